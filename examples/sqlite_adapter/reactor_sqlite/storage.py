"""``SQLiteStorage``: :class:`reactor.generic.storage.GenericStorage` over SQLite, and its URL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactor.errors import ConfigurationError
from reactor.generic.storage import GenericStorage
from reactor.ports.clock import Clock
from reactor.ports.storage import Capabilities
from reactor.ports.urls import UrlOptions, redact_url
from reactor_sqlite.documents import SQLiteDocumentStore

__all__ = ["SQLITE_CAPABILITIES", "SQLiteStorage", "SQLiteURL", "parse_url", "storage_from_url"]

#: No pub/sub (waiters poll), no document limit, and the application clock (SQLite has none).
SQLITE_CAPABILITIES = Capabilities(signals=False, max_document_bytes=None, clock="application")

_PARAMETERS = frozenset({"prefix", "context_ttl", "busy_timeout"})


@dataclass(frozen=True)
class SQLiteURL:
    """A parsed ``sqlite://`` URL.

    Attributes:
        path: the database file, or ``":memory:"``.
        prefix: the document namespace (``""`` = none).
        options: the query parameters, with typed readers (``context_ttl``, ``busy_timeout``).
    """

    path: str
    prefix: str
    options: UrlOptions


def parse_url(url: str) -> SQLiteURL:
    """Parse a ``sqlite://`` URL; the path follows ``file://`` URLs.

    * ``sqlite:///tmp/x.db`` -> ``/tmp/x.db`` (absolute; extra leading slashes are ignored);
    * ``sqlite://runs.db`` or ``sqlite://./data/runs.db`` -> relative to the working directory;
    * ``sqlite://:memory:`` -> a private in-memory database.

    Raises:
        ConfigurationError: another scheme, no path, or an unknown query parameter.
    """
    head, sep, rest = url.partition("://")
    if not sep or head.lower() != "sqlite":
        raise ConfigurationError(f"expected a sqlite:// URL, got {redact_url(url)!r}")
    location, _, query = rest.partition("?")
    if location in (":memory:", "/:memory:"):
        path = ":memory:"
    elif location.strip("/"):
        path = "/" + location.lstrip("/") if location.startswith("/") else location
    else:
        raise ConfigurationError(
            "sqlite URLs look like sqlite:///path/to/file.db or sqlite://:memory:, got "
            f"{redact_url(url)!r}"
        )
    options = UrlOptions.parse(
        query, url=url, label="sqlite:// URL parameter", accepted=_PARAMETERS
    )
    return SQLiteURL(path=path, prefix=options.get("prefix", ""), options=options)


class SQLiteStorage(GenericStorage):
    """A :class:`reactor.ports.Storage` on one SQLite database.

    Args:
        path: the database file, or ``":memory:"``.
        prefix: a namespace for every document (several storages may share one file).
        context_ttl: retention in seconds of durable run state after its last write.
        busy_timeout: seconds to wait for another process's write lock.
        clock: the application clock, ``() -> epoch seconds`` or a
            :class:`reactor.ports.Clock` (default ``None``: the system clock, read at call
            time; injectable for tests, docs/coordination.md#clock-skew).

    Attributes:
        documents: the :class:`SQLiteDocumentStore` (its ``raw``/``set_expiry`` serve probes).
    """

    documents: SQLiteDocumentStore

    def __init__(
        self,
        path: str = ":memory:",
        *,
        prefix: str = "",
        context_ttl: float = 86400.0,
        busy_timeout: float = 30.0,
        clock: Callable[[], float] | Clock | None = None,
    ) -> None:
        super().__init__(
            SQLiteDocumentStore(path, prefix=prefix, clock=clock, busy_timeout=busy_timeout),
            context_ttl=context_ttl,
            capabilities=SQLITE_CAPABILITIES,
        )


def storage_from_url(url: str, **settings: Any) -> SQLiteStorage:
    """Build a :class:`SQLiteStorage` from a ``sqlite://`` URL (the ``reactor.storages`` factory).

    Args:
        url: see :func:`parse_url`.
        **settings: reactor engine settings; ``context_ttl`` (seconds) is used unless the URL
            sets it, the rest is ignored.

    Raises:
        ConfigurationError: a malformed URL or a bad parameter value.
        StorageError: the database cannot be opened.
    """
    parsed = parse_url(url)
    ttl = float(settings.get("context_ttl", 86400.0))  # validated by reactor's settings

    def seconds(name: str, default: float) -> float:
        return parsed.options.number(
            name, default, exclusive_minimum=0, unit="seconds", allow_empty=False
        )

    return SQLiteStorage(
        parsed.path,
        prefix=parsed.prefix,
        context_ttl=seconds("context_ttl", ttl),
        busy_timeout=seconds("busy_timeout", 30.0),
    )
