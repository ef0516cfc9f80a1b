"""Attacks on run deadlines (docs/concepts.md, "Run deadlines") and on a step's ``total`` time
limit across a worker's re-enqueued retries (docs/concepts.md, "Time limits").

Hostile values at start and on the class, deadlines that pass at every point of a run (before
the first step, during a step, a retry wait, a park on a lock another owner holds, a pause at
an interrupt, a fan-out map, a composed child, concurrent branches, an ``async_reactor``
child), a cancel racing the deadline, ``Reactor.retry``/``undo``/``resume`` of a stopped run,
idempotency keys, a checkpoint that fails once the deadline's rollback started, and runs
without a deadline. Everything runs on the test clock (``reactor.testing``): nothing sleeps.

A test named ``test_defect_*`` shows a defect: it fails on the code it was written against.
Those marked ``xfail(strict=True)`` need a fix outside the deadline modules (see the reason).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest

from reactor import (
    Background,
    DeadlineError,
    DispatchHandle,
    Failure,
    FanOut,
    Input,
    Paused,
    Reactor,
    Retries,
    RunDeadlineExceeded,
    StorageError,
    Success,
    Timeouts,
    config,
    with_lock,
)
from reactor.config import Runtime
from reactor.coordination import Lock
from reactor.dsl import async_reactor, compose, element, input, interrupt, map_step, step
from reactor.dsl.deadlines import MAX_SECONDS, absolute_deadline, declared_seconds
from reactor.engine.async_reactor import child_run_id
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.errors import DefinitionError, RunFinishedError, StepTimeout
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.engine_state import CancelRequest, EngineState
from reactor.model.status import RunStatus
from reactor.testing import TestClock, TestEnvironment, run_view

EXCEEDED = "reactor.errors.RunDeadlineExceeded"
CANCELLED = "reactor.errors.RunCancelledError"
START = 1_700_000_000.0


def _stored_runs(env: TestEnvironment, reactor: type[Reactor]) -> int:
    return len(env.storage.contexts.page(reactor=reactor.reactor_name).runs)


def _trivial(ran: list[str]) -> type[Reactor]:
    class Trivial(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> str:
            ran.append("a")
            return "a"

    return Trivial


def _assert_stopped_by_deadline(ref: Any) -> None:
    view = run_view(ref)
    assert view.status is RunStatus.FAILED, view
    assert view.failure is not None and view.failure.exception_class == EXCEEDED, view.failure


@pytest.fixture
def manual() -> Iterator[tuple[Runtime, TestClock]]:
    """A runtime on a manual test clock: ``advance`` moves time only, no job runs until a
    :class:`Worker` runs it (a run's ``run_deadline`` timer not yet delivered)."""
    clock = TestClock(START)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock), clock=clock
    )
    yield runtime, clock
    config.reset()


# ============================================================================ hostile values


class _LyingDelta(timedelta):
    """A timedelta whose ``total_seconds`` lies: 4,000 days reported as 5 seconds."""

    def total_seconds(self) -> float:
        return 5.0


class _TextDelta(timedelta):
    def total_seconds(self) -> Any:
        return "soon"


class _HugeDelta(timedelta):
    def total_seconds(self) -> Any:
        return 10**400


class _NaNStamp(datetime):
    """An aware datetime whose ``timestamp`` is NaN."""

    def timestamp(self) -> float:
        return math.nan


class _SoonStamp(datetime):
    """An aware datetime in 4,000 days whose ``timestamp`` claims to be a minute away."""

    def timestamp(self) -> float:
        return START + 60.0


class _RaisingZone(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta:
        raise RuntimeError("zone database unavailable")

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)


class _OutOfRangeZone(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=30)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)


class _FloatLie(int):
    """An int subclass whose ``__float__`` hides a value far beyond the limit."""

    def __float__(self) -> float:
        return 5.0


class _FloatNaN(float):
    def __float__(self) -> float:
        return 5.0


_AWAY = datetime.fromtimestamp(START, UTC) + timedelta(days=4000)


def _judged_by_its_real_value(value: Any, real: float | None) -> None:
    """``value`` refused before anything is stored when ``real`` is ``None``, else stored as
    the deadline ``real`` (epoch seconds), whatever its type's overrides say."""
    ran: list[str] = []
    with TestEnvironment(start=START) as env:
        trivial = _trivial(ran)
        if real is None:
            with pytest.raises(DeadlineError) as caught:
                trivial.run(deadline=value)
            assert caught.value.field == "deadline"
            assert _stored_runs(env, trivial) == 0
            assert ran == []
        else:
            out = trivial.run(deadline=value)
            assert isinstance(out, Success)
            assert run_view(out).deadline == pytest.approx(real)


@pytest.mark.parametrize(("value", "real"), [
    (_TextDelta(days=1), START + 86_400),
    (_HugeDelta(days=1), START + 86_400),
    (_LyingDelta(days=4000), None),  # beyond 3,650 days, whatever it reports
], ids=["text", "huge", "lying"])
def test_defect_a_timedelta_subclass_slips_past_the_deadline_checks(
    value: timedelta, real: float | None,
) -> None:
    # _relative trusted the subclass's own total_seconds(): a str or a huge int escaped as a
    # TypeError/OverflowError, and a lying one let a 4,000-day deadline through (int and
    # float subclasses are read with the type's own conversion; timedelta ones were not)
    _judged_by_its_real_value(value, real)
    if real is None:
        with pytest.raises(DefinitionError, match="deadline"):
            declared_seconds(value, "Bad")
    else:
        assert declared_seconds(value, "Ok") == 86_400


@pytest.mark.parametrize(("value", "real"), [
    (_NaNStamp(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC).timestamp()),
    (_SoonStamp(_AWAY.year, _AWAY.month, _AWAY.day, tzinfo=UTC), None),
    (datetime(2025, 1, 1, tzinfo=_RaisingZone()), None),
    (datetime(2025, 1, 1, tzinfo=_OutOfRangeZone()), None),
], ids=["nan-timestamp", "lying-timestamp", "raising-zone", "out-of-range-zone"])
def test_defect_a_hostile_datetime_is_stored_or_escapes_as_another_error(
    value: datetime, real: float | None,
) -> None:
    # the NaN one was stored as NaN (private_data.deadline) and the run then raised ValueError
    # formatting it, left `running`; the lying one was stored a minute away although it is
    # 4,000 days away; a zone that raises or is out of range escaped as its own error
    _judged_by_its_real_value(value, real)


@pytest.mark.parametrize("value", [
    _FloatLie(10**12), _FloatNaN(math.nan), _FloatNaN(-1.0), 10**400, -(10**400),
    float("-inf"), -0.0, 1.7e308, MAX_SECONDS + 0.001, timedelta.max, timedelta.min,
    timedelta(microseconds=-1), False, datetime(2030, 1, 1).date(), 60j, b"60",
    datetime(2030, 1, 1),  # naive
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-23, minutes=-59))),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=23, minutes=59))),
    datetime.fromtimestamp(START, UTC),  # exactly now: already passed
    datetime.fromtimestamp(START, UTC) + timedelta(seconds=MAX_SECONDS + 1),
], ids=lambda v: type(v).__name__)
def test_hostile_values_are_refused_before_anything_is_stored(value: Any) -> None:
    ran: list[str] = []
    with TestEnvironment(start=START) as env:
        trivial = _trivial(ran)
        with pytest.raises(DeadlineError) as caught:
            trivial.run(deadline=value)
        assert caught.value.field == "deadline"
        with pytest.raises(DeadlineError):
            trivial.run(deadline=value, idempotency_key="k")
        with pytest.raises(DeadlineError):
            asyncio.run(trivial.arun(deadline=value))
        with pytest.raises(DeadlineError):
            asyncio.run(trivial.aexecute({}, deadline=value, idempotency_key="k"))
        assert _stored_runs(env, trivial) == 0
        assert env.pending_jobs() == []
        assert isinstance(trivial.run(idempotency_key="k"), Success)  # the key stayed free
    assert ran == ["a"]


@pytest.mark.parametrize("value", [_FloatLie(10**12), _FloatNaN(math.nan), 10**400, False,
                                   timedelta.max, datetime(2030, 1, 1, tzinfo=UTC)])
def test_hostile_class_deadlines_are_definition_errors(value: Any) -> None:
    with pytest.raises(DefinitionError, match="deadline"):
        class Bad(Reactor):
            deadline = value

            @step()
            def a(inputs: Any, ctx: Any) -> None:
                return None


def test_accepted_values_store_the_deadline_they_mean() -> None:
    now = START
    assert absolute_deadline(None, None, now) is None
    assert absolute_deadline(None, 30.0, now) == now + 30
    assert absolute_deadline(MAX_SECONDS, None, now) == now + MAX_SECONDS
    assert absolute_deadline(_FloatNaN(2.5), None, now) == now + 2.5  # the value, not __float__
    assert absolute_deadline(timedelta(minutes=2), 30.0, now) == now + 120
    zone = timezone(timedelta(hours=5))
    at = datetime.fromtimestamp(now + 90, zone)
    assert absolute_deadline(at, 30.0, now) == pytest.approx(now + 90)
    assert declared_seconds(timedelta(hours=1), "Ok") == 3600.0
    assert declared_seconds(7, "Ok") == 7.0


def test_async_start_stores_the_deadline_and_a_finished_run_schedules_no_timer() -> None:
    with TestEnvironment(start=START) as env:
        trivial = _trivial([])
        at = datetime.fromtimestamp(START + 300, UTC)
        out = asyncio.run(trivial.aexecute({}, deadline=at))
        assert isinstance(out, Success)
        assert run_view(out).deadline == pytest.approx(START + 300)
        out = asyncio.run(trivial.arun(deadline=timedelta(seconds=20)))
        assert run_view(out).deadline == pytest.approx(START + 20)
        assert env.pending_jobs() == []


# ============================================================================ where it passes


class _Journal:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.lock = threading.Lock()

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def count(self, event: str) -> int:
        return self.events.count(event)


def test_defect_a_callers_lock_wait_runs_past_the_deadline() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        other = _held_elsewhere(env, "ledger", ttl=10_000)

        class Ledger(Reactor):
            coordination = with_lock(key="ledger", ttl=30, wait=120)

            @step()
            def post(inputs: Any, ctx: Any) -> str:
                journal.add("run post")
                return "p"

        out = Ledger.run(deadline=60)
        assert isinstance(out, Failure)
        assert other.held_by_me()  # the other owner's lock is untouched
        assert journal.events == []  # no step ran (holds today too)
        assert env.clock.now() - START <= 60, env.clock.now() - START
        assert out.exception_class == EXCEEDED, out.exception_class


def test_a_deadline_during_a_worker_retry_wait_cuts_the_retry_and_rolls_back() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Parcel(Reactor):
            background = Background(all=True)

            @step()
            def pack(inputs: Any, ctx: Any) -> str:
                journal.add("run pack")
                return "p"

            @pack.undo
            def unpack(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo pack")

            @step(wait_for=["pack"],
                  retries=Retries(max_attempts=10, backoff="fixed", base_delay=40))
            def label(inputs: Any, ctx: Any) -> str:
                journal.add(f"label#{ctx.attempt}@{env.clock.now() - START:.0f}")
                raise RuntimeError("printer jammed")

            @label.compensate
            def unlabel(error: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"compensate label {type(error).__name__}")

        handle = Parcel.run(deadline=100)
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        _assert_stopped_by_deadline(handle)
        failure = run_view(handle).failure
        assert failure is not None and "printer jammed" in failure.message
        assert env.clock.now() - START <= 100  # never later than its deadline
    # 0, 40, 80; the retry at 120 would pass the deadline: not waited for
    assert journal.events == ["run pack", "label#1@0", "label#2@40", "label#3@80",
                              "compensate label RunDeadlineExceeded", "undo pack"]


def test_a_run_parked_on_a_lock_another_owner_holds_comes_back_at_its_deadline() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        other = Lock(env.storage.locks, "acct:1", owner="another-run", ttl=10_000,
                     auto_extend=False, clock=env.clock)
        assert other.try_acquire()

        class Transfer(Reactor):
            background = Background(all=True)

            @step()
            def debit(inputs: Any, ctx: Any) -> str:
                journal.add("run debit")
                return "d"

            @debit.undo
            def refund(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo debit")

            @step(wait_for=["debit"], coordination=with_lock(key="acct:1", ttl=30))
            def credit(inputs: Any, ctx: Any) -> str:
                journal.add("run credit")
                return "c"

        handle = Transfer.run(deadline=100)
        env.run_until_idle()
        _assert_stopped_by_deadline(handle)
        assert env.clock.now() - START == pytest.approx(100)  # parks cut to end at it
        assert other.held_by_me()
        trace = [(e.type, e.step) for e in run_view(handle).trace]
    assert journal.events == ["run debit", "undo debit"]
    assert trace.count(("deadline", None)) == 1
    assert trace[-1] == ("undo", "debit")


def test_a_paused_run_resumed_after_its_deadline_rolls_back_and_the_timer_changes_nothing(
    manual: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = manual
    journal = _Journal()

    class Approval(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.add("run reserve")
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo reserve")

        gate = interrupt(wait_for="reserve")

        @step(wait_for=["gate"])
        def ship(inputs: Any, ctx: Any) -> str:
            journal.add("run ship")
            return "s"

    paused = Approval.run(deadline=60)
    assert isinstance(paused, Paused)
    clock.advance(61)  # nobody ran its timer yet
    out = Approval.resume(paused.run_id, payload={"approved": True})
    assert isinstance(out, Failure) and out.exception_class == EXCEEDED
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1  # the timer: a no-op now
    _assert_stopped_by_deadline(paused)
    with pytest.raises(RunFinishedError):
        Approval.cancel(paused.run_id)
    assert journal.events == ["run reserve", "undo reserve"]


def test_defect_a_cancel_after_the_deadline_passed_ends_the_run_cancelled(
    manual: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = manual
    journal = _Journal()

    class Approval(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.add("run reserve")
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo reserve")

        gate = interrupt(wait_for="reserve")

    paused = Approval.run(deadline=60)
    assert isinstance(paused, Paused)
    clock.advance(120)  # the deadline passed; its timer job waits in a busy queue
    # docs: "a Reactor.cancel after the deadline passed finds a failed run
    # (RunFinishedError)": the deadline, which came first, decides
    try:
        Approval.cancel(paused.run_id, reason="customer left")
    except RunFinishedError:
        pass
    Worker(runtime, liveness_wait=0.0).run_pending()
    assert journal.events == ["run reserve", "undo reserve"]
    _assert_stopped_by_deadline(paused)


def test_a_cancel_recorded_before_the_deadline_is_noticed_wins() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Order(Reactor):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                journal.add("run reserve")
                return "r"

            @reserve.undo
            def release(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo reserve")

            @step(wait_for=["reserve"])
            def charge(inputs: Any, ctx: Any) -> str:
                journal.add("run charge")
                # a cancel lands, then the deadline passes, before the boundary
                handle = Order.cancel(ctx.run_id, reason="customer left")
                assert isinstance(handle, DispatchHandle)  # this execution carries it out
                env.clock.advance(120)
                return "c"

            @charge.undo
            def refund(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo charge")

            @charge.compensate
            def void(error: Any, inputs: Any, ctx: Any) -> None:
                journal.add("compensate charge")

            @step(wait_for=["charge"])
            def ship(inputs: Any, ctx: Any) -> str:
                journal.add("run ship")
                return "s"

        out = Order.run(deadline=60)
        assert isinstance(out, Failure) and out.exception_class == CANCELLED
        view = run_view(out)
        assert view.status is RunStatus.CANCELLED
        assert view.cancel is not None and view.cancel.cause is None
        env.run_until_idle()
        assert run_view(out).status is RunStatus.CANCELLED  # the timer changed nothing
    assert "run ship" not in journal.events
    assert journal.count("undo reserve") == 1
    assert journal.count("undo charge") + journal.count("compensate charge") == 1


def test_concurrent_branches_in_flight_finish_are_undone_and_nothing_more_starts() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        both = threading.Barrier(2, timeout=10)

        class Fork(Reactor):
            max_concurrency = 3

            @step()
            def left(inputs: Any, ctx: Any) -> str:
                journal.add("run left")
                both.wait()
                env.clock.advance(100)  # the deadline passes while both branches run
                return "l"

            @left.undo
            def undo_left(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo left")

            @step()
            def right(inputs: Any, ctx: Any) -> str:
                both.wait()
                journal.add("run right")
                return "r"

            @right.undo
            def undo_right(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo right")

            @step(wait_for=["left", "right"])
            def join(inputs: Any, ctx: Any) -> str:
                journal.add("run join")
                return "j"

        out = Fork.run(deadline=50)
        _assert_stopped_by_deadline(out)
    assert "run join" not in journal.events
    assert journal.count("undo left") == 1 and journal.count("undo right") == 1


def test_an_async_reactor_child_the_run_waits_for_is_stopped_with_it() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Kid(Reactor):
            @step()
            def hold(inputs: Any, ctx: Any) -> str:
                journal.add("run hold")
                return "h"

            @hold.undo
            def unhold(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo hold")

            gate = interrupt(wait_for="hold")

            @step(wait_for=["gate"])
            def finish(inputs: Any, ctx: Any) -> str:
                journal.add("run finish")
                return "f"

        class Parent(Reactor):
            background = Background(all=True)

            @step()
            def open_(inputs: Any, ctx: Any) -> str:
                journal.add("run open")
                return "o"

            @open_.undo
            def close(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo open")

            kid = async_reactor(Kid, wait_for=["open_"])

        handle = Parent.run(deadline=60)
        env.run_until_idle()
        _assert_stopped_by_deadline(handle)
        child = run_view(child_run_id(handle.run_id, "kid"))
        assert child.status is RunStatus.FAILED
        assert env.clock.now() - START == pytest.approx(60)
    assert "run finish" not in journal.events
    assert journal.count("undo hold") == 1 and journal.count("undo open") == 1
    assert journal.events.index("undo hold") < journal.events.index("undo open")


def test_a_fan_out_map_stops_dispatching_at_the_deadline_and_its_elements_are_undone() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Pick(Reactor):
            x = Input(int)

            @step(x=input("x"), retries=Retries(max_attempts=2, backoff="fixed", base_delay=20))
            def pick(inputs: Any, ctx: Any) -> int:
                journal.add(f"pick {inputs.x}#{ctx.attempt}")
                if ctx.attempt == 1:
                    raise RuntimeError("scanner busy")
                return inputs.x

            @pick.undo
            def put_back(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"undo {inputs.x}")

        class Wave(Reactor):
            items = Input(list)

            @step()
            def open_(inputs: Any, ctx: Any) -> str:
                journal.add("run open")
                return "o"

            @open_.undo
            def close(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo open")

            picks = map_step(Pick, source=input("items"), args={"x": element("picks")},
                             fan_out=FanOut(batch_size=2), wait_for=["open_"])

            @step(wait_for=["picks"])
            def seal(inputs: Any, ctx: Any) -> str:
                journal.add("run seal")
                return "s"

        handle = Wave.run(items=[1, 2, 3, 4, 5, 6], deadline=10)
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        _assert_stopped_by_deadline(handle)
    # Element 1's retry would start after the deadline: cut, it fails at once (the element
    # carries its root's deadline), the atomic map stops, and element 2, whose job comes
    # after it, never starts (it used to start at 20 s, past the 10 s deadline)
    assert journal.events == ["run open", "pick 1#1", "undo open"]


def test_a_retry_inside_a_composed_child_is_cut_by_the_root_deadline() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Child(Reactor):
            @step(retries=Retries(max_attempts=10, backoff="fixed", base_delay=30))
            def call(inputs: Any, ctx: Any) -> str:
                journal.add(f"call#{ctx.attempt}")
                raise RuntimeError("down")

        class Parent(Reactor):
            @step()
            def first(inputs: Any, ctx: Any) -> str:
                journal.add("run first")
                return "f"

            @first.undo
            def undo_first(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo first")

            child = compose(Child, wait_for=["first"])

        out = Parent.run(deadline=70)
        _assert_stopped_by_deadline(out)
        assert env.clock.now() - START == pytest.approx(60)
    assert journal.events == ["run first", "call#1", "call#2", "call#3", "undo first"]


def test_defect_a_composed_child_starts_steps_after_the_deadline() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Child(Reactor):
            @step()
            def c1(inputs: Any, ctx: Any) -> str:
                journal.add("run c1")
                env.clock.advance(100)  # the run's deadline passes here
                return "1"

            @c1.undo
            def undo_c1(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo c1")

            @step(wait_for=["c1"])
            def c2(inputs: Any, ctx: Any) -> str:
                journal.add("run c2")  # e.g. a charge: must not start after the deadline
                return "2"

            @c2.undo
            def undo_c2(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo c2")

        class Parent(Reactor):
            child = compose(Child)

        out = Parent.run(deadline=50)
        _assert_stopped_by_deadline(out)
    assert "run c2" not in journal.events
    assert journal.events == ["run c1", "undo c1"]


def test_defect_inline_map_elements_start_after_the_deadline() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Pick(Reactor):
            x = Input(int)

            @step(x=input("x"))
            def pick(inputs: Any, ctx: Any) -> int:
                journal.add(f"pick {inputs.x}")
                env.clock.advance(100)
                return inputs.x

            @pick.undo
            def put_back(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"undo {inputs.x}")

        class Wave(Reactor):
            items = Input(list)
            picks = map_step(Pick, source=input("items"), args={"x": element("picks")})

        out = Wave.run(items=[1, 2, 3, 4], deadline=50)
        _assert_stopped_by_deadline(out)
    assert journal.events == ["pick 1", "undo 1"]


def test_a_composed_run_past_its_deadline_is_undone_once_everywhere() -> None:
    # what holds today, whatever the child ran: one undo per completed step, newest first
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Child(Reactor):
            @step()
            def c1(inputs: Any, ctx: Any) -> str:
                journal.add("run c1")
                env.clock.advance(100)
                return "1"

            @c1.undo
            def undo_c1(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo c1")

        class Parent(Reactor):
            @step()
            def p1(inputs: Any, ctx: Any) -> str:
                journal.add("run p1")
                return "p"

            @p1.undo
            def undo_p1(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo p1")

            child = compose(Child, wait_for=["p1"])

            @step(wait_for=["child"])
            def p2(inputs: Any, ctx: Any) -> str:
                journal.add("run p2")
                return "p2"

        out = Parent.run(deadline=50)
        _assert_stopped_by_deadline(out)
    assert journal.events == ["run p1", "run c1", "undo c1", "undo p1"]


# ============================================================================ after it passed


def _approval(journal: _Journal, *, class_deadline: float | None = None) -> type[Reactor]:
    class Approval(Reactor):
        deadline = class_deadline

        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.add("run reserve")
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo reserve")

        gate = interrupt(wait_for="reserve")

    return Approval


def test_retry_of_a_deadline_failed_run_gets_the_class_deadline_afresh_with_its_timer() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        approval = _approval(journal, class_deadline=60)
        first = approval.run()
        env.run_until_idle()
        _assert_stopped_by_deadline(first)
        again = approval.retry(first.run_id)
        assert isinstance(again, Paused) and again.run_id != first.run_id
        assert run_view(again).deadline == pytest.approx(env.clock.now() + 60)
        assert [job.kind for job in env.pending_jobs()] == ["run_deadline"]
        env.run_until_idle()
        _assert_stopped_by_deadline(again)
    assert journal.events == ["run reserve", "undo reserve"] * 2


def test_retry_of_a_run_whose_deadline_was_given_at_start_has_none() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        approval = _approval(journal)
        first = approval.run(deadline=60)
        env.run_until_idle()
        _assert_stopped_by_deadline(first)
        again = approval.retry(first.run_id)
        assert isinstance(again, Paused)
        assert run_view(again).deadline is None
        assert env.pending_jobs() == []


def test_undo_of_a_deadline_failed_run_undoes_nothing_twice() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        approval = _approval(journal)
        first = approval.run(deadline=60)
        env.run_until_idle()
        approval.undo(first.run_id)
        approval.undo(first.run_id)
        _assert_stopped_by_deadline(first)
        assert run_view(first).undo_stack == ()
    assert journal.events == ["run reserve", "undo reserve"]


def test_an_idempotency_key_answers_with_the_first_runs_deadline_outcome() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Slow(Reactor):
            @step()
            def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                env.clock.advance(100)
                return "a"

            @step(wait_for=["a"])
            def b(inputs: Any, ctx: Any) -> str:
                journal.add("run b")
                return "b"

        first = Slow.run(idempotency_key="order-1", deadline=50)
        again = Slow.run(idempotency_key="order-1", deadline=5000)
        plain = Slow.run(idempotency_key="order-1")
        assert isinstance(first, Failure) and first.exception_class == EXCEEDED
        for other in (again, plain):
            assert isinstance(other, Failure) and other.run_id == first.run_id
        assert run_view(first).deadline == pytest.approx(START + 50)
    assert journal.events == ["run a"]


# ============================================================================ crash


def _checkout(journal: _Journal, env: TestEnvironment, faults: list[Any], on_call: int
              ) -> type[Reactor]:
    """reserve -> charge -> ship (the deadline passes in it) -> notify; the compensate of
    ship arms a fault on the ``on_call``-th step checkpoint from there, once."""

    class Checkout(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.add("run reserve")
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo reserve")

        @step(wait_for=["reserve"])
        def charge(inputs: Any, ctx: Any) -> str:
            journal.add("run charge")
            return "c"

        @charge.undo
        def refund(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo charge")

        @step(wait_for=["charge"])
        def ship(inputs: Any, ctx: Any) -> str:
            journal.add("run ship")
            env.clock.advance(100)  # the deadline passes in this step
            return "s"

        @ship.undo
        def unship(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo ship")

        @ship.compensate
        def recall(error: Any, inputs: Any, ctx: Any) -> None:
            journal.add("compensate ship")
            if not faults:  # the deadline's rollback started: a checkpoint of it fails
                faults.append(env.storage_fails(method="contexts.append", on_call=on_call))

        @step(wait_for=["ship"])
        def notify(inputs: Any, ctx: Any) -> str:
            journal.add("run notify")
            return "n"

    return Checkout


@pytest.mark.parametrize("on_call", [1, 2, 3], ids=["compensate", "first-undo", "last-undo"])
def test_a_checkpoint_failing_in_the_deadline_rollback_resumes_it_and_ends_failed(
    on_call: int,
) -> None:
    # 1: the checkpoint after the compensate of the step in flight fails; 2, 3: the one
    # popping the first, the last undo. The recovered execution finishes the rollback: only
    # the entry in flight at the failure repeats (docs/concepts.md, "Rollback": an
    # interrupted rollback repeats the undo in flight), every other runs exactly once.
    journal = _Journal()
    faults: list[Any] = []
    with TestEnvironment(start=START) as env:
        checkout = _checkout(journal, env, faults, on_call)
        with pytest.raises(StorageError) as caught:
            checkout.run(deadline=50)
        run_id = caught.value.run_id
        assert run_id is not None
        assert faults and faults[0].raised == 1
        faults[0].remove()
        assert run_view(run_id).status is RunStatus.RUNNING
        env.clock.advance(env.settings.context_lock_ttl + 1)  # the dead holder's lock lapses
        env.sweep()
        env.run_until_idle()
        _assert_stopped_by_deadline(run_id)
        view = run_view(run_id)
        assert view.undo_stack == ()
        assert [e.type for e in view.trace].count("deadline") == 1
    assert "run notify" not in journal.events and "undo ship" not in journal.events
    rollback = [e for e in journal.events if not e.startswith("run ")]
    in_flight = ["compensate ship", "undo charge", "undo reserve"][on_call - 1]
    expected = ["compensate ship", "undo charge", "undo reserve"]
    expected.insert(on_call, in_flight)  # repeated once, right after its first run
    assert rollback == expected


# ============================================================================ without one


def test_a_reactor_without_a_deadline_stores_and_schedules_nothing_new() -> None:
    with TestEnvironment(start=START) as env:
        class Plain(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=10_000))
            def a(inputs: Any, ctx: Any) -> str:
                if ctx.attempt < 3:
                    raise RuntimeError("later")
                return "a"

            gate = interrupt(wait_for="a")

        handle = Plain.run()
        assert [job.kind for job in env.pending_jobs()] == ["run"]  # no run_deadline job
        env.run_until_idle()
        view = run_view(handle)
        assert view.status is RunStatus.PAUSED and view.deadline is None
        assert env.clock.now() - START == pytest.approx(20_000)  # retry delays not cut
        stored = load_context(make_env(env.runtime), handle.run_id)
        assert stored is not None
        assert "deadline" not in stored.engine_state.to_json()  # private_data as before
        assert env.pending_jobs() == []


def test_stored_documents_without_the_new_keys_load() -> None:
    state = EngineState.from_json({})
    assert state.deadline is None and state.cancel is None
    assert state.to_json() == {}  # nothing new written for a run without a deadline
    request = CancelRequest.from_json({"reason": "old", "rollback": True, "requested_at": 5})
    assert request.cause is None
    assert request.to_json() == {"reason": "old", "rollback": True, "requested_at": 5.0}
    assert CancelRequest.decode(request.encode()) == request


# ============================================================================ total + deadline


def test_total_spent_is_kept_across_worker_retries_and_the_deadline_still_decides() -> None:
    attempts: list[int] = []
    with TestEnvironment(start=START) as env:
        class Gateway(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=10, backoff="fixed", base_delay=30),
                  timeouts=Timeouts(total=75))
            def call(inputs: Any, ctx: Any) -> str:
                attempts.append(ctx.attempt)
                raise RuntimeError("down")

        limited = Gateway.run(deadline=3600)
        env.run_until_idle()
        view = run_view(limited)
        assert view.status is RunStatus.FAILED
        assert view.failure is not None
        assert view.failure.exception_class == "reactor.errors.StepTimeout"
        # 0, 30, 60; the fourth would start at 90 with 75 s used up
        assert attempts == [1, 2, 3]
        assert StepTimeout.__name__ in view.failure.exception_class

        attempts.clear()
        stopped = Gateway.run(deadline=45)
        env.run_until_idle()
        _assert_stopped_by_deadline(stopped)
        assert attempts == [1, 2]  # 0, 30; 60 would pass the deadline (45)
        failure = run_view(stopped).failure
        assert failure is not None and isinstance(failure.exception_class, str)
        assert RunDeadlineExceeded.__name__ in failure.exception_class


@pytest.mark.parametrize("stored", [math.nan, math.inf, -math.inf])
def test_defect_a_stored_non_finite_deadline_is_accepted(stored: float) -> None:
    from reactor.errors import DeserializationError

    try:
        state = EngineState.from_json({"deadline": stored})
    except DeserializationError:
        return
    raise AssertionError(f"a stored deadline of {state.deadline!r} was accepted")


@pytest.mark.parametrize("concurrency", [1, 2])
@pytest.mark.parametrize("composed", [True, False], ids=["composed", "own-step"])
def test_total_spans_worker_retries_inside_a_composed_child_and_a_branch(
    concurrency: int, composed: bool,
) -> None:
    attempts: list[tuple[int, float]] = []
    with TestEnvironment(start=START) as env:
        limited = step(retries=Retries(max_attempts=10, backoff="fixed", base_delay=30),
                       timeouts=Timeouts(total=75))

        def failing(inputs: Any, ctx: Any) -> str:
            attempts.append((ctx.attempt, env.clock.now() - START))
            raise RuntimeError("down")

        class Child(Reactor):
            call = limited(failing)

        class Parent(Reactor):
            background = Background(all=True)
            max_concurrency = concurrency

            @step()
            def other(inputs: Any, ctx: Any) -> str:
                return "o"

            if composed:
                kid = compose(Child)
            else:
                call = limited(failing)

        assert Parent.definition.max_concurrency == concurrency
        handle = Parent.run()
        env.run_until_idle()
        view = run_view(handle)
        assert view.status is RunStatus.FAILED
        assert view.failure is not None
        assert view.failure.exception_class == "reactor.errors.StepTimeout"
    assert attempts == [(1, 0.0), (2, 30.0), (3, 60.0)]


# ============================================================================ precedence


def test_a_step_failing_or_halting_at_the_deadline_boundary_ends_the_run_as_it_would() -> None:
    # as for a cancel (docs/run-control.md, "Step boundaries"): a failure or a halt settled
    # with the deadline decides the run's end
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Failing(Reactor):
            @step()
            def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                return "a"

            @a.undo
            def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo a")

            @step(wait_for=["a"])
            def b(inputs: Any, ctx: Any) -> str:
                journal.add("run b")
                env.clock.advance(100)
                raise RuntimeError("boom")

            @b.compensate
            def comp_b(error: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"compensate b {type(error).__name__}")

        out = Failing.run(deadline=50)
        assert isinstance(out, Failure) and out.exception_class == "RuntimeError"
        assert journal.events == ["run a", "run b", "compensate b RuntimeError", "undo a"]
        assert env.pending_jobs() == []


def test_a_deadline_passing_during_the_rollback_of_a_failure_keeps_the_failure() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Slow(Reactor):
            @step()
            def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                return "a"

            @a.undo
            def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo a")
                env.clock.advance(100)

            @step(wait_for=["a"])
            def a2(inputs: Any, ctx: Any) -> str:
                journal.add("run a2")
                return "a2"

            @a2.undo
            def undo_a2(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo a2")
                env.clock.advance(100)  # the deadline passes mid-rollback

            @step(wait_for=["a2"])
            def b(inputs: Any, ctx: Any) -> str:
                raise RuntimeError("boom")

        out = Slow.run(deadline=50)
        assert isinstance(out, Failure) and out.exception_class == "RuntimeError"
        view = run_view(out)
        assert view.status is RunStatus.FAILED and view.cancel is None
    assert journal.events == ["run a", "run a2", "undo a2", "undo a"]


@pytest.mark.parametrize("on_call", [1, 2, 3], ids=["first-undo", "last-undo", "final-save"])
def test_the_timer_jobs_rollback_resumes_after_a_failed_checkpoint(on_call: int) -> None:
    journal = _Journal()
    faults: list[Any] = []
    with TestEnvironment(start=START) as env:
        class Approval(Reactor):
            @step()
            def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                return "a"

            @a.undo
            def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo a")

            @step(wait_for=["a"])
            def b(inputs: Any, ctx: Any) -> str:
                journal.add("run b")
                return "b"

            @b.undo
            def undo_b(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo b")
                if not faults:  # the timer's rollback started: a checkpoint of it fails
                    faults.append(env.storage_fails(method="contexts.append", on_call=on_call))

            gate = interrupt(wait_for="b")

        paused = Approval.run(deadline=60)
        env.run_until_idle()  # the timer job fails once, the worker retries it
        assert faults and faults[0].raised == 1
        _assert_stopped_by_deadline(paused)
        assert run_view(paused).undo_stack == ()
        assert env.dead_letters() == []
    repeated = {1: ["undo b"], 2: ["undo a"], 3: []}[on_call]
    expected = ["run a", "run b", "undo b", "undo a"]
    for event in repeated:
        expected.insert(expected.index(event) + 1, event)
    assert journal.events == expected


# ============================================================================ parks after it


def _held_elsewhere(env: TestEnvironment, key: str, ttl: float) -> Lock:
    other = Lock(env.storage.locks, key, owner="another-run", ttl=ttl, auto_extend=False,
                 clock=env.clock)
    assert other.try_acquire()
    return other


def test_defect_a_rollback_parked_after_a_retry_cut_by_the_deadline_spins() -> None:
    # The deadline cut a retry: the step failed with RunDeadlineExceeded, and the rollback's
    # undo waits for a lock another run holds for 300 s. capped_delay cut every park of that
    # rollback to 0 s once the deadline had passed: the run was re-enqueued at once, over and
    # over (hundreds of jobs, saves and trace entries per second of the lock's hold), where
    # a rollback parks at lock_snooze_base_delay + jitter (docs/coordination.md, "Rollback").
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Transfer(Reactor):
            background = Background(all=True)

            @step(coordination=with_lock(key="acct:9", ttl=30))
            def debit(inputs: Any, ctx: Any) -> str:
                journal.add("run debit")
                return "d"

            @debit.undo
            def refund(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"undo debit@{env.clock.now() - START:.0f}")

            @step(wait_for=["debit"],
                  retries=Retries(max_attempts=3, backoff="fixed", base_delay=30))
            def notify(inputs: Any, ctx: Any) -> str:
                journal.add(f"notify#{ctx.attempt}")
                raise RuntimeError("mail server down")

        handle = Transfer.run(deadline=45)
        env.run_pending()  # debit, notify#1; its retry is queued for 30 s
        _held_elsewhere(env, "acct:9", ttl=300)
        env.run_until_idle(max_jobs=300)  # the lock frees at 300 s: ~60 parks at most
        _assert_stopped_by_deadline(handle)
        parks = [e for e in run_view(handle).trace if e.type == "contention_park"]
        assert 1 <= len(parks) <= 80
    assert journal.events[:3] == ["run debit", "notify#1", "notify#2"]
    assert journal.count("run debit") == 1 and len(journal.events) == 4
    assert journal.events[-1].startswith("undo debit@") and int(journal.events[-1][11:]) >= 300


def test_defect_the_timer_job_skips_an_undo_whose_lock_another_run_holds() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Hold(Reactor):
            @step(coordination=with_lock(key="acct:1", ttl=30))
            def debit(inputs: Any, ctx: Any) -> str:
                journal.add("run debit")
                return "d"

            @debit.undo
            def refund(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo debit")

            gate = interrupt(wait_for="debit")

        paused = Hold.run(deadline=45)
        assert isinstance(paused, Paused)
        _held_elsewhere(env, "acct:1", ttl=300)  # another run holds it for a while
        env.run_until_idle(max_jobs=300)
        _assert_stopped_by_deadline(paused)
        failure = run_view(paused).failure
        assert failure is not None
        assert not failure.rollback_failures, failure.rollback_failures
    assert journal.events == ["run debit", "undo debit"]  # never left standing


def test_defect_an_async_reactor_childs_class_deadline_is_ignored() -> None:
    with TestEnvironment(start=START) as env:
        class Kid(Reactor):
            deadline = 30

            @step()
            def hold(inputs: Any, ctx: Any) -> str:
                return "h"

            gate = interrupt(wait_for="hold")

        class Parent(Reactor):
            background = Background(all=True)
            kid = async_reactor(Kid)

        handle = Parent.run()
        env.run_pending()
        child = child_run_id(handle.run_id, "kid")
        assert run_view(child).status is RunStatus.PAUSED
        assert run_view(child).deadline == pytest.approx(START + 30)
        env.run_until_idle(max_seconds=3600)
        _assert_stopped_by_deadline(child)


def test_an_aborted_run_past_its_deadline_is_finished_by_undo_as_without_one() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Aborting(Reactor):
            @step()
            def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                return "a"

            @a.undo
            def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo a")

            @step(wait_for=["a"])
            def b(inputs: Any, ctx: Any) -> str:
                journal.add("run b")
                raise KeyboardInterrupt

            @b.compensate
            def comp_b(error: Any, inputs: Any, ctx: Any) -> None:
                journal.add("compensate b")

        with pytest.raises(KeyboardInterrupt) as caught:
            Aborting.run(deadline=50)
        run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
        assert run_view(run_id).status is RunStatus.ABORTED
        assert env.pending_jobs() == []  # it raised: no timer
        env.clock.advance(100)
        assert isinstance(Aborting.undo(run_id), Success)
        assert Aborting.find(run_id).undo_stack == ()
    assert journal.events == ["run a", "run b", "compensate b", "undo a"]


def test_an_async_body_past_the_deadline_under_arun_stops_the_run() -> None:
    journal = _Journal()
    with TestEnvironment(start=START) as env:
        class Remote(Reactor):
            @step()
            async def call(inputs: Any, ctx: Any) -> str:
                journal.add("run call")
                await asyncio.sleep(0)
                env.clock.advance(100)
                return "c"

            @call.undo
            async def uncall(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo call")

            @call.compensate
            async def void(error: Any, inputs: Any, ctx: Any) -> None:
                journal.add("compensate call")

            @step(wait_for=["call"])
            async def after(inputs: Any, ctx: Any) -> str:
                journal.add("run after")
                return "a"

        out = asyncio.run(Remote.arun(deadline=50))
        _assert_stopped_by_deadline(out)
    assert journal.events[0] == "run call" and "run after" not in journal.events
    assert journal.events[1:] in (["compensate call"], ["undo call"])
