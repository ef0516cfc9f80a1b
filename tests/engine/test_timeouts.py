"""Step time limits (docs/concepts.md, "Time limits"; reactor/dsl/timeouts.py,
reactor/engine/invoke.py): ``Timeouts(per_attempt=..., total=...)`` on a ``Step`` class or
``step(..., timeouts=)``; an attempt past its limit fails with ``StepTimeout``, the retry
policy applies, and a step that finally fails is compensated and the run rolled back.

A body that must time out waits on an event nobody sets before the limit: the timeout is
certain, only its length (tens of milliseconds of real time) is spent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from typing import Any

import pytest

from reactor import Retries, Step, StepTimeout, Timeouts
from reactor.dsl import step
from reactor.errors import DefinitionError
from reactor.facade import Reactor
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus

#: The limit of a body that must time out (seconds of real time).
_SHORT = 0.05
#: How long a test waits for something that must happen (never reached when it works).
_MEET = 10.0


# ----------------------------------------------------------------------------- declaration


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"per_attempt": 0}, "per_attempt"), ({"per_attempt": -1}, "per_attempt"),
    ({"per_attempt": math.nan}, "per_attempt"), ({"per_attempt": math.inf}, "per_attempt"),
    ({"per_attempt": True}, "per_attempt"), ({"per_attempt": "5"}, "per_attempt"),
    ({"total": 0.0}, "total"), ({"total": -math.inf}, "total"), ({"total": [1]}, "total"),
])
def test_a_limit_must_be_finite_positive_seconds(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(DefinitionError, match=f"Timeouts.{field}"):
        Timeouts(**kwargs)


def test_timeouts_without_a_limit_is_refused() -> None:
    with pytest.raises(DefinitionError, match="no limit"):
        Timeouts()


def test_timeouts_must_be_a_timeouts() -> None:
    with pytest.raises(DefinitionError, match="timeouts= must be a Timeouts"):
        step(timeouts=5)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="timeouts must be a Timeouts"):
        class Bad(Step):
            timeouts = 5  # type: ignore[assignment]


def test_a_transactional_step_cannot_declare_timeouts() -> None:
    with pytest.raises(DefinitionError, match="transactional step cannot declare timeouts"):
        @step(transaction=True, timeouts=Timeouts(per_attempt=1))
        def write(inputs: Any, ctx: Any) -> None:
            return None


def test_the_step_option_overrides_the_class_attribute() -> None:
    class Slow(Step):
        timeouts = Timeouts(per_attempt=5)

        def run(self) -> int:
            return 1

    assert step(Slow).timeouts == Timeouts(per_attempt=5)
    assert step(Slow, timeouts=Timeouts(total=9)).timeouts == Timeouts(total=9)


def test_the_tighter_limit_applies() -> None:
    both = Timeouts(per_attempt=10, total=25)
    assert both.limit(0) == (10, "per_attempt")
    assert both.limit(20) == (5, "total")
    assert both.limit(30) == (0, "total")
    assert Timeouts(total=5).limit(1) == (4, "total")


# ----------------------------------------------------------------------------- sync bodies


def test_a_hung_plain_step_fails_with_step_timeout_and_the_run_rolls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    release = threading.Event()
    returned = threading.Event()

    class Order(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            return "held"

        @reserve.undo
        def release_stock(value: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo reserve")

        @step(wait_for=["reserve"], timeouts=Timeouts(per_attempt=_SHORT))
        def charge(inputs: Any, ctx: Any) -> str:
            release.wait(_MEET)
            returned.set()
            return "charged late"

        @charge.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate charge: {type(error).__name__}")

    caplog.set_level(logging.WARNING, logger="reactor.engine")
    out = Order.run()
    assert isinstance(out, Failure) and out.step_name == "charge", out
    assert out.exception_class == "reactor.errors.StepTimeout"
    assert "per-attempt limit" in out.message and out.retryable  # the policy decides
    assert events == ["compensate charge: StepTimeout", "undo reserve"]
    # the body is still running: released now, its late result is discarded and logged
    release.set()
    assert returned.wait(_MEET)
    deadline = time.monotonic() + _MEET
    while not any("discarded" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the late result was never logged"
        time.sleep(0.01)
    view = Order.find(out.run_id)  # type: ignore[arg-type]
    assert view.status is RunStatus.FAILED and "charge" not in view.results


def test_a_step_within_its_limit_is_unaffected() -> None:
    class Quick(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MEET, total=_MEET))
        def fast(inputs: Any, ctx: Any) -> int:
            return 7

        @step(timeouts=Timeouts(per_attempt=_MEET))
        def failing(inputs: Any, ctx: Any) -> int:
            raise ValueError("not a timeout")

    out = Quick.run()
    assert isinstance(out, Failure) and out.exception_class == "ValueError", out
    assert out.step_name == "failing"
    assert Quick.find(out.run_id).results == {"fast": 7}  # type: ignore[arg-type]


def test_a_timed_out_attempt_is_retried_per_the_policy() -> None:
    attempts: list[int] = []
    hang = threading.Event()

    class Flaky(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT),
              retries=Retries(max_attempts=3, backoff="fixed", base_delay=1))
        def call(inputs: Any, ctx: Any) -> int:
            attempts.append(ctx.attempt)
            if ctx.attempt < 3:
                hang.wait(_MEET)  # attempts 1 and 2 hang past the limit
            return ctx.attempt

        returns = "call"

    try:
        out = Flaky.run()
    finally:
        hang.set()
    assert isinstance(out, Success) and out.value == 3, out
    assert attempts == [1, 2, 3]
    retries = [e for e in Flaky.find(out.run_id).trace if e.type == "retry"]  # type: ignore[arg-type]
    assert [e.attempt for e in retries] == [1, 2]
    assert all("per-attempt limit" in (e.detail or "") for e in retries)


def test_total_covers_the_retry_waits_and_is_not_retried(sleeps: list[float]) -> None:
    attempts: list[int] = []

    class Bounded(Reactor):
        @step(timeouts=Timeouts(total=25),
              retries=Retries(max_attempts=9, backoff="fixed", base_delay=10))
        def call(inputs: Any, ctx: Any) -> int:
            attempts.append(ctx.attempt)
            raise RuntimeError("down")

    out = Bounded.run()
    # attempts at 0, 10 and 20 s (the fake clock moves with each retry wait); at 30 s nothing
    # of the 25 s is left: the fourth attempt fails with StepTimeout, without running
    assert attempts == [1, 2, 3]
    assert sleeps == [10, 10, 10]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout"
    assert "total limit" in out.message and not out.retryable


# ----------------------------------------------------------------------------- async bodies


def test_a_hung_async_step_is_cancelled_at_its_limit() -> None:
    seen: list[str] = []

    class AsyncOrder(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def charge(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.Event().wait()  # never set
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            return "never"

        @charge.compensate
        def void(error: Any, inputs: Any, ctx: Any) -> None:
            seen.append(f"compensate: {type(error).__name__}")

    out = AsyncOrder.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout"
    assert seen == ["cancelled", "compensate: StepTimeout"]


def test_an_async_bodys_own_timeout_error_is_not_a_step_timeout() -> None:
    class OwnTimeout(Reactor):
        @step(timeouts=Timeouts(per_attempt=_MEET))
        async def call(inputs: Any, ctx: Any) -> str:
            raise TimeoutError("the carrier's API timed out")

    out = OwnTimeout.run()
    assert isinstance(out, Failure) and out.exception_class == "TimeoutError", out


def test_arun_cancels_a_hung_async_step_on_the_callers_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    class AsyncHang(Reactor):
        @step(timeouts=Timeouts(per_attempt=_SHORT))
        async def call(inputs: Any, ctx: Any) -> str:
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(_MEET)
            return "late"

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        return await AsyncHang.arun(), asyncio.get_running_loop()

    out, loop = asyncio.run(main())
    assert loops == [loop]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.StepTimeout"


def test_step_timeout_is_exported_and_is_a_timeout_error() -> None:
    error = StepTimeout("x", step_name="s", limit="total", seconds=2.0, attempt=3)
    assert isinstance(error, TimeoutError)
    assert (error.step_name, error.limit, error.seconds, error.attempt) == ("s", "total", 2.0, 3)
    assert error.retryable is False
    assert StepTimeout("y").retryable is True
