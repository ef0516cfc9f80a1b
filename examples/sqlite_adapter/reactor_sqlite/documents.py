"""A :class:`reactor.ports.DocumentStore` on Python's built-in :mod:`sqlite3`.

One table holds every collection::

    documents(collection TEXT, key TEXT, value TEXT, version TEXT, expires_at REAL, idx TEXT,
              PRIMARY KEY (collection, key))
    INDEX documents_scan ON documents (collection, idx, key)

Semantics follow ``reactor/ports/documents.py``:

* every write stores a fresh UUID version (no ABA after a delete and re-create);
* a row whose ``expires_at <= now`` reads as absent, yet reports its version so a caller can
  take it over; expired rows are deleted by :meth:`SQLiteDocumentStore.purge`, which the store
  also runs every ``purge_every`` writes (garbage collection, never a semantic: SQLite has no
  native TTL);
* the clock is the application clock (SQLite has no server): ``Capabilities.clock`` is
  ``"application"``.

Transactions: none explicit. Every operation is **one SQL statement** run in autocommit mode
(the connection is opened with ``isolation_level=None``, so Python's :mod:`sqlite3` never
issues an implicit ``BEGIN``), and SQLite runs each such statement as its own transaction:

* insert-if-absent (``expected_version=None``) is ``INSERT ... ON CONFLICT (collection, key)
  DO NOTHING``; it wrote when it changed one row;
* compare-and-set is ``UPDATE ... WHERE collection = ? AND key = ? AND version = ?``, and
  compare-and-delete ``DELETE ... WHERE ... AND version = ?``: the version check and the
  write are one statement, so no other writer can slip in between;
* delete-if-absent (``expected_version=None``, ``value=None``) is one ``SELECT``: it succeeds
  exactly when no row is stored, and writes nothing;
* :meth:`SQLiteDocumentStore.purge` is one ``DELETE`` of a bounded sub-select.

A write statement takes SQLite's database write lock when it starts (before it reads the row
it checks) and holds it until it ends, waiting up to ``busy_timeout`` for another
connection's lock, so two processes writing one file serialize exactly as they would under
``BEGIN IMMEDIATE``, at a third of the statements. No operation of this store is a
read-then-write of several statements, so none needs an explicit transaction; one that does
must wrap its statements in ``BEGIN IMMEDIATE`` ... ``COMMIT`` (a deferred ``BEGIN`` could
fail to upgrade its read snapshot to a write). The example's tests pin the statements of each
call.

Thread safety: one connection guarded by a lock. SQLite serializes writers anyway, and a
connection shared under a lock works for ``:memory:`` databases too (a connection per thread
would give every thread its own empty in-memory database).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reactor.errors import StorageError
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.documents import Versioned
from reactor.ports.driver_errors import translate_errors

__all__ = ["RawRow", "SQLiteDocumentStore"]

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS documents (
        collection TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        version TEXT NOT NULL,
        expires_at REAL,
        idx TEXT,
        PRIMARY KEY (collection, key)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX IF NOT EXISTS documents_scan ON documents (collection, idx, key)",
)


@dataclass(frozen=True, slots=True)
class RawRow:
    """A physically stored row, expired or not (what the contract-suite probe reads).

    Attributes:
        value: the stored document.
        version: the stored version token.
        expires_at: epoch seconds after which the row reads as absent, ``None`` = never.
        index: the ``idx`` column.
    """

    value: dict[str, Any]
    version: str
    expires_at: float | None
    index: str | None


class SQLiteDocumentStore:
    """Versioned JSON documents in one SQLite table.

    Args:
        path: a database file path, or ``":memory:"`` for a private in-memory database.
        prefix: a namespace prepended to every collection name (``"<prefix>:<collection>"``), so
            several stores can share one file without seeing each other's documents.
        clock: the store clock in epoch seconds: a callable or a :class:`reactor.ports.Clock`
            (default ``None``: the system clock, read at call time).
        busy_timeout: seconds to wait for another process's write lock before failing.
        purge_every: delete up to 1000 expired rows of this namespace every this many writes
            (``0`` disables it; :meth:`purge` still works).

    Raises:
        StorageError: the database cannot be opened or its schema created.
    """

    def __init__(
        self,
        path: str = ":memory:",
        *,
        prefix: str = "",
        clock: Callable[[], float] | Clock | None = None,
        busy_timeout: float = 30.0,
        purge_every: int = 1000,
    ) -> None:
        if purge_every < 0:
            raise ValueError(f"purge_every must be >= 0, got {purge_every!r}")
        self._purge_every = purge_every
        self._writes = 0
        self._path = path
        self._prefix = f"{prefix}:" if prefix else ""
        self._clock = wall_reader(clock)
        self._lock = threading.RLock()
        self._closed = False
        with translate_errors(sqlite3.Error, what=f"opening SQLite database {path!r}"):
            self._conn = sqlite3.connect(
                path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                self._conn.execute(statement)

    @property
    def path(self) -> str:
        """The database path given to the constructor."""
        return self._path

    @property
    def prefix(self) -> str:
        """The namespace given to the constructor (``""`` = none)."""
        return self._prefix.removesuffix(":")

    @property
    def connection(self) -> sqlite3.Connection:
        """The shared connection, for instrumentation only (e.g.
        :meth:`sqlite3.Connection.set_trace_callback` in tests and benchmarks); running
        statements on it bypasses the store's lock."""
        return self._conn

    def now(self) -> float:
        """The application clock in epoch seconds (SQLite has no server clock)."""
        return self._clock()

    def _execute(self, sql: str, params: tuple[Any, ...]) -> int:
        """Run one write statement in autocommit mode (its own SQLite transaction) and return
        the number of rows it changed."""
        with self._lock:
            if self._closed:
                raise StorageError("the SQLite document store is closed")
            with translate_errors(sqlite3.Error, what="SQLite write"):
                return self._conn.execute(sql, params).rowcount

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            if self._closed:
                raise StorageError("the SQLite document store is closed")
            with translate_errors(sqlite3.Error, what="SQLite query"):
                return self._conn.execute(sql, params).fetchall()

    def read(self, collection: str, key: str) -> Versioned:
        """Read one document; an expired row gives ``value=None`` but keeps its version."""
        rows = self._query(
            "SELECT value, version, expires_at FROM documents WHERE collection = ? AND key = ?",
            (self._prefix + collection, key),
        )
        if not rows:
            return Versioned(value=None, version=None)
        text, version, expires_at = rows[0]
        if expires_at is not None and expires_at <= self.now():
            return Versioned(value=None, version=version)
        return Versioned(value=json.loads(text), version=version, expires_at=expires_at)

    def write(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None = None,
    ) -> bool:
        """Compare-and-set one document (``value=None`` deletes it).

        Args:
            collection: the collection name.
            key: the document key.
            value: a JSON-native dict, or ``None`` to delete the row.
            expected_version: the version the caller read; ``None`` = no row may exist.
            expires_at: epoch seconds after which the row reads as absent; ``None`` = never.
            index: the ``idx`` column :meth:`scan` filters on.

        Returns:
            ``True`` when written; ``False`` when the stored version differed.

        Raises:
            TypeError: ``value`` is not JSON-serializable.
            ValueError: ``value`` holds a non-finite float.
            StorageError: SQLite failed.
        """
        text = None if value is None else json.dumps(dict(value), allow_nan=False)
        coll = self._prefix + collection
        version = uuid.uuid4().hex
        if expected_version is None:
            if text is None:  # delete-if-absent: succeeds exactly when nothing is stored
                return not self._query(
                    "SELECT 1 FROM documents WHERE collection = ? AND key = ?", (coll, key)
                )
            changed = self._execute(
                "INSERT INTO documents (collection, key, value, version, expires_at, idx) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (collection, key) DO NOTHING",
                (coll, key, text, version, expires_at, index),
            )
        elif text is None:
            changed = self._execute(
                "DELETE FROM documents WHERE collection = ? AND key = ? AND version = ?",
                (coll, key, expected_version),
            )
        else:
            changed = self._execute(
                "UPDATE documents SET value = ?, version = ?, expires_at = ?, idx = ? "
                "WHERE collection = ? AND key = ? AND version = ?",
                (text, version, expires_at, index, coll, key, expected_version),
            )
        written = changed == 1
        if written and self._purge_every:
            with self._lock:
                self._writes += 1
                due = self._writes % self._purge_every == 0
            if due:
                self.purge()
        return written

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired documents in ascending key order (served by ``documents_scan``).

        Args:
            collection: the collection name.
            index: only rows written with this ``idx`` (``None``: all rows).
            after: only keys strictly greater than this one (keyset paging).
            limit: the maximum number of rows (``<= 0`` gives ``[]``).
        """
        if limit <= 0:
            return []
        sql = ["SELECT key, value FROM documents WHERE collection = ?"]
        params: list[Any] = [self._prefix + collection]
        if index is not None:
            sql.append("AND idx = ?")
            params.append(index)
        if after is not None:
            sql.append("AND key > ?")
            params.append(after)
        sql.append("AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?")
        params += [self.now(), limit]
        rows = self._query(" ".join(sql), tuple(params))
        return [(key, json.loads(text)) for key, text in rows]

    def purge(self, limit: int = 1000) -> int:
        """Delete up to ``limit`` expired rows of this store's namespace; returns the count."""
        like = self._prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return self._execute(
            "DELETE FROM documents WHERE (collection, key) IN ("
            " SELECT collection, key FROM documents"
            " WHERE collection LIKE ? ESCAPE '\\' AND expires_at IS NOT NULL"
            " AND expires_at <= ? LIMIT ?)",
            (like, self.now(), limit),
        )

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    # -- backdoor for the contract-suite probe (never used by reactor itself) ---------------

    def raw(self, collection: str, key: str) -> RawRow | None:
        """The physically stored row, expired or not; ``None`` when no row exists."""
        rows = self._query(
            "SELECT value, version, expires_at, idx FROM documents "
            "WHERE collection = ? AND key = ?",
            (self._prefix + collection, key),
        )
        if not rows:
            return None
        text, version, expires_at, idx = rows[0]
        return RawRow(json.loads(text), version, expires_at, idx)

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a row's ``expires_at`` in place, keeping its version (simulated time)."""
        return (
            self._execute(
                "UPDATE documents SET expires_at = ? WHERE collection = ? AND key = ?",
                (expires_at, self._prefix + collection, key),
            )
            == 1
        )
