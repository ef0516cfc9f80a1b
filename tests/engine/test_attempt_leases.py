"""A time-limited step's leases in a worker (docs/concepts.md, "Time limits", "Heartbeats";
reactor/engine/attempt_leases.py): while an attempt of a step declared
``Timeouts(heartbeat=h)`` or ``Timeouts(per_attempt=t)`` runs in a worker, the run's liveness
lock and the job's delivery are held with leases of the shorter limit (not
``context_lock_ttl`` and ``visibility_timeout``), so a worker that dies mid-step leaves the
run to another within about that limit; both get their own lengths back when the attempt
ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, Timeouts, config
from reactor.config import Runtime
from reactor.dsl import step
from reactor.engine.attempt_leases import attempt_lease
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.engine.liveness import lease_remaining
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.coordination.renewal import MIN_LEASE
from reactor.model.keys import run_liveness_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.router import Delivery
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on


def test_the_heartbeat_lease_is_the_limit_raised_to_a_lease_the_store_can_hold() -> None:
    assert attempt_lease(30, 0.0) == 30
    assert attempt_lease(0.2, 0.0) == MIN_LEASE  # no lease below the minimum
    assert attempt_lease(1.0, 2.0) == 5.0  # the holder's share must exceed the skew
    assert attempt_lease(30, 2.0) == 30


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[tuple[Runtime, TestClock]]:
    """A runtime on each backend (a fresh namespace), on a test clock; the run lease and the
    visibility long (60 s), so a short lease seen is the heartbeat step's."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="hbleases",
                       context_lock_ttl=60, visibility_timeout=60), clock
    config.reset()


@pytest.mark.parametrize("limits", [
    Timeouts(heartbeat=4), Timeouts(per_attempt=4), Timeouts(per_attempt=30, heartbeat=4),
], ids=["heartbeat", "per_attempt", "both"])
def test_a_time_limited_step_holds_its_run_with_its_limit_as_lease_on_every_backend(
    runtime_on: tuple[Runtime, TestClock], limits: Timeouts,
) -> None:
    runtime, clock = runtime_on
    env = make_env(runtime)
    seen: dict[str, float | None] = {}

    class Copy(Reactor):
        background = Background(all=True)

        @step(timeouts=limits)
        def copy(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat({"offset": 1})
            seen["during"] = lease_remaining(env, run_liveness_key(ctx.run_id))
            return "copied"

        @step(wait_for="copy")
        def seal(inputs: Any, ctx: Any) -> str:
            seen["after"] = lease_remaining(env, run_liveness_key(ctx.run_id))
            return "sealed"

    handle = Copy.run()
    assert isinstance(handle, DispatchHandle)
    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + 60
    while True:
        stored = load_context(env, handle.run_id, open_secrets=False)
        assert stored is not None
        if stored.status in TERMINAL_STATUSES:
            break
        assert time.monotonic() < deadline, "the run never ended"
        worker.run_pending()
        clock.advance(0.2)
    assert stored.status is RunStatus.COMPLETED
    during, after = seen["during"], seen["after"]
    # on memory the lock is on the test clock; elsewhere on the store's: both read at once
    assert during is not None and 0 < during <= 4.0 + 0.5, seen
    assert after is not None and after > 30, seen  # its own 60 s lease again


class _RecordingRouter(LocalRouter):
    """The in-process router, recording every visibility extension (seconds)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.extensions: list[float] = []

    def extend(self, delivery: Delivery, seconds: float) -> None:
        self.extensions.append(seconds)
        super().extend(delivery, seconds)


def test_a_heartbeat_step_shortens_its_jobs_visibility_and_gives_it_back() -> None:
    clock = TestClock(1_800_000_000.0)
    router = _RecordingRouter(clock=clock)
    runtime = config.configure(storage=MemoryStorage(clock=clock), router=router, clock=clock)
    marks: dict[str, int] = {}
    try:
        class Copy(Reactor):
            background = Background(all=True)

            @step(timeouts=Timeouts(heartbeat=3))
            def copy(inputs: Any, ctx: Any) -> str:
                marks["during"] = len(router.extensions)
                return "copied"

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        Worker(runtime, liveness_wait=0.0, visibility=45).run_pending()
        assert Copy.find(handle.run_id).status is RunStatus.COMPLETED
    finally:
        config.reset()
    # set to 3 s when the attempt began, back to the worker's 45 s when it ended
    assert router.extensions[: marks["during"]][-1:] == [3.0]
    assert 45.0 in router.extensions[marks["during"]:]
