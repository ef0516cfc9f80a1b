"""MongoDB storage and router for reactor (pymongo).

Registered through entry points exactly like a third-party adapter (docs/architecture.md,
"Repository layout"):

* ``reactor.storages``: ``mongodb``, ``mongodb+srv`` -> :func:`storage_from_url`
* ``reactor.routers``: ``mongodb``, ``mongodb+srv`` -> :func:`router_from_url`
* ``reactor.probes`` / ``reactor.router_probes``: the contract-suite backdoors
  (:mod:`reactor_mongodb.probe`)

URLs: ``mongodb://host:27017/DB?prefix=reactor_&clock=server`` (see
:mod:`reactor_mongodb._url` for the reactor options; every other option must be a MongoDB
connection-string option and goes to the driver). Unknown options and bad values raise
:class:`reactor.ConfigurationError` at construction. Construction never waits for the server;
operations on an unreachable server raise ``StorageError``/``RouterError`` after the
``serverSelectionTimeoutMS`` (default 5 s; docs/adapters/mongodb.md "Timeouts").
``mongomock://`` (:mod:`reactor_mongodb.testing`) runs the same adapter in-process, for tests.
"""

from __future__ import annotations

from typing import Any

from reactor.errors import ConfigurationError
from reactor_mongodb._url import MongoURL, parse_url
from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.router import MongoRouter
from reactor_mongodb.storage import MONGO_CAPABILITIES, MongoStorage

__all__ = [
    "MONGO_CAPABILITIES",
    "MongoDocumentStore",
    "MongoRouter",
    "MongoStorage",
    "build_router",
    "build_storage",
    "router_from_url",
    "storage_from_url",
]


def _client(uri: str) -> Any:
    """A ``pymongo.MongoClient`` on ``uri`` (connects lazily, in the background).

    Raises:
        ConfigurationError: pymongo refused the URI (e.g. a ``mongodb+srv`` name that does not
            resolve, or a combination of options the URL parser could not judge alone).
    """
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    try:
        return MongoClient(uri, tz_aware=False, uuidRepresentation="standard")
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"MongoDB client configuration rejected: {exc}") from exc


def build_storage(
    url: MongoURL,
    client: Any,
    *,
    clock: str = "server",
    owns_client: bool = True,
    context_ttl: float = 86400.0,
    clock_skew_budget: float = 1.0,
    **_ignored: Any,
) -> MongoStorage:
    """Build a :class:`MongoStorage` from a parsed URL and a (pymongo-compatible) client.

    Args:
        url: the parsed URL (database and reactor options).
        client: a ``pymongo.MongoClient`` or an API-compatible fake.
        clock: the default clock mode when the URL has no ``clock`` option.
        owns_client: close ``client`` when the storage is closed.
        context_ttl: retention of durable run state in seconds.
        clock_skew_budget: the default of the ``clock_skew_budget`` URL option (seconds; only
            used with ``clock=application``).
        **_ignored: other engine settings (accepted and ignored).
    """
    documents = MongoDocumentStore(
        client[url.database],
        prefix=url.options.get("prefix", "reactor_"),
        clock=url.clock(clock),
        gc_grace=url.gc_grace(),
        owns_client=owns_client,
        clock_skew_budget=url.clock_skew_budget(clock_skew_budget),
    )
    return MongoStorage(documents, context_ttl=context_ttl)


def build_router(
    url: MongoURL,
    client: Any,
    *,
    clock: str = "server",
    owns_client: bool = True,
    visibility_timeout: float = 30.0,
    **_ignored: Any,
) -> MongoRouter:
    """Build a :class:`MongoRouter` from a parsed URL and a (pymongo-compatible) client.

    Args:
        url: the parsed URL (database, ``queue``, ``prefix``, ``visibility_timeout``).
        client: a ``pymongo.MongoClient`` or an API-compatible fake.
        clock: the default clock mode when the URL has no ``clock`` option.
        owns_client: close ``client`` when the router is closed.
        visibility_timeout: the default lease in seconds (the URL option wins).
        **_ignored: other engine settings (accepted and ignored).
    """
    return MongoRouter(
        client[url.database],
        queue=url.options.get("queue", "default"),
        prefix=url.options.get("prefix", "reactor_"),
        visibility_timeout=url.visibility_timeout(visibility_timeout),
        clock=url.clock(clock),
        owns_client=owns_client,
    )


def storage_from_url(url: str, **settings: Any) -> MongoStorage:
    """The ``reactor.storages`` factory for ``mongodb://`` and ``mongodb+srv://``.

    Args:
        url: ``mongodb://host[:port]/DB?prefix=...&clock=server|application&gc_grace=60``.
        **settings: engine settings; ``context_ttl`` (seconds) is used, others are ignored.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad option value.
    """
    parsed = parse_url(url)
    return build_storage(parsed, _client(parsed.client_uri), **settings)


def router_from_url(url: str, **settings: Any) -> MongoRouter:
    """The ``reactor.routers`` factory for ``mongodb://`` and ``mongodb+srv://``.

    Args:
        url: ``mongodb://host[:port]/DB?queue=default&prefix=...&visibility_timeout=30``.
        **settings: engine settings; ``visibility_timeout`` (seconds) is used, others ignored.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad option value.
    """
    parsed = parse_url(url)
    return build_router(parsed, _client(parsed.client_uri), **settings)
