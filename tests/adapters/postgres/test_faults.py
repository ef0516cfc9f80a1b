"""An unreachable PostgreSQL server fails operations with reactor's typed errors in bounded
time (docs/adapters/postgres.md, "URL"): ``StorageError``/``RouterError`` with the driver's
exception chained, never a bare psycopg or pool exception."""

from __future__ import annotations

import socket
import time

import pytest
from reactor_postgres import PostgresClient, PostgresQueue, PostgresRouter, PostgresStorage

from reactor.errors import RouterError, StorageError
from reactor.ports.router import Job


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_server_fails_storage_and_router_calls_with_typed_errors() -> None:
    conninfo = f"postgresql://reactor@127.0.0.1:{_closed_port()}/postgres?connect_timeout=1"
    storage = PostgresStorage(PostgresClient(conninfo, schema="reactor", timeout=1.0),
                              clock=lambda: 1_000_000.0)
    router = PostgresRouter(
        PostgresQueue(PostgresClient(conninfo, schema="reactor", timeout=1.0,
                                     error=RouterError), "q"),
        clock=lambda: 1_000_000.0,
    )
    try:
        started = time.monotonic()
        with pytest.raises(StorageError) as stored:
            storage.claims.claim_correlation_id("c", "run-1")
        with pytest.raises(RouterError) as routed:
            router.enqueue(Job(kind="run", payload={}))
        assert time.monotonic() - started < 30
        assert stored.value.__cause__ is not None and routed.value.__cause__ is not None
    finally:
        storage.close()
        router.close()


def test_a_closed_storage_and_router_refuse_with_typed_errors() -> None:
    conninfo = f"postgresql://reactor@127.0.0.1:{_closed_port()}/postgres?connect_timeout=1"
    storage = PostgresStorage(PostgresClient(conninfo, schema="reactor", timeout=1.0),
                              clock=lambda: 1_000_000.0)
    storage.close()
    storage.close()  # idempotent
    with pytest.raises(StorageError):
        storage.documents.read("c", "k")
