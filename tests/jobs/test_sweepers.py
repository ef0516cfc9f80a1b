"""The sweepers recover lost units through Storage and Router only (docs/workers.md)."""

from __future__ import annotations

import json

import pytest

from reactor.jobs.sweepers import DispatchLease, sweep_maps, sweep_runs, sweep_steps
from reactor.memory import MemoryStorage
from reactor.memory.clock import ManualClock
from reactor.model import codec
from reactor.model.keys import map_collect_key, map_element_key, run_liveness_key, step_liveness_key
from reactor.ports import (
    ContextRecord,
    DeadLetter,
    Delivery,
    Job,
    MapMetadata,
    MapRollbackMetadata,
    RollbackOutcome,
    StepResultRecord,
)
from reactor.ports.payloads import parse_payload


class RecordingRouter:
    """A router that only records what was enqueued."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Job, float]] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        self.jobs.append((job, delay_seconds))
        return job.id

    def payloads(self) -> list[object]:
        return [parse_payload(job) for job, _ in self.jobs]

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        return []

    def ack(self, delivery: Delivery) -> None: ...
    def retry(self, delivery: Delivery, delay_seconds: float) -> None: ...
    def extend(self, delivery: Delivery, seconds: float) -> None: ...
    def dead_letter(self, delivery: Delivery, reason: str) -> None: ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return []

    def close(self) -> None: ...


@pytest.fixture
def storage() -> MemoryStorage:
    return MemoryStorage(clock=ManualClock(1_700_000_000.0))


@pytest.fixture
def router() -> RecordingRouter:
    return RecordingRouter()


def _context(
    storage: MemoryStorage,
    context_id: str,
    status: str,
    *,
    parent: str | None = None,
    dispatched_child: bool = False,
    document: dict[str, object] | None = None,
) -> None:
    now = storage.now()
    storage.contexts.save(
        ContextRecord(
            context_id=context_id,
            reactor="orders.fulfil",
            status=status,
            document=codec.encode_document(document or {"intermediate_results": {}}),
            created_at=now,
            updated_at=now,
            parent_context_id=parent,
            dispatched_child=dispatched_child,
        )
    )


def test_run_sweeper_redispatches_running_runs_without_a_liveness_lock(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _context(storage, "lost", "running")
    _context(storage, "alive", "running")
    _context(storage, "rolling", "rolling_back")
    _context(storage, "done", "completed")
    _context(storage, "paused", "paused")
    _context(storage, "element", "running", parent="lost")
    _context(storage, "child", "running", parent="lost", dispatched_child=True)
    assert storage.locks.acquire(run_liveness_key("alive"), "worker-1", 60)

    counts = sweep_runs(storage, router)

    swept = sorted(p.context_id for p in router.payloads())  # type: ignore[attr-defined]
    assert swept == ["child", "lost", "rolling"]
    assert counts.redispatched == 3
    assert counts.errors == 0


def test_run_sweeper_does_not_redispatch_a_run_within_its_dispatch_lease(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _context(storage, "lost", "running")
    lease = DispatchLease(base=60, cap=480)
    assert sweep_runs(storage, router, lease=lease).redispatched == 1
    counts = sweep_runs(storage, router, lease=lease)  # its job may merely still be queued
    assert counts.redispatched == 0 and counts.leased == 1
    storage.advance(61)
    assert sweep_runs(storage, router, lease=lease).redispatched == 1
    assert [p.context_id for p in router.payloads()] == ["lost", "lost"]  # type: ignore[attr-defined]


def test_run_sweeper_sees_a_lock_that_lapsed(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _context(storage, "run", "running")
    assert storage.locks.acquire(run_liveness_key("run"), "dead-worker", 60)
    assert sweep_runs(storage, router).redispatched == 0
    storage.advance(61)
    assert sweep_runs(storage, router).redispatched == 1


def _step_record(
    storage: MemoryStorage, step: str, *, parked_until: float | None = None, attempts: int = 0
) -> None:
    now = storage.now()
    storage.step_results.put(
        StepResultRecord(
            context_id="ctx",
            step_name=step,
            status="dispatched",
            root_context_id="root",
            reactor="orders.fulfil",
            dispatched_at=now,
            updated_at=now,
            parked_until=parked_until,
            contention_attempts=attempts,
        )
    )


def test_step_sweeper_skips_live_and_parked_units_and_carries_attempts(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _step_record(storage, "lost", attempts=4)
    _step_record(storage, "alive")
    _step_record(storage, "parked", parked_until=storage.now() + 30)
    _step_record(storage, "park_lapsed", parked_until=storage.now() - 1)
    assert storage.locks.acquire(step_liveness_key("ctx", "alive"), "w", 60)

    counts = sweep_steps(storage, router)

    by_step = {p.step_name: p for p in router.payloads()}  # type: ignore[attr-defined]
    assert sorted(by_step) == ["lost", "park_lapsed"]
    assert by_step["lost"].contention_attempts == 4
    assert counts.redispatched == 2


def test_step_sweeper_ignores_completed_records(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    now = storage.now()
    storage.step_results.put(
        StepResultRecord(
            context_id="ctx", step_name="done", status="completed", root_context_id="root",
            reactor="r", dispatched_at=now, updated_at=now, outcome=json.dumps(1),
        )
    )
    assert sweep_steps(storage, router).redispatched == 0


def _map(storage: MemoryStorage, count: int = 4) -> MapMetadata:
    meta = MapMetadata(
        map_id="m1", count=count, parent_context_id="owner", parent_reactor="orders.fulfil",
        step_name="reserve", element_reactor="orders.reserve_line", owner_context_id="owner",
        owner_reactor="orders.fulfil", batch_size=2, atomic=True, created_at=storage.now(),
    )
    assert storage.maps.init(meta)
    return meta


def test_map_sweeper_redispatches_missing_indices_without_an_element_lock(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _map(storage)
    storage.maps.put_result("m1", 0, "1")
    storage.maps.put_result("m1", 2, "3")
    assert storage.locks.acquire(map_element_key("m1", 3), "w", 60)

    counts = sweep_maps(storage, router)

    assert [(p.map_id, p.index) for p in router.payloads()] == [("m1", 1)]  # type: ignore[attr-defined]
    assert counts.redispatched == 1
    assert counts.recollected == 0


def test_map_sweeper_recollects_only_when_nobody_is_alive(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _map(storage, count=2)
    _context(storage, "owner", "running")
    storage.maps.put_result("m1", 0, "1")
    storage.maps.put_result("m1", 1, "2")

    assert storage.locks.acquire(map_collect_key("m1"), "collector", 60)
    assert sweep_maps(storage, router).recollected == 0
    assert storage.locks.release(map_collect_key("m1"), "collector")

    assert storage.locks.acquire(run_liveness_key("owner"), "owner-worker", 60)
    assert sweep_maps(storage, router).recollected == 0
    assert storage.locks.release(run_liveness_key("owner"), "owner-worker")

    assert sweep_maps(storage, router).recollected == 1
    assert [type(p).__name__ for p in router.payloads()] == ["MapCollectPayload"]


def test_map_sweeper_does_not_recollect_a_map_the_parent_recorded(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _map(storage, count=1)
    _context(storage, "owner", "running", document={"intermediate_results": {"reserve": [1]}})
    storage.maps.put_result("m1", 0, "1")
    assert sweep_maps(storage, router).recollected == 0


def _rollback(storage: MemoryStorage, total: int) -> MapRollbackMetadata:
    meta = MapRollbackMetadata(
        map_id="m1", total=total, batch_size=2, step_name="reserve", owner_context_id="owner",
        owner_reactor="orders.fulfil", element_reactor="orders.reserve_line",
        started_at=storage.now(),
    )
    created, _ = storage.map_rollbacks.start(meta)
    assert created
    return meta


def test_map_sweeper_redispatches_claimed_rollback_positions_without_outcome(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _map(storage, count=3)
    _context(storage, "owner", "rolling_back")
    for index in range(3):
        _context(storage, f"el{index}", "completed", parent="owner",
                 document={"map_metadata": {"map_step": "reserve", "map_id": "m1",
                                            "index": index, "parent_reactor": "orders.fulfil"}})
        storage.maps.append_element("m1", f"el{index}")
        storage.maps.put_result("m1", index, "1")
    _rollback(storage, total=3)
    assert list(storage.map_rollbacks.claim_positions("m1", 2)) == [0, 1]
    assert storage.map_rollbacks.put_outcome("m1", 0, RollbackOutcome(index=2, outcome="undone"))
    # position 1 is element index 1 (tail order); hold its lock first: alive, not swept
    assert storage.locks.acquire(map_element_key("m1", 1), "w", 60)
    assert sweep_maps(storage, router).rollback_redispatched == 0
    assert storage.locks.release(map_element_key("m1", 1), "w")

    counts = sweep_maps(storage, router)

    assert counts.rollback_redispatched == 1
    assert [(p.map_id, p.position) for p in router.payloads()] == [("m1", 1)]  # type: ignore[attr-defined]


def test_map_sweeper_claims_the_next_batch_when_its_trigger_was_lost(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _rollback(storage, total=3)
    assert list(storage.map_rollbacks.claim_positions("m1", 2)) == [0, 1]
    for position in (0, 1):
        assert storage.map_rollbacks.put_outcome(
            "m1", position, RollbackOutcome(index=position, outcome="undone")
        )

    counts = sweep_maps(storage, router)

    assert counts.rollback_batches == 1
    assert [p.position for p in router.payloads()] == [2]  # type: ignore[attr-defined]
    assert storage.map_rollbacks.offset("m1") == 4


def test_one_bad_record_never_aborts_a_sweep(
    storage: MemoryStorage, router: RecordingRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    _context(storage, "a", "running")
    _context(storage, "b", "running")
    real_held = storage.locks.held

    def flaky_held(key: str) -> bool:
        if key == run_liveness_key("a"):
            raise RuntimeError("boom")
        return real_held(key)

    monkeypatch.setattr(storage.locks, "held", flaky_held)
    counts = sweep_runs(storage, router)
    assert counts.errors == 1
    assert [p.context_id for p in router.payloads()] == ["b"]  # type: ignore[attr-defined]
