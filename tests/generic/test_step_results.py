"""DocumentStepResultStore on the memory document store (docs/protocol.md#step-results)."""

from __future__ import annotations

import pytest

from reactor.generic.step_results import STEP_RESULTS, DocumentStepResultStore
from reactor.memory import ManualClock, MemoryDocumentStore, MemoryProbe, MemoryStorage
from reactor.model.records import StepResultStatus
from reactor.ports import StepResultRecord

TTL = 100.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def storage(clock: ManualClock) -> MemoryStorage:
    return MemoryStorage(clock=clock, context_ttl=TTL)


def rec(
    context_id: str = "ctx", step: str = "charge", status: StepResultStatus = "dispatched",
    **extra: object,
) -> StepResultRecord:
    fields: dict[str, object] = {
        "context_id": context_id,
        "step_name": step,
        "status": status,
        "root_context_id": "root",
        "reactor": "Orders",
        "dispatched_at": 10.0,
        "updated_at": 11.0,
    }
    fields.update(extra)
    return StepResultRecord(**fields)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field(storage: MemoryStorage) -> None:
    full = rec(
        parked_until=99.5, waiting="lock:x", contention_attempts=3, outcome='{"ok":1}',
        data={"ticket": {"nonce": 2, "epoch": 1}},
    )
    storage.step_results.put(full)
    assert storage.step_results.get("ctx", "charge") == full


def test_completed_overwrites_dispatched_in_place(storage: MemoryStorage) -> None:
    storage.step_results.put(rec())
    storage.step_results.put(rec(status="completed", outcome='"done"'))
    got = storage.step_results.get("ctx", "charge")
    assert got is not None and got.status == "completed" and got.outcome == '"done"'
    assert len(storage.step_results.scan()) == 1


def test_records_are_scoped_by_step_and_parent(storage: MemoryStorage) -> None:
    storage.step_results.put(rec("a", "s1", outcome="a-s1"))
    storage.step_results.put(rec("a", "s2", outcome="a-s2"))
    storage.step_results.put(rec("b", "s1", outcome="b-s1"))
    for context_id, step in [("a", "s1"), ("a", "s2"), ("b", "s1")]:
        got = storage.step_results.get(context_id, step)
        assert got is not None and got.outcome == f"{context_id}-{step}"
    assert storage.step_results.get("a", "unknown") is None
    assert storage.step_results.get("c", "s1") is None


def test_scan_includes_records_and_filters_by_status_before_limit(
    storage: MemoryStorage,
) -> None:
    for i in range(5):
        storage.step_results.put(rec("a", f"done{i}", status="completed"))
    storage.step_results.put(rec("z", "lost", status="dispatched"))
    assert len(storage.step_results.scan()) == 6
    lost = storage.step_results.scan(status="dispatched", limit=1)
    assert [(r.context_id, r.step_name) for r in lost] == [("z", "lost")]
    assert len(storage.step_results.scan(status="completed", limit=2)) == 2
    assert storage.step_results.scan(limit=0) == []


def test_a_status_change_moves_the_record_between_scans(storage: MemoryStorage) -> None:
    storage.step_results.put(rec())
    storage.step_results.put(rec(status="completed"))
    assert storage.step_results.scan(status="dispatched") == []
    assert len(storage.step_results.scan(status="completed")) == 1


def test_every_put_restamps_retention(storage: MemoryStorage, clock: ManualClock) -> None:
    probe = MemoryProbe(storage)
    storage.step_results.put(rec())
    assert probe.ttl(STEP_RESULTS, "ctx:charge") == pytest.approx(TTL)
    clock.advance(TTL - 1)
    storage.step_results.put(rec(parked_until=5.0))
    clock.advance(2)
    assert storage.step_results.get("ctx", "charge") is not None
    clock.advance(TTL)
    assert storage.step_results.get("ctx", "charge") is None
    assert storage.step_results.scan() == []


def test_scan_returns_at_most_1000_records_by_default(storage: MemoryStorage) -> None:
    """``StepResultStore.scan``'s default ``limit`` is 1000 (docs/protocol.md#step-results)."""
    for n in range(1001):
        storage.step_results.put(rec(context_id=f"c{n:04d}"))
    first = storage.step_results.scan()
    assert len(first) == 1000 and first.next_cursor is not None
    rest = storage.step_results.scan(cursor=first.next_cursor)
    assert [record.context_id for record in rest] == ["c1000"]


def test_a_store_built_without_a_ttl_keeps_records_a_day(clock: ManualClock) -> None:
    """``context_ttl`` defaults to 86400 s, the setting's default (docs/protocol.md,
    "Conventions")."""
    docs = MemoryDocumentStore(clock=clock)
    DocumentStepResultStore(docs).put(rec())
    assert MemoryProbe(docs).ttl(STEP_RESULTS, "ctx:charge") == pytest.approx(86400.0)
