"""Configuration: URL resolution through entry points, settings validation, env overrides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.model.errors import ConfigurationError
from reactor.ports import Router, Storage


@pytest.fixture(autouse=True)
def _fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    config.reset()
    yield
    config.reset()


def test_defaults_are_memory_and_local() -> None:
    runtime = config.current()
    assert isinstance(runtime.storage, Storage)
    assert isinstance(runtime.router, Router)
    assert type(runtime.storage).__name__ == "MemoryStorage"
    assert type(runtime.router).__name__ == "LocalRouter"
    assert runtime.settings.context_ttl == 86400.0


def test_unknown_scheme_names_the_registered_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"no reactor.storages adapter .* 'nosuch'"):
        config.configure(storage="nosuch://x")


def test_url_without_scheme_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="scheme://"):
        config.configure(storage="localhost:6379")


def test_invalid_setting_names_the_field_and_value() -> None:
    with pytest.raises(ConfigurationError, match=r"context_ttl: .*greater than 0.*-5"):
        config.configure(context_ttl=-5)


def test_unknown_setting_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="context_tll"):
        config.configure(context_tll=5)


def test_environment_overrides_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_ROUTER_URL", "inline://")
    runtime = config.configure(router="local://")
    assert type(runtime.router).__name__ == "InlineRouter"


def test_url_options_parse_the_query() -> None:
    assert config.url_options("local://?workers=2&visibility_timeout=5") == (
        "local",
        {"workers": "2", "visibility_timeout": "5"},
    )


def test_settings_reach_the_runtime() -> None:
    runtime = config.configure(lock_snooze_max_attempts=3, map_batch_size=10)
    assert runtime.settings.lock_snooze_max_attempts == 3
    assert runtime.settings.map_batch_size == 10
