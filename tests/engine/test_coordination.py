"""Coordination in synchronous runs: acquisition order, re-entrancy, contention, rollback
re-take, periods and rate limits (docs/coordination.md)."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import (
    Input,
    Reactor,
    Step,
    compose,
    input,
    step,
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)
from reactor.coordination import Lock, RateLimit, Semaphore, registry
from reactor.errors import (
    CoordinationKeyError,
    LockAcquisitionError,
    RateLimitExceeded,
    SemaphoreAcquisitionError,
    StorageError,
    UnknownRateLimitError,
)
from reactor.memory import MemoryStorage
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.signals import halt, skip
from reactor.model.status import RunStatus
from tests.engine.coordination_helpers import (
    manual_runtime,
    record_coordination,
    stored,
)
from tests.fake_clock import FakeClock


@pytest.fixture
def storage(fake_clock: FakeClock) -> MemoryStorage:
    return manual_runtime(fake_clock)[1]


@pytest.fixture(autouse=True)
def _clean_registry() -> Any:
    yield
    registry.clear()


def _hold(storage: MemoryStorage, key: str, owner: str = "intruder") -> Lock:
    lock = Lock(storage.locks, key, owner=owner, auto_extend=False)
    assert lock.try_acquire()
    return lock


# ------------------------------------------------------------------------ acquisition order


def test_reactor_level_acquisition_and_release_order(storage: MemoryStorage) -> None:
    events: list[str] = []

    class R(Reactor):
        account = Input(str)
        coordination = [
            with_semaphore(key=lambda i: f"sem:{i.account}", limit=2),
            with_lock(key=lambda i: f"lock:{i.account}", auto_extend=False),
            with_period(key=lambda i: f"per:{i.account}", every="day"),
            with_rate_limit(key="api", limit=5, period="minute"),
            with_ordered_lock(key=lambda i: f"ord:{i.account}"),
        ]

        @step()
        def work(inputs: Any, ctx: Any) -> str:
            events.append("step")
            return "done"

    record_coordination(storage, events)
    result = R.run(account="a1")
    assert result == Success({"work": "done"})
    assert events == [
        "ordered.assign", "ordered.can_proceed",  # ticket at run time, then the gate
        "period.marker",  # fast check
        "rate.hit",
        "lock.acquire",
        "semaphore.acquire",
        "period.marker",  # re-check under the lock
        "step",
        "period.mark",  # plain Success
        "semaphore.release", "lock.release",
        "ordered.advance",
    ]
    ctx = stored(result.run_id or "")
    assert ctx.engine_state.admitted is True
    assert ctx.engine_state.rate_limit_charged is True
    assert ctx.engine_state.ordered_ticket is not None
    assert ctx.engine_state.ordered_ticket.nonce == 1
    line = storage.ordered_locks.peek("ord:a1")
    # advanced past the ticket, and the drained line was garbage-collected
    assert (line.next_nonce, line.last_completed, dict(line.in_flight)) == (0, 0, {})


def test_step_level_acquisition_order_puts_the_rate_limit_last(storage: MemoryStorage) -> None:
    events: list[str] = []

    class Charge(Step):
        card = Input(str)
        coordination = [
            with_rate_limit(key=lambda i: f"rate:{i.card}", limit=3, period=60),
            with_lock(key=lambda i: f"lock:{i.card}", auto_extend=False),
        ]

        def run(self) -> str:
            events.append("body")
            return "charged"

    class R(Reactor):
        card = Input(str)
        charge = step(Charge, coordination=[
            with_semaphore(key="gateway", limit=1),
            with_period(key=lambda i: f"per:{i.card}", every=3600),
            with_ordered_lock(key=lambda i: f"ord:{i.card}"),
        ])

    record_coordination(storage, events)
    assert R.run(card="c").success
    assert events == [
        "ordered.assign", "ordered.can_proceed",
        "period.marker",
        "lock.acquire",
        "semaphore.acquire",
        "period.marker",
        "rate.hit",
        "body",
        "period.mark",
        "semaphore.release", "lock.release",
        "ordered.advance",
    ]


# ------------------------------------------------------------------------ re-entrancy


def test_lock_is_reentrant_across_the_compose_tree_and_released_after(
    storage: MemoryStorage,
) -> None:
    counts: list[int] = []

    class Child(Reactor):
        account = Input(str)
        coordination = with_lock(key=lambda i: f"acct:{i.account}", auto_extend=False)

        @step(coordination=with_lock(key=lambda i: f"acct:{i.account}", auto_extend=False),
              account=input("account"))
        def inner(inputs: Any, ctx: Any) -> str:
            info = storage.locks.info("acct:" + inputs.account)
            assert info is not None and info.owner == ctx.root_run_id
            counts.append(info.count)
            return "ok"

    class Parent(Reactor):
        account = Input(str)
        coordination = with_lock(key=lambda i: f"acct:{i.account}", auto_extend=False)
        child = compose(Child)

    result = Parent.run(account="9")
    assert isinstance(result, Success)
    assert counts == [3]  # parent run, child run, child step: one owner, counted
    assert not storage.locks.held("acct:9")


def test_semaphore_is_per_holder_not_reentrant(storage: MemoryStorage) -> None:
    class Child(Reactor):
        coordination = with_semaphore(key="one-slot", limit=1)
        inner = step(lambda inputs, ctx: "never")

    class Parent(Reactor):
        coordination = with_semaphore(key="one-slot", limit=1)
        child = compose(Child)

    result = Parent.run()
    assert isinstance(result, Failure)
    assert result.exception_class is not None
    assert result.exception_class.endswith("SemaphoreAcquisitionError")
    state = storage.semaphores.state("one-slot")
    assert state is None or not state.holders


# ------------------------------------------------------------------------ sync contention


def test_step_contention_fails_without_compensation_and_rolls_back_earlier_steps(
    storage: MemoryStorage, fake_clock: FakeClock
) -> None:
    calls: list[str] = []

    class Reserve(Step):
        def run(self) -> str:
            calls.append("reserve")
            return "r1"

        def undo(self) -> None:
            calls.append("undo reserve")

    class Charge(Step):
        coordination = with_lock(key="card:1", wait=2.0)

        def run(self) -> str:
            calls.append("charge")
            return "c1"

        def compensate(self) -> None:
            calls.append("compensate charge")

    class R(Reactor):
        reserve = step(Reserve)
        charge = step(Charge, wait_for="reserve")

    _hold(storage, "card:1")
    result = R.run()
    assert isinstance(result, Failure)
    assert isinstance(result.error, LockAcquisitionError)
    assert result.step_name == "charge" and not result.retryable
    assert calls == ["reserve", "undo reserve"]  # charge never ran, never compensated
    assert fake_clock.slept == pytest.approx(2.0)  # waited up to `wait`, then failed
    assert stored(result.run_id or "").status is RunStatus.FAILED


def test_step_contention_waits_and_succeeds_when_the_hold_frees(
    storage: MemoryStorage, fake_clock: FakeClock
) -> None:
    intruder = _hold(storage, "k")
    fake_clock.on_sleep = lambda seconds: intruder.release()  # it finishes while we poll

    class R(Reactor):
        s = step(lambda inputs, ctx: "got it", coordination=with_lock(key="k", wait=5))

    assert R.run().value == {"s": "got it"}
    assert len(fake_clock.sleeps) == 1  # one poll on the runtime's clock, then it was free


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "applied"])
def test_a_release_the_store_failed_is_tried_again_and_is_no_loss(
    storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    """A release that meets a dead connection (the soak's PostgreSQL restarts) is tried again
    at once: the lock is free for the next run instead of held for its whole lifetime, and a
    second answer of "not held" (the first one applied, its reply lost) is not a lost hold."""
    real = storage.locks.release
    failures = [1]

    def flaky(key: str, owner: str) -> bool:
        if failures:
            failures.pop()
            if applied:
                real(key, owner)
            raise StorageError("injected: connection terminated")
        return real(key, owner)

    monkeypatch.setattr(storage.locks, "release", flaky)

    class R(Reactor):
        s = step(lambda inputs, ctx: "done",
                 coordination=with_lock(key="k", ttl=600, auto_extend=False))

    assert R.run().value == {"s": "done"}
    assert not storage.locks.held("k")
    assert failures == []


def test_reactor_level_contention_fails_before_any_step(storage: MemoryStorage) -> None:
    ran: list[str] = []

    class R(Reactor):
        coordination = [with_semaphore(key="pool", limit=1)]
        s = step(lambda inputs, ctx: ran.append("s"))

    blocker = Semaphore(storage.semaphores, "pool", limit=1, auto_extend=False)
    assert blocker.try_acquire()
    result = R.run()
    assert isinstance(result, Failure)
    assert isinstance(result.error, SemaphoreAcquisitionError)
    assert result.step_name is None and ran == []
    assert stored(result.run_id or "").status is RunStatus.FAILED
    assert stored(result.run_id or "").engine_state.admitted is False


def test_key_function_error_fails_the_step_without_compensation(storage: MemoryStorage) -> None:
    calls: list[str] = []

    class Bad(Step):
        coordination = with_lock(key=lambda i: i["missing"])

        def run(self) -> None:
            calls.append("run")

        def compensate(self) -> None:
            calls.append("compensate")

    class R(Reactor):
        bad = step(Bad)

    result = R.run()
    assert isinstance(result, Failure)
    assert isinstance(result.error, CoordinationKeyError)
    assert calls == [] and not result.retryable


# ------------------------------------------------------------------------ rollback re-take


def test_rollback_retakes_the_step_lock_around_undo_and_compensate(
    storage: MemoryStorage,
) -> None:
    seen: list[tuple[str, str | None]] = []

    def owner() -> str | None:
        info = storage.locks.info("acct")
        return info.owner if info else None

    class Debit(Step):
        coordination = with_lock(key="acct", auto_extend=False)

        def run(self) -> str:
            return "d"

        def undo(self) -> None:
            seen.append(("undo", owner()))

    class Credit(Step):
        coordination = with_lock(key="acct", auto_extend=False)

        def run(self) -> None:
            raise RuntimeError("credit failed")

        def compensate(self) -> None:
            seen.append(("compensate", owner()))

    class R(Reactor):
        debit = step(Debit)
        credit = step(Credit, wait_for="debit")

    result = R.run()
    assert isinstance(result, Failure) and result.rollback_failures == []
    assert seen == [("compensate", result.run_id), ("undo", result.run_id)]
    assert not storage.locks.held("acct")


def test_rollback_that_cannot_retake_records_coordination_unavailable(
    storage: MemoryStorage, fake_clock: FakeClock
) -> None:
    calls: list[str] = []

    class First(Step):
        def run(self) -> str:
            return "1"

        def undo(self) -> None:
            calls.append("undo first")

    class Locked(Step):
        coordination = with_lock(key="acct", ttl=30, auto_extend=False)

        def run(self) -> str:
            return "2"

        def undo(self) -> None:
            calls.append("undo locked")

    class Pooled(Step):
        coordination = with_semaphore(key="pool", limit=1)

        def run(self) -> str:
            return "3"

        def undo(self) -> None:
            calls.append("undo pooled")

    class Boom(Step):
        def run(self) -> None:
            # Someone else grabs the lock and the slot before the rollback runs.
            _hold(storage, "acct")
            assert Semaphore(storage.semaphores, "pool", limit=1, auto_extend=False).try_acquire()
            raise RuntimeError("boom")

    class R(Reactor):
        first = step(First)
        locked = step(Locked, wait_for="first")
        pooled = step(Pooled, wait_for="locked")
        boom = step(Boom, wait_for="pooled")

    result = R.run()
    assert isinstance(result, Failure)
    assert calls == ["undo first"]  # the rest of the rollback went on
    reasons = {(f.step, f.kind, f.reason) for f in result.rollback_failures}
    assert reasons == {
        ("locked", "undo", "coordination_unavailable"),
        ("pooled", "undo", "coordination_unavailable"),
    }
    # Waited the semaphore's 60 s default, then the lock's TTL (30 s).
    assert fake_clock.slept == pytest.approx(90.0)


# ------------------------------------------------------------------------ periods


def test_reactor_period_halts_a_repeat_run_and_marks_only_plain_success(
    storage: MemoryStorage,
) -> None:
    runs: list[str] = []

    class Invoice(Reactor):
        customer = Input(str)
        mode = Input(str, default="ok")
        coordination = with_period(key=lambda i: f"invoice:{i.customer}", every="day")

        @step(mode=input("mode"))
        def send(inputs: Any, ctx: Any) -> str:
            runs.append(inputs.mode)
            if inputs.mode == "halt":
                halt("not today")
            if inputs.mode == "fail":
                raise RuntimeError("smtp down")
            return "sent"

    assert isinstance(Invoice.run(customer="c", mode="halt"), Halt)
    assert isinstance(Invoice.run(customer="c", mode="fail"), Failure)
    first = Invoice.run(customer="c")
    assert type(first) is Success
    again = Invoice.run(customer="c")
    assert isinstance(again, Halt) and again.reason == "period"
    assert runs == ["halt", "fail", "ok"]
    assert stored(again.run_id or "").status is RunStatus.HALTED
    marker = storage.periods.marker("period:invoice:c:2026-11-29")
    assert marker is not None and marker.context_id == first.run_id
    storage.advance(86_400)  # the next day's bucket
    assert type(Invoice.run(customer="c")) is Success


def test_step_period_skips_the_step_and_the_run_continues(storage: MemoryStorage) -> None:
    runs: list[str] = []

    class R(Reactor):
        skip_it = Input(bool, default=False)

        @step(coordination=with_period(key="daily-report", every="day"))
        def report(inputs: Any, ctx: Any) -> str:
            runs.append("report")
            if ctx.reactor_inputs["skip_it"]:
                skip("nothing to report")
            return "r"

        @step(wait_for="report")
        def after(inputs: Any, ctx: Any) -> str:
            runs.append("after")
            return "a"

    skipped = R.run(skip_it=True)  # a Skipped body does not mark the bucket
    assert skipped.value == {"report": "nothing to report", "after": "a"}
    assert R.run().value == {"report": "r", "after": "a"}
    third = R.run()
    assert third.value == {"report": None, "after": "a"}
    assert type(third) is Success  # the run completes; only the step was skipped
    assert runs == ["report", "after", "report", "after", "after"]
    assert any(e.type == "skipped" and e.step == "report"
               for e in stored(third.run_id or "").execution_trace)


# ------------------------------------------------------------------------ rate limits


def test_reactor_rate_limit_admits_the_limit_then_fails_with_retry_after(
    storage: MemoryStorage,
) -> None:
    class R(Reactor):
        coordination = with_rate_limit(key="api", limit=2, period="minute")
        s = step(lambda inputs, ctx: "ok")

    assert R.run().success and R.run().success
    third = R.run()
    assert isinstance(third, Failure) and isinstance(third.error, RateLimitExceeded)
    assert third.error.retry_after is not None and 0 < third.error.retry_after <= 60
    windows = R.definition.coordination[0].windows  # type: ignore[attr-defined]
    assert RateLimit(storage.rate_limits, "api", windows).counts() == {"minute": 2}


def test_named_rate_limit_is_shared_and_unknown_name_fails(storage: MemoryStorage) -> None:
    class A(Reactor):
        coordination = with_rate_limit("stripe")
        s = step(lambda inputs, ctx: "a")

    class B(Reactor):
        s = step(lambda inputs, ctx: "b", coordination=with_rate_limit("stripe"))

    unknown = A.run()
    assert isinstance(unknown, Failure) and isinstance(unknown.error, UnknownRateLimitError)
    assert not unknown.retryable
    registry.register("stripe", limit=1, period="minute")
    assert A.run().success
    shared = B.run()  # same bucket: the name is the key
    assert isinstance(shared, Failure) and isinstance(shared.error, RateLimitExceeded)


def test_step_rate_limit_charges_every_attempt(storage: MemoryStorage) -> None:
    from reactor import Retries

    attempts: list[int] = []

    class Flaky(Step):
        retries = Retries(max_attempts=3, base_delay=0)
        coordination = with_rate_limit(key="flaky", limit=10, period="minute")

        def run(self) -> str:
            attempts.append(1)
            if len(attempts) < 3:
                raise RuntimeError("again")
            return "ok"

    class R(Reactor):
        f = step(Flaky)

    assert R.run().success
    windows = Flaky.coordination[0].windows  # type: ignore[attr-defined]
    assert RateLimit(storage.rate_limits, "flaky", windows).counts() == {"minute": 3}


def test_skipped_result_is_not_a_plain_success() -> None:
    assert type(Skipped(None)) is not Success
