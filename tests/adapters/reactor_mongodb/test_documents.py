"""MongoDocumentStore: compare-and-set, logical expiry, scans and limits on every backend."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC
from typing import Any

import pytest
from reactor_mongodb.documents import MongoDocumentStore

from reactor.errors import ContextTooLargeError
from reactor.memory.clock import ManualClock

#: The manual clocks start a day after the real time: mongomock applies TTL indexes eagerly on
#: every read against the *wall* clock, so an expiry that falls in the wall clock's past (a clock
#: in the past, or a module imported minutes before its tests run) would make documents vanish.
T0 = float(int(time.time())) + 86_400.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(mongo_db: tuple[str, Any], clock: ManualClock) -> MongoDocumentStore:
    return MongoDocumentStore(mongo_db[1], prefix="p_", clock=clock)


def test_insert_then_duplicate_insert_loses(store: MongoDocumentStore) -> None:
    assert store.write("c", "k", {"a": 1}, expected_version=None, expires_at=None)
    assert not store.write("c", "k", {"a": 2}, expected_version=None, expires_at=None)
    assert store.read("c", "k").value == {"a": 1}


def test_compare_and_set_needs_the_current_version(store: MongoDocumentStore) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
    first = store.read("c", "k")
    assert store.write("c", "k", {"n": 2}, expected_version=first.version, expires_at=None)
    assert not store.write("c", "k", {"n": 3}, expected_version=first.version, expires_at=None)
    second = store.read("c", "k")
    assert second.value == {"n": 2}
    assert second.version != first.version


def test_delete_is_conditional(store: MongoDocumentStore) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
    version = store.read("c", "k").version
    assert not store.write("c", "k", None, expected_version="stale", expires_at=None)
    assert not store.write("c", "k", None, expected_version=None, expires_at=None)
    assert store.write("c", "k", None, expected_version=version, expires_at=None)
    assert store.read("c", "k").version is None
    assert store.write("c", "gone", None, expected_version=None, expires_at=None)


def test_expired_document_reads_absent_but_keeps_its_version(
    store: MongoDocumentStore, clock: ManualClock
) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=T0 + 10)
    live = store.read("c", "k")
    assert live.expires_at == T0 + 10
    clock.advance(10)
    expired = store.read("c", "k")
    assert expired.value is None
    assert expired.version == live.version
    assert store.write("c", "k", {"n": 2}, expected_version=expired.version, expires_at=None)
    assert store.read("c", "k").value == {"n": 2}


def test_scan_orders_by_key_filters_index_expiry_and_pages(
    store: MongoDocumentStore, clock: ManualClock
) -> None:
    for key in ["b", "a", "d", "c", "e"]:
        store.write("c", key, {"k": key}, expected_version=None, expires_at=None, index="x")
    store.write("c", "f", {"k": "f"}, expected_version=None, expires_at=None, index="y")
    store.write("c", "g", {"k": "g"}, expected_version=None, expires_at=T0 + 1, index="x")
    clock.advance(1)
    assert [k for k, _ in store.scan("c")] == ["a", "b", "c", "d", "e", "f"]
    assert [k for k, _ in store.scan("c", index="x", after="b", limit=2)] == ["c", "d"]
    assert store.scan("c", index="y") == [("f", {"k": "f"})]
    assert store.scan("c", limit=0) == []
    assert store.scan("missing") == []


def test_rewriting_the_index_moves_the_document(store: MongoDocumentStore) -> None:
    store.write("c", "k", {"s": 1}, expected_version=None, expires_at=None, index="running")
    version = store.read("c", "k").version
    store.write("c", "k", {"s": 2}, expected_version=version, expires_at=None, index="done")
    assert store.scan("c", index="running") == []
    assert store.scan("c", index="done") == [("k", {"s": 2})]


def test_values_round_trip_exactly(store: MongoDocumentStore) -> None:
    value = {"$weird.key": [1, 2**70, 1.5, None, True], "ünï": "\u2603", "": {}}
    store.write("c", "k", value, expected_version=None, expires_at=None)
    assert store.read("c", "k").value == value


def test_oversized_document_is_refused_before_any_write(mongo_db: tuple[str, Any]) -> None:
    store = MongoDocumentStore(mongo_db[1], clock="application", max_document_bytes=1000)
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "k", {"blob": "x" * 2000}, expected_version=None, expires_at=None)
    assert info.value.limit_bytes == 1000
    assert store.raw("c", "k") is None


def test_backdoor_rewrites_expiry_without_a_new_version(
    store: MongoDocumentStore, clock: ManualClock
) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None, index="i")
    before = store.raw("c", "k")
    assert before is not None
    assert store.set_expiry("c", "k", clock())
    after = store.raw("c", "k")
    assert after is not None
    assert (after.version, after.expires_at, after.index) == (before.version, T0, "i")
    assert store.read("c", "k").value is None
    assert not store.set_expiry("c", "missing", None)


def test_indexes_are_created_idempotently(store: MongoDocumentStore) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=T0 + 5)
    assert store.ensure_indexes() == ["c"]
    assert store.ensure_indexes(["c"]) == ["c"]
    info = store.database["p_c"].index_information()
    assert info["reactor_gc_ttl"]["expireAfterSeconds"] == 0
    assert [tuple(part) for part in info["reactor_scan"]["key"]] == [("idx", 1), ("_id", 1)]


def test_gc_date_trails_the_logical_expiry_by_the_grace(mongo_db: tuple[str, Any]) -> None:
    store = MongoDocumentStore(mongo_db[1], prefix="g_", clock=lambda: T0, gc_grace=60)
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=T0 + 0.0004)
    raw = mongo_db[1]["g_c"].find_one({"_id": "k"})
    assert raw is not None
    assert raw["exp"] == T0 + 0.0004
    stamp = raw["expires_at"]
    gc_at = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    assert T0 + 60 < gc_at <= T0 + 60.002


def test_logical_expiry_holds_whatever_the_ttl_monitor_did(mongo_db: tuple[str, Any]) -> None:
    """mongomock deletes TTL-expired documents on the next read; mongod/SecantusDB sweep later.

    With ``gc_grace=0`` and an expiry in the past, the document may or may not still be stored
    (backend-dependent), but it always reads as absent and can always be re-created.
    """
    store = MongoDocumentStore(mongo_db[1], prefix="e_", clock="application", gc_grace=0)
    past = time.time() - 5
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=past)
    found = store.read("c", "k")
    assert found.value is None
    assert store.scan("c") == []
    assert store.write("c", "k", {"n": 2}, expected_version=found.version, expires_at=None)
    assert store.read("c", "k").value == {"n": 2}


def test_a_collection_is_used_only_after_its_indexes_exist(
    mongo_db: tuple[str, Any], clock: ManualClock
) -> None:
    # Two threads meet a collection this process never used: the second waits for the first
    # one's index build instead of writing into a collection still being created.
    store = MongoDocumentStore(mongo_db[1], prefix="race_", clock=clock)
    events: list[str] = []
    building = threading.Event()
    release = threading.Event()
    create = store._create_indexes

    def slow_create(collection: str) -> None:
        events.append(f"build {collection} started")
        building.set()
        assert release.wait(10)
        create(collection)
        events.append(f"build {collection} done")

    store._create_indexes = slow_create  # type: ignore[method-assign]
    first = threading.Thread(
        target=store.write, args=("c", "a", {"n": 1}), kwargs={"expected_version": None,
                                                              "expires_at": None})
    first.start()
    assert building.wait(10)
    second_done = threading.Event()

    def second_writer() -> None:
        store.write("c", "b", {"n": 2}, expected_version=None, expires_at=None)
        events.append("second write done")
        second_done.set()

    second = threading.Thread(target=second_writer)
    second.start()
    second_done.wait(1.0)  # the old code let it through at once; the fix holds it here
    release.set()
    first.join(10)
    second.join(10)
    assert events == ["build c started", "build c done", "second write done"]
    assert store.read("c", "b").value == {"n": 2}


def test_a_document_of_exactly_the_limit_is_accepted(mongo_db: tuple[str, Any]) -> None:
    """``max_document_bytes`` is the largest encoded document accepted, inclusive: a document
    of exactly that many bytes of JSON is written, one byte more is refused."""
    value = {"blob": "x" * 100}
    size = len(json.dumps(value, separators=(",", ":")).encode("utf-8"))
    store = MongoDocumentStore(mongo_db[1], clock="application", max_document_bytes=size)
    assert store.write("c", "k", value, expected_version=None, expires_at=None)
    assert store.read("c", "k").value == value
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "k2", {"blob": "x" * 101}, expected_version=None, expires_at=None)
    assert (info.value.size_bytes, info.value.limit_bytes) == (size + 1, size)
    assert store.raw("c", "k2") is None


def test_a_scan_without_a_limit_returns_the_first_1000_documents(
    store: MongoDocumentStore,
) -> None:
    """``scan``'s default ``limit`` is 1000 (the ``DocumentStore`` port's): of 1001 documents
    a scan without a limit returns the first 1000 in key order, and the next page the last."""
    keys = [f"k{n:04d}" for n in range(1001)]
    for key in keys:
        store.write("c", key, {"k": key}, expected_version=None, expires_at=None)
    page = store.scan("c")
    assert [k for k, _ in page] == keys[:1000]
    assert [k for k, _ in store.scan("c", after=page[-1][0])] == keys[1000:]


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_value_json_cannot_hold_is_refused_before_any_write(
    store: MongoDocumentStore, number: float
) -> None:
    """Documents are JSON: a NaN or infinite number has no JSON text, so the write raises
    ``ValueError`` and stores nothing (not the non-JSON text ``NaN`` or ``Infinity``), and an
    existing document keeps its value."""
    with pytest.raises(ValueError):
        store.write("c", "k", {"x": number}, expected_version=None, expires_at=None)
    assert store.raw("c", "k") is None
    store.write("c", "k", {"x": 1}, expected_version=None, expires_at=None)
    version = store.read("c", "k").version
    with pytest.raises(ValueError):
        store.write("c", "k", {"x": [number]}, expected_version=version, expires_at=None)
    assert store.read("c", "k").value == {"x": 1}


def test_the_default_gc_grace_is_a_minute(mongo_db: tuple[str, Any]) -> None:
    """Without ``gc_grace`` the TTL date trails the logical expiry by 60 s (docs/adapters/
    mongodb.md, "Logical expiry": the default grace)."""
    store = MongoDocumentStore(mongo_db[1], prefix="d_", clock=lambda: T0)
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=T0 + 5)
    raw = mongo_db[1]["d_c"].find_one({"_id": "k"})
    assert raw is not None
    stamp = raw["expires_at"]
    gc_at = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    assert gc_at == pytest.approx(T0 + 65, abs=0.002)


def test_closing_a_store_leaves_a_client_it_does_not_own_open(
    mongo_db: tuple[str, Any], clock: ManualClock
) -> None:
    """By default (``owns_client=False``) the store does not own the client it was given:
    closing the store leaves that client usable for the application's other work (here a
    second store on the same client)."""
    first = MongoDocumentStore(mongo_db[1], prefix="o_", clock=clock)
    first.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
    first.close()
    second = MongoDocumentStore(mongo_db[1], prefix="o_", clock=clock)
    assert second.read("c", "k").value == {"n": 1}
    assert second.write("c", "k2", {"n": 2}, expected_version=None, expires_at=None)


def test_an_expiry_past_the_year_9999_is_stored_and_reads_alive(
    store: MongoDocumentStore,
) -> None:
    """An expiry beyond what a BSON date built here can hold (a caller's "practically never",
    1e12 epoch seconds) is written, its logical expiry kept exactly, and reads as alive: only
    the garbage-collection date is clamped to the year 9999."""
    far = 1e12
    assert store.write("c", "k", {"n": 1}, expected_version=None, expires_at=far)
    found = store.read("c", "k")
    assert (found.value, found.expires_at) == ({"n": 1}, far)
    assert [k for k, _ in store.scan("c")] == ["k"]


@pytest.mark.parametrize("budget", [-0.5, -1e-9, -1.0])
def test_a_negative_clock_skew_budget_is_refused(
    mongo_db: tuple[str, Any], budget: float
) -> None:
    """``clock_skew_budget`` is a difference between clocks, at least 0: any negative value,
    however small, is refused with ``ValueError`` naming it."""
    with pytest.raises(ValueError, match="clock_skew_budget must be >= 0"):
        MongoDocumentStore(mongo_db[1], clock="application", clock_skew_budget=budget)


def test_the_default_limit_is_16_mib_less_a_1_kib_envelope(mongo_db: tuple[str, Any]) -> None:
    """docs/adapters/mongodb.md, "Limits": by default a document whose JSON exceeds 16 MiB
    minus a 1 KiB envelope is refused before any write; a large document under it (4 MiB) is
    written and read back whole."""
    store = MongoDocumentStore(mongo_db[1], clock="application")
    big = {"blob": "x" * (4 * 1024 * 1024)}
    assert store.write("c", "big", big, expected_version=None, expires_at=None)
    assert store.read("c", "big").value == big
    limit = 16 * 1024 * 1024 - 1024
    over = {"blob": "x" * (limit - len('{"blob":""}') + 1)}
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "over", over, expected_version=None, expires_at=None)
    assert (info.value.size_bytes, info.value.limit_bytes) == (limit + 1, limit)
    assert store.raw("c", "over") is None
