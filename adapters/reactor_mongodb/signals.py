"""Best-effort completion signals on MongoDB change streams (docs/protocol.md#signals).

``publish`` inserts ``{channel, message, at}`` into the ``<prefix>signals`` collection; each
:class:`MongoSubscription` is a change stream on that collection filtered to inserts of its
channel, opened before :meth:`MongoSignalStore.subscribe` returns, so a message published
afterwards is delivered. Signal documents are garbage: a TTL index on ``at`` removes them
(:data:`SIGNAL_RETENTION` seconds; best effort, a server without TTL indexes keeps them).

Change streams need a replica set or a server that emulates one (SecantusDB does); a
standalone ``mongod`` and mongomock do not. :func:`change_streams_supported` asks once, when the
storage is built, bounded by :data:`PROBE_TIMEOUT` seconds (construction never waits for an
unreachable server for long). A definite answer is final: without support the storage declares
``Capabilities(signals=False)`` and waits poll the durable records (signals only ever
shorten waits: docs/protocol.md#signals). When the server cannot be reached in time the answer is
unknown: the storage declares signals and the :class:`MongoSignalStore` settles the question on
first use; if the server then turns out to refuse change streams, ``publish`` does nothing and
``subscribe`` returns a subscription that never delivers (each ``get`` just waits its timeout,
which is the waiter's poll interval), so waits degrade to polling.
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

import pymongo
from pymongo.errors import ConnectionFailure, PyMongoError

from reactor.errors import StorageError
from reactor.ports.driver_errors import close_quietly, translate_errors

__all__ = [
    "PROBE_TIMEOUT",
    "SIGNALS",
    "SIGNAL_RETENTION",
    "MongoSignalStore",
    "MongoSubscription",
    "change_streams_supported",
]

#: The reactor collection holding published signals (``<prefix>signals`` in MongoDB).
SIGNALS = "signals"
#: Seconds a published signal document is kept (TTL index; clean-up only).
SIGNAL_RETENTION = 300
#: Longest single server-side wait of a subscription, in milliseconds (bounds ``get`` overrun
#: and how quickly ``close`` from another thread takes effect).
_MAX_AWAIT_MS = 100
#: Longest wait in seconds of one change-stream support probe (:func:`change_streams_supported`).
PROBE_TIMEOUT = 1.0


def _transient(exc: PyMongoError) -> bool:
    """Whether ``exc`` says nothing about change-stream support (unreachable, timed out)."""
    return isinstance(exc, ConnectionFailure) or bool(getattr(exc, "timeout", False))


def change_streams_supported(collection: Any, timeout: float = PROBE_TIMEOUT) -> bool | None:
    """Whether ``collection`` can be watched: opens a change stream and closes it at once.

    Args:
        collection: a pymongo ``Collection`` (or an API-compatible fake).
        timeout: the longest wait in seconds (pymongo's client-side operation timeout,
            server selection included).

    Returns:
        ``True`` when the stream opened; ``False`` when the server or fake refused (standalone
        ``mongod``: ``OperationFailure`` 40573; mongomock: ``NotImplementedError``); ``None``
        when the server could not be reached or did not answer within ``timeout``.
    """
    try:
        with pymongo.timeout(timeout):
            stream = collection.watch(max_await_time_ms=1)
    except PyMongoError as exc:
        return None if _transient(exc) else False
    except (NotImplementedError, AttributeError, TypeError):
        return False
    close_quietly(stream.close)
    return True


class MongoSubscription:
    """A live subscription to one channel (a :class:`reactor.ports.Subscription`).

    Args:
        stream: a pymongo ``ChangeStream`` of inserts on the signals collection, filtered to
            this channel and opened with a short ``max_await_time_ms``.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False
        self._lock = threading.Lock()

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the next message; ``None`` on timeout or close.

        Raises:
            StorageError: the change stream failed (not when it was closed meanwhile).
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._closed:
            try:
                with self._lock:
                    change = None if self._closed else self._stream.try_next()
            except PyMongoError as exc:
                if self._closed:
                    return None
                raise StorageError(f"MongoDB signal wait failed: {exc}") from exc
            if change is not None:
                document = change.get("fullDocument") or {}
                return str(document.get("message", ""))
            if time.monotonic() >= deadline:
                return None
        return None

    def close(self) -> None:
        """Close the change stream; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            close_quietly(self._stream.close)


class _SilentSubscription:
    """A subscription that never delivers (the server refused change streams).

    ``get`` waits its timeout (or until closed) and returns ``None``, so a waiter re-checks the
    durable record once per poll interval, as without signals.
    """

    def __init__(self) -> None:
        self._closed = threading.Event()

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds (less if closed); always ``None``."""
        self._closed.wait(max(timeout, 0.0))
        return None

    def close(self) -> None:
        """Wake a pending ``get``; idempotent, never raises."""
        self._closed.set()


class MongoSignalStore:
    """:class:`reactor.ports.SignalStore` on a MongoDB collection and its change streams.

    Args:
        collection: the pymongo ``Collection`` of signal documents (``<prefix>signals``).
        supported: whether the server supports change streams; ``None`` = not known yet
            (settled on first use; see the module docstring).
    """

    def __init__(self, collection: Any, *, supported: bool | None = True) -> None:
        self._collection = collection
        self._indexed = False
        self._index_lock = threading.Lock()
        self._supported = supported
        self._open: weakref.WeakSet[MongoSubscription | _SilentSubscription] = weakref.WeakSet()

    @property
    def supported(self) -> bool | None:
        """Whether change streams work on this server; ``None`` while not known yet."""
        return self._supported

    def _ensure_index(self) -> None:
        """Create the clean-up TTL index once (best effort: failures are ignored); other
        threads wait for it rather than race the collection's creation."""
        if self._indexed:
            return
        with self._index_lock:
            if self._indexed:
                return
            try:
                self._collection.create_index("at", expireAfterSeconds=SIGNAL_RETENTION)
            except PyMongoError:
                pass
            self._indexed = True

    def publish(self, channel: str, message: str) -> None:
        """Insert one signal document; never raises for a missing subscriber.

        Does nothing when the server refuses change streams (nobody can listen); while support
        is unknown it is probed first (at most :data:`PROBE_TIMEOUT` seconds).

        Raises:
            StorageError: MongoDB failed.
        """
        if self._supported is None:
            self._supported = change_streams_supported(self._collection)
        if self._supported is False:
            return
        self._ensure_index()
        with translate_errors(PyMongoError, what="MongoDB signal publish"):
            self._collection.insert_one(
                {"channel": channel, "message": message, "at": datetime.now(UTC)}
            )

    def subscribe(self, channel: str) -> MongoSubscription | _SilentSubscription:
        """Open a change stream of ``channel``'s inserts (later publishes are delivered).

        Returns:
            A live subscription; one that never delivers when the server refuses change
            streams (learnt here when support was unknown).

        Raises:
            StorageError: MongoDB failed to open the stream (unreachable, timed out; or a
                refusal by a server whose support was known).
        """
        subscription: MongoSubscription | _SilentSubscription
        if self._supported is False:
            subscription = _SilentSubscription()
            self._open.add(subscription)
            return subscription
        pipeline = [{"$match": {"operationType": "insert", "fullDocument.channel": channel}}]
        try:
            stream = self._collection.watch(pipeline, max_await_time_ms=_MAX_AWAIT_MS)
        except PyMongoError as exc:
            if self._supported is None and not _transient(exc):
                self._supported = False  # the server refused change streams: poll from now on
                return self.subscribe(channel)
            raise StorageError(f"MongoDB signal subscribe failed: {exc}") from exc
        self._supported = True
        subscription = MongoSubscription(stream)
        self._open.add(subscription)
        return subscription

    def close_all(self) -> None:
        """Close every subscription still open (storage shutdown)."""
        for subscription in list(self._open):
            subscription.close()
