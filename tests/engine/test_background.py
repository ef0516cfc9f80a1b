"""Background runs (docs/workers.md, "Background runs").

Runs on the memory storage with a ``LocalRouter`` driven by ``Worker.run_pending`` in the test
thread, on one injected :class:`ManualClock` (delays, leases and lock TTLs), so nothing sleeps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    AsyncWaitTimeoutError,
    Background,
    DefinitionError,
    DispatchHandle,
    Failure,
    FanOut,
    Halt,
    Input,
    Reactor,
    Retries,
    SnoozeLimitError,
    Success,
    config,
    element,
    halt,
    input,
    map_step,
    result,
    step,
    with_lock,
    with_semaphore,
)
from reactor.config import Runtime
from reactor.coordination import Lock, Semaphore
from reactor.engine import dispatch as dispatch_module
from reactor.engine.parks import Park
from reactor.errors import StorageError
from reactor.jobs.sweepers import sweep_runs
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from reactor.ports import Job
from reactor.ports.payloads import RunPayload, job, parse_payload

EVENTS: list[str] = []
FAIL_TIMES: dict[str, int] = {}
PARKS: list[Park] = []


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    EVENTS.clear()
    FAIL_TIMES.clear()
    PARKS.clear()
    TAKEN_WHILE_SHIPPING.clear()
    yield


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def local(clock: ManualClock) -> Iterator[Runtime]:
    """Memory storage + local router on one manual clock (replaces the inline default)."""
    rt = config.configure(
        storage=MemoryStorage(clock=clock),
        router=LocalRouter(clock=clock, visibility_timeout=30),
        lock_snooze_max_attempts=2,
        context_lock_ttl=10,
    )
    yield rt
    config.reset()


@pytest.fixture
def worker(local: Runtime) -> Worker:
    return Worker(local, liveness_wait=0.0)


def _due(router: Any) -> list[tuple[float, Any]]:
    """(visible_at, payload) of every queued message of a LocalRouter, earliest first."""
    return [(due, parse_payload(Job.from_json(body))) for due, body in router.queued()]


def _mk(name: str, **extra: Any) -> Any:
    @step(x=input("x"), **extra)
    def fn(inputs: Any, ctx: Any) -> Any:
        EVENTS.append(f"run:{name}")
        remaining = FAIL_TIMES.get(name, 0)
        if remaining:
            FAIL_TIMES[name] = remaining - 1
            EVENTS.append(f"fail:{name}:{ctx.attempt}")
            raise RuntimeError(f"{name} failed")
        if PARKS and name == "b":
            raise PARKS.pop(0)
        return f"{name}:{inputs.x}"

    @fn.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        EVENTS.append(f"undo:{name}")

    return fn


class AllFlow(Reactor, name="bg.all"):
    x = Input(int)
    a = _mk("a")
    b = _mk("b", wait_for="a")
    background = Background(all=True)


class AfterFlow(Reactor, name="bg.after"):
    x = Input(int)
    a = _mk("a")
    b = _mk("b", wait_for="a")
    c = _mk("c", wait_for="b")
    background = Background(after="a")


class BeforeFlow(Reactor, name="bg.before"):
    x = Input(int)
    a = _mk("a")
    b = _mk("b", wait_for="a")
    background = Background(before="b")


class RetryFlow(Reactor, name="bg.retry"):
    x = Input(int)
    a = _mk("a")
    b = _mk("b", wait_for="a", retries=Retries(max_attempts=3, backoff="fixed", base_delay=7))
    background = Background(after="a")


class ParkFirstFlow(Reactor, name="bg.park_first"):
    x = Input(int)
    b = _mk("b")
    background = Background(all=True)


class HaltFlow(Reactor, name="bg.halt"):
    x = Input(int)

    @step(x=input("x"))
    def a(inputs: Any, ctx: Any) -> Any:
        halt("nothing to do")

    b = _mk("b", wait_for="a")
    background = Background(after="a")


class SyncFlow(Reactor, name="bg.sync"):
    x = Input(int)

    @step(x=input("x"))
    def probe(inputs: Any, ctx: Any) -> Any:
        rt = config.current()
        held = rt.storage.locks.held(run_liveness_key(ctx.run_id))
        swept = sweep_runs(rt.storage, rt.router).redispatched
        return {"held": held, "swept": swept}


# ------------------------------------------------------------------------- declarations


def test_background_needs_exactly_one_mode() -> None:
    with pytest.raises(DefinitionError, match="exactly one"):
        Background()
    with pytest.raises(DefinitionError, match="exactly one"):
        Background(after="a", before="b")
    with pytest.raises(DefinitionError, match="exactly one"):
        Background(all=True, after="a")
    with pytest.raises(DefinitionError, match="bool"):
        Background(all="yes")  # type: ignore[arg-type]
    assert repr(Background(before="b")) == "Background(before='b')"


def test_background_must_name_a_known_step() -> None:
    with pytest.raises(DefinitionError, match="names no step"):

        class Bad(Reactor, name="bg.bad"):
            x = Input(int)
            a = _mk("a")
            background = Background(after="nope")

    with pytest.raises(DefinitionError, match="must be a Background"):

        class Bad2(Reactor, name="bg.bad2"):
            x = Input(int)
            a = _mk("a")
            background = "all"  # type: ignore[assignment]

    assert AfterFlow.definition.background == Background(after="a")
    assert SyncFlow.definition.background is None


# ------------------------------------------------------------------------- all / after / before


def test_all_runs_everything_in_the_worker(local: Runtime, worker: Worker) -> None:
    handle = AllFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    assert EVENTS == [] and dict(handle.results) == {}
    assert AllFlow.find(handle.run_id).status is RunStatus.RUNNING
    assert worker.run_pending() == 1
    outcome = handle.wait(timeout=1)
    assert outcome == Success({"a": "a:1", "b": "b:1"}, run_id=handle.run_id)
    assert EVENTS == ["run:a", "run:b"]
    assert AllFlow.find(handle.run_id).status is RunStatus.COMPLETED


def test_all_validates_inputs_in_the_worker(local: Runtime, worker: Worker) -> None:
    handle = AllFlow.run(x="not a number")
    assert isinstance(handle, DispatchHandle)  # the caller does not validate
    worker.run_pending()
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and "x" in outcome.validation_errors
    assert EVENTS == []


def test_after_runs_the_trigger_in_the_caller(local: Runtime, worker: Worker) -> None:
    handle = AfterFlow.run(x=2)
    assert isinstance(handle, DispatchHandle)
    assert EVENTS == ["run:a"]
    assert dict(handle.results) == {"a": "a:2"} == dict(handle.intermediate_results)
    assert handle.execution_id == handle.run_id
    [(_, payload)] = _due(local.router)
    assert payload == RunPayload(context_id=handle.run_id, reactor="bg.after")
    # the caller released the liveness lock after the enqueue
    assert not local.storage.locks.held(run_liveness_key(handle.run_id))
    worker.run_pending()
    assert EVENTS == ["run:a", "run:b", "run:c"]
    assert handle.wait(timeout=1).value == {"a": "a:2", "b": "b:2", "c": "c:2"}


def test_before_hands_off_instead_of_running_the_step(local: Runtime, worker: Worker) -> None:
    handle = BeforeFlow.run(x=3)
    assert isinstance(handle, DispatchHandle)
    assert EVENTS == ["run:a"] and dict(handle.results) == {"a": "a:3"}
    assert BeforeFlow.find(handle.run_id).current_step == "b"
    worker.run_pending()
    assert EVENTS == ["run:a", "run:b"]  # the hand-off never re-triggers in the worker
    assert handle.wait(timeout=1).value == {"a": "a:3", "b": "b:3"}


def test_halt_before_the_trigger_never_hands_off(local: Runtime) -> None:
    outcome = HaltFlow.run(x=1)
    assert isinstance(outcome, Halt) and outcome.reason == "nothing to do"
    assert local.router.size() == 0  # type: ignore[attr-defined]


def test_inline_router_returns_the_final_result() -> None:
    config.configure(storage="memory://", router="inline://")
    try:
        outcome = AfterFlow.run(x=4)
        assert isinstance(outcome, Success)
        assert outcome.value == {"a": "a:4", "b": "b:4", "c": "c:4"}
        assert AfterFlow.find(outcome.run_id or "").status is RunStatus.COMPLETED
    finally:
        config.reset()


def test_a_failure_in_the_worker_undoes_the_steps_run_in_the_caller(
    local: Runtime, worker: Worker
) -> None:
    FAIL_TIMES["c"] = 1
    handle = AfterFlow.run(x=5)
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and outcome.step_name == "c"
    assert EVENTS == ["run:a", "run:b", "run:c", "fail:c:1", "undo:b", "undo:a"]
    view = AfterFlow.find(handle.run_id)
    assert view.status is RunStatus.FAILED and view.undo_stack == ()


# ------------------------------------------------------------------------- waiting


def test_wait_times_out_while_no_worker_runs(local: Runtime) -> None:
    handle = AllFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    with pytest.raises(AsyncWaitTimeoutError) as info:
        handle.wait(timeout=0.05)
    assert info.value.run_id == handle.run_id and info.value.timeout == 0.05


def test_wait_falls_back_to_polling_the_record(local: Runtime, worker: Worker) -> None:
    handle = AllFlow.run(x=6)
    assert isinstance(handle, DispatchHandle)
    polls: list[float] = []  # an explicit sleep: polled through it, not a signal wait

    def poll(seconds: float) -> None:  # the "sleep" between re-checks runs the worker
        polls.append(seconds)
        worker.run_pending()

    outcome = dispatch_module.wait_for_run(local, handle.run_id, 2.0, sleep=poll)
    assert outcome.value == {"a": "a:6", "b": "b:6"}
    assert polls == [0.2]  # clamp(timeout / 10, 0.05, 5)


def test_completion_is_published_after_the_save(local: Runtime, worker: Worker) -> None:
    handle = AllFlow.run(x=7)
    assert isinstance(handle, DispatchHandle)
    signals = local.storage.signals
    assert signals is not None
    seen: list[str | None] = []
    sub = signals.subscribe(f"run:{handle.run_id}:done")
    worker.run_pending()
    seen.append(sub.get(0))
    sub.close()
    assert seen == ["completed"]


# ------------------------------------------------------------------------- worker retries


def test_worker_retries_re_enqueue_with_the_delay(
    local: Runtime, worker: Worker, clock: ManualClock, sleeps: list[float]
) -> None:
    FAIL_TIMES["b"] = 2
    handle = RetryFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    assert EVENTS == ["run:a", "run:b", "fail:b:1"]
    [(visible_at, payload)] = _due(local.router)
    assert visible_at == clock() + 7 and payload.context_id == handle.run_id
    view = RetryFlow.find(handle.run_id)
    assert view.status is RunStatus.RUNNING and view.current_step == "b"
    # the lock is kept as a "parked until" stamp: the sweeper leaves the run alone
    info = local.storage.locks.info(run_liveness_key(handle.run_id))
    assert info is not None and info.expires_at == clock() + 7
    assert sweep_runs(local.storage, local.router).redispatched == 0
    assert worker.run_pending() == 0  # not due yet
    clock.advance(7)
    worker.run_pending()
    clock.advance(7)
    worker.run_pending()
    assert EVENTS == ["run:a", "run:b", "fail:b:1", "run:b", "fail:b:2", "run:b"]
    assert handle.wait(timeout=1).value == {"a": "a:1", "b": "b:1"}
    assert sleeps == []  # nothing slept in-thread
    trace = [(e.type, e.attempt) for e in RetryFlow.find(handle.run_id).trace if e.step == "b"]
    assert trace == [("retry", 1), ("retry", 2), ("run", 3)]


# ------------------------------------------------------------------------- parks


def test_a_park_re_enqueues_with_its_delay_and_counts_snoozes(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    PARKS.append(Park(delay=3, reason="lock", key="k"))
    handle = AfterFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    [(visible_at, payload)] = _due(local.router)
    assert visible_at == clock() + 3 and payload.snooze_count == 1
    clock.advance(3)
    worker.run_pending()
    assert handle.wait(timeout=1).value == {"a": "a:1", "b": "b:1", "c": "c:1"}
    assert EVENTS == ["run:a", "run:b", "run:b", "run:c"]


def test_a_never_admitted_run_fails_at_the_snooze_cap_without_rollback(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    PARKS.extend(Park(delay=1, reason="semaphore", key="s") for _ in range(5))
    handle = ParkFirstFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(4):
        worker.run_pending()
        clock.advance(1)
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and not outcome.retryable
    assert outcome.exception_class is not None
    assert outcome.exception_class.endswith(SnoozeLimitError.__name__)
    assert outcome.message == "gave up after 2 parks waiting for semaphore s"
    assert EVENTS == ["run:b"] * 3  # lock_snooze_max_attempts=2: the third park gives up
    assert local.router.size() == 0  # type: ignore[attr-defined]


def test_an_admitted_run_keeps_waiting_past_the_cap_and_logs_once(
    local: Runtime, worker: Worker, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    PARKS.extend(Park(delay=1, reason="lock", key="k") for _ in range(5))
    handle = AfterFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    with caplog.at_level(logging.WARNING, logger="reactor.worker"):
        for _ in range(6):
            worker.run_pending()
            clock.advance(1)
    assert handle.wait(timeout=1).value == {"a": "a:1", "b": "b:1", "c": "c:1"}
    assert EVENTS.count("run:b") == 6
    assert sum("snooze_limit_admitted" in r.message for r in caplog.records) == 1


#: Holds another run takes while ``ReservingFlow`` ships (``(lock, semaphore)``).
TAKEN_WHILE_SHIPPING: list[tuple[Lock, Semaphore]] = []


class ReservingFlow(Reactor, name="bg.reserving"):
    """reserve (under lock ``sku:1``), charge (under semaphore ``pool``), then ship fails
    after another run took that lock and slot."""

    x = Input(int)
    reserve = _mk("reserve", coordination=with_lock(key="sku:1", ttl=5, auto_extend=False))
    charge = _mk("charge", wait_for="reserve",
                 coordination=with_semaphore(key="pool", limit=1, lease=5))

    @step(wait_for="charge")
    def ship(inputs: Any, ctx: Any) -> None:
        for lock, slot in TAKEN_WHILE_SHIPPING:
            assert lock.try_acquire() and slot.try_acquire()
        raise RuntimeError("carrier down")

    background = Background(all=True)


def test_a_rollback_in_a_worker_parks_on_a_held_lock_and_undoes_each_step_once(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    """docs/coordination.md, "Rollback": in a worker an undo whose lock or slot is taken parks
    the rollback (the thread is given back) for as long as it takes, past the snooze cap, and
    the redelivery resumes at that entry: every undo runs once, newest first. The old code
    waited ``rollback_wait`` in the worker thread, then skipped the undo as
    ``coordination_unavailable`` (a reservation never released)."""
    storage = local.storage
    lock = Lock(storage.locks, "sku:1", owner="another-order", ttl=600, auto_extend=False)
    slot = Semaphore(storage.semaphores, "pool", limit=1, holder="another", lease=600,
                     auto_extend=False)
    TAKEN_WHILE_SHIPPING[:] = [(lock, slot)]
    handle = ReservingFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(4):  # parked on the slot, past lock_snooze_max_attempts=2
        worker.run_pending()
        clock.advance(10)
    view = ReservingFlow.find(handle.run_id)
    assert view.status is RunStatus.RUNNING and list(view.undo_stack) == [
        "reserve", "charge"]
    assert EVENTS == ["run:reserve", "run:charge"]  # nothing undone, nothing re-run
    [(_, payload)] = _due(local.router)
    assert payload.context_id == handle.run_id

    assert slot.release()
    for _ in range(3):  # the refund runs; parked on the reservation's lock
        worker.run_pending()
        clock.advance(10)
    assert EVENTS[2:] == ["undo:charge"]
    assert lock.release()
    worker.run_pending()
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and outcome.rollback_failures == []
    assert EVENTS[2:] == ["undo:charge", "undo:reserve"]
    assert not storage.locks.held("sku:1") and storage.semaphores.state("pool") is None
    assert local.router.size() == 0  # type: ignore[attr-defined]


class ReservingElement(Reactor, name="bg.reserving_element"):
    """One line item: ``reserve`` under the lock ``sku:<n>``."""

    n = Input(int)
    x = Input(int)
    reserve = _mk("reserve", coordination=with_lock(key=lambda inputs: f"sku:{inputs.x}",
                                                    ttl=5, auto_extend=False))

    @step(n=input("n"), wait_for="reserve")
    def done(inputs: Any, ctx: Any) -> int:
        return int(inputs.n)

    returns = "done"


class ReservingMap(Reactor, name="bg.reserving_map"):
    """Reserves lines 0 and 1 in a fan-out map, then ``ship`` fails after another run took the
    lock of line 1 (``TAKEN_WHILE_SHIPPING``)."""

    x = Input(int)
    background = Background(all=True)

    @step(x=input("x"))
    def lines(inputs: Any, ctx: Any) -> list[int]:
        return [0, 1]

    lines_reserved = map_step(ReservingElement, source=result("lines"),
                              args={"n": element("lines_reserved"), "x": element("lines_reserved")},
                              atomic=True, fan_out=FanOut(batch_size=10))

    @step(wait_for="lines_reserved")
    def ship(inputs: Any, ctx: Any) -> None:
        for lock, _ in TAKEN_WHILE_SHIPPING:
            assert lock.try_acquire()
        raise RuntimeError("carrier down")


def test_an_element_rollback_job_parks_on_a_held_lock_and_undoes_each_element_once(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    """docs/coordination.md, "Rollback": the rollback job of a fan-out element is a worker
    execution too; an element undo whose lock is taken re-queues that job, past the snooze
    cap, until the lock is free. The old code waited ``rollback_wait`` in the worker thread
    and then skipped the undo (the soak's "reserve undo: undo skipped: lock 'sku:...' is held
    by another owner", a reservation never released)."""
    storage = local.storage
    lock = Lock(storage.locks, "sku:1", owner="another-order", ttl=600, auto_extend=False)
    TAKEN_WHILE_SHIPPING[:] = [(lock, Semaphore(storage.semaphores, "unused", limit=1))]
    handle = ReservingMap.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(12):  # parked on sku:1, past lock_snooze_max_attempts=2
        worker.run_pending()
        clock.advance(10)
    assert sorted(EVENTS) == ["run:reserve", "run:reserve", "undo:reserve"]  # line 0 only
    assert handle.status() is RunStatus.ROLLING_BACK
    assert lock.release()
    for _ in range(3):
        worker.run_pending()
        clock.advance(10)
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and outcome.rollback_failures == []
    assert sorted(EVENTS) == ["run:reserve"] * 2 + ["undo:reserve"] * 2
    assert not storage.locks.held("sku:1")
    assert local.router.size() == 0  # type: ignore[attr-defined]


class LineElement(Reactor, name="bg.line_element"):
    """One line of an inline map: ``hold`` under the lock ``line:<n>``; line 1's undo fails."""

    n = Input(int)

    @step(n=input("n"), coordination=with_lock(key=lambda inputs: f"line:{inputs.n}", ttl=5,
                                               auto_extend=False))
    def hold(inputs: Any, ctx: Any) -> int:
        EVENTS.append(f"run:{inputs.n}")
        return int(inputs.n)

    @hold.undo
    def release(value: Any, inputs: Any, ctx: Any) -> None:
        EVENTS.append(f"undo:{inputs.n}")
        if inputs.n == 1:
            raise RuntimeError("line 1 cannot be released")

    returns = "hold"


class InlineLines(Reactor, name="bg.inline_lines"):
    """An inline map over lines 0 and 1, then ``ship`` fails after another run took the lock
    of line 0."""

    x = Input(int)
    background = Background(all=True)

    @step(x=input("x"))
    def lines(inputs: Any, ctx: Any) -> list[int]:
        return [0, 1]

    held = map_step(LineElement, source=result("lines"), args={"n": element("held")})

    @step(wait_for="held")
    def ship(inputs: Any, ctx: Any) -> None:
        for lock, _ in TAKEN_WHILE_SHIPPING:
            assert lock.try_acquire()
        raise RuntimeError("carrier down")


def test_an_inline_map_element_rolled_back_before_a_park_keeps_its_rollback_failure(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    """docs/concepts.md, "Rollback": every undo that did not complete is reported once. Line 1
    is rolled back (its undo fails), then line 0's undo parks on its lock; the redelivered
    rollback skips line 1 (already rolled back) and must still report its failure. The old
    code cleared the element's record, so the failure vanished from the run's ``Failure``."""
    lock = Lock(local.storage.locks, "line:0", owner="another-order", ttl=600,
                auto_extend=False)
    TAKEN_WHILE_SHIPPING[:] = [(lock, Semaphore(local.storage.semaphores, "unused", limit=1))]
    handle = InlineLines.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(3):
        worker.run_pending()
        clock.advance(10)
    assert EVENTS == ["run:0", "run:1", "undo:1"]  # line 0 waits on its lock
    assert lock.release()
    for _ in range(2):
        worker.run_pending()
        clock.advance(10)
    outcome = handle.wait(timeout=1)
    assert isinstance(outcome, Failure) and outcome.step_name == "ship"
    assert EVENTS == ["run:0", "run:1", "undo:1", "undo:0"]
    assert [(f.map_step, f.element_index, f.kind, f.reason) for f in outcome.rollback_failures
            ] == [("held", 1, "undo", "raised")]


class FannedLines(Reactor, name="bg.fanned_lines"):
    """:class:`InlineLines` with a fan-out map."""

    x = Input(int)
    background = Background(all=True)

    @step(x=input("x"))
    def lines(inputs: Any, ctx: Any) -> list[int]:
        return [0, 1]

    held = map_step(LineElement, source=result("lines"), args={"n": element("held")},
                    fan_out=FanOut(batch_size=10))

    @step(wait_for="held")
    def ship(inputs: Any, ctx: Any) -> None:
        raise RuntimeError("carrier down")


def test_an_element_rollback_job_redelivered_after_its_elements_last_save_keeps_its_failure(
    local: Runtime, worker: Worker, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/fan_out.md, "Rollback": an element's rollback job that saved the element rolled
    back but failed to store the position's outcome (the store raised) is redelivered; the
    redelivery reports the element's undo failure, which that first pass saved on it. The old
    code called the rolled-back element ``not_needed`` and the failure vanished."""
    rollbacks = local.storage.map_rollbacks
    real = rollbacks.put_outcome
    raised: list[int] = []

    def flaky(map_id: str, position: int, outcome: Any) -> bool:
        if outcome.index == 1 and not raised:
            raised.append(position)
            raise StorageError("injected outage after the element's save")
        return real(map_id, position, outcome)

    monkeypatch.setattr(rollbacks, "put_outcome", flaky)
    handle = FannedLines.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(40):
        worker.run_pending()
        clock.advance(5)
        if handle.status() is RunStatus.FAILED:
            break
    outcome = handle.wait(timeout=1)
    assert raised, "the injected outage never fired"
    assert isinstance(outcome, Failure) and outcome.step_name == "ship"
    assert sorted(EVENTS) == ["run:0", "run:1", "undo:0", "undo:1"]  # each undone once
    assert [(f.map_step, f.element_index, f.kind, f.reason) for f in outcome.rollback_failures
            ] == [("held", 1, "undo", "raised")]


def test_uncapped_parks_do_not_count(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    PARKS.extend(Park(delay=1, reason="ordered_lock", key="o") for _ in range(4))
    handle = ParkFirstFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    for _ in range(5):
        worker.run_pending()
        clock.advance(1)
    assert handle.wait(timeout=1).value == {"b": "b:1"}


# ------------------------------------------------------------------------- liveness


def test_sync_runs_hold_the_liveness_lock(local: Runtime) -> None:
    outcome = SyncFlow.run(x=1)
    assert outcome.value == {"probe": {"held": True, "swept": 0}}
    assert not local.storage.locks.held(run_liveness_key(outcome.run_id or ""))


def test_a_duplicate_delivery_meets_the_live_lock_and_re_enqueues(
    local: Runtime, worker: Worker, clock: ManualClock
) -> None:
    handle = AllFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    key = run_liveness_key(handle.run_id)
    assert local.storage.locks.acquire(key, "someone-else", 4)
    worker.run_pending()
    assert EVENTS == []
    [(visible_at, payload)] = _due(local.router)
    assert visible_at == clock() + 4 and payload.snooze_count == 0  # liveness: uncapped
    clock.advance(4)
    worker.run_pending()
    assert handle.wait(timeout=1).value == {"a": "a:1", "b": "b:1"}


def test_stale_deliveries_of_finished_runs_are_dropped(local: Runtime, worker: Worker) -> None:
    handle = AllFlow.run(x=1)
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    local.router.enqueue(job(RunPayload(context_id=handle.run_id, reactor="bg.all")))
    assert worker.run_pending() == 1
    assert EVENTS == ["run:a", "run:b"]
    assert worker.jobs_dead_lettered == 0


def test_result_and_wait_for_inline_after_flows_with_failures() -> None:
    config.configure(storage="memory://", router="inline://")
    try:
        FAIL_TIMES["b"] = 1
        outcome = AfterFlow.run(x=1)
        assert isinstance(outcome, Failure) and outcome.step_name == "b"
        assert EVENTS == ["run:a", "run:b", "fail:b:1", "undo:a"]
    finally:
        config.reset()
