"""MongoSignalStore: change-stream signals where supported, capability absent otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError
from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.signals import SIGNALS, MongoSignalStore, change_streams_supported
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
