"""Adapter factories by entry point (reactor/config/urls.py): a scheme whose adapter cannot be
imported names the missing dependency and the extra that installs it, read from the metadata
of the distribution that registered the scheme, not from a table of known schemes (README,
"Choosing a backend")."""

from __future__ import annotations

from importlib.metadata import distribution

import pytest

from reactor import config
from reactor.config import urls
from reactor.errors import ConfigurationError


def test_the_extra_of_a_missing_dependency_comes_from_the_distribution() -> None:
    core = distribution("reactor-saga")
    assert urls.extra_providing(core, "redis") == "redis"  # not "all", which also has it
    assert urls.extra_providing(core, "redis.cluster") == "redis"
    assert urls.extra_providing(core, "pymongo") == "mongodb"
    assert urls.extra_providing(core, "boto3") == "dynamodb"
    assert urls.extra_providing(core, "psycopg_pool") == "postgres"  # psycopg-pool
    assert urls.extra_providing(core, "no_such_dependency") is None


class _UnimportableAdapter:
    """An entry point whose module imports a dependency that is not installed."""

    name = "unimportable"
    value = "reactor_postgres:storage_from_url"

    def __init__(self, missing: str, dist: object) -> None:
        self.missing = missing
        self.dist = dist

    def load(self) -> object:
        raise ModuleNotFoundError(f"No module named {self.missing!r}", name=self.missing)


def test_an_unimportable_adapter_names_the_extra_its_distribution_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = _UnimportableAdapter("psycopg_pool", distribution("reactor-saga"))
    monkeypatch.setattr(urls, "entry_points", lambda group: [entry])
    with pytest.raises(ConfigurationError, match=(
        r"the 'unimportable' adapter needs a missing dependency \(psycopg_pool\); install it "
        r"with: pip install -e '\.\[postgres\]' in a reactor checkout \(the distribution "
        r"reactor-saga\[postgres\]\)"
    )):
        config.storage_from_url("unimportable://x")


def test_an_unimportable_adapter_without_a_declared_extra_names_the_dependency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = _UnimportableAdapter("no_such_dependency", distribution("reactor-saga"))
    monkeypatch.setattr(urls, "entry_points", lambda group: [entry])
    with pytest.raises(ConfigurationError) as raised:
        config.router_from_url("unimportable://x")
    assert str(raised.value) == (
        "the 'unimportable' adapter needs a missing dependency (no_such_dependency)"
    )
