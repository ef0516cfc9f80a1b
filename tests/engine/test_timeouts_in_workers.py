"""A step's ``total`` time limit in a worker, on every backend (docs/concepts.md, "Time
limits"; docs/workers.md, "Decisions"; reactor/engine/step_runner.py).

A worker does not wait for a retry: it re-enqueues the run. The time the step used of its
``total`` (its attempts, and each retry wait counted as its declared delay) is kept in the
run's ``retry_context`` (``"spent": {step: seconds}``) with the save that hands the retry to
the queue, so the next execution, on any worker, goes on from it; the kept figure is dropped
when the step ends. Before, each execution counted ``total`` afresh and ``total`` never ended
a worker's retries (these tests fail on that code: every attempt of ``max_attempts`` ran).

A remote router's delays are real time: the retry waits here are 0.2 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, Retries, Timeouts, config
from reactor.config import Runtime
from reactor.dsl import step
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.jobs.worker import Worker
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on

#: A retry's declared delay (seconds).
_WAIT = 0.2
#: Seconds of real time a test gives its run to end (never reached when it works).
_MEET = 60.0


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[tuple[Runtime, TestClock]]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="timeouts"), clock
    config.reset()


def _work_until(runtime: Runtime, clock: TestClock, done: Callable[[], bool]) -> int:
    """Run due jobs until ``done()``, moving the test clock past each retry's delay (the
    memory router's delays are on it; a remote router's are real time). Returns the passes."""
    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + _MEET
    passes = 0
    while not done():
        worker.run_pending()
        passes += 1
        clock.advance(_WAIT)
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.01 if done() else _WAIT / 4)
    return passes


def test_total_spans_the_executions_of_a_worker_retry(
    runtime_on: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = runtime_on
    attempts: list[int] = []
    kept: list[float] = []

    class Charged(Reactor):
        background = Background(all=True)

        # 0.5 s of total: 0.2 s waits after attempts 1, 2 and 3 use it up (0.6 s), so
        # attempt 4 fails with StepTimeout without running; max_attempts allows 6.
        @step(timeouts=Timeouts(total=0.5),
              retries=Retries(max_attempts=6, backoff="fixed", base_delay=_WAIT))
        def charge(inputs: Any, ctx: Any) -> None:
            attempts.append(ctx.attempt)
            raise RuntimeError("gateway down")

    handle = Charged.run()
    assert isinstance(handle, DispatchHandle)
    run_id = handle.run_id
    env = make_env(runtime)

    def done() -> bool:
        stored = load_context(env, run_id, open_secrets=False)
        assert stored is not None
        spent = stored.time_spent("charge")
        if spent and (not kept or kept[-1] != spent):
            kept.append(spent)
        return stored.status in TERMINAL_STATUSES

    _work_until(runtime, clock, done)
    view = Charged.find(run_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.StepTimeout", view.failure.message
    assert "total" in view.failure.message
    assert attempts == [1, 2, 3]
    # each hand-off to the queue kept the time used so far, the wait counted as declared
    assert [round(k, 6) for k in kept] == [0.2, 0.4, 0.6]
    stored = load_context(env, run_id, open_secrets=False)
    assert stored is not None and stored.retry_context.spent is None  # dropped at the end


def test_a_step_that_succeeds_within_total_drops_what_it_kept(
    runtime_on: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = runtime_on
    attempts: list[int] = []

    class Flaky(Reactor):
        background = Background(all=True)

        @step(timeouts=Timeouts(total=30),
              retries=Retries(max_attempts=3, backoff="fixed", base_delay=_WAIT))
        def charge(inputs: Any, ctx: Any) -> str:
            attempts.append(ctx.attempt)
            if ctx.attempt < 2:
                raise RuntimeError("gateway down")
            return "charged"

        @step(wait_for=["charge"])
        def ship(inputs: Any, ctx: Any) -> str:
            return "shipped"

    handle = Flaky.run()
    assert isinstance(handle, DispatchHandle)
    env = make_env(runtime)

    def done() -> bool:
        stored = load_context(env, handle.run_id, open_secrets=False)
        return stored is not None and stored.status in TERMINAL_STATUSES

    _work_until(runtime, clock, done)
    stored = load_context(env, handle.run_id, open_secrets=False)
    assert stored is not None and stored.status is RunStatus.COMPLETED
    assert attempts == [1, 2]
    assert stored.retry_context.spent is None
    assert "spent" not in stored.retry_context.to_stored()
