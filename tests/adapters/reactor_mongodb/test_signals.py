"""MongoSignalStore: change-stream signals where supported, capability absent otherwise."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import (
    AutoReconnect,
    ExecutionTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
)
from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.signals import (
    SIGNAL_RETENTION,
    SIGNALS,
    MongoSignalStore,
    MongoSubscription,
    change_streams_supported,
)
from reactor_mongodb.storage import MongoStorage

from reactor.errors import StorageError


def _storage(db: Any) -> MongoStorage:
    return MongoStorage(MongoDocumentStore(db, clock="application", owns_client=False))


def test_capability_follows_change_stream_support(mongo_db: tuple[str, Any]) -> None:
    backend, db = mongo_db
    storage = _storage(db)
    try:
        supported = change_streams_supported(db["reactor_" + SIGNALS])
        assert supported is (backend != "mongomock")  # SecantusDB emulates change streams
        assert storage.capabilities.signals is supported
        assert (storage.signals is not None) is supported
    finally:
        storage.close()


def test_messages_published_after_subscribe_arrive_in_order(mongo_db: tuple[str, Any]) -> None:
    backend, db = mongo_db
    collection = db["reactor_" + SIGNALS]
    if not change_streams_supported(collection):
        assert backend == "mongomock"
        return
    signals = MongoSignalStore(collection)
    other = signals.subscribe("other")
    subscription = signals.subscribe("done")
    try:
        signals.publish("done", "1")
        signals.publish("elsewhere", "x")
        signals.publish("done", "2")
        assert subscription.get(timeout=5) == "1"
        assert subscription.get(timeout=5) == "2"
        assert other.get(timeout=0.05) is None
    finally:
        signals.close_all()
    assert subscription.get(timeout=0.05) is None  # closed: no delivery, no error
    subscription.close()  # idempotent


class _Refusing:
    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("no change streams")


def test_a_refused_watch_means_unsupported() -> None:
    assert change_streams_supported(_Refusing()) is False


class _Watchable:
    """A fake collection whose ``watch`` raises ``error`` and records inserts."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.watches = 0
        self.inserted: list[Any] = []

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        self.watches += 1
        raise self.error

    def insert_one(self, document: Any) -> None:
        self.inserted.append(document)

    def create_index(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_an_unreachable_server_leaves_support_unknown() -> None:
    collection = _Watchable(ServerSelectionTimeoutError("127.0.0.1:1: connection refused"))
    assert change_streams_supported(collection) is None
    signals = MongoSignalStore(collection, supported=None)
    with pytest.raises(StorageError):
        signals.subscribe("done")
    assert signals.supported is None  # a transient failure teaches nothing


def test_a_refusal_found_on_first_use_degrades_to_polling() -> None:
    collection = _Watchable(OperationFailure("replica sets only", code=40573))
    assert change_streams_supported(collection) is False
    signals = MongoSignalStore(collection, supported=None)
    subscription = signals.subscribe("done")
    assert signals.supported is False
    assert subscription.get(timeout=0) is None  # never delivers: the waiter polls
    signals.publish("done", "1")
    assert collection.inserted == []  # nobody can listen: nothing written
    watches = collection.watches
    signals.subscribe("other").close()
    assert collection.watches == watches  # settled: no more attempts
    signals.close_all()
    assert subscription.get(timeout=30) is None  # closed: returns at once


def test_storage_declares_signals_when_the_probe_cannot_reach_the_server() -> None:
    client: Any = MongoClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100",
                              connect=False)  # fmt: skip
    storage = MongoStorage(
        MongoDocumentStore(client["app"], clock="application", owns_client=True),
        probe_timeout=0.1,
    )
    try:
        assert storage.capabilities.signals is True
        assert isinstance(storage.signals, MongoSignalStore)
        assert storage.signals.supported is None
    finally:
        storage.close()


@pytest.mark.parametrize("error", [AutoReconnect("connection reset by peer"),
                                   ExecutionTimeout("operation exceeded time limit", code=50)],
                         ids=["connection lost", "timed out"])
def test_a_lost_connection_or_a_timeout_during_the_probe_leaves_support_unknown(
    error: Exception,
) -> None:
    """Only a refusal says the server cannot watch: a connection lost mid-probe, or an
    operation that ran out of time, teaches nothing (``None``), so signals are not turned off
    for good by a network blip (docs/adapters/mongodb.md, "Signals")."""
    collection = _Watchable(error)
    assert change_streams_supported(collection) is None
    signals = MongoSignalStore(collection, supported=None)
    with pytest.raises(StorageError):
        signals.subscribe("done")
    assert signals.supported is None


def test_published_signals_are_cleaned_up_by_a_ttl_index(mongo_db: tuple[str, Any]) -> None:
    """Signal documents are garbage: the first publish creates the TTL index on ``at`` that
    removes them after :data:`SIGNAL_RETENTION` seconds (docs/adapters/mongodb.md, "Signals"),
    and later publishes leave it as it is."""
    collection = mongo_db[1]["reactor_" + SIGNALS]
    signals = MongoSignalStore(collection, supported=True)
    signals.publish("done", "1")
    signals.publish("done", "2")
    ttl = [index for index in collection.index_information().values()
           if [tuple(part) for part in index["key"]] == [("at", 1)]]
    assert [index["expireAfterSeconds"] for index in ttl] == [SIGNAL_RETENTION]
    assert collection.count_documents({"channel": "done"}) == 2


def test_a_server_refusing_the_ttl_index_still_gets_the_signals() -> None:
    """The clean-up index is best effort: a server that refuses it keeps its signal documents,
    and ``publish`` still inserts them without an error."""

    class NoTtl(_Watchable):
        def create_index(self, *args: Any, **kwargs: Any) -> None:
            raise OperationFailure("TTL indexes are not supported", code=67)

    collection = NoTtl(NotImplementedError())
    signals = MongoSignalStore(collection, supported=True)
    signals.publish("done", "1")
    signals.publish("done", "2")
    assert [doc["message"] for doc in collection.inserted] == ["1", "2"]


class _Stream:
    """A fake change stream: ``try_next`` waits ``pause`` seconds (the server's short await)
    and returns the next queued change, or raises ``error``; it fails the test when called
    more than ``max_calls`` times (a ``get`` that overran its timeout)."""

    def __init__(self, *, error: Exception | None = None, pause: float = 0.01,
                 max_calls: int = 1000) -> None:  # fmt: skip
        self.error = error
        self.pause = pause
        self.max_calls = max_calls
        self.calls = 0
        self.closed = False

    def try_next(self) -> Any:
        self.calls += 1
        assert self.calls <= self.max_calls, "get() kept waiting past its timeout"
        if self.error is not None:
            raise self.error
        time.sleep(self.pause)
        return None

    def close(self) -> None:
        self.closed = True


def test_a_get_waits_its_whole_timeout_and_no_longer() -> None:
    """With nothing published, ``get`` returns ``None`` once its timeout has passed: not
    before (a waiter would re-check the durable records early), and not long after (a waiter
    must get back to polling): each change-stream call waits only a short time."""
    stream = _Stream(pause=0.01, max_calls=300)  # 300 short waits: ~3 s
    subscription = MongoSubscription(stream)
    started = time.monotonic()
    assert subscription.get(timeout=0.2) is None
    assert time.monotonic() - started >= 0.2
    stream.calls = 0
    assert subscription.get(timeout=1.0) is None  # returns: the fake would fail after ~3 s


def test_a_failing_change_stream_is_a_storage_error() -> None:
    """A change stream that fails while its subscription is open raises ``StorageError``
    naming the failure (a closed subscription's ``get`` returns ``None`` instead)."""
    subscription = MongoSubscription(_Stream(error=OperationFailure("cursor killed", code=237)))
    with pytest.raises(StorageError, match="signal wait failed: cursor killed"):
        subscription.get(timeout=5)
    subscription.close()
    assert subscription.get(timeout=5) is None


def test_close_all_closes_every_open_subscription() -> None:
    """Storage shutdown (``close_all``) closes the change stream of every subscription still
    open, so no server cursor outlives the storage, and their ``get`` returns ``None``."""
    streams: list[_Stream] = []

    class Watchable(_Watchable):
        def watch(self, *args: Any, **kwargs: Any) -> Any:
            streams.append(_Stream())
            return streams[-1]

    signals = MongoSignalStore(Watchable(NotImplementedError()), supported=True)
    subscriptions = [signals.subscribe("a"), signals.subscribe("b")]
    signals.close_all()
    assert [stream.closed for stream in streams] == [True, True]
    assert [s.get(timeout=5) for s in subscriptions] == [None, None]
