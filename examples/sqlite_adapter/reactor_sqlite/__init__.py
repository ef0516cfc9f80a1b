"""reactor-sqlite-example: a third-party reactor storage adapter on Python's built-in sqlite3.

It is written only against reactor's public protocol (:mod:`reactor.ports`) and the generic
stores (:mod:`reactor.generic`): it implements the small versioned-document primitive
(:class:`SQLiteDocumentStore`) and lets :class:`reactor.generic.storage.GenericStorage` supply
every sub-store. See docs/writing-an-adapter.md for the walk-through.

URLs (entry point ``reactor.storages: sqlite``)::

    sqlite:///relative/or/absolute/path.db     a database file (created when missing)
    sqlite:////tmp/x.db                        the same, absolute, four slashes
    sqlite://:memory:                          a private in-memory database
    ...?prefix=NAME                            namespace every document (tests, multi-tenant)
    ...?context_ttl=SECONDS                    retention (else the engine setting, else 24 h)
"""

from __future__ import annotations

from reactor_sqlite.documents import RawRow, SQLiteDocumentStore
from reactor_sqlite.storage import SQLITE_CAPABILITIES, SQLiteStorage, parse_url, storage_from_url

__all__ = [
    "SQLITE_CAPABILITIES",
    "RawRow",
    "SQLiteDocumentStore",
    "SQLiteStorage",
    "parse_url",
    "storage_from_url",
]
