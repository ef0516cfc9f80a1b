"""MongoSignalStore: change-stream signals where supported, capability absent otherwise."""

from __future__ import annotations

from typing import Any

from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.signals import SIGNALS, MongoSignalStore, change_streams_supported
from reactor_mongodb.storage import MongoStorage


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
