"""The PostgreSQL schema migration (docs/adapters/postgres.md, "Schema and migration"):
created on first use, versioned in ``<schema>.schema_version``, idempotent, and safe when
several processes start at once."""

from __future__ import annotations

import threading

import psycopg
import pytest
from reactor_postgres import migrations, router_from_url, storage_from_url
from reactor_postgres.migrations import SCHEMA_VERSION, applied_versions, migrate

from reactor.errors import RouterError, StorageError

pytestmark = pytest.mark.postgres


def _tables(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    return {row[0] for row in rows}


def test_the_schema_is_created_on_first_use_not_at_construction(
    pg_url: str, schema: str, schema_url: str
) -> None:
    storage = storage_from_url(schema_url)
    try:
        assert _tables(pg_url, schema) == set()  # construction never waits for the server
        storage.claims.claim_correlation_id("c1", "run-1")
        assert _tables(pg_url, schema) == {"schema_version", "documents", "jobs", "dead_letters"}
    finally:
        storage.close()
    with psycopg.connect(pg_url) as conn:
        assert applied_versions(conn, schema) == [SCHEMA_VERSION]


def test_migrating_again_changes_nothing(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert migrate(conn, schema) == [v for v, _ in migrations.MIGRATIONS]
        assert migrate(conn, schema) == []
        assert migrate(conn, schema) == []
        assert applied_versions(conn, schema) == [v for v, _ in migrations.MIGRATIONS]


def test_only_the_versions_not_recorded_yet_are_applied(
    pg_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn, schema)
        later = (*migrations.MIGRATIONS,
                 (SCHEMA_VERSION + 1, ("CREATE TABLE {schema}.later (id integer)",)))
        monkeypatch.setattr(migrations, "MIGRATIONS", later)
        assert migrate(conn, schema) == [SCHEMA_VERSION + 1]
        assert migrate(conn, schema) == []
        assert applied_versions(conn, schema) == [SCHEMA_VERSION, SCHEMA_VERSION + 1]
    assert "later" in _tables(pg_url, schema)


def test_processes_starting_together_migrate_once(pg_url: str, schema: str) -> None:
    """Eight connections migrate a missing schema at the same moment: the advisory lock
    serializes them, one applies every version, the others find them recorded."""
    start = threading.Barrier(8)
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                start.wait(10)
                results.append(migrate(conn, schema))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(results) == [[]] * 7 + [[v for v, _ in migrations.MIGRATIONS]]


def test_migrate_never_refuses_an_outdated_schema_and_changes_nothing(
    pg_url: str, schema: str, schema_url: str
) -> None:
    storage = storage_from_url(f"{schema_url}&migrate=never")
    try:
        with pytest.raises(StorageError, match=r"lacks migration\(s\) \[1\].*reactor migrate"):
            storage.claims.claim_correlation_id("c1", "run-1")
        assert _tables(pg_url, schema) == set()  # it created nothing
        assert storage.migrate() == [SCHEMA_VERSION]  # what `reactor migrate` calls
        storage.claims.claim_correlation_id("c1", "run-1")
        assert storage.claims.correlation_context("c1") == "run-1"
        assert storage.migrate() == []
    finally:
        storage.close()


def test_migrate_never_accepts_a_schema_migrated_by_another_process(
    pg_url: str, schema: str, schema_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn, schema)
    router = router_from_url(f"{schema_url}&migrate=never")
    try:
        assert router.migrate() == []
        assert router.queue_stats().ready == 0
    finally:
        router.close()


def test_an_outdated_router_schema_names_the_router_option(schema_url: str) -> None:
    router = router_from_url(f"{schema_url}&migrate=never")
    try:
        with pytest.raises(RouterError, match=r"reactor migrate --router URL"):
            router.queue_stats()
    finally:
        router.close()
