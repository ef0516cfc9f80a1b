"""Configuration: URL resolution through entry points, settings validation, precedence
(explicit argument > environment > default) and argument validation (README, "Choosing a
backend")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.errors import ConfigurationError
from reactor.memory import LocalRouter, MemoryStorage
from reactor.ports import Router, Storage


@pytest.fixture(autouse=True)
def _fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    for name in config.Settings.model_fields:
        monkeypatch.delenv(f"REACTOR_{name.upper()}", raising=False)
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


ENV_STORAGE = "mongomock://precedence/reactor"


def _storage_type(explicit: object, env: str | None, monkeypatch: pytest.MonkeyPatch) -> str:
    if env is None:
        monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    else:
        monkeypatch.setenv("REACTOR_STORAGE_URL", env)
    return type(config.configure(storage=explicit).storage).__name__  # type: ignore[arg-type]


def test_storage_precedence_is_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = MemoryStorage()
    # (argument, REACTOR_STORAGE_URL, expected adapter)
    matrix: list[tuple[object, str | None, str]] = [
        ("memory://", ENV_STORAGE, "MemoryStorage"),  # a URL argument beats the environment
        (mine, ENV_STORAGE, "MemoryStorage"),  # so does an object
        (None, ENV_STORAGE, "MongoStorage"),  # the environment beats the default
        (None, None, "MemoryStorage"),  # the default
        (None, "", "MemoryStorage"),  # an empty variable is not set
    ]
    for explicit, env, expected in matrix:
        assert _storage_type(explicit, env, monkeypatch) == expected, (explicit, env)
    monkeypatch.setenv("REACTOR_STORAGE_URL", ENV_STORAGE)
    assert config.configure(storage=mine).storage is mine


def test_router_precedence_is_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = LocalRouter(workers=0)
    # (argument, REACTOR_ROUTER_URL, expected router)
    matrix: list[tuple[object, str | None, str]] = [
        ("local://", "inline://", "LocalRouter"),
        (mine, "inline://", "LocalRouter"),
        (None, "inline://", "InlineRouter"),
        (None, None, "LocalRouter"),
    ]
    for explicit, env, expected in matrix:
        if env is None:
            monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
        else:
            monkeypatch.setenv("REACTOR_ROUTER_URL", env)
        runtime = config.configure(router=explicit)  # type: ignore[arg-type]
        assert type(runtime.router).__name__ == expected, (explicit, env)
    monkeypatch.setenv("REACTOR_ROUTER_URL", "inline://")
    assert config.configure(router=mine).router is mine


def test_setting_precedence_is_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert config.configure().settings.context_ttl == 86400.0  # default
    monkeypatch.setenv("REACTOR_CONTEXT_TTL", "7200")
    assert config.configure().settings.context_ttl == 7200.0  # environment over default
    assert config.configure(context_ttl=60).settings.context_ttl == 60.0  # argument over env
    monkeypatch.setenv("REACTOR_LOCK_SNOOZE_MAX_ATTEMPTS", "none")
    assert config.configure().settings.lock_snooze_max_attempts is None
    assert config.configure(lock_snooze_max_attempts=3).settings.lock_snooze_max_attempts == 3


def test_a_bad_environment_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = config.configure()
    monkeypatch.setenv("REACTOR_SWEEPER_LIMIT", "lots")
    with pytest.raises(
        ConfigurationError, match=r"sweeper_limit: .*'lots' from REACTOR_SWEEPER_LIMIT"
    ):
        config.configure()
    assert config.current() is previous
    assert config.configure(sweeper_limit=5).settings.sweeper_limit == 5  # explicit wins


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"storage": 123}, r"configure\(storage=\.\.\.\) .*reactor\.ports\.Storage; got int 123"),
        ({"router": 4.5}, r"configure\(router=\.\.\.\) .*reactor\.ports\.Router; got float 4\.5"),
        ({"storage": LocalRouter}, r"configure\(storage=\.\.\.\) .*got type"),
        ({"router": MemoryStorage()}, r"configure\(router=\.\.\.\) .*got MemoryStorage"),
        ({"storage": b"memory://"}, r"configure\(storage=\.\.\.\) .*got bytes b'memory://'"),
    ],
    ids=["int-storage", "float-router", "class-storage", "storage-as-router", "bytes-url"],
)
def test_a_bad_backend_argument_is_refused_and_the_runtime_kept(
    arguments: dict[str, object], named: str
) -> None:
    previous = config.configure(storage="memory://", router="local://?workers=0")
    with pytest.raises(ConfigurationError, match=named):
        config.configure(**arguments)  # type: ignore[arg-type]
    assert config.current() is previous
    # the previous runtime still works, and so does every later configure()
    assert list(previous.storage.contexts.page(limit=1).runs) == []
    assert previous.router.dead_letters() == []
    replacement = config.configure()
    assert replacement is config.current() and replacement is not previous


def test_a_storage_built_for_a_refused_router_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    monkeypatch.setattr(MemoryStorage, "close", lambda self: closed.append(True))
    previous = config.current()
    with pytest.raises(ConfigurationError, match="nosuch"):
        config.configure(storage="memory://", router="nosuch://")
    assert closed == [True]
    assert config.current() is previous


def test_url_options_parse_the_query() -> None:
    assert config.url_options("local://?workers=2&visibility_timeout=5") == (
        "local",
        {"workers": "2", "visibility_timeout": "5"},
    )


def test_settings_reach_the_runtime() -> None:
    runtime = config.configure(lock_snooze_max_attempts=3, map_batch_size=10)
    assert runtime.settings.lock_snooze_max_attempts == 3
    assert runtime.settings.map_batch_size == 10
