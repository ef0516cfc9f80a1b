"""Transactional steps on PostgreSQL (docs/adapters/postgres.md, "Transactional steps").

:class:`PostgresStepTransaction` is the :class:`reactor.ports.capabilities.StepTransaction`
the PostgreSQL storage opens for a step declared ``transaction=True``: a connection taken out
of the storage's pool with autocommit off. The step body writes through it
(``ctx.transaction``); the engine then writes the step's checkpoint with the connection
*bound* to the calling thread (:meth:`reactor_postgres._client.PostgresClient.bind`), so the
checkpoint's statements — the context's compare-and-set with its fence, its segment, its
listing row — run in the same transaction, and commits. A crash before the ``COMMIT`` leaves
neither the body's writes nor the checkpoint; after it, both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from reactor.ports.driver_errors import translate_errors
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient

__all__ = ["PostgresStepTransaction"]


class PostgresStepTransaction:
    """One open transaction of a transactional step, on a connection of its own.

    Args:
        client: the storage's pooled client (the connection is taken from it at once).

    Raises:
        StorageError: no connection could be taken (closed client, server down, pool timeout).
    """

    def __init__(self, client: PostgresClient) -> None:
        self._client = client
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL transaction begin"):
            conn = client.take()
            try:
                conn.autocommit = False  # the first statement opens the transaction
            except BaseException:
                client.give_back(conn)
                raise
        self._conn: psycopg.Connection[Any] | None = conn

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The ``psycopg.Connection`` inside the transaction.

        Raises:
            RuntimeError: the transaction was committed or rolled back.
        """
        if self._conn is None:
            raise RuntimeError("the step's transaction is over (committed or rolled back)")
        return self._conn

    @contextmanager
    def binding(self) -> Iterator[None]:
        """While entered, the storage's statements on the calling thread run in the
        transaction (:meth:`reactor_postgres._client.PostgresClient.bind`)."""
        with self._client.bind(self.connection):
            yield

    def commit(self) -> None:
        """``COMMIT`` and give the connection back.

        Raises:
            StorageError: the commit failed (the transaction rolled back) or its reply was
                lost (applied or not: the run's checkpoint tells).
        """
        conn = self.connection
        self._conn = None
        try:
            with translate_errors(DRIVER_ERRORS, what="PostgreSQL transaction commit"):
                conn.commit()
        finally:
            self._give_back(conn)

    def rollback(self) -> None:
        """``ROLLBACK`` and give the connection back; a no-op when already over; never raises
        (a broken connection is discarded by the pool: the server rolled it back)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.rollback()
        except psycopg.Error:
            pass  # the connection is broken: the server ends its transaction
        self._give_back(conn)

    def _give_back(self, conn: psycopg.Connection[Any]) -> None:
        try:
            if not conn.broken:
                conn.autocommit = True
        except psycopg.Error:
            pass  # still in a transaction block: the pool discards it
        self._client.give_back(conn)
