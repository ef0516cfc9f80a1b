"""The connection pool the PostgreSQL storage and router share the code of.

:class:`PostgresClient` wraps one :class:`psycopg_pool.ConnectionPool` (autocommit
connections: every statement is its own transaction unless a caller opens a block), runs the
schema migration (:mod:`reactor_postgres.migrations`) once, on first use, and reads the server
clock for :class:`reactor.ports.clock.CalibratedClock`. It is thread-safe: the pool hands each
thread a connection of its own. A thread may *bind* a connection it holds (a transactional
step's transaction, :mod:`reactor_postgres.transactions`): while bound, that thread's
statements run on it, every other thread's on pooled connections.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from reactor.errors import ReactorError, RouterError, StepTransactionMisuseError, StorageError
from reactor.ports.driver_errors import close_quietly
from reactor_postgres.migrations import MIGRATIONS, applied_versions, migrate

__all__ = ["DRIVER_ERRORS", "GuardedConnection", "PostgresClient"]

#: What the driver and the pool raise for a backend failure.
DRIVER_ERRORS: tuple[type[Exception], ...] = (psycopg.Error, PoolTimeout)


class GuardedConnection(psycopg.Connection[Any]):
    """The pool's connection class: a plain ``psycopg.Connection`` that, while a
    transactional step's body holds it (``guarded``), refuses the calls that would end or
    change the step's transaction behind the engine's back (docs/concepts.md,
    "Transactional steps").

    Raises (from ``commit``, ``rollback``, ``close``, ``set_autocommit`` while guarded):
        StepTransactionMisuseError: naming the call.
    """

    #: ``True`` while a step body holds the connection inside its transaction.
    guarded: bool = False

    def _refuse(self, call: str) -> None:
        if self.guarded:
            raise StepTransactionMisuseError(
                f"ctx.transaction.{call}() in a transactional step: the transaction commits "
                "with the step's checkpoint, which the engine writes after the body returns; "
                "use a savepoint (with ctx.transaction.transaction(): ...) to undo part of "
                "the body's work (docs/concepts.md, \"Transactional steps\")"
            )

    def commit(self) -> None:
        """``Connection.commit``; refused while guarded."""
        self._refuse("commit")
        super().commit()

    def rollback(self) -> None:
        """``Connection.rollback``; refused while guarded."""
        self._refuse("rollback")
        super().rollback()

    def close(self) -> None:
        """``Connection.close``; refused while guarded."""
        self._refuse("close")
        super().close()

    def set_autocommit(self, value: bool) -> None:
        """``Connection.set_autocommit`` (the ``autocommit`` setter); refused while
        guarded."""
        self._refuse("set_autocommit")
        super().set_autocommit(value)


class PostgresClient:
    """A connection pool on one PostgreSQL database and schema.

    Construction never waits for the server: the pool opens its connections in the
    background and the first :meth:`connection` migrates the schema.

    Args:
        conninfo: the libpq URI (reactor's options removed).
        schema: the schema holding the adapter's tables.
        max_size: the pool's largest number of connections.
        timeout: seconds a caller waits for a free connection before ``PoolTimeout``.
        error: the error class failures are reported as (``StorageError`` or
            ``RouterError``), used for a closed client and an outdated schema.
        auto_migrate: ``True``: the first use migrates the schema; ``False``: it only checks
            that the schema is up to date (URL option ``migrate=never``).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str,
        max_size: int = 10,
        timeout: float = 10.0,
        error: type[ReactorError] = StorageError,
        auto_migrate: bool = True,
    ) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self._error = error
        self._auto_migrate = auto_migrate
        self._migrated = False
        self._migrate_lock = threading.Lock()
        self._closed = False
        self._bound = threading.local()
        self._last_broken = threading.local()
        self._checking = threading.Lock()
        self.pool: ConnectionPool[Any] = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True},
            connection_class=GuardedConnection,
            timeout=timeout,
            open=True,
            name=f"reactor-{schema}",
        )

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection the calling thread bound (:meth:`bind`), else a pooled autocommit
        connection, the schema migrated (first use only).

        Raises:
            StorageError or RouterError: the client is closed.
            psycopg.Error, PoolTimeout: the server failed (callers translate them).
        """
        if self._closed:
            raise self._error("the PostgreSQL client is closed")
        bound: psycopg.Connection[Any] | None = getattr(self._bound, "connection", None)
        if bound is not None:
            yield bound
            return
        with self.pool.connection() as conn:
            self._migrate(conn)
            yield conn

    def execute(
        self, statement: Any, params: Any, *, fetch: bool, idempotent: bool = False
    ) -> Any:
        """Run one statement on the thread's bound connection or a pooled one.

        A pooled connection the server dropped (a restart, an administrator's
        ``pg_terminate_backend``) fails the statement that finds it; the pool then discards
        it, and this checks the pool's other idle connections, which died with it, so the
        next statements do not find them one by one. An ``idempotent`` statement (a read) is
        then run once more on a fresh connection: the caller never sees the dead one. A write
        is not: whether it was applied before the connection died is unknown
        (docs/adapters/postgres.md, "Limits").

        Args:
            statement: the SQL (a ``psycopg.sql`` composable or a string).
            params: its parameters.
            fetch: return every row (else the changed-row count).
            idempotent: the statement changes nothing (safe to run twice).

        Returns:
            The rows, or the changed-row count.

        Raises:
            StorageError or RouterError: the client is closed.
            psycopg.Error, PoolTimeout: the server failed (callers translate them).
        """
        bound = getattr(self._bound, "connection", None) is not None
        try:
            return self._execute_once(statement, params, fetch)
        except psycopg.OperationalError:
            if bound or not self._lost_connection():
                raise
            if not idempotent:
                raise
            return self._execute_once(statement, params, fetch)

    def _execute_once(self, statement: Any, params: Any, fetch: bool) -> Any:
        with self.connection() as conn:
            try:
                cursor = conn.execute(statement, params)
            except psycopg.OperationalError:
                self._last_broken.value = conn.broken
                raise
            return cursor.fetchall() if fetch else cursor.rowcount

    def _lost_connection(self) -> bool:
        """After an ``OperationalError``: whether it was the connection that died (then the
        pool's idle connections are checked, once at a time, in the calling thread)."""
        if not getattr(self._last_broken, "value", False):
            return False
        self._last_broken.value = False
        if self._checking.acquire(blocking=False):
            try:
                close_quietly(self.pool.check)
            finally:
                self._checking.release()
        return True

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        if not self._migrated:
            with self._migrate_lock:
                if not self._migrated:
                    if self._auto_migrate:
                        migrate(conn, self.schema)
                    else:
                        self._check_schema(conn)
                    self._migrated = True

    def _check_schema(self, conn: psycopg.Connection[Any]) -> None:
        """With ``migrate=never``: refuse a schema that lacks a migration this code needs."""
        missing = sorted({v for v, _ in MIGRATIONS} - set(applied_versions(conn, self.schema)))
        if missing:
            option = "--router" if issubclass(self._error, RouterError) else "--storage"
            raise self._error(
                f"PostgreSQL schema {self.schema!r} lacks migration(s) {missing} and the URL "
                f"says migrate=never: run `reactor migrate {option} URL` (with a role allowed "
                "to create tables) first (docs/adapters/postgres.md, \"Schema and migration\")"
            )

    def migrate_now(self) -> list[int]:
        """Bring the schema up to date now (whatever ``auto_migrate`` says).

        Returns:
            The versions this call applied, ascending (``[]``: already up to date).

        Raises:
            StorageError or RouterError: the client is closed.
            psycopg.Error, PoolTimeout: the server failed (callers translate them).
        """
        if self._closed:
            raise self._error("the PostgreSQL client is closed")
        # a connection of its own, not the pool's: a refused or misconfigured server fails
        # at once with its own reason instead of after the pool's wait
        with self._migrate_lock, psycopg.connect(self.conninfo, autocommit=True) as conn:
            applied = migrate(conn, self.schema)
            self._migrated = True
        return applied

    def take(self) -> psycopg.Connection[Any]:
        """Take a connection out of the pool (the schema migrated) until :meth:`give_back`.

        Raises:
            StorageError or RouterError: the client is closed.
            psycopg.Error, PoolTimeout: the server failed (callers translate them).
        """
        if self._closed:
            raise self._error("the PostgreSQL client is closed")
        conn: psycopg.Connection[Any] = self.pool.getconn()
        try:
            self._migrate(conn)
        except BaseException:
            self.pool.putconn(conn)
            raise
        return conn

    def give_back(self, conn: psycopg.Connection[Any]) -> None:
        """Return a connection :meth:`take` gave (the pool discards a broken one); never
        raises."""
        close_quietly(lambda: self.pool.putconn(conn))

    @contextmanager
    def bind(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """While entered, :meth:`connection` on the calling thread yields ``conn``."""
        previous = getattr(self._bound, "connection", None)
        self._bound.connection = conn
        try:
            yield
        finally:
            self._bound.connection = previous

    def server_time(self) -> float:
        """One round trip: the server's ``clock_timestamp()`` in epoch seconds.

        Raises:
            psycopg.Error, PoolTimeout: the server failed.
        """
        if self._closed:
            raise self._error("the PostgreSQL client is closed")
        with self.pool.connection() as conn:
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert row is not None
        return float(row[0])

    def close(self) -> None:
        """Close the pool and its connections; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        close_quietly(self.pool.close)
