"""PostgreSQL storage and router for reactor (psycopg 3 + psycopg_pool; docs/adapters/postgres.md).

Registered through entry points exactly like a third-party adapter (docs/architecture.md,
"Repository layout"):

* ``reactor.storages``: ``postgresql``, ``postgres`` -> :func:`storage_from_url`
* ``reactor.routers``: ``postgresql``, ``postgres`` -> :func:`router_from_url`
* ``reactor.probes`` / ``reactor.router_probes``: the contract-suite backdoors
  (:mod:`reactor_postgres.probe`)

URLs: ``postgresql://user@host:5432/db?schema=reactor&prefix=NAME`` (see
:mod:`reactor_postgres._url` for reactor's options; every other option must be a libpq
connection parameter). Unknown options and bad values raise :class:`reactor.ConfigurationError`
at construction. Construction never waits for the server: the pool connects in the background
and the first operation creates the schema (:mod:`reactor_postgres.migrations`).
"""

from __future__ import annotations

from typing import Any

from reactor.errors import RouterError, StorageError
from reactor.ports.clock import wall_reader
from reactor_postgres._client import PostgresClient
from reactor_postgres._url import PostgresURL, parse_url
from reactor_postgres.documents import PostgresDocumentStore
from reactor_postgres.router import PostgresQueue, PostgresRouter
from reactor_postgres.storage import POSTGRES_CAPABILITIES, PostgresStorage, capabilities_for

__all__ = [
    "POSTGRES_CAPABILITIES",
    "PostgresClient",
    "PostgresDocumentStore",
    "PostgresQueue",
    "PostgresRouter",
    "PostgresStorage",
    "PostgresURL",
    "build_router",
    "build_storage",
    "capabilities_for",
    "parse_url",
    "router_from_url",
    "storage_from_url",
]


def _namespaced(prefix: str, name: str) -> str:
    """``"<prefix>:<name>"``, or ``name`` without a prefix."""
    return f"{prefix}:{name}" if prefix else name


def build_storage(
    url: PostgresURL, *, context_ttl: float = 86400.0, **_ignored: Any
) -> PostgresStorage:
    """Build a :class:`PostgresStorage` (with a pool of its own) from a parsed URL.

    Args:
        url: the parsed URL.
        context_ttl: retention of durable run state in seconds (the URL option wins).
        **_ignored: other engine settings (accepted and ignored).
    """
    client = PostgresClient(
        url.conninfo, schema=url.schema, max_size=url.pool_max_size(), error=StorageError,
        auto_migrate=url.migrate() == "auto",
    )
    return PostgresStorage(
        client,
        prefix=url.prefix,
        context_ttl=url.context_ttl(context_ttl),
        capabilities=capabilities_for(url.clock(), url.clock_skew_budget()),
    )


def build_router(
    url: PostgresURL, *, visibility_timeout: float = 30.0, **_ignored: Any
) -> PostgresRouter:
    """Build a :class:`PostgresRouter` (with a pool of its own) from a parsed URL.

    Args:
        url: the parsed URL (``queue``, ``prefix``, ``visibility_timeout``, ``poll_ceiling``).
        visibility_timeout: the default lease in seconds (the URL option wins).
        **_ignored: other engine settings (accepted and ignored).
    """
    client = PostgresClient(
        url.conninfo, schema=url.schema, max_size=url.pool_max_size(), error=RouterError,
        auto_migrate=url.migrate() == "auto",
    )
    queue = PostgresQueue(
        client, _namespaced(url.prefix, url.queue), poll_ceiling=url.poll_ceiling()
    )
    return PostgresRouter(
        queue,
        visibility_timeout=url.visibility_timeout(visibility_timeout),
        clock=wall_reader(None) if url.clock() == "application" else None,
    )


def storage_from_url(url: str, **settings: Any) -> PostgresStorage:
    """The ``reactor.storages`` factory for ``postgresql://`` and ``postgres://``.

    Args:
        url: ``postgresql://user@host:5432/db?schema=reactor&prefix=...&context_ttl=...``.
        **settings: engine settings; ``context_ttl`` (seconds) is used, others are ignored.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad option value.
    """
    return build_storage(parse_url(url), **settings)


def router_from_url(url: str, **settings: Any) -> PostgresRouter:
    """The ``reactor.routers`` factory for ``postgresql://`` and ``postgres://``.

    Args:
        url: ``postgresql://user@host:5432/db?schema=reactor&queue=default&prefix=...
            &visibility_timeout=30``.
        **settings: engine settings; ``visibility_timeout`` (seconds) is used, others ignored.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad option value.
    """
    return build_router(parse_url(url), **settings)
