"""Coordination under concurrency and in workers: parks with detached holds, ordered locks,
a semaphore under real threads, and direct ``Step.call`` (docs/coordination.md,
"Contention")."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reactor import (
    Input,
    Reactor,
    Step,
    config,
    input,
    step,
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)
from reactor.config import Runtime
from reactor.coordination import Lock, OrderedLock, RateLimit, Semaphore
from reactor.engine.parks import Park
from reactor.errors import (
    LockAcquisitionError,
    OrderedLockWaitError,
    SemaphoreAcquisitionError,
)
from reactor.memory import MemoryStorage
from reactor.model.engine_state import ParkedHold, Waiting
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.status import RunStatus
from reactor.model.step_context import StepContext
from reactor.ports import SYSTEM_CLOCK
from tests.engine.coordination_helpers import (
    deliver,
    enqueue,
    manual_runtime,
    stored,
)
from tests.fake_clock import FakeClock


@pytest.fixture
def storage(fake_clock: FakeClock) -> MemoryStorage:
    return manual_runtime(fake_clock)[1]


@pytest.fixture
def real_time() -> Runtime:
    """The in-memory runtime on the system clock: threads that wait for each other's holds
    wait in real time (a shared fake clock would run their deadlines out at once)."""
    return config.configure(storage="memory://", router="inline://", clock=SYSTEM_CLOCK)


# ------------------------------------------------------------------------ parks in a worker


def test_worker_contention_parks_with_holds_detached_recorded_and_readopted(
    storage: MemoryStorage,
) -> None:
    counts: list[int] = []

    class R(Reactor):
        account = Input(str)
        coordination = [
            with_lock(key=lambda i: f"acct:{i.account}", auto_extend=False),
            with_rate_limit(key="api", limit=10, period="minute"),
        ]

        @step(account=input("account"), coordination=[
            with_lock(key="ledger", auto_extend=False),
            with_semaphore(key="pool", limit=1),
        ])
        def post(inputs: Any, ctx: Any) -> str:
            info = storage.locks.info(f"acct:{inputs.account}")
            assert info is not None
            counts.append(info.count)
            return "posted"

    blocker = Semaphore(storage.semaphores, "pool", limit=1, holder="other", auto_extend=False)
    assert blocker.try_acquire()
    enqueue(R.definition, {"account": "7"}, "run-1")

    with pytest.raises(Park) as parked:
        deliver(R.definition, "run-1")
    park = parked.value
    assert (park.reason, park.key, park.step) == ("semaphore", "pool", "post")
    assert park.capped and park.delay >= 0
    ctx = stored("run-1")  # saved before the Park left the executor
    holds = ctx.engine_state.parked_holds
    assert holds["@reactor"] == (ParkedHold("lock", "acct:7", "run-1"),)
    assert holds["post"] == (ParkedHold("lock", "ledger", "run-1"),)
    assert ctx.engine_state.waiting == Waiting(scope="post", primitive="semaphore", key="pool")
    assert ctx.current_step == "post" and ctx.status is RunStatus.RUNNING
    # Detached, not released: the holds survive the park (bounded by their TTL).
    assert storage.locks.held("acct:7") and storage.locks.held("ledger")
    assert any(e.type == "contention_park" for e in ctx.execution_trace)

    with pytest.raises(Park):  # still contended: parks again, holds kept
        deliver(R.definition, "run-1")
    assert stored("run-1").engine_state.parked_holds["post"][0].key == "ledger"

    assert blocker.release()
    result = deliver(R.definition, "run-1")
    assert result == Success({"post": "posted"})
    assert counts == [1]  # re-adopted, never acquired a second time
    done = stored("run-1")
    assert not done.engine_state.parked_holds and done.engine_state.waiting is None
    assert not storage.locks.held("acct:7") and not storage.locks.held("ledger")
    windows = R.definition.coordination[1].windows  # type: ignore[attr-defined]
    assert RateLimit(storage.rate_limits, "api", windows).counts() == {"minute": 1}


def test_reactor_level_contention_in_a_worker_parks_before_admission(
    storage: MemoryStorage,
) -> None:
    class R(Reactor):
        coordination = [
            with_rate_limit(key="api", limit=5, period="minute"),
            with_lock(key="global", auto_extend=False),
        ]
        s = step(lambda inputs, ctx: "ok")

    intruder = Lock(storage.locks, "global", owner="other", auto_extend=False)
    assert intruder.try_acquire()
    enqueue(R.definition, {}, "run-2")
    for _ in range(3):
        with pytest.raises(Park) as parked:
            deliver(R.definition, "run-2")
        assert parked.value.reason == "lock" and parked.value.step is None
    ctx = stored("run-2")
    assert ctx.engine_state.rate_limit_charged is True
    assert ctx.engine_state.admitted is False
    intruder.release()
    assert deliver(R.definition, "run-2").success
    assert stored("run-2").engine_state.admitted is True
    windows = R.definition.coordination[0].windows  # type: ignore[attr-defined]
    # Charged once per run, not once per delivery.
    assert RateLimit(storage.rate_limits, "api", windows).counts() == {"minute": 1}


def test_rate_limit_park_uses_retry_after_and_unknown_named_limit_never_parks(
    storage: MemoryStorage,
) -> None:
    class Limited(Reactor):
        coordination = with_rate_limit(key="tight", limit=1, period=60)
        s = step(lambda inputs, ctx: "ok")

    class Unknown(Reactor):
        s = step(lambda inputs, ctx: "ok", coordination=with_rate_limit("nope"))

    enqueue(Limited.definition, {}, "a")
    enqueue(Limited.definition, {}, "b")
    assert deliver(Limited.definition, "a").success
    with pytest.raises(Park) as parked:
        deliver(Limited.definition, "b")
    assert parked.value.reason == "rate_limit"
    assert 0 < parked.value.delay <= 60  # the window's roll-over, not the snooze base delay

    enqueue(Unknown.definition, {}, "u")
    failed = deliver(Unknown.definition, "u")
    assert isinstance(failed, Failure) and not failed.retryable
    assert failed.exception_class is not None
    assert failed.exception_class.endswith("UnknownRateLimitError")


# ------------------------------------------------------------------------ ordered locks


def _ordered_reactor(events: list[str], *, fail_on: str | None = None) -> type[Reactor]:
    class Ledger(Reactor):
        account = Input(str)
        label = Input(str)
        coordination = with_ordered_lock(key=lambda i: f"ledger:{i.account}")

        @step(label=input("label"))
        def apply(inputs: Any, ctx: Any) -> str:
            events.append(inputs.label)
            if inputs.label == fail_on:
                raise RuntimeError("bad entry")
            return inputs.label

    return Ledger


def test_ordered_lock_runs_in_ticket_order_in_workers(storage: MemoryStorage) -> None:
    events: list[str] = []
    ledger = _ordered_reactor(events).definition
    for label in ("first", "second", "third"):  # tickets assigned at enqueue time
        enqueue(ledger, {"account": "a", "label": label}, label)
    tickets = [stored(x).engine_state.ordered_ticket for x in ("first", "second", "third")]
    assert [t.nonce if t else None for t in tickets] == [1, 2, 3]
    for early in ("third", "second"):
        with pytest.raises(Park) as parked:
            deliver(ledger, early)
        assert parked.value.reason == "ordered_lock" and not parked.value.capped
    assert deliver(ledger, "first").success
    with pytest.raises(Park):
        deliver(ledger, "third")
    assert deliver(ledger, "second").success
    assert deliver(ledger, "third").success
    assert events == ["first", "second", "third"]


def test_strict_ordered_lock_halts_the_chain_after_a_failure(storage: MemoryStorage) -> None:
    events: list[str] = []
    ledger = _ordered_reactor(events, fail_on="first").definition
    enqueue(ledger, {"account": "b", "label": "first"}, "first")
    enqueue(ledger, {"account": "b", "label": "second"}, "second")
    assert isinstance(deliver(ledger, "first"), Failure)
    halted = deliver(ledger, "second")
    assert isinstance(halted, Halt) and halted.reason == "ordered_lock_chain_failed"
    assert events == ["first"]
    assert stored("second").status is RunStatus.HALTED


def test_synchronous_caller_out_of_turn_fails_and_gives_its_place_up(
    storage: MemoryStorage,
) -> None:
    events: list[str] = []
    ledger = _ordered_reactor(events)
    line = OrderedLock(storage.ordered_locks, "ledger:c")
    queued = line.assign()  # a background run enqueued earlier holds ticket 1
    out_of_turn = ledger.run(account="c", label="sync")
    assert isinstance(out_of_turn, Failure)
    assert isinstance(out_of_turn.error, OrderedLockWaitError)
    assert events == []
    line.advance(queued)  # the queued run completes
    # The failed caller's ticket does not block the line (its timer was dropped).
    assert ledger.run(account="c", label="next").success
    assert events == ["next"]


def test_step_level_ordered_lock_orders_arrivals(storage: MemoryStorage) -> None:
    events: list[str] = []

    class R(Reactor):
        label = Input(str)

        @step(label=input("label"), coordination=with_ordered_lock(key="queue"))
        def apply(inputs: Any, ctx: Any) -> str:
            events.append(inputs.label)
            return inputs.label

    first_in_line = OrderedLock(storage.ordered_locks, "queue").assign()
    enqueue(R.definition, {"label": "late"}, "late")
    with pytest.raises(Park) as parked:
        deliver(R.definition, "late")  # arrives second at the step: waits
    assert parked.value.step == "apply"
    assert stored("late").engine_state.step_ordered_tickets["apply"].nonce == 2
    OrderedLock(storage.ordered_locks, "queue").advance(first_in_line)
    assert deliver(R.definition, "late").success
    assert events == ["late"]
    assert not stored("late").engine_state.step_ordered_tickets


# ------------------------------------------------------------------------ threads


def test_semaphore_of_three_never_has_four_holders_across_threads(real_time: Runtime) -> None:
    barrier = threading.Barrier(3, timeout=30)
    guard = threading.Lock()
    inside = 0
    peak = 0

    class Pool(Reactor):
        n = Input(int)
        coordination = with_semaphore(key="pool-of-3", limit=3, wait=60)

        @step(n=input("n"))
        def work(inputs: Any, ctx: Any) -> int:
            nonlocal inside, peak
            with guard:
                inside += 1
                peak = max(peak, inside)
            barrier.wait()  # every slot holder is inside at the same time
            with guard:
                inside -= 1
            return int(inputs.n)

    results: list[Any] = []
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            results.append(Pool.run(n=n))
        except BaseException as exc:  # surfaced below, never lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert sorted(r.value["work"] for r in results) == list(range(6))
    assert peak == 3


def test_lock_serializes_threads_of_the_same_key(real_time: Runtime) -> None:
    guard = threading.Lock()
    inside = 0
    overlaps = 0
    entered = threading.Event()

    class Serial(Reactor):
        n = Input(int)
        coordination = with_lock(key="serial", wait=60)

        @step(n=input("n"))
        def work(inputs: Any, ctx: Any) -> int:
            nonlocal inside, overlaps
            with guard:
                inside += 1
                overlaps += inside > 1
            entered.set()
            with guard:
                inside -= 1
            return int(inputs.n)

    results: list[Any] = []
    threads = [threading.Thread(target=lambda n=n: results.append(Serial.run(n=n)))
               for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert entered.is_set() and overlaps == 0
    assert all(r.success for r in results) and len(results) == 4


# ------------------------------------------------------------------------ direct Step.call


def test_direct_step_call_coordinates_as_its_own_unit(
    storage: MemoryStorage, fake_clock: FakeClock
) -> None:
    bodies: list[str] = []

    class Charge(Step):
        card = Input(str)
        coordination = [
            with_lock(key=lambda i: f"card:{i.card}", wait=3, auto_extend=False),
            with_period(key=lambda i: f"charged:{i.card}", every="day"),
        ]

        def run(self) -> str:
            info = storage.locks.info(f"card:{self.inputs.card}")
            assert info is not None
            bodies.append(info.owner)
            return "charged"

    intruder = Lock(storage.locks, "card:1", owner="other", auto_extend=False)
    assert intruder.try_acquire()
    contended = Charge.call({"card": "1"})
    assert isinstance(contended, Failure) and isinstance(contended.error, LockAcquisitionError)
    assert fake_clock.slept == pytest.approx(3.0) and bodies == []  # waited, then failed
    intruder.release()

    assert Charge.call({"card": "1"}) == Success("charged")
    assert not storage.locks.held("card:1")
    assert bodies[0].startswith("direct:")  # its own owner
    assert Charge.call({"card": "1"}) == Skipped(None)  # the period was marked
    assert len(bodies) == 1
    invalid = Charge.call({})
    assert isinstance(invalid, Failure) and invalid.validation_errors


def test_direct_call_with_a_step_context_reenters_its_runs_lock(storage: MemoryStorage) -> None:
    class Inner(Step):
        coordination = with_semaphore(key="inner-pool", limit=1)

        def run(self) -> str:
            return "inner"

    class Outer(Step):
        coordination = with_lock(key="shared", auto_extend=False)

        def run(self) -> Any:
            nested = Locked.call({}, self.context)
            return [nested.value, Inner.call({}).value]

    class Locked(Step):
        coordination = with_lock(key="shared", auto_extend=False)

        def run(self) -> str:
            return "nested"

    class R(Reactor):
        outer = step(Outer)

    assert R.run().value == {"outer": ["nested", "inner"]}
    alone = Locked.call({}, StepContext(run_id="x", reactor="r", step="s"))
    assert alone == Success("nested")  # a context without a root falls back to its run id

    blocker = Semaphore(storage.semaphores, "inner-pool", limit=1, auto_extend=False)
    assert blocker.try_acquire()
    busy = Inner.call({})
    assert isinstance(busy, Failure) and isinstance(busy.error, SemaphoreAcquisitionError)
