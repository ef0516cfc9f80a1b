"""The SQLite example's own settings, outside what the contract suite can see: documented
defaults, argument validation, connection pragmas and the API's keyword-only options.

Each test here kills mutants of ``scripts/mutation --adapter sqlite`` that the contract suite
certified (docs/contract-suite.md, "Mutation testing of our own adapters").
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from reactor_sqlite import SQLiteDocumentStore, SQLiteStorage, parse_url, storage_from_url

from reactor.errors import ConfigurationError, StorageError


class Clock:
    """A manual clock (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Iterator[SQLiteDocumentStore]:
    opened = SQLiteDocumentStore(clock=clock)
    yield opened
    opened.close()


def _busy_timeout_ms(store: SQLiteDocumentStore) -> int:
    return int(store.connection.execute("PRAGMA busy_timeout").fetchone()[0])


def test_the_busy_timeout_defaults_to_30_seconds_on_every_path(tmp_path: Path) -> None:
    documents = SQLiteDocumentStore()
    storage = SQLiteStorage()
    built = storage_from_url(f"sqlite://{tmp_path}/a.db")
    set_by_url = storage_from_url(f"sqlite://{tmp_path}/b.db?busy_timeout=2.5")
    try:
        assert _busy_timeout_ms(documents) == 30_000
        assert _busy_timeout_ms(storage.documents) == 30_000
        assert _busy_timeout_ms(built.documents) == 30_000
        assert _busy_timeout_ms(set_by_url.documents) == 2_500
    finally:
        for closing in (documents, storage, built, set_by_url):
            closing.close()


def test_the_context_ttl_defaults_to_a_day_unless_the_settings_or_url_say(
    tmp_path: Path,
) -> None:
    storages = [
        SQLiteStorage(),
        storage_from_url(f"sqlite://{tmp_path}/a.db"),
        storage_from_url(f"sqlite://{tmp_path}/b.db", context_ttl=120),
        storage_from_url(f"sqlite://{tmp_path}/c.db?context_ttl=60", context_ttl=120),
    ]
    try:
        assert [s.context_ttl for s in storages] == [86400.0, 86400.0, 120.0, 60.0]
    finally:
        for storage in storages:
            storage.close()


def test_a_file_database_runs_in_wal_mode_and_a_memory_one_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    on_disk = SQLiteDocumentStore(str(tmp_path / "runs.db"))
    relative = SQLiteDocumentStore("a.db")  # sorts after ":memory:"
    in_memory = SQLiteDocumentStore(":memory:")
    try:
        modes = [s.connection.execute("PRAGMA journal_mode").fetchone()[0]
                 for s in (on_disk, relative, in_memory)]
        assert modes == ["wal", "wal", "memory"]
    finally:
        for closing in (on_disk, relative, in_memory):
            closing.close()


@pytest.mark.parametrize("url", ["sqlitex:///x.db", "zzz:///x.db", "SQLITE3:///x.db"])
def test_a_scheme_that_only_starts_like_sqlite_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="expected a sqlite:// URL"):
        parse_url(url)


def test_purge_every_is_checked_and_purges_on_the_nth_write_exactly(clock: Clock) -> None:
    with pytest.raises(ValueError, match="purge_every must be >= 0, got -1"):
        SQLiteDocumentStore(purge_every=-1)
    store = SQLiteDocumentStore(clock=clock, purge_every=3)
    try:
        store.write("c", "old", {}, expected_version=None, expires_at=clock.now + 1)
        clock.now += 10
        store.write("c", "a", {}, expected_version=None, expires_at=None)
        assert store.raw("c", "old") is not None  # two writes: not yet
        store.write("c", "b", {}, expected_version=None, expires_at=None)
        assert store.raw("c", "old") is None  # the third write purged it
    finally:
        store.close()


def test_writes_purge_every_thousand_writes_by_default(
    store: SQLiteDocumentStore, clock: Clock
) -> None:
    store.write("c", "old", {}, expected_version=None, expires_at=clock.now + 1)
    clock.now += 10
    for n in range(998):
        store.write("c", f"k{n}", {}, expected_version=None, expires_at=None)
    assert store.raw("c", "old") is not None  # 999 writes
    store.write("c", "last", {}, expected_version=None, expires_at=None)
    assert store.raw("c", "old") is None  # the 1000th


def test_purge_deletes_at_most_a_thousand_rows_by_default(
    clock: Clock,
) -> None:
    store = SQLiteDocumentStore(clock=clock, purge_every=0)
    try:
        for n in range(1001):
            store.write("c", f"k{n:04}", {}, expected_version=None, expires_at=clock.now + 1)
        clock.now += 10
        assert store.purge() == 1000
        assert store.purge() == 1
    finally:
        store.close()


def test_scan_pages_a_thousand_rows_by_default_and_nothing_for_a_limit_below_one(
    store: SQLiteDocumentStore,
) -> None:
    for n in range(1001):
        store.write("c", f"k{n:04}", {"n": n}, expected_version=None, expires_at=None)
    assert len(store.scan("c")) == 1000
    assert store.scan("c", limit=1) == [("k0000", {"n": 0})]
    assert store.scan("c", limit=0) == [] and store.scan("c", limit=-1) == []


def test_a_value_that_is_not_json_is_refused_before_anything_is_written(
    store: SQLiteDocumentStore,
) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        store.write("c", "k", {"x": float("nan")}, expected_version=None, expires_at=None)
    assert store.raw("c", "k") is None


def test_a_closed_store_says_it_is_closed(store: SQLiteDocumentStore) -> None:
    store.close()
    with pytest.raises(StorageError, match="the SQLite document store is closed"):
        store.write("c", "k", {}, expected_version=None, expires_at=None)


@pytest.mark.parametrize(
    ("function", "keyword_only"),
    [
        (SQLiteDocumentStore.__init__, {"prefix", "clock", "busy_timeout", "purge_every"}),
        (SQLiteDocumentStore.write, {"expected_version", "expires_at", "index"}),
        (SQLiteDocumentStore.scan, {"index", "after", "limit"}),
        (SQLiteStorage.__init__, {"prefix", "context_ttl", "busy_timeout", "clock"}),
    ],
)
def test_options_are_keyword_only(function: object, keyword_only: set[str]) -> None:
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    assert {p.name for p in parameters if p.kind is p.KEYWORD_ONLY} == keyword_only
    assert all(p.kind is not p.POSITIONAL_ONLY for p in parameters)
