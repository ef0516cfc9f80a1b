"""An outside attack on step time limits (docs/concepts.md, "Time limits";
reactor/dsl/timeouts.py, reactor/engine/invoke.py, reactor/engine/coroutines.py,
reactor/engine/step_runner.py, reactor/engine/body_threads.py).

Tests named ``test_defect_...`` demonstrate a defect the attack found: each fails on 9fffbd3 (the
version attacked) and passes on the fixed one. The others pin what held under attack.

A body that must time out waits on an event nobody sets before the limit (``_SHORT`` seconds of
real time); a test waiting for something that must happen polls with a deadline (``_MEET``)
and unblocks what it started before it fails, so the session goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import functools
import logging
import math
import pickle
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from reactor import Background, Reactor, Retries, Step, StepTimeout, Timeouts, with_lock
from reactor.coordination import Lock, registry
from reactor.dsl import step
from reactor.engine import body_threads, coroutines
from reactor.errors import DefinitionError
from reactor.model.results import Failure, Halt, Success
from reactor.model.signals import fail, halt, skip, succeed
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment
from tests.engine.coordination_helpers import manual_runtime
from tests.fake_clock import FakeClock

#: The limit of a body that must time out (seconds of real time).
_SHORT = 0.05
#: How long a test waits for something that must happen (never reached when it works).
_MEET = 10.0
#: The longest limit a field may declare (reactor.dsl.timeouts.MAX_SECONDS): 30 days.
_MAX = 30 * 24 * 3600

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("attack_var", default="unset")


def _until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail after :data:`_MEET` seconds."""
    deadline = time.monotonic() + _MEET
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def _value(out: object) -> Any:
    """The value of a run that must have succeeded."""
    assert isinstance(out, Success), out
    return out.value


def _run_id(out: object) -> str:
    """The run id of a result or a background hand-off."""
    run_id = getattr(out, "run_id", None)
    assert isinstance(run_id, str), out
    return run_id


def _discarded(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "discarded" in r.getMessage()]


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    yield
    registry.clear()


# ----------------------------------------------------------------------------- declarations


class _LyingInt(int):
    """An int that claims to be above 0 and converts to a negative float."""

    def __le__(self, other: object) -> bool:
        return False

    def __float__(self) -> float:
        return -1.0


class _LyingFloat(float):
    def __le__(self, other: object) -> bool:
        return False

    def __float__(self) -> float:
        return -5.0


class _Seconds(enum.IntEnum):
    THREE = 3


_HOSTILE: list[Any] = [
    0, -1, -0.0, 1e-320 * -1, math.nan, math.inf, -math.inf, True, False, "5", b"5",
    Decimal("5"), Decimal("NaN"), Fraction(1, 2), complex(1, 0), [1], object(),
]
#: Finite and positive, but longer than a thread can wait: 9fffbd3 accepted them, and a plain
#: step under one made ``Reactor.run`` raise ``OverflowError``; an int beyond any float made
#: the declaration raise ``OverflowError``. The fix caps a limit at 30 days on every platform
#: (Windows threads wait at most about 49.7 days), so 60 days is refused as well.
_HUGE: list[Any] = [_MAX * 2, 1e20, 1e300, 2**63, 10**400, 10**5000]


@pytest.mark.parametrize("field", ["per_attempt", "total"])
@pytest.mark.parametrize("value", _HOSTILE, ids=repr)
def test_a_hostile_limit_is_a_definition_error_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(DefinitionError, match=rf"Timeouts\.{field}"):
        Timeouts(**{field: value})


@pytest.mark.parametrize("field", ["per_attempt", "total"])
@pytest.mark.parametrize(
    "value", _HUGE, ids=["60-days", "1e20", "1e300", "2**63", "10**400", "10**5000"]
)
def test_defect_a_huge_limit_is_a_definition_error_naming_the_field(
    field: str, value: Any
) -> None:
    """9fffbd3: ``Timeouts(per_attempt=1e20)`` was accepted, and a plain step under it made
    ``Reactor.run`` raise ``OverflowError`` (a thread wait cannot be that long);
    ``Timeouts(total=10**400)`` raised ``OverflowError`` instead of a DefinitionError."""
    with pytest.raises(DefinitionError, match=rf"Timeouts\.{field}"):
        Timeouts(**{field: value})


@pytest.mark.parametrize("field", ["per_attempt", "total"])
@pytest.mark.parametrize("value", [_LyingInt(-1), _LyingFloat(-1.0)], ids=["int", "float"])
def test_defect_a_number_subclass_cannot_slip_a_negative_limit_through(
    field: str, value: Any
) -> None:
    """9fffbd3 compared the value with its own (overridable) ``<=`` and converted it with its
    own ``__float__``: ``Timeouts(per_attempt=_LyingInt(-1))`` was ``per_attempt=-1.0``."""
    with pytest.raises(DefinitionError, match=rf"Timeouts\.{field}"):
        Timeouts(**{field: value})


def test_accepted_limits_are_plain_floats() -> None:
    assert Timeouts(per_attempt=_Seconds.THREE).per_attempt == 3.0
    assert type(Timeouts(per_attempt=_Seconds.THREE).per_attempt) is float
    assert Timeouts(total=_MAX).total == float(_MAX)
    assert Timeouts(per_attempt=1, total=2) == Timeouts(per_attempt=1.0, total=2.0)


def test_numpy_numbers_follow_their_python_type() -> None:
    np = pytest.importorskip("numpy")
    assert Timeouts(per_attempt=np.float64(1.5)).per_attempt == 1.5  # a float subclass
    for bad in (np.float64("nan"), np.float64(-1.0), np.int64(3), np.bool_(True)):
        with pytest.raises(DefinitionError, match=r"Timeouts\.total"):
            Timeouts(total=bad)


def test_no_limit_and_transactional_steps_are_refused() -> None:
    with pytest.raises(DefinitionError, match="no limit"):
        Timeouts()
    with pytest.raises(DefinitionError, match="no limit"):
        Timeouts(per_attempt=None, total=None)

    class Write(Step):
        transaction = True
        timeouts = Timeouts(per_attempt=1)

        def run(self) -> None:
            return None

    with pytest.raises(DefinitionError, match="transactional step cannot declare timeouts"):
        step(Write)

    class Plain(Step):
        timeouts = Timeouts(per_attempt=1)

        def run(self) -> None:
            return None

    with pytest.raises(DefinitionError, match="transactional step cannot declare timeouts"):
        step(Plain, transaction=True)
    assert step(Write, transaction=False).timeouts == Timeouts(per_attempt=1)


def test_the_longest_limit_runs_plain_and_async_bodies() -> None:
    class Long(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MAX, total=_MAX))
        def plain(inputs: Any, ctx: Any) -> int:
            return 1

        @step(timeouts=Timeouts(per_attempt=_MAX))
        async def later(inputs: Any, ctx: Any) -> int:
            return 2

    assert _value(Long.run()) == {"plain": 1, "later": 2}


# ----------------------------------------------------------------------------- plain bodies


def _signalling(timeouts: Timeouts | None) -> type[Reactor]:
    kw: dict[str, Any] = {} if timeouts is None else {"timeouts": timeouts}

    class Signals(Reactor):
        @step(**kw)
        def skipped(inputs: Any, ctx: Any) -> None:
            skip("nothing to do")

        @step(wait_for=["skipped"], **kw)
        def early(inputs: Any, ctx: Any) -> None:
            succeed("early")

        @step(wait_for=["early"], **kw)
        def seen(inputs: Any, ctx: Any) -> Any:
            return (_VAR.get(), ctx.step, ctx.attempt, dict(ctx.results),
                    threading.current_thread().name)

        @step(wait_for=["seen"], **kw)
        def stop(inputs: Any, ctx: Any) -> None:
            halt("enough")

    return Signals


@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
def test_signals_context_variables_and_ctx_behave_as_without_a_limit(timed: bool) -> None:
    signals = _signalling(Timeouts(per_attempt=_MEET) if timed else None)
    token = _VAR.set("set before the run")
    try:
        out = signals.run()
    finally:
        _VAR.reset(token)
    assert isinstance(out, Halt) and out.reason == "enough" and out.step_name == "stop"
    results = signals.find(_run_id(out)).results
    assert results["skipped"] == "nothing to do" and results["early"] == "early"
    var, name, attempt, earlier, thread = results["seen"]
    assert (var, name, attempt) == ("set before the run", "seen", 1)
    assert earlier == {"skipped": "nothing to do", "early": "early"}
    assert thread.startswith("reactor-step-body") is timed


@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
def test_fail_signal_stops_retries_as_without_a_limit(timed: bool) -> None:
    attempts: list[int] = []
    kw: dict[str, Any] = {"timeouts": Timeouts(per_attempt=_MEET)} if timed else {}

    class Refused(Reactor):
        @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=1), **kw)
        def call(inputs: Any, ctx: Any) -> None:
            attempts.append(ctx.attempt)
            fail("card declined", retryable=False)

    out = Refused.run()
    assert isinstance(out, Failure) and out.error == "card declined" and not out.retryable
    assert attempts == [1]


@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_an_interruption_aborts_the_run_as_without_a_limit(
    timed: bool, interruption: type[BaseException]
) -> None:
    events: list[str] = []
    kw: dict[str, Any] = {"timeouts": Timeouts(per_attempt=_MEET)} if timed else {}

    class Interrupted(Reactor):
        @step(**kw)
        def first(inputs: Any, ctx: Any) -> int:
            return 1

        @first.undo
        def undo_first(value: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo first")

        @step(wait_for=["first"], **kw)
        def boom(inputs: Any, ctx: Any) -> None:
            raise interruption()

    with pytest.raises(interruption) as raised:
        Interrupted.run()
    run_id = raised.value.reactor_run_id  # type: ignore[attr-defined]
    assert Interrupted.find(run_id).status is RunStatus.ABORTED
    assert events == []  # no rollback: Reactor.undo finishes it
    Interrupted.undo(run_id)
    assert events == ["undo first"]


def test_a_body_setting_a_context_variable_does_not_change_later_steps() -> None:
    """Documented: a timed plain body runs in a copy of the caller's context variables (as an
    async body does), so what it sets stays in it."""
    class Setter(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MEET))
        def sets(inputs: Any, ctx: Any) -> None:
            _VAR.set("set in a timed body")

        @step(wait_for=["sets"])
        def reads(inputs: Any, ctx: Any) -> str:
            return _VAR.get()

        returns = "reads"

    assert _value(Setter.run()) == "unset"


def test_the_late_result_of_attempt_1_never_reaches_attempt_2_or_the_undo(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Attempt 1 hangs past its limit; attempt 2 releases it and waits until its late result
    was discarded before it returns its own. Only attempt 2's result is recorded and undone."""
    caplog.set_level(logging.WARNING, logger="reactor.engine")
    release = threading.Event()
    undone: list[Any] = []
    compensated: list[Any] = []

    class Twice(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT),
              retries=Retries(max_attempts=2, backoff="fixed", base_delay=1))
        def call(inputs: Any, ctx: Any) -> str:
            if ctx.attempt == 1:
                release.wait(_MEET)
                return "attempt 1, late"
            release.set()
            _until(lambda: bool(_discarded(caplog)), "attempt 1's late result discarded")
            return "attempt 2"

        @call.undo
        def undo_call(value: Any, inputs: Any, ctx: Any) -> None:
            undone.append(value)

        @call.compensate
        def compensate_call(error: Any, inputs: Any, ctx: Any) -> None:
            compensated.append(error)

        @step(wait_for=["call"])
        def after(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("fails after call")

    try:
        out = Twice.run()
    finally:
        release.set()
    assert isinstance(out, Failure) and out.step_name == "after", out
    assert undone == ["attempt 2"] and compensated == []
    assert "attempt 1" in _discarded(caplog)[0]
    assert Twice.find(out.run_id).results == {"call": "attempt 2"}  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- total


def test_total_trims_an_attempt_and_is_not_retried() -> None:
    attempts: list[int] = []
    hang = threading.Event()

    class Trimmed(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MEET, total=_SHORT),
              retries=Retries(max_attempts=5, backoff="fixed", base_delay=1))
        def call(inputs: Any, ctx: Any) -> None:
            attempts.append(ctx.attempt)
            hang.wait(_MEET)

    try:
        out = Trimmed.run()
    finally:
        hang.set()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout"
    assert "total limit" in out.message and not out.retryable
    assert attempts == [1]


def test_defect_total_does_not_count_a_step_lock_wait(fake_clock: FakeClock) -> None:
    """docs/concepts.md: the limit covers the body only, not a step-level lock wait. 9fffbd3
    counted ``total`` on the clock from before the first attempt's lock wait, so 10 s waited
    for the lock used up a 5 s total: attempt 2 (after a 1 s retry wait) failed with
    StepTimeout(total) without running."""
    _, storage = manual_runtime(fake_clock)
    intruder = Lock(storage.locks, "card:1", owner="intruder", auto_extend=False)
    assert intruder.try_acquire()

    def free_after_ten(seconds: float) -> None:
        if fake_clock.elapsed >= 10 and not freed:
            freed.append(True)
            intruder.release()

    freed: list[bool] = []
    fake_clock.on_sleep = free_after_ten
    attempts: list[int] = []

    class Locked(Reactor):
        @step(coordination=with_lock(key="card:1", wait=60), timeouts=Timeouts(total=5),
              retries=Retries(max_attempts=2, backoff="fixed", base_delay=1))
        def charge(inputs: Any, ctx: Any) -> str:
            attempts.append(ctx.attempt)
            if ctx.attempt == 1:
                raise RuntimeError("gateway down")
            return "charged"

        returns = "charge"

    out = Locked.run()
    assert fake_clock.slept >= 11  # 10 s for the lock, 1 s of retry wait
    assert isinstance(out, Success) and out.value == "charged", out
    assert attempts == [1, 2]


# ----------------------------------------------------------------------------- async bodies


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a cancelled async body is given to end before the engine stops waiting."""
    monkeypatch.setattr(coroutines, "_CANCEL_GRACE", _SHORT)


def test_defect_an_async_body_that_catches_the_cancellation_and_returns_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """9fffbd3 recorded ``Success("after the limit")``: the attempt ran past its limit, yet a
    body catching ``CancelledError`` and returning was recorded as a success."""
    caplog.set_level(logging.WARNING, logger="reactor.engine")
    events: list[str] = []

    class Stubborn(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                events.append("cancelled")
            return "after the limit"

        @charge.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate: {type(error).__name__}")

    out = Stubborn.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out
    assert events == ["cancelled", "compensate: StepTimeout"]
    assert Stubborn.find(out.run_id).status is RunStatus.FAILED  # type: ignore[arg-type]
    assert any("(Success) is discarded" in m for m in _discarded(caplog))


def test_defect_an_async_body_raising_its_own_error_once_cancelled_still_timed_out() -> None:
    """9fffbd3 failed the step with the body's ``ValueError``: what it raised after it was
    cancelled at its limit replaced the StepTimeout (and hid the timeout from the retry
    policy and the compensate)."""
    class Cleanup(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise ValueError("cleanup failed") from None
            return "never"

    out = Cleanup.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out


@pytest.mark.usefixtures("short_grace")
def test_defect_an_async_body_ignoring_its_cancellation_is_not_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """9fffbd3 waited for the body as long as it ran (here until the test released it) and
    then recorded its value: the engine must stop waiting at the limit (plus the grace)."""
    caplog.set_level(logging.WARNING, logger="reactor.engine")
    release = threading.Event()
    returned = threading.Event()

    class Ignores(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.to_thread(release.wait, _MEET)  # keeps going
            returned.set()
            return "very late"

    result: list[Any] = []
    runner = threading.Thread(target=lambda: result.append(Ignores.run()), daemon=True)
    runner.start()
    try:
        runner.join(_MEET / 2)
        assert not runner.is_alive(), "the engine still waits for the cancelled body"
    finally:
        release.set()
    out = result[0]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out
    assert returned.wait(_MEET)
    _until(lambda: bool(_discarded(caplog)), "the late value logged as discarded")
    assert Ignores.find(out.run_id).status is RunStatus.FAILED  # type: ignore[arg-type]


@pytest.mark.usefixtures("short_grace")
def test_defect_an_async_body_blocking_its_loop_times_out() -> None:
    """A synchronous wait inside an ``async def`` body keeps its loop from expiring the
    limit. 9fffbd3 waited for it, then recorded ``Success("blocked")`` long past the limit."""
    release = threading.Event()

    class Blocking(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            release.wait(_MEET)  # blocks the loop: the mistake being attacked
            return "blocked"

    result: list[Any] = []
    runner = threading.Thread(target=lambda: result.append(Blocking.run()), daemon=True)
    runner.start()
    try:
        runner.join(_MEET / 2)
        assert not runner.is_alive(), "the engine still waits for the blocking body"
    finally:
        release.set()
    out = result[0]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out


def test_defect_an_async_body_blocking_its_loop_past_the_limit_is_not_a_success() -> None:
    """Ended within the grace, but past its limit: still a StepTimeout (the loop never got to
    expire the limit while the body held it). 9fffbd3 recorded ``Success("blocked")``."""
    class Blocking(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            threading.Event().wait(_SHORT * 3)  # blocks the loop past the limit, then ends
            return "blocked"

    out = Blocking.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out


def _traced(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """A plain decorator (as tracing and retry libraries write them): the decorated
    ``async def`` is no longer a coroutine function, it returns a coroutine."""
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


def test_defect_a_decorated_async_body_is_cancelled_at_its_limit() -> None:
    """9fffbd3 ran a plain function returning a coroutine on a body thread and awaited the
    coroutine there without a limit: the step failed with StepTimeout, but the body was never
    cancelled and went on after its compensate (docs: an async body is cancelled at its
    limit, a ``finally`` runs)."""
    events: list[str] = []

    @_traced
    async def charge(inputs: Any, ctx: Any) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return "never"

    class Decorated(Reactor):
        pay = step(charge, timeouts=Timeouts(per_attempt=_SHORT))

        @pay.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate: {type(error).__name__}")

    out = Decorated.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out
    assert events == ["cancelled", "compensate: StepTimeout"]


def test_a_decorated_async_body_within_its_limit_is_unaffected() -> None:
    @_traced
    async def charge(inputs: Any, ctx: Any) -> str:
        await asyncio.sleep(0)
        return "charged"

    class Decorated(Reactor):
        pay = step(charge, timeouts=Timeouts(per_attempt=_MEET))
        returns = "pay"

    assert _value(Decorated.run()) == "charged"


def test_an_async_bodys_timeout_error_after_its_cancellation_is_a_step_timeout() -> None:
    class Converts(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def call(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise TimeoutError("client timeout") from None
            return "never"

    out = Converts.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out


def test_an_async_body_interrupted_after_its_cancellation_still_aborts() -> None:
    class Interrupted(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def call(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise KeyboardInterrupt from None
            return "never"

    with pytest.raises(KeyboardInterrupt) as raised:
        Interrupted.run()
    run_id = raised.value.reactor_run_id  # type: ignore[attr-defined]
    assert Interrupted.find(run_id).status is RunStatus.ABORTED


def test_defect_arun_with_a_stubborn_async_body_times_out_on_the_callers_loop() -> None:
    """The same defect under ``await Reactor.arun``: 9fffbd3 recorded ``Success("swallowed")``."""
    loops: list[asyncio.AbstractEventLoop] = []

    class Stubborn(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def call(inputs: Any, ctx: Any) -> str:
            loops.append(asyncio.get_running_loop())
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return "swallowed"
            return "never"

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        return await Stubborn.arun(), asyncio.get_running_loop()

    out, loop = asyncio.run(main())
    assert loops == [loop]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout", out


# ----------------------------------------------------------------------------- body threads


def test_fifty_hung_bodies_do_not_delay_a_fresh_one() -> None:
    release = threading.Event()
    hung: list[str] = []
    lock = threading.Lock()

    def hang() -> None:
        with lock:
            hung.append(threading.current_thread().name + f"#{threading.get_ident()}")
        release.wait(_MEET)

    try:
        for _ in range(50):
            body_threads.submit(hang)
        _until(lambda: len(hung) == 50, "50 bodies hanging")

        class Fresh(Reactor):
            @step(timeouts=Timeouts(per_attempt=_MEET / 2))
            def call(inputs: Any, ctx: Any) -> str:
                return threading.current_thread().name + f"#{threading.get_ident()}"

            returns = "call"

        out = Fresh.run()
        assert isinstance(out, Success), out
        assert out.value not in hung
    finally:
        release.set()


def test_an_idle_body_thread_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body_threads, "IDLE_SECONDS", _SHORT)
    ran_on: list[threading.Thread] = []

    class Once(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MEET))
        def call(inputs: Any, ctx: Any) -> None:
            ran_on.append(threading.current_thread())

    _value(Once.run())
    _until(lambda: not ran_on[0].is_alive(), "the idle body thread ended")
    with body_threads._lock:
        assert ran_on[0] not in body_threads._idle


def test_a_thousand_timed_steps_leak_no_thread() -> None:
    class Ten(Reactor):
        s0 = step(lambda inputs, ctx: 0, timeouts=Timeouts(per_attempt=_MEET))
        s1 = step(lambda inputs, ctx: 1, wait_for=["s0"], timeouts=Timeouts(per_attempt=_MEET))
        s2 = step(lambda inputs, ctx: 2, wait_for=["s1"], timeouts=Timeouts(total=_MEET))
        s3 = step(lambda inputs, ctx: 3, wait_for=["s2"], timeouts=Timeouts(per_attempt=_MEET))
        s4 = step(lambda inputs, ctx: 4, wait_for=["s3"], timeouts=Timeouts(per_attempt=_MEET))
        s5 = step(lambda inputs, ctx: 5, wait_for=["s4"], timeouts=Timeouts(per_attempt=_MEET))
        s6 = step(lambda inputs, ctx: 6, wait_for=["s5"], timeouts=Timeouts(per_attempt=_MEET))
        s7 = step(lambda inputs, ctx: 7, wait_for=["s6"], timeouts=Timeouts(per_attempt=_MEET))
        s8 = step(lambda inputs, ctx: 8, wait_for=["s7"], timeouts=Timeouts(per_attempt=_MEET))
        s9 = step(lambda inputs, ctx: 9, wait_for=["s8"], timeouts=Timeouts(per_attempt=_MEET))

    _value(Ten.run())  # warm: the threads a run needs exist
    before = threading.active_count()
    for _ in range(100):
        _value(Ten.run())
    assert threading.active_count() <= before + 2


# ----------------------------------------------------------------------------- concurrency


def test_a_timed_out_branch_fails_the_run_and_its_siblings_settle() -> None:
    events: list[str] = []
    hang = threading.Event()
    lock = threading.Lock()

    def log(event: str) -> None:
        with lock:
            events.append(event)

    class Checkout(Reactor):
        max_concurrency = 3

        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            log("reserve")
            return "held"

        @reserve.undo
        def unreserve(value: Any, inputs: Any, ctx: Any) -> None:
            log("undo reserve")

        @step(timeouts=Timeouts(per_attempt=_SHORT))
        def authorise(inputs: Any, ctx: Any) -> str:
            hang.wait(_MEET)
            return "late"

        @authorise.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            log(f"compensate authorise: {type(error).__name__}")

        @step(timeouts=Timeouts(per_attempt=_MEET))
        async def fraud(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(0)
            log("fraud")
            return "ok"

        @fraud.undo
        def unfraud(value: Any, inputs: Any, ctx: Any) -> None:
            log("undo fraud")

        @step(wait_for=["reserve", "authorise", "fraud"])
        def confirm(inputs: Any, ctx: Any) -> str:
            log("confirm")
            return "confirmed"

    try:
        out = Checkout.run()
    finally:
        hang.set()
    assert isinstance(out, Failure) and out.step_name == "authorise", out
    assert out.exception_class == "reactor.errors.StepTimeout"
    assert "confirm" not in events
    assert "compensate authorise: StepTimeout" in events
    assert sorted(e for e in events if e.startswith("undo")) == ["undo fraud", "undo reserve"]
    view = Checkout.find(out.run_id)  # type: ignore[arg-type]
    assert view.status is RunStatus.FAILED and "authorise" not in view.results


# ----------------------------------------------------------------------------- workers


def test_in_a_worker_a_timed_out_step_fails_the_run_and_rolls_back() -> None:
    events: list[str] = []
    hang = threading.Event()

    class Worked(Reactor):
        background = Background(all=True)

        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            return "held"

        @reserve.undo
        def unreserve(value: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo reserve")

        @step(wait_for=["reserve"], timeouts=Timeouts(per_attempt=_SHORT))
        def charge(inputs: Any, ctx: Any) -> str:
            hang.wait(_MEET)
            return "late"

        @charge.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate charge: {type(error).__name__}")

    try:
        with TestEnvironment() as env:
            handle = Worked.run()
            env.run_until_idle()
            view = Worked.find(_run_id(handle))
    finally:
        hang.set()
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.StepTimeout"
    assert events == ["compensate charge: StepTimeout", "undo reserve"]


# ----------------------------------------------------------------------------- stored failure


def test_a_stored_step_timeout_reads_back_with_its_class_and_message() -> None:
    hang = threading.Event()

    class Stored(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT, total=_MEET))
        def call(inputs: Any, ctx: Any) -> None:
            hang.wait(_MEET)

    try:
        out = Stored.run()
    finally:
        hang.set()
    assert isinstance(out, Failure)
    failure = Stored.find(out.run_id).failure  # type: ignore[arg-type]
    assert failure is not None
    assert failure.exception_class == "reactor.errors.StepTimeout"
    assert failure.message == out.message == (
        "step 'call' attempt 1 ran past its per-attempt limit of 0.05s"
    )
    assert failure.retryable and failure.step_name == "call"


def test_step_timeout_rebuilds_from_its_message_and_pickles_whole() -> None:
    assert str(StepTimeout("x")) == "x" and StepTimeout("x").limit == "per_attempt"
    error = StepTimeout("m", step_name="s", limit="total", seconds=2.5, attempt=3)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is StepTimeout and str(copy) == "m"
    assert (copy.step_name, copy.limit, copy.seconds, copy.attempt, copy.retryable) == (
        "s", "total", 2.5, 3, False
    )
