"""Run deadlines (docs/concepts.md, "Run deadlines"; reactor/dsl/deadlines.py,
reactor/engine/run_control/deadline.py, reactor/jobs/handlers/run_deadline.py).

``deadline=`` on a reactor class (seconds or a ``timedelta`` from each run's start) or at start
(seconds, a ``timedelta`` or a timezone-aware ``datetime``). Once it passes the run starts no
further step, the step in flight is compensated when its body started, every completed step is
undone once, newest first, and the run is stored ``failed`` with ``RunDeadlineExceeded`` —
also when nobody executes it (queued, paused at an interrupt): the ``run_deadline`` timer job
stops it then. The in-memory tests run on the test clock (``reactor.testing``); the
every-backend ones use deadlines of a fraction of a second of real time (a remote router's
delays are real time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reactor import (
    Background,
    DeadlineError,
    DispatchHandle,
    Failure,
    Paused,
    Reactor,
    Retries,
    RunDeadlineExceeded,
    Success,
    config,
)
from reactor.config import Runtime
from reactor.dsl import interrupt, step
from reactor.dsl.deadlines import MAX_SECONDS
from reactor.errors import DefinitionError, RunFinishedError
from reactor.jobs.worker import Worker
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock, TestEnvironment
from tests.backends import BACKENDS, configure_on

EXCEEDED = "reactor.errors.RunDeadlineExceeded"


# ----------------------------------------------------------------------------- declaration


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, True, "60", [60],
                                   MAX_SECONDS * 2, timedelta(0), timedelta(seconds=-5)])
def test_a_class_deadline_must_be_positive_finite_seconds(value: Any) -> None:
    with pytest.raises(DefinitionError, match="deadline"):
        class Bad(Reactor):
            deadline = value

            @step()
            def a(inputs: Any, ctx: Any) -> None:
                return None


def test_a_class_deadline_is_relative_not_a_datetime() -> None:
    with pytest.raises(DefinitionError, match="relative to each run's start"):
        class Bad(Reactor):
            deadline = datetime.now(UTC) + timedelta(hours=1)

            @step()
            def a(inputs: Any, ctx: Any) -> None:
                return None


def test_deadline_is_a_reserved_input_name() -> None:
    from reactor.dsl import Input

    with pytest.raises(DefinitionError, match="deadline"):
        class Bad(Reactor):
            deadline = Input(int)

            @step()
            def a(inputs: Any, ctx: Any) -> None:
                return None


@pytest.mark.parametrize(("value", "match"), [
    (0, "above 0"), (-3, "above 0"), (math.nan, "finite"), (math.inf, "finite"),
    (True, "number of seconds"), ("60", "number of seconds"), (MAX_SECONDS + 1, "3,650 days"),
    (datetime(2030, 1, 1), "timezone-aware"),  # a naive datetime is refused
    (datetime(2001, 1, 1, tzinfo=UTC), "already passed"),
])
def test_a_bad_run_deadline_is_refused_and_nothing_is_stored(value: Any, match: str) -> None:
    ran: list[str] = []

    class Order(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> None:
            ran.append("a")

    with TestEnvironment() as env:
        with pytest.raises(DeadlineError, match=match) as caught:
            Order.run(deadline=value)
        assert caught.value.field == "deadline"
        with pytest.raises(DeadlineError):  # the idempotent path refuses before its claim
            Order.run(deadline=value, idempotency_key="k-1")
        assert ran == []
        assert not env.storage.contexts.page(reactor=Order.reactor_name).runs  # none stored
        assert isinstance(Order.run(idempotency_key="k-1"), Success)  # the key is free


# ----------------------------------------------------------------------------- in the caller


class _Journal:
    def __init__(self) -> None:
        self.events: list[str] = []


def _shipping(
    journal: _Journal, clock: TestClock, *, slow: float, handed: Background | None = None
) -> type[Reactor]:
    """reserve -> charge (takes ``slow`` seconds of the test clock) -> ship; run by a worker
    with ``handed``."""

    class Shipping(Reactor):
        background = handed

        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.events.append("run reserve")
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.events.append("undo reserve")

        @step(wait_for=["reserve"])
        def charge(inputs: Any, ctx: Any) -> str:
            journal.events.append("run charge")
            clock.advance(slow)
            return "c"

        @charge.undo
        def refund(result: Any, inputs: Any, ctx: Any) -> None:
            journal.events.append("undo charge")

        @charge.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            journal.events.append("compensate charge")

        @step(wait_for=["charge"])
        def ship(inputs: Any, ctx: Any) -> str:
            journal.events.append("run ship")
            return "s"

    return Shipping


def test_a_passed_deadline_starts_no_step_and_rolls_the_run_back() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        shipping = _shipping(journal, env.clock, slow=120)
        out = shipping.run(deadline=60)
        assert isinstance(out, Failure)
        assert out.exception_class == EXCEEDED and "deadline" in out.message
        assert isinstance(out.error, RunDeadlineExceeded)
        view = shipping.find(out.run_id)  # type: ignore[arg-type]
        assert view.deadline == pytest.approx(view.created_at + 60)
        assert view.cancel is not None and view.cancel.cause == "deadline"
    # ship never started; charge (in flight at the boundary) compensated, reserve undone
    assert journal.events == ["run reserve", "run charge", "compensate charge",
                              "undo reserve"]
    assert view.status is RunStatus.FAILED
    assert view.failure is not None and view.failure.exception_class == EXCEEDED
    assert [e.type for e in view.trace].count("deadline") == 1


def test_the_class_deadline_applies_and_a_run_deadline_overrides_it() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        class Timed(Reactor):
            deadline = timedelta(seconds=30)

            @step()
            def a(inputs: Any, ctx: Any) -> str:
                env.clock.advance(45)
                return "a"

            @step(wait_for=["a"])
            def b(inputs: Any, ctx: Any) -> str:
                journal.events.append("b")
                return "b"

        failed = Timed.run()
        assert isinstance(failed, Failure) and failed.exception_class == EXCEEDED
        done = Timed.run(deadline=3600)
        assert isinstance(done, Success)
        at = datetime.fromtimestamp(env.clock.now(), UTC) + timedelta(minutes=5)
        assert isinstance(Timed.run(deadline=at), Success)
    assert journal.events == ["b", "b"]


def test_a_retry_that_would_start_after_the_deadline_is_not_waited_for() -> None:
    attempts: list[int] = []
    compensated: list[str] = []
    with TestEnvironment() as env:
        class Flaky(Reactor):
            @step(retries=Retries(max_attempts=5, backoff="fixed", base_delay=30))
            def call(inputs: Any, ctx: Any) -> None:
                attempts.append(ctx.attempt)
                raise RuntimeError("gateway down")

            @call.compensate
            def undo_call(error: Any, inputs: Any, ctx: Any) -> None:
                compensated.append(type(error).__name__)

        began = env.clock.now()
        out = Flaky.run(deadline=45)
        # attempt 1 at 0 s, attempt 2 at 30 s; attempt 3 would start at 60 s, past 45 s
        assert attempts == [1, 2]
        assert env.clock.now() - began == pytest.approx(30)
    assert isinstance(out, Failure) and out.exception_class == EXCEEDED
    assert "gateway down" in out.message and "would retry in 30s" in out.message
    assert compensated == ["RunDeadlineExceeded"]


def test_a_run_that_finishes_in_time_keeps_no_trace_of_its_deadline() -> None:
    with TestEnvironment() as env:
        class Quick(Reactor):
            deadline = 60

            @step()
            def a(inputs: Any, ctx: Any) -> str:
                return "a"

        out = Quick.run()
        assert isinstance(out, Success)
        assert env.run_until_idle() == 0  # a finished synchronous run schedules no timer


# ----------------------------------------------------------------------------- nobody holds it


def test_a_run_paused_at_an_interrupt_is_rolled_back_by_the_timer_job() -> None:
    undone: list[str] = []
    with TestEnvironment() as env:
        class Approval(Reactor):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            @reserve.undo
            def release(result: Any, inputs: Any, ctx: Any) -> None:
                undone.append("reserve")

            approval = interrupt(wait_for="reserve")

        paused = Approval.run(deadline=timedelta(hours=2))
        assert isinstance(paused, Paused)
        assert Approval.find(paused.run_id).status is RunStatus.PAUSED
        env.run_until_idle()  # the clock moves to the timer job's due time
        view = Approval.find(paused.run_id)
        with pytest.raises(RunFinishedError):
            Approval.cancel(paused.run_id)  # it ended failed, not cancelled
    assert undone == ["reserve"]
    assert view.status is RunStatus.FAILED
    assert view.failure is not None and view.failure.exception_class == EXCEEDED


def test_a_cancel_before_the_deadline_stands_and_the_timer_changes_nothing() -> None:
    undone: list[str] = []
    with TestEnvironment() as env:
        class Approval(Reactor):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            @reserve.undo
            def release(result: Any, inputs: Any, ctx: Any) -> None:
                undone.append("reserve")

            approval = interrupt(wait_for="reserve")

        paused = Approval.run(deadline=60)
        assert isinstance(paused, Paused)
        cancelled = Approval.cancel(paused.run_id, reason="customer left")
        assert isinstance(cancelled, Failure)
        env.run_until_idle()
        view = Approval.find(paused.run_id)
    assert undone == ["reserve"]  # once
    assert view.status is RunStatus.CANCELLED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.RunCancelledError"


# ----------------------------------------------------------------------------- every backend


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="deadlines")
    config.reset()


def _work_until(runtime: Runtime, done: Callable[[], bool], seconds: float = 60.0) -> None:
    """Run due jobs until ``done()``, the test clock kept at real time (a remote router's
    delays are real time; the memory router's are on the clock)."""
    clock = runtime.clock
    assert isinstance(clock, TestClock)
    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + seconds
    while not done():
        clock.advance(max(time.time() - clock.now(), 0.0))
        worker.run_pending()
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.05)


def test_the_timer_job_stops_a_paused_run_on_every_backend(runtime_on: Runtime) -> None:
    undone: list[str] = []

    class Approval(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            undone.append("reserve")

        approval = interrupt(wait_for="reserve")

    # a deadline the run reaches its interrupt well before, on a loaded machine and a slow
    # server too (the deadline is real time on a remote backend)
    paused = Approval.run(deadline=5.0)
    assert isinstance(paused, Paused), paused
    run_id = paused.run_id
    assert run_id is not None
    _work_until(runtime_on, lambda: Approval.find(run_id).status in TERMINAL_STATUSES)
    view = Approval.find(run_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None and view.failure.exception_class == EXCEEDED
    assert undone == ["reserve"]


def test_a_worker_run_past_its_deadline_stops_on_every_backend(runtime_on: Runtime) -> None:
    journal = _Journal()
    clock = runtime_on.clock
    assert isinstance(clock, TestClock)

    class Parcel(Reactor):
        background = Background(all=True)

        @step()
        def pack(inputs: Any, ctx: Any) -> str:
            journal.events.append("run pack")
            return "p"

        @pack.undo
        def unpack(result: Any, inputs: Any, ctx: Any) -> None:
            journal.events.append("undo pack")

        # fails until the deadline stops its retries
        @step(wait_for=["pack"], retries=Retries(max_attempts=100, backoff="fixed",
                                                 base_delay=0.2))
        def label(inputs: Any, ctx: Any) -> str:
            journal.events.append("run label")
            raise RuntimeError("printer jammed")

    handle = Parcel.run(deadline=4.0)  # pack runs well before it, even on a slow server
    assert isinstance(handle, DispatchHandle)
    _work_until(runtime_on, lambda: Parcel.find(handle.run_id).status in TERMINAL_STATUSES)
    view = Parcel.find(handle.run_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None and view.failure.exception_class == EXCEEDED
    assert journal.events[0] == "run pack" and journal.events[-1] == "undo pack"
    assert journal.events.count("undo pack") == 1
    assert 1 <= journal.events.count("run label") <= 21  # about 4 s of 0.2 s retries


def test_a_run_queued_past_its_deadline_runs_no_step_on_every_backend(
    runtime_on: Runtime,
) -> None:
    journal = _Journal()
    clock = runtime_on.clock
    assert isinstance(clock, TestClock)
    shipping = _shipping(journal, clock, slow=0, handed=Background(all=True))
    handle = shipping.run(deadline=0.3)
    assert isinstance(handle, DispatchHandle)
    passed_at = time.time() + 0.3
    while time.time() <= passed_at:  # no worker runs it before its deadline
        time.sleep(0.05)
    _work_until(runtime_on, lambda: shipping.find(handle.run_id).status in TERMINAL_STATUSES)
    view = shipping.find(handle.run_id)
    assert journal.events == []
    assert view.status is RunStatus.FAILED
    assert view.failure is not None and view.failure.exception_class == EXCEEDED
