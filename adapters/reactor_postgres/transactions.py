"""Transactional steps on PostgreSQL (docs/adapters/postgres.md, "Transactional steps").

:class:`PostgresStepTransaction` is the :class:`reactor.ports.capabilities.StepTransaction`
the PostgreSQL storage opens for a step declared ``transaction=True``: a connection taken out
of the storage's pool with autocommit off. The step body writes through it
(``ctx.transaction``); the engine then writes the step's checkpoint with the connection
*bound* to the calling thread (:meth:`reactor_postgres._client.PostgresClient.bind`), so the
checkpoint's statements — the context's compare-and-set with its fence, its segment, its
listing row — run in the same transaction, and commits. A crash before the ``COMMIT`` leaves
neither the body's writes nor the checkpoint; after it, both. While the body holds the
connection it refuses ``commit``, ``rollback``, ``close`` and ``set_autocommit``
(:class:`reactor_postgres._client.GuardedConnection`), and a transaction a failed statement
aborted fails the attempt (:meth:`PostgresStepTransaction.check`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from reactor.errors import StepTransactionError
from reactor.ports.driver_errors import translate_errors
from reactor_postgres._client import DRIVER_ERRORS, GuardedConnection, PostgresClient

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
        _guard(conn, True)  # the body may not end the transaction itself

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

    def check(self) -> None:
        """Whether the transaction can still commit, once the body returned (no round trip:
        the connection's own state).

        Raises:
            StepTransactionError: a statement failed and the body caught it (the transaction
                is aborted), or the connection is closed or broken.
        """
        conn = self.connection
        if conn.closed or conn.broken:
            raise StepTransactionError(
                "the step's transaction lost its connection before it could commit (closed "
                "or dropped by the server): nothing of the attempt is stored"
            )
        if conn.info.transaction_status == TransactionStatus.INERROR:
            raise StepTransactionError(
                "the step's transaction is aborted: a statement of the body failed and the "
                "body went on; catch such errors inside a savepoint (with "
                "ctx.transaction.transaction(): ...) to keep the rest of the attempt "
                "(docs/concepts.md, \"Transactional steps\")"
            )

    def commit(self) -> None:
        """``COMMIT`` and give the connection back.

        Raises:
            StorageError: the commit failed (the transaction rolled back) or its reply was
                lost (applied or not: the run's checkpoint tells).
        """
        conn = self.connection
        self._conn = None
        _guard(conn, False)
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
        _guard(conn, False)
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


def _guard(conn: psycopg.Connection[Any], on: bool) -> None:
    """Turn the pool connection's guard on or off (a connection of another class, which a
    pool built elsewhere may hand out, has none)."""
    if isinstance(conn, GuardedConnection):
        conn.guarded = on
