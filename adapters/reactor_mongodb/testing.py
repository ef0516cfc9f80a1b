"""Test-only ``mongomock://`` factories: the MongoDB adapter on an in-process fake.

**For tests only.** ``mongomock://NAME/DB?prefix=...`` builds the real
:class:`reactor_mongodb.MongoStorage` / :class:`reactor_mongodb.MongoRouter` over a
``mongomock`` client instead of a server, so the contract suite can run the adapter without any
server. URLs with the same ``NAME`` share one in-memory server inside the process (as two
clients of one mongod would); state is lost when the process exits and is invisible to other
processes. The clock is the application clock (mongomock has neither ``hello`` nor ``$$NOW``).

**Serialised.** mongomock is not thread-safe: an update rewrites the stored document in place
(``clear()`` then ``update()``), so a concurrent read can see it half-written (a document
without its ``version``: ``KeyError: 'version'``), and two compare-and-sets can interleave.
:func:`client_for` therefore returns a :class:`Serialized` proxy: every call into any mongomock
object of the process (client, database, collection, cursor) runs under one process-wide
re-entrant lock, :data:`MONGOMOCK_LOCK`. Threads still race to the lock, so the concurrency
tests keep their meaning on mongomock (each operation is atomic, as one ``mongod`` operation
is), but real parallelism is only exercised on a MongoDB server (docs/adapters/mongodb.md).

mongomock is a test dependency (the ``dev`` extra), never needed by production code.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any
from urllib.parse import urlsplit

from reactor.errors import ConfigurationError
from reactor.ports.urls import redact_url
from reactor_mongodb._url import parse_url

__all__ = ["MONGOMOCK_LOCK", "Serialized", "client_for", "router_from_url", "storage_from_url"]

_stores: dict[str, Any] = {}
_lock = threading.Lock()

#: The one lock every call into mongomock takes (re-entrant: mongomock calls itself).
MONGOMOCK_LOCK = threading.RLock()


def _serialized(value: Any) -> Any:
    """``value`` behind a :class:`Serialized` proxy when it is a mongomock object."""
    if isinstance(value, Serialized | BaseException):
        return value
    if type(value).__module__.split(".", 1)[0] == "mongomock":
        return Serialized(value)
    return value


class Serialized:
    """A proxy that runs every operation on a mongomock object under :data:`MONGOMOCK_LOCK`.

    Attribute reads, method calls, ``obj[name]``, iteration steps and ``with`` blocks are
    serialised; the mongomock objects they return (databases, collections, cursors, change
    streams) are wrapped in turn, plain values (documents, results, numbers) are returned as
    they are. Exceptions pass through unchanged.

    Args:
        target: the mongomock object (normally a ``mongomock.MongoClient``).
    """

    __slots__ = ("_target",)

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        """The target's attribute; a method comes back as a serialised call."""
        with MONGOMOCK_LOCK:
            value = getattr(self._target, name)
        if not inspect.isroutine(value):
            return _serialized(value)

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            with MONGOMOCK_LOCK:
                return _serialized(value(*args, **kwargs))

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute of the target under the lock."""
        with MONGOMOCK_LOCK:
            setattr(self._target, name, value)

    def __getitem__(self, key: Any) -> Any:
        """``target[key]`` (a database of a client, a collection of a database)."""
        with MONGOMOCK_LOCK:
            return _serialized(self._target[key])

    def __iter__(self) -> Any:
        """An iterator over the target whose every step is serialised."""
        with MONGOMOCK_LOCK:
            return _serialized(iter(self._target))

    def __next__(self) -> Any:
        """The target iterator's next item (``StopIteration`` at the end)."""
        with MONGOMOCK_LOCK:
            return _serialized(next(self._target))

    def __enter__(self) -> Any:
        """Enter the target's context (a change stream, a session)."""
        with MONGOMOCK_LOCK:
            return _serialized(self._target.__enter__())

    def __exit__(self, *exc: Any) -> Any:
        """Leave the target's context."""
        with MONGOMOCK_LOCK:
            return self._target.__exit__(*exc)

    def __repr__(self) -> str:
        """``Serialized(<target repr>)``."""
        return f"Serialized({self._target!r})"


def client_for(name: str) -> Any:
    """A mongomock client on the process-wide in-memory server called ``name``.

    Every operation through it (and through the databases, collections and cursors it hands
    out) is serialised by :data:`MONGOMOCK_LOCK`, because mongomock is not thread-safe.

    Returns:
        A :class:`Serialized` ``mongomock.MongoClient``.

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
    return Serialized(mongomock.MongoClient(_store=store))


def _as_mongodb_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if parts.scheme.lower() != "mongomock":
        raise ConfigurationError(f"not a mongomock URL: {redact_url(url)!r}")
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
    # One process, one clock: no skew between the clients of an in-process mongomock.
    return build_storage(
        parsed, client, clock="application", owns_client=False, clock_skew_budget=0.0,
        **settings,
    )


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
