"""Pooled connections the server dropped (a restart, ``pg_terminate_backend``) while they sat
idle (docs/adapters/postgres.md, "Limits"): a read finds the dead connection and runs again on
a fresh one, so the caller never sees it; the pool's other dead connections are checked at
once, so the writes that follow find live ones. Found by the soak's server restarts: a lock
release (a read, then a compare-and-set) that met a dead connection failed, and the lock stayed
held for its whole lifetime while other runs failed on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from reactor_postgres import router_from_url, storage_from_url
from reactor_postgres.storage import PostgresStorage

pytestmark = pytest.mark.postgres


@pytest.fixture
def app_name() -> str:
    return f"drop_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def storage(schema_url: str, app_name: str) -> Iterator[PostgresStorage]:
    store = storage_from_url(f"{schema_url}&application_name={app_name}&pool_max_size=4")
    yield store
    store.close()


def _drop_every_connection(pg_url: str, app_name: str) -> int:
    """Terminate every backend of the pool (identified by its ``application_name``)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app_name,),
        ).fetchall()
    return len(rows)


def _warm(storage: PostgresStorage, n: int = 4) -> None:
    """Open ``n`` pooled connections (each thread holds one at once)."""
    import threading

    barrier = threading.Barrier(n)

    def hold() -> None:
        with storage.client.connection() as conn:
            conn.execute("SELECT 1")
            barrier.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)


def test_a_lock_release_after_the_server_dropped_the_pool_releases(
    storage: PostgresStorage, pg_url: str, app_name: str
) -> None:
    assert storage.locks.acquire("sku:1", "run-a", 30.0)
    _warm(storage)
    assert _drop_every_connection(pg_url, app_name) >= 2
    assert storage.locks.release("sku:1", "run-a")  # its read met a dead connection
    assert not storage.locks.held("sku:1")
    assert storage.locks.acquire("sku:1", "run-b", 30.0)  # the next writes find live ones


def test_reads_after_the_server_dropped_the_pool_answer(
    storage: PostgresStorage, pg_url: str, app_name: str
) -> None:
    storage.claims.claim_correlation_id("c1", "run-1")
    _warm(storage)
    assert _drop_every_connection(pg_url, app_name) >= 2
    for _ in range(6):  # more reads than the pool had connections
        assert storage.claims.correlation_context("c1") == "run-1"


def test_router_reads_after_the_server_dropped_the_pool_answer(
    schema_url: str, pg_url: str, app_name: str
) -> None:
    router = router_from_url(f"{schema_url}&application_name={app_name}&pool_max_size=2")
    try:
        assert router.queue_stats().ready == 0
        assert _drop_every_connection(pg_url, app_name) >= 1
        assert router.queue_stats().ready == 0
    finally:
        router.close()
