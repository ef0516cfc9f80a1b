"""A :class:`reactor.ports.DocumentStore` on PostgreSQL (docs/adapters/postgres.md, "Storage").

One table of the deployment's schema holds every collection (created by
:mod:`reactor_postgres.migrations`)::

    documents(collection text COLLATE "C", key text COLLATE "C", value text, version text,
              expires_at double precision, idx text COLLATE "C",
              PRIMARY KEY (collection, key))
    INDEX documents_scan (collection, idx, key)
    INDEX documents_expiry (expires_at) WHERE expires_at IS NOT NULL

Semantics follow ``reactor/ports/documents.py`` (docs/writing-an-adapter.md, "Versions" and
"Scans, expiry and the clock"):

* every compare-and-set is **one autocommit statement**: ``INSERT ... ON CONFLICT DO NOTHING``
  (create), ``UPDATE ... WHERE version = %s`` (update), ``DELETE ... WHERE version = %s``
  (delete); under READ COMMITTED a racing writer waits for the row lock and then re-checks
  the version on the row it finds, so of racing compare-and-sets exactly one wins;
* every write stores a fresh UUID version (no ABA after a delete and re-create);
* ``COLLATE "C"`` makes key order code-point order whatever the database's locale;
* a row whose ``expires_at <= now`` reads as absent but reports its version; expired rows are
  deleted by :meth:`PostgresDocumentStore.purge`, run every ``purge_every`` writes (garbage
  collection, never a semantic);
* ``now()`` is the server's clock (``clock_timestamp()``) read through a
  :class:`reactor.ports.clock.CalibratedClock`, and expiry is judged against it in every read
  and scan (passed as a parameter, so a probe's storage with an injected clock judges by its
  own clock, docs/contract-suite.md, "The probe").

Values are stored as JSON text (``json.dumps`` with ASCII escapes, so a NUL or lone surrogate
inside a string is kept as its escape: PostgreSQL ``text`` cannot hold NUL).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg import sql

from reactor.errors import StorageError
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.documents import Versioned
from reactor.ports.driver_errors import translate_errors
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient

__all__ = ["PostgresDocumentStore", "RawRow", "like_prefix"]


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


def like_prefix(prefix: str) -> str:
    """A ``LIKE`` pattern (escape ``\\``) matching every text that starts with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresDocumentStore:
    """Versioned JSON documents in one PostgreSQL table.

    Args:
        client: the pooled client (schema and connections).
        prefix: a namespace prepended to every collection name (``"<prefix>:<collection>"``).
        clock: the store clock in epoch seconds, a callable or a
            :class:`reactor.ports.Clock` (the adapter passes the server's calibrated clock).
        owns_client: close ``client`` in :meth:`close` (a probe's twin store shares it and
            passes ``False``).
        purge_every: delete up to 1000 expired rows of this namespace every this many
            successful writes (``0``: never; :meth:`purge` still works).

    Raises:
        ValueError: ``purge_every`` is negative.
    """

    def __init__(
        self,
        client: PostgresClient,
        *,
        prefix: str = "",
        clock: Callable[[], float] | Clock | None = None,
        owns_client: bool = True,
        purge_every: int = 1000,
    ) -> None:
        if purge_every < 0:
            raise ValueError(f"purge_every must be >= 0, got {purge_every!r}")
        self.client = client
        self._prefix = f"{prefix}:" if prefix else ""
        self._clock = wall_reader(clock)
        self._owns_client = owns_client
        self._purge_every = purge_every
        self._writes = 0
        self._lock = threading.Lock()
        self._closed = False
        table = sql.SQL("{}.documents").format(sql.Identifier(client.schema))
        self._sql: dict[str, sql.Composed] = {
            name: sql.SQL(text).format(t=table) for name, text in _STATEMENTS.items()
        }

    @property
    def prefix(self) -> str:
        """The namespace given to the constructor (``""`` = none)."""
        return self._prefix.removesuffix(":")

    @property
    def owns_client(self) -> bool:
        """Whether :meth:`close` closes the client."""
        return self._owns_client

    def now(self) -> float:
        """The store clock in epoch seconds (the server's, calibrated; no round trip).

        Raises:
            StorageError: a due calibration failed.
        """
        return self._clock()

    def _run(self, name: str, params: tuple[Any, ...], *, fetch: bool) -> Any:
        """Run one named statement (:meth:`PostgresClient.execute`: a read is run again once
        on a fresh connection when its pooled one had died); rows or the changed-row count."""
        if self._closed:
            raise StorageError("the PostgreSQL document store is closed")
        with translate_errors(DRIVER_ERRORS, what=f"PostgreSQL {name}"):
            return self.client.execute(self._sql[name], params, fetch=fetch,
                                       idempotent=name in _READS)

    def read(self, collection: str, key: str) -> Versioned:
        """Read one document (one ``SELECT``); an expired row gives ``value=None`` but keeps
        its version.

        Raises:
            StorageError: PostgreSQL failed.
        """
        rows = self._run("read", (self._prefix + collection, key), fetch=True)
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
        """Compare-and-set one document in one statement (``value=None`` deletes it).

        Args:
            collection: the collection name.
            key: the document key (any text without NUL).
            value: a JSON-native mapping, or ``None`` to delete the row.
            expected_version: the version the caller read; ``None`` = no row may exist.
            expires_at: epoch seconds after which the row reads as absent; ``None`` = never.
            index: the ``idx`` column :meth:`scan` filters on.

        Returns:
            ``True`` when written; ``False`` when the stored version differed.

        Raises:
            TypeError: ``value`` is not JSON-serializable.
            ValueError: ``value`` holds a non-finite float.
            StorageError: PostgreSQL failed.
        """
        text = None if value is None else json.dumps(dict(value), allow_nan=False)
        coll = self._prefix + collection
        version = uuid.uuid4().hex
        if expected_version is None:
            if text is None:  # delete-if-absent: succeeds exactly when nothing is stored
                return not self._run("exists", (coll, key), fetch=True)
            changed = self._run(
                "create", (coll, key, text, version, expires_at, index), fetch=False
            )
        elif text is None:
            changed = self._run("delete", (coll, key, expected_version), fetch=False)
        else:
            changed = self._run(
                "update", (text, version, expires_at, index, coll, key, expected_version),
                fetch=False,
            )
        written = bool(changed == 1)
        if written and self._purge_every:
            with self._lock:
                self._writes += 1
                due = self._writes % self._purge_every == 0
            if due:
                self.purge()
        return written

    def write_together(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any],
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None,
        inserts: Sequence[tuple[str, str, Mapping[str, Any], float | None]] = (),
        upserts: Sequence[tuple[str, str, Mapping[str, Any], float | None]] = (),
    ) -> str | None:
        """Compare-and-set one document and, only when that wrote, insert documents under
        fresh keys and put others (last writer wins): **one statement** (data-modifying CTEs),
        so all of it is written or none (a checkpoint's head, its new pieces and the run's
        listing row: reactor_postgres/contexts.py).

        Args:
            collection, key, value, expires_at, index: the document compare-and-set, as
                :meth:`write` (``value`` not ``None``).
            expected_version: the version read (the row must be live with it), or ``None``:
                no row may exist.
            inserts: ``(collection, key, value, expires_at)`` documents to insert (no
                ``idx``); each key must be free.
            upserts: the same, written whatever is stored there.

        Returns:
            The compare-and-set document's new version; ``None`` when its condition failed
            (nothing written).

        Raises:
            TypeError, ValueError: a value is not JSON-serializable, or holds a non-finite
                float.
            StorageError: PostgreSQL failed, or an insert's key is taken (nothing written).
        """
        text = json.dumps(dict(value), allow_nan=False)
        version = uuid.uuid4().hex
        head: tuple[Any, ...]
        if expected_version is None:
            name = "create_together"
            head = (self._prefix + collection, key, text, version, expires_at, index)
        else:
            name = "update_together"
            head = (text, version, expires_at, index, self._prefix + collection, key,
                    expected_version, self.now())
        rows = self._run(name, (*head, *self._columns(inserts), *self._columns(upserts)),
                         fetch=True)
        return version if rows and rows[0][0] == 1 else None

    def _columns(
        self, documents: Sequence[tuple[str, str, Mapping[str, Any], float | None]]
    ) -> tuple[list[str], list[str], list[str], list[str], list[float | None]]:
        """The ``unnest`` arrays of ``documents``: collections, keys, values, versions,
        expiries."""
        return (
            [self._prefix + c for c, _, _, _ in documents],
            [k for _, k, _, _ in documents],
            [json.dumps(dict(v), allow_nan=False) for _, _, v, _ in documents],
            [uuid.uuid4().hex for _ in documents],
            [e for _, _, _, e in documents],
        )

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired documents in ascending code-point key order (one indexed
        ``SELECT``: ``documents_scan`` with an index, the primary key without).

        Args:
            collection: the collection name.
            index: only rows written with this ``idx`` (``None``: all rows).
            after: only keys strictly greater than this one (keyset paging); trailing NULs
                are stripped (``text`` cannot carry them and no key holds one, so
                ``> key + "\\x00"`` selects exactly the keys ``> key``).
            limit: the maximum number of rows (``<= 0`` gives ``[]``).

        Raises:
            StorageError: PostgreSQL failed.
        """
        if limit <= 0:
            return []
        start = None if after is None else after.rstrip("\x00")
        name = "scan_index" if index is not None else "scan"
        params: tuple[Any, ...] = (self._prefix + collection,)
        if index is not None:
            params += (index,)
        if start is not None:
            name += "_after"
            params += (start,)
        params += (self.now(), limit)
        rows = self._run(name, params, fetch=True)
        return [(key, json.loads(text)) for key, text in rows]

    def purge(self, limit: int = 1000) -> int:
        """Delete up to ``limit`` expired rows of this store's namespace; returns the count.

        Raises:
            StorageError: PostgreSQL failed.
        """
        like, now = like_prefix(self._prefix), self.now()
        return int(
            self._run("purge", (like, now, like, now, limit), fetch=False)
        )

    def close(self) -> None:
        """Close the client when this store owns it; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.client.close()

    # -- backdoor for the contract-suite probe (never used by reactor itself) ---------------

    def raw(self, collection: str, key: str) -> RawRow | None:
        """The physically stored row, expired or not; ``None`` when no row exists.

        Raises:
            StorageError: PostgreSQL failed.
        """
        rows = self._run("raw", (self._prefix + collection, key), fetch=True)
        if not rows:
            return None
        text, version, expires_at, idx = rows[0]
        return RawRow(json.loads(text), version, expires_at, idx)

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a row's ``expires_at`` in place, keeping its version (simulated time).

        Raises:
            StorageError: PostgreSQL failed.
        """
        changed = self._run(
            "set_expiry", (expires_at, self._prefix + collection, key), fetch=False
        )
        return bool(changed == 1)


#: The inserts and puts of a ``*_together`` statement, after its ``head`` CTE.
_TOGETHER: LiteralString = (
    ", ins AS (INSERT INTO {t} (collection, key, value, version, expires_at, idx)"
    " SELECT u.c, u.k, u.v, u.n, u.e, NULL FROM head,"
    " unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[]) AS u(c, k, v, n, e)"
    " RETURNING 1),"
    " put AS (INSERT INTO {t} (collection, key, value, version, expires_at, idx)"
    " SELECT u.c, u.k, u.v, u.n, u.e, NULL FROM head,"
    " unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[]) AS u(c, k, v, n, e)"
    " ON CONFLICT (collection, key) DO UPDATE SET value = excluded.value,"
    " version = excluded.version, expires_at = excluded.expires_at, idx = excluded.idx"
    " RETURNING 1)"
    " SELECT (SELECT count(*) FROM head), (SELECT count(*) FROM ins), (SELECT count(*) FROM put)"
)

#: The statements that change nothing (run again once when their connection had died).
_READS = frozenset(
    {"read", "raw", "exists", "scan", "scan_after", "scan_index", "scan_index_after"}
)

_STATEMENTS: dict[str, LiteralString] = {
    "read": "SELECT value, version, expires_at FROM {t} WHERE collection = %s AND key = %s",
    "raw": "SELECT value, version, expires_at, idx FROM {t} WHERE collection = %s AND key = %s",
    "exists": "SELECT 1 FROM {t} WHERE collection = %s AND key = %s",
    "create": "INSERT INTO {t} (collection, key, value, version, expires_at, idx)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (collection, key) DO NOTHING",
    "update": "UPDATE {t} SET value = %s, version = %s, expires_at = %s, idx = %s"
    " WHERE collection = %s AND key = %s AND version = %s",
    "delete": "DELETE FROM {t} WHERE collection = %s AND key = %s AND version = %s",
    # the inserts and puts run only when the head was written (they read its RETURNING); a
    # taken insert key fails the whole statement, so nothing is written
    "update_together": "WITH head AS (UPDATE {t} SET value = %s, version = %s,"
    " expires_at = %s, idx = %s WHERE collection = %s AND key = %s AND version = %s"
    " AND (expires_at IS NULL OR expires_at > %s) RETURNING key)" + _TOGETHER,
    "create_together": "WITH head AS (INSERT INTO {t}"
    " (collection, key, value, version, expires_at, idx) VALUES (%s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (collection, key) DO NOTHING RETURNING key)" + _TOGETHER,
    "scan": "SELECT key, value FROM {t} WHERE collection = %s"
    " AND (expires_at IS NULL OR expires_at > %s) ORDER BY key LIMIT %s",
    "scan_after": "SELECT key, value FROM {t} WHERE collection = %s AND key > %s"
    " AND (expires_at IS NULL OR expires_at > %s) ORDER BY key LIMIT %s",
    "scan_index": "SELECT key, value FROM {t} WHERE collection = %s AND idx = %s"
    " AND (expires_at IS NULL OR expires_at > %s) ORDER BY key LIMIT %s",
    "scan_index_after": "SELECT key, value FROM {t} WHERE collection = %s AND idx = %s"
    " AND key > %s AND (expires_at IS NULL OR expires_at > %s) ORDER BY key LIMIT %s",
    # the re-checked top-level expiry condition keeps a row renewed meanwhile
    "purge": "DELETE FROM {t} WHERE collection LIKE %s ESCAPE '\\' AND expires_at <= %s"
    " AND (collection, key) IN (SELECT collection, key FROM {t}"
    " WHERE collection LIKE %s ESCAPE '\\' AND expires_at <= %s LIMIT %s)",
    "set_expiry": "UPDATE {t} SET expires_at = %s WHERE collection = %s AND key = %s",
}
