"""Test-only ``mongomock://`` factories: the MongoDB adapter on an in-process fake.

**For tests only.** ``mongomock://NAME/DB?prefix=...`` builds the real
:class:`reactor_mongodb.MongoStorage` / :class:`reactor_mongodb.MongoRouter` over a
``mongomock`` client instead of a server, so the contract suite can run the adapter without any
server. URLs with the same ``NAME`` share one in-memory server inside the process (as two
clients of one mongod would); state is lost when the process exits and is invisible to other
processes. The clock is the application clock (mongomock has neither ``hello`` nor ``$$NOW``).

mongomock is a test dependency (the ``dev`` extra), never needed by production code.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from reactor.model.errors import ConfigurationError
from reactor_mongodb._url import parse_url

__all__ = ["client_for", "router_from_url", "storage_from_url"]

_stores: dict[str, Any] = {}
_lock = threading.Lock()


def client_for(name: str) -> Any:
    """A mongomock client on the process-wide in-memory server called ``name``.

    Raises:
        ConfigurationError: mongomock is not installed.
    """
    try:
        import mongomock
        from mongomock.store import ServerStore
    except ImportError as exc:  # pragma: no cover - dev extra missing
        raise ConfigurationError(
            "mongomock:// needs mongomock (a test dependency: pip install 'reactor-saga[dev]')"
        ) from exc
    with _lock:
        store = _stores.get(name)
        if store is None:
            store = _stores[name] = ServerStore()  # type: ignore[no-untyped-call]
    return mongomock.MongoClient(_store=store)


def _as_mongodb_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if parts.scheme.lower() != "mongomock":
        raise ConfigurationError(f"not a mongomock URL: {url!r}")
    rest = url.split("://", 1)[1]
    return parts.netloc or "default", "mongodb://localhost" + rest[len(parts.netloc) :]


def storage_from_url(url: str, **settings: Any) -> Any:
    """Build a :class:`reactor_mongodb.MongoStorage` on mongomock (tests only).

    Args:
        url: ``mongomock://NAME/DB?prefix=...``.
        **settings: engine settings; ``context_ttl`` is used, the rest ignored.
    """
    from reactor_mongodb import build_storage

    name, mongo_url = _as_mongodb_url(url)
    parsed = parse_url(mongo_url)
    client = client_for(name)
    return build_storage(parsed, client, clock="application", owns_client=False, **settings)


def router_from_url(url: str, **settings: Any) -> Any:
    """Build a :class:`reactor_mongodb.MongoRouter` on mongomock (tests only).

    Args:
        url: ``mongomock://NAME/DB?queue=...&visibility_timeout=...``.
        **settings: engine settings; ``visibility_timeout`` is used, the rest ignored.
    """
    from reactor_mongodb import build_router

    name, mongo_url = _as_mongodb_url(url)
    parsed = parse_url(mongo_url)
    client = client_for(name)
    return build_router(parsed, client, clock="application", owns_client=False, **settings)
