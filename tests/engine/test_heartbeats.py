"""Step heartbeats (docs/concepts.md, "Heartbeats"; reactor/model/heartbeats.py,
reactor/engine/invoke.py, reactor/engine/coroutines.py, reactor/engine/step_runner.py).

``ctx.heartbeat(details)`` says a long body is alive; a step declared
``Timeouts(heartbeat=...)`` fails its attempt with ``StepTimeout`` (``limit == "heartbeat"``)
when its body goes that long without one, and the next attempt reads the last details as
``ctx.last_heartbeat`` — in this execution, or after a worker handed the retry to the queue
(kept in ``retry_context``). A body that must go silent waits on an event nobody sets before
its heartbeat limit (a fraction of a second of real time): the timeout is certain.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import (
    Background,
    DispatchHandle,
    Reactor,
    Retries,
    Step,
    StepTimeout,
    Timeouts,
    config,
)
from reactor.config import Runtime
from reactor.dsl import step
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.errors import DefinitionError
from reactor.jobs.worker import Worker
from reactor.model.heartbeats import Heartbeats, LastHeartbeat
from reactor.model.results import Failure, Success
from reactor.model.run_records import RetryCounters
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.model.step_context import StepContext
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on

#: The heartbeat limit of a body that must go silent (seconds of real time).
_BEAT = 0.1
#: How long a test waits for something that must happen (never reached when it works).
_MEET = 10.0


def test_a_heartbeat_limit_must_be_positive_finite_seconds() -> None:
    for bad in (0, -1.0, float("nan"), True, "5"):
        with pytest.raises(DefinitionError, match=r"Timeouts\.heartbeat"):
            Timeouts(heartbeat=bad)
    assert Timeouts(heartbeat=5).heartbeat == 5.0  # a heartbeat limit alone is a limit


def test_heartbeats_keep_a_long_plain_body_alive_past_its_heartbeat_limit() -> None:
    beats: list[int] = []

    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT * 3))
        def copy(inputs: Any, ctx: Any) -> int:
            began = time.monotonic()
            n = 0
            while time.monotonic() - began < _BEAT * 6:  # twice its heartbeat limit
                n += 1
                ctx.heartbeat({"copied": n})
                beats.append(n)
                time.sleep(_BEAT / 4)
            return n

    out = Copy.run()
    assert isinstance(out, Success), out
    assert out.value["copy"] == beats[-1] > 1


def test_a_silent_plain_body_times_out_and_the_retry_resumes_from_its_last_heartbeat() -> None:
    hang = threading.Event()
    seen: list[Any] = []

    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT),
              retries=Retries(max_attempts=2, backoff="fixed", base_delay=0))
        def copy(inputs: Any, ctx: Any) -> str:
            last = ctx.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if ctx.attempt == 1:
                ctx.heartbeat({"offset": 40})
                hang.wait(_MEET)  # goes silent: no heartbeat for longer than _BEAT
                return "late"
            return f"resumed at {last.details['offset']}"

    try:
        began = time.monotonic()
        out = Copy.run()
        took = time.monotonic() - began
    finally:
        hang.set()
    assert isinstance(out, Success), out
    assert out.value["copy"] == "resumed at 40"
    assert seen == [None, ({"offset": 40}, 1)]
    assert took < _MEET / 2  # the silence, not the hang, ended attempt 1


def test_the_heartbeat_timeout_is_a_step_timeout_naming_the_heartbeat() -> None:
    hang = threading.Event()

    class Silent(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT, per_attempt=_MEET))
        def call(inputs: Any, ctx: Any) -> None:
            hang.wait(_MEET)

    try:
        out = Silent.run()
    finally:
        hang.set()
    assert isinstance(out, Failure)
    assert isinstance(out.error, StepTimeout)
    assert (out.error.limit, out.error.seconds, out.error.attempt) == ("heartbeat", _BEAT, 1)
    assert "without a heartbeat" in out.message and out.is_retryable


def test_heartbeats_never_extend_the_per_attempt_limit() -> None:
    stop = threading.Event()

    class Chatty(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT, per_attempt=_BEAT * 3))
        def call(inputs: Any, ctx: Any) -> None:
            while not stop.wait(_BEAT / 5):
                ctx.heartbeat()

    try:
        out = Chatty.run()
    finally:
        stop.set()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "per_attempt"


def test_an_async_body_is_kept_alive_by_heartbeats_and_cancelled_when_silent() -> None:
    cancelled: list[str] = []

    class AsyncCopy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT * 3))
        async def alive(inputs: Any, ctx: Any) -> str:
            for n in range(12):  # 12 x _BEAT/2: twice its heartbeat limit
                ctx.heartbeat(n)
                await asyncio.sleep(_BEAT / 2)
            return "done"

        @step(wait_for=["alive"], timeouts=Timeouts(heartbeat=_BEAT))
        async def silent(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat("started")
            try:
                await asyncio.sleep(_MEET)
            except asyncio.CancelledError:
                cancelled.append("silent")
                raise
            return "late"

    out = AsyncCopy.run()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "heartbeat" and out.step_name == "silent"
    assert cancelled == ["silent"]
    assert AsyncCopy.find(out.run_id).results["alive"] == "done"  # type: ignore[arg-type]


def test_a_heartbeat_outside_a_run_body_does_nothing() -> None:
    undone: list[Any] = []

    class Order(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat("a")  # no heartbeat limit: kept for a retry, harmless
            return "a"

        @a.undo
        def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            ctx.heartbeat("undo")  # no heartbeats object: nothing happens
            undone.append(ctx.last_heartbeat)

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("no")

    out = Order.run()
    assert isinstance(out, Failure)
    assert undone == [None]

    class Probe(Step):
        def run(self) -> str:
            self.context.heartbeat("outside the engine")
            return "ok"

    called = Probe.call({}, StepContext(run_id="r-1", reactor="probe", step="probe"))
    assert isinstance(called, Success) and called.value == "ok"


def test_the_heartbeat_record_is_thread_safe_and_dates_each_attempt() -> None:
    now = [100.0]
    beats = Heartbeats(LastHeartbeat("kept", 5.0, 1), monotonic=lambda: now[0],
                       wall=lambda: 1700000000.0)
    assert beats.start(2) == LastHeartbeat("kept", 5.0, 1)
    assert beats.due(10) == 110.0
    now[0] = 104.0
    beats.beat({"offset": 3})
    assert beats.due(10) == 114.0
    assert beats.last == LastHeartbeat({"offset": 3}, 1700000000.0, 2)


def test_kept_heartbeats_round_trip_and_bad_ones_are_refused() -> None:
    shape = {"attempts": {"copy": 1},
             "heartbeats": {"copy": {"details": {"offset": 40}, "at": 1700000000.5,
                                     "attempt": 1}}}
    counters = RetryCounters.from_stored(shape)
    assert counters.heartbeat_of("copy") == LastHeartbeat({"offset": 40}, 1700000000.5, 1)
    assert counters.to_stored() == shape
    assert counters.with_heartbeat("copy", None).to_stored() == {"attempts": {"copy": 1}}
    from reactor.errors import DeserializationError

    for bad in ({"heartbeats": [1]}, {"heartbeats": {"copy": 1}},
                {"heartbeats": {"copy": {"at": "x", "attempt": 1}}},
                {"heartbeats": {"copy": {"at": 1.0, "attempt": True}}}):
        with pytest.raises(DeserializationError, match="heartbeats"):
            RetryCounters.from_stored(bad)


# ----------------------------------------------------------------------------- in a worker


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[tuple[Runtime, TestClock]]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="heartbeats"), clock
    config.reset()


def test_a_retry_handed_to_the_queue_reads_the_last_heartbeat_on_every_backend(
    runtime_on: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = runtime_on
    seen: list[Any] = []

    class Export(Reactor):
        background = Background(all=True)

        @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=0.2))
        def export(inputs: Any, ctx: Any) -> str:
            last = ctx.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if ctx.attempt == 1:
                ctx.heartbeat({"page": 7})
                ctx.heartbeat({"page": 8, "unstorable": object()})  # kept without details
                ctx.heartbeat({"page": 9})
                raise RuntimeError("the export API dropped the connection")
            return f"resumed at page {last.details['page']}"

    handle = Export.run()
    assert isinstance(handle, DispatchHandle)
    env = make_env(runtime)
    kept: list[Any] = []

    def done() -> bool:
        stored = load_context(env, handle.run_id, open_secrets=False)
        assert stored is not None
        last = stored.kept_heartbeat("export")
        if last is not None and not kept:
            kept.append(last.details)
        return stored.status in TERMINAL_STATUSES

    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + 60
    while not done():
        worker.run_pending()
        clock.advance(0.2)
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.05)
    stored = load_context(env, handle.run_id, open_secrets=False)
    assert stored is not None and stored.status is RunStatus.COMPLETED
    assert stored.intermediate_results["export"] == "resumed at page 9"
    assert seen == [None, ({"page": 9}, 1)]
    assert kept == [{"page": 9}]  # what the hand-off stored
    assert stored.kept_heartbeat("export") is None  # dropped when the step ended
