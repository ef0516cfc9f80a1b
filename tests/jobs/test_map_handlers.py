"""The fan-out map job handlers and the map sweeper's forward pass
(docs/architecture.md, "Job kinds"; docs/fan_out.md).

A run is dispatched against a router that only records jobs; each test then runs the handlers
itself, one job at a time, so duplicates, contention and lost triggers are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    DispatchHandle,
    FanOut,
    Input,
    Reactor,
    config,
    element,
    input,
    map_step,
    step,
    with_lock,
)
from reactor.config import Runtime
from reactor.engine.maps.dispatcher import element_context_id
from reactor.engine.maps.rollback import dispatch_rollback_batch
from reactor.jobs.handlers import JobContext
from reactor.jobs.handlers.map_collect import handle_map_collect
from reactor.jobs.handlers.map_element import handle_map_element
from reactor.jobs.handlers.map_element_rollback import handle_map_element_rollback
from reactor.jobs.sweepers import sweep_maps
from reactor.memory import MemoryStorage
from reactor.model.keys import map_element_key, sweep_dispatch_key
from reactor.model.records import MapMetadata, MapRollbackMetadata
from reactor.ports.payloads import (
    MapCollectPayload,
    MapElementPayload,
    MapElementRollbackPayload,
    Payload,
    RunPayload,
    job,
    parse_payload,
)
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor.testing import TestClock

RUNS: list[int] = []


class Twice(Reactor, name="test_map_handlers.twice"):
    n = Input(int)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        RUNS.append(inputs.n)
        return int(inputs.n) * 2

    @double.undo
    def halve(value: Any, inputs: Any, ctx: Any) -> None:
        RUNS.append(-inputs.n)

    returns = "double"


class Owner(Reactor, name="test_map_handlers.owner"):
    items = Input(list)
    doubled = map_step(Twice, source=input("items"), args={"n": element("doubled")},
                       fan_out=FanOut(batch_size=2))


class Recorder:
    """A router that records jobs and runs nothing."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Job, float]] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        self.jobs.append((job, delay_seconds))
        return job.id

    def take(self) -> list[Payload]:
        taken, self.jobs = self.jobs, []
        return [parse_payload(j) for j, _ in taken]

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
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def rt(recorder: Recorder) -> Iterator[Runtime]:
    RUNS.clear()
    runtime = config.configure(storage=MemoryStorage(), router=recorder,  # type: ignore[arg-type]
                               lock_snooze_max_attempts=2)
    yield runtime
    config.reset()


def _jc(rt: Runtime, payload: Payload) -> JobContext:
    return JobContext(runtime=rt, job=job(payload), liveness_wait=0.0)


def _dispatch(
    rt: Runtime, recorder: Recorder, items: list[int]
) -> tuple[DispatchHandle, MapMetadata]:
    handle = Owner.run(items=items)
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    return handle, meta


def test_an_element_job_stores_its_slot_and_a_duplicate_runs_nothing(
    rt: Runtime, recorder: Recorder
) -> None:
    _handle, meta = _dispatch(rt, recorder, [1, 2, 3])
    assert [type(p).__name__ for p in recorder.take()] == ["MapElementPayload"] * 2
    payload = MapElementPayload(map_id=meta.map_id, index=0)
    handle_map_element(_jc(rt, payload), payload)
    handle_map_element(_jc(rt, payload), payload)  # redelivered: the slot is there
    assert RUNS == [1]
    assert rt.storage.maps.count_elements(meta.map_id) == 1
    assert rt.storage.maps.counter(meta.map_id) == 2
    assert recorder.take() == []  # not a batch end, not the last


def test_a_held_element_lock_drops_the_duplicate(rt: Runtime, recorder: Recorder) -> None:
    _handle, meta = _dispatch(rt, recorder, [1, 2])
    assert rt.storage.locks.acquire(map_element_key(meta.map_id, 1), "live-job", 60)
    payload = MapElementPayload(map_id=meta.map_id, index=1)
    handle_map_element(_jc(rt, payload), payload)
    assert RUNS == [] and rt.storage.maps.result_slots(meta.map_id, [1]) == [None]


def test_the_batch_end_claims_the_next_throw_and_the_last_enqueues_the_collector(
    rt: Runtime, recorder: Recorder
) -> None:
    handle, meta = _dispatch(rt, recorder, [1, 2, 3])
    recorder.take()
    for index in (0, 1):
        payload = MapElementPayload(map_id=meta.map_id, index=index)
        handle_map_element(_jc(rt, payload), payload)
    assert [(type(p).__name__, getattr(p, "index", None)) for p in recorder.take()] == [
        ("MapElementPayload", 2)
    ]
    payload = MapElementPayload(map_id=meta.map_id, index=2)
    handle_map_element(_jc(rt, payload), payload)
    (collect,) = recorder.take()
    assert isinstance(collect, MapCollectPayload)
    handle_map_collect(_jc(rt, collect), collect)
    handle_map_collect(_jc(rt, collect), collect)  # a second collector signals nothing
    assert recorder.take() == [RunPayload(context_id=handle.run_id, reactor=Owner.reactor_name)]


def test_the_collector_trusts_the_slots_not_the_counter(rt: Runtime, recorder: Recorder) -> None:
    _handle, meta = _dispatch(rt, recorder, [1, 2])
    rt.storage.maps.add_to_counter(meta.map_id, -2)  # a counter that lies
    collect = MapCollectPayload(map_id=meta.map_id)
    handle_map_collect(_jc(rt, collect), collect)
    assert [type(p).__name__ for p in recorder.take()] == ["MapElementPayload"] * 2


def test_map_sweeper_redispatches_only_reached_indexes_and_reclaims_a_lost_throw(
    rt: Runtime, recorder: Recorder
) -> None:
    _handle, meta = _dispatch(rt, recorder, [1, 2, 3, 4, 5])
    recorder.take()  # the first throw's jobs are "lost"
    dispatched: list[str] = []
    counts = sweep_maps(rt.storage, rt.router, dispatch_batch=lambda m: dispatched.append(m.map_id))
    assert sorted(p.index for p in recorder.take()) == [0, 1]  # type: ignore[attr-defined]
    assert counts.redispatched == 2 and dispatched == []
    for index in (0, 1):
        rt.storage.maps.put_result(meta.map_id, index, '{"skipped": true}')
    counts = sweep_maps(rt.storage, rt.router, dispatch_batch=lambda m: dispatched.append(m.map_id))
    assert counts.redispatched == 0 and counts.batches == 1 and dispatched == [meta.map_id]


def _rolled_back_map(rt: Runtime, recorder: Recorder) -> MapRollbackMetadata:
    _handle, meta = _dispatch(rt, recorder, [1, 2, 3])
    recorder.take()
    for index in range(3):
        payload = MapElementPayload(map_id=meta.map_id, index=index)
        handle_map_element(_jc(rt, payload), payload)
    recorder.take()
    rollback = MapRollbackMetadata(
        map_id=meta.map_id, total=3, batch_size=2, step_name="doubled",
        owner_context_id=meta.owner_context_id, owner_reactor=meta.owner_reactor,
        element_reactor=Twice.reactor_name, started_at=rt.storage.now(),
    )
    assert rt.storage.map_rollbacks.start(rollback)[0]
    assert list(dispatch_rollback_batch(rt.storage, rt.router, rollback)) == [0, 1]
    recorder.take()
    return rollback


def test_element_rollback_undoes_once_claims_the_next_batch_and_signals_after_hand_off(
    rt: Runtime, recorder: Recorder
) -> None:
    rollback = _rolled_back_map(rt, recorder)
    RUNS.clear()
    for position in (0, 1, 1):  # position 1 ends the batch; the duplicate does nothing
        payload = MapElementRollbackPayload(map_id=rollback.map_id, position=position)
        handle_map_element_rollback(_jc(rt, payload), payload)
    assert RUNS == [-3, -2]  # from the tail: newest element first
    assert [getattr(p, "position", None) for p in recorder.take()] == [2]
    rt.storage.map_rollbacks.mark_handed_off(rollback.map_id)
    payload = MapElementRollbackPayload(map_id=rollback.map_id, position=2)
    handle_map_element_rollback(_jc(rt, payload), payload)
    assert RUNS == [-3, -2, -1]
    assert recorder.take() == [
        RunPayload(context_id=rollback.owner_context_id, reactor=rollback.owner_reactor)
    ]
    outcomes = [o.outcome for _p, o in rt.storage.map_rollbacks.outcomes(rollback.map_id)]
    assert outcomes == ["undone", "undone", "undone"]


def test_a_contended_element_requeues_then_reports_in_flight_at_the_cap(
    rt: Runtime, recorder: Recorder
) -> None:
    rollback = _rolled_back_map(rt, recorder)
    ids = rt.storage.maps.element_ids_from_tail(rollback.map_id, position=0, count=1, total=3)
    assert ids == [element_context_id(rollback.map_id, 2)]
    assert rt.storage.locks.acquire(map_element_key(rollback.map_id, 2), "zombie", 60)
    payload = MapElementRollbackPayload(map_id=rollback.map_id, position=0)
    for attempt in (0, 1):
        handle_map_element_rollback(_jc(rt, payload), payload)
        (payload,) = recorder.take()  # type: ignore[assignment]
        assert isinstance(payload, MapElementRollbackPayload) and payload.attempt == attempt + 1
    handle_map_element_rollback(_jc(rt, payload), payload)
    outcome = rt.storage.map_rollbacks.outcome(rollback.map_id, 0)
    assert outcome is not None and outcome.outcome == "element_in_flight" and outcome.index == 2


def test_a_dead_holders_lease_lapses_before_the_attempts_run_out(
    recorder: Recorder,
) -> None:
    """A worker killed inside an element leaves the element's lock until its lease lapses;
    the rollback job waits that long instead of using up its attempts on 0.2 s snoozes and
    reporting the element in flight (the order-fulfilment soak's violation)."""
    clock = TestClock(1_700_000_000.0)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=recorder,  # type: ignore[arg-type]
        clock=clock, lock_snooze_max_attempts=2, lock_snooze_base_delay=0.2,
        lock_snooze_jitter=0.2, context_lock_ttl=6,
    )
    try:
        rollback = _rolled_back_map(runtime, recorder)
        RUNS.clear()
        key = map_element_key(rollback.map_id, 2)
        assert runtime.storage.locks.acquire(key, "killed-worker", 6)  # never renewed
        payload: Any = MapElementRollbackPayload(map_id=rollback.map_id, position=0)
        delays: list[float] = []
        while runtime.storage.map_rollbacks.outcome(rollback.map_id, 0) is None:
            assert len(delays) <= 2, delays
            handle_map_element_rollback(_jc(runtime, payload), payload)
            if recorder.jobs:
                ((queued, delay),) = recorder.jobs
                recorder.jobs.clear()
                payload = parse_payload(queued)
                delays.append(delay)
                clock.advance(delay)
        outcome = runtime.storage.map_rollbacks.outcome(rollback.map_id, 0)
        assert outcome is not None and outcome.outcome == "undone", outcome
        assert RUNS == [-3]  # the element was undone, once
        assert delays and delays[0] >= 6.0  # waited out the dead holder's lease
    finally:
        config.reset()


def test_a_missing_element_context_is_context_unavailable(rt: Runtime, recorder: Recorder) -> None:
    rollback = _rolled_back_map(rt, recorder)
    assert rt.storage.contexts.delete(element_context_id(rollback.map_id, 2))
    payload = MapElementRollbackPayload(map_id=rollback.map_id, position=0)
    handle_map_element_rollback(_jc(rt, payload), payload)
    outcome = rt.storage.map_rollbacks.outcome(rollback.map_id, 0)
    assert outcome is not None
    assert (outcome.index, outcome.outcome) == (None, "context_unavailable")


class LockedLine(Reactor, name="test_map_handlers.locked_line"):
    """One element: ``reserve`` under the lock ``line:<n>`` (a synchronous caller would wait
    up to 5 s for it)."""

    n = Input(int)

    @step(n=input("n"), coordination=with_lock(key=lambda inputs: f"line:{inputs.n}", ttl=30,
                                                 wait=5))
    def reserve(inputs: Any, ctx: Any) -> int:
        RUNS.append(inputs.n)
        return int(inputs.n)

    returns = "reserve"


class LockedOwner(Reactor, name="test_map_handlers.locked_owner"):
    items = Input(list)
    lines = map_step(LockedLine, source=input("items"), args={"n": element("lines")},
                     fan_out=FanOut(batch_size=10))


class GatedLine(Reactor, name="test_map_handlers.gated_line"):
    """One element whose reactor-level lock ``gate`` is taken before any step runs."""

    n = Input(int)
    coordination = with_lock(key="gate", ttl=30, wait=5)

    @step(n=input("n"))
    def reserve(inputs: Any, ctx: Any) -> int:
        RUNS.append(inputs.n)
        return int(inputs.n)

    returns = "reserve"


class GatedOwner(Reactor, name="test_map_handlers.gated_owner"):
    items = Input(list)
    lines = map_step(GatedLine, source=input("items"), args={"n": element("lines")},
                     fan_out=FanOut(batch_size=10))


def test_a_contended_element_parks_and_runs_once_the_lock_is_free(
    rt: Runtime, recorder: Recorder
) -> None:
    """docs/fan_out.md, "What happens" (3.): in a worker an element whose step lock is taken
    parks like any unit (docs/coordination.md, "Contention"): its context is saved, its job
    re-enqueued after the park delay, its own lock released and its dispatch mark taken; it
    never blocks the handler thread for the declaration's ``wait`` and never fails the map.
    The old code waited ``wait`` seconds in the worker thread and then stored the element
    failed (``LockAcquisitionError``): a fifth of the orders of a soak with killed workers."""
    handle = LockedOwner.run(items=[1])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    recorder.take()
    assert rt.storage.locks.acquire("line:1", "another-order", 600)
    payload = MapElementPayload(map_id=meta.map_id, index=0)
    started = rt.clock.monotonic()
    handle_map_element(_jc(rt, payload), payload)
    assert rt.clock.monotonic() - started < 1.0, "the handler thread did not wait"
    assert RUNS == [] and rt.storage.maps.result_slots(meta.map_id, [0]) == [None]
    [(requeued, delay)] = recorder.jobs
    again = parse_payload(requeued)
    assert isinstance(again, MapElementPayload) and (again.index, again.attempt) == (0, 1)
    assert delay > 0
    assert not rt.storage.locks.held(map_element_key(meta.map_id, 0)), "its lock is released"
    assert rt.storage.periods.marker(sweep_dispatch_key(map_element_key(meta.map_id, 0)))
    assert sweep_maps(rt.storage, rt.router).redispatched == 0, "the sweep leaves it alone"
    element = rt.storage.contexts.load(element_context_id(meta.map_id, 0))
    assert element is not None and element.status == "running"
    recorder.take()

    assert rt.storage.locks.release("line:1", "another-order")
    handle_map_element(_jc(rt, again), again)
    assert RUNS == [1]
    [slot] = rt.storage.maps.result_slots(meta.map_id, [0])
    assert slot is not None and "reactor.Success" in slot and '"value":1' in slot
    assert [type(p).__name__ for p in recorder.take()] == ["MapCollectPayload"]


def test_an_element_never_admitted_gives_up_at_the_snooze_cap(
    rt: Runtime, recorder: Recorder
) -> None:
    """docs/fan_out.md, "What happens" (3.): an element whose reactor-level lock stays taken
    parks ``lock_snooze_max_attempts`` times (2 here), then settles as a non-retryable
    ``Failure(SnoozeLimitError)``, stored failed without rollback, and the map goes on."""
    handle = GatedOwner.run(items=[7])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    recorder.take()
    assert rt.storage.locks.acquire("gate", "another-order", 600)
    payload = MapElementPayload(map_id=meta.map_id, index=0)
    attempts = []
    for _ in range(2):
        handle_map_element(_jc(rt, payload), payload)
        [(requeued, _delay)] = recorder.jobs
        recorder.jobs.clear()
        parsed = parse_payload(requeued)
        assert isinstance(parsed, MapElementPayload)
        attempts.append(parsed.attempt)
        payload = parsed
    assert attempts == [1, 2] and RUNS == []
    handle_map_element(_jc(rt, payload), payload)  # parked twice: the third gives up
    assert RUNS == []
    [slot] = rt.storage.maps.result_slots(meta.map_id, [0])
    assert slot is not None and "SnoozeLimitError" in slot
    element = rt.storage.contexts.load(element_context_id(meta.map_id, 0))
    assert element is not None and element.status == "failed"
    assert [type(p).__name__ for p in recorder.take()] == ["MapCollectPayload"]
