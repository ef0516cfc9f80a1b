"""Unit tests of the SQLite example beyond the contract suite: URLs, CAS, purge, isolation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from reactor_sqlite import SQLiteDocumentStore, SQLiteStorage, parse_url

from reactor.config import storage_from_url
from reactor.errors import ConfigurationError, StorageError


class Clock:
    """A manual clock (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("url", "path", "prefix"),
    [
        ("sqlite:///tmp/x.db", "/tmp/x.db", ""),
        ("sqlite:////tmp/x.db", "/tmp/x.db", ""),
        ("sqlite://runs.db", "runs.db", ""),
        ("sqlite://:memory:?prefix=t1", ":memory:", "t1"),
    ],
)
def test_parse_url(url: str, path: str, prefix: str) -> None:
    parsed = parse_url(url)
    assert (parsed.path, parsed.prefix) == (path, prefix)


@pytest.mark.parametrize("url", ["redis://x", "sqlite://", "sqlite:///x.db?colour=red"])
def test_bad_urls_raise_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_the_entry_point_builds_a_storage(tmp_path: Path) -> None:
    storage = storage_from_url(f"sqlite://{tmp_path}/a.db?context_ttl=60", context_ttl=5)
    try:
        assert isinstance(storage, SQLiteStorage)
        assert storage.context_ttl == 60
    finally:
        storage.close()


def test_compare_and_set_and_logical_expiry() -> None:
    clock = Clock()
    store = SQLiteDocumentStore(clock=clock)
    assert store.write("c", "k", {"a": 1}, expected_version=None, expires_at=clock.now + 10)
    assert not store.write("c", "k", {"a": 2}, expected_version=None, expires_at=None)
    first = store.read("c", "k")
    assert first.value == {"a": 1} and first.version is not None
    assert store.write("c", "k", {"a": 2}, expected_version=first.version, expires_at=None)
    assert not store.write("c", "k", {"a": 3}, expected_version=first.version, expires_at=None)
    second = store.read("c", "k")
    assert second.value == {"a": 2} and second.version != first.version
    assert store.write("c", "k", {"a": 4}, expected_version=second.version, expires_at=clock.now)
    expired = store.read("c", "k")
    assert expired.value is None and expired.version is not None
    assert store.scan("c") == []
    assert store.write("c", "k", None, expected_version=expired.version, expires_at=None)
    assert store.read("c", "k").version is None
    store.close()


def test_scan_filters_by_index_and_pages_by_key() -> None:
    store = SQLiteDocumentStore()
    for key, idx in (("b", "x"), ("a", "x"), ("c", "y")):
        store.write("c", key, {"k": key}, expected_version=None, expires_at=None, index=idx)
    assert [k for k, _ in store.scan("c")] == ["a", "b", "c"]
    assert [k for k, _ in store.scan("c", index="x")] == ["a", "b"]
    assert [k for k, _ in store.scan("c", after="a", limit=1)] == ["b"]
    store.close()


def test_prefixes_isolate_stores_sharing_a_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    one, two = SQLiteDocumentStore(path, prefix="one"), SQLiteDocumentStore(path, prefix="two")
    one.write("c", "k", {"v": 1}, expected_version=None, expires_at=None)
    assert two.read("c", "k").value is None
    assert two.scan("c") == []
    one.close()
    two.close()


def test_purge_removes_expired_rows_only() -> None:
    clock = Clock()
    store = SQLiteDocumentStore(clock=clock, purge_every=0)
    store.write("c", "old", {}, expected_version=None, expires_at=clock.now + 1)
    store.write("c", "new", {}, expected_version=None, expires_at=clock.now + 100)
    store.write("c", "forever", {}, expected_version=None, expires_at=None)
    clock.now += 10
    assert store.purge() == 1
    assert store.raw("c", "old") is None
    assert store.raw("c", "new") is not None and store.raw("c", "forever") is not None
    store.close()


def test_writes_purge_periodically() -> None:
    clock = Clock()
    store = SQLiteDocumentStore(clock=clock, purge_every=2)
    store.write("c", "old", {}, expected_version=None, expires_at=clock.now + 1)
    clock.now += 10
    store.write("c", "new", {}, expected_version=None, expires_at=None)
    assert store.raw("c", "old") is None
    store.close()


def test_a_closed_store_raises_storage_error() -> None:
    store = SQLiteDocumentStore()
    store.close()
    store.close()
    with pytest.raises(StorageError):
        store.read("c", "k")


def test_bad_parameters_are_named_with_the_url(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/a.db"
    with pytest.raises(ConfigurationError) as excinfo:
        storage_from_url(f"{url}?busy_timeout=0")
    assert str(excinfo.value) == (
        f"sqlite:// URL parameter busy_timeout='0' must be > 0 seconds (in '{url}?busy_timeout=0')"
    )
    with pytest.raises(ConfigurationError, match="context_ttl='' must be a number"):
        storage_from_url(f"{url}?context_ttl=")
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url(f"{url}?colour=red&size=2")
    assert "unknown sqlite:// URL parameters 'colour', 'size'" in str(excinfo.value)
    assert str(excinfo.value).endswith("(accepted: busy_timeout, context_ttl, prefix)")


def test_sqlite_errors_are_storage_errors_with_the_cause_chained(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="opening SQLite database") as excinfo:
        SQLiteDocumentStore(str(tmp_path / "missing-dir" / "a.db"))
    assert isinstance(excinfo.value.__cause__, sqlite3.Error)
