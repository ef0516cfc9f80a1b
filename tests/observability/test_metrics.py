"""Metrics through the OpenTelemetry middleware (docs/observability.md, "Metrics"): the counts
match the runs, rollbacks, parks, dead letters and lock waits that happened."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from reactor import (
    Background,
    Failure,
    Input,
    Reactor,
    Success,
    input,
    result,
    step,
    with_lock,
)
from reactor.config import Runtime
from reactor.coordination import Lock
from reactor.jobs.worker import Worker
from reactor.middleware import Middleware, ParkEvent
from reactor.ports.router import Job
from tests.observability.conftest import Telemetry


@step(x=input("x"))
def triple(inputs: Any, ctx: Any) -> int:
    if inputs.x < 0:
        raise ValueError("negative")
    return int(inputs.x) * 3


@step(y=result("triple"))
def keep(inputs: Any, ctx: Any) -> int:
    return int(inputs.y)


@keep.undo
def _unkeep(result: Any, inputs: Any, ctx: Any) -> None:
    return None


class Tripler(Reactor, name="obs.tripler"):
    x = Input(int)
    triple = triple
    returns = "triple"
    background = Background(all=True)


class Keeper(Reactor, name="obs.keeper"):
    x = Input(int)
    triple = triple
    keep = keep
    returns = "keep"


class Locked(Reactor, name="obs.locked"):
    x = Input(int)
    triple = triple
    returns = "triple"
    background = Background(all=True)
    coordination = [with_lock(key="obs-metrics-lock", auto_extend=False)]


@step(x=input("x"), coordination=[with_lock(key="obs-step-lock", auto_extend=False)])
def guarded(inputs: Any, ctx: Any) -> int:
    return int(inputs.x)


class Guarded(Reactor, name="obs.guarded"):
    x = Input(int)
    guarded = guarded


def test_run_counts_durations_and_rollbacks_match_what_ran(
    telemetry: Telemetry, configure: Callable[..., Runtime],
    workers: Callable[[Runtime], Worker],
) -> None:
    runtime = configure(telemetry.middleware)
    worker = workers(runtime)
    handles = [Tripler.run(x=x) for x in (1, 2, 3)]
    failed_in_worker = Tripler.run(x=-1)
    assert [h.wait(10) for h in handles] == [  # type: ignore[union-attr]
        Success(3 * x, run_id=h.run_id) for x, h in zip((1, 2, 3), handles, strict=True)  # type: ignore[union-attr]
    ]
    assert isinstance(failed_in_worker.wait(10), Failure)  # type: ignore[union-attr]
    worker.stop(timeout=10)
    kept = Keeper.run(x=2)  # synchronous on the queue-only router: no job
    assert kept.success
    assert Keeper.undo(kept.run_id).success  # the completed run ends cancelled
    assert Keeper.undo(kept.run_id).success  # nothing left: no second outcome

    assert telemetry.total("reactor.runs.started", **{"reactor.name": "obs.tripler"}) == 4
    assert telemetry.total("reactor.runs.started", **{"reactor.name": "obs.keeper"}) == 1
    finished = {(a["reactor.name"], a["reactor.run.status"]): v
                for a, v in telemetry.points("reactor.runs.finished")}
    assert finished == {
        ("obs.tripler", "completed"): 3, ("obs.tripler", "failed"): 1,
        ("obs.keeper", "completed"): 1, ("obs.keeper", "cancelled"): 1,
    }
    # every step action is timed: 4 triples in workers, triple + keep in the caller; the failed
    # triple's compensate; the undo of keep and triple
    assert telemetry.total("reactor.step.duration", **{"reactor.step.action": "run"}) == 6
    assert telemetry.total("reactor.step.duration", **{"reactor.step.action": "compensate"}) == 1
    assert telemetry.total("reactor.step.duration", **{"reactor.step.action": "undo"}) == 2
    rollbacks = {(a["reactor.name"], a["reactor.rollback.reason"]): v
                 for a, v in telemetry.points("reactor.rollbacks")}
    assert rollbacks == {("obs.tripler", "step_failed"): 1, ("obs.keeper", "undo"): 1}
    # one job per background run, each with its queue lag and duration
    assert telemetry.total("reactor.job.queue_lag", **{"reactor.job.kind": "run"}) == 4
    assert telemetry.total("reactor.job.duration", **{"reactor.job.status": "ok"}) == 4


class _Parks(Middleware):
    def __init__(self) -> None:
        self.parked = threading.Event()
        self.events: list[ParkEvent] = []

    def on_park(self, event: ParkEvent) -> None:
        self.events.append(event)
        self.parked.set()


def test_parks_dead_letters_and_lock_waits_are_counted(
    telemetry: Telemetry, configure: Callable[..., Runtime],
    workers: Callable[[Runtime], Worker],
) -> None:
    parks = _Parks()
    runtime = configure(telemetry.middleware, parks)
    held = Lock(runtime.storage.locks, "obs-metrics-lock", owner="someone-else", ttl=60)
    held.acquire()
    worker = workers(runtime)
    handle = Locked.run(x=5)
    assert parks.parked.wait(10)  # the worker parked the run on the held lock
    held.release()
    assert handle.wait(10) == Success(15, run_id=handle.run_id)  # type: ignore[union-attr]
    worker.stop(timeout=10)
    assert parks.events[0].reason == "lock" and parks.events[0].step is None
    assert telemetry.total("reactor.parks", **{"reactor.park.reason": "lock"}) == len(
        parks.events)

    poison = Job(kind="run", payload={"context_id": "x", "reactor": "obs.not_registered"})
    runtime.router.enqueue(poison)
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert telemetry.total("reactor.jobs.dead_lettered", **{"reactor.job.kind": "run"}) == 1

    assert Guarded.run(x=1).success  # a synchronous run takes its step lock at once
    (wait,) = telemetry.points("reactor.lock.wait")
    assert wait == ({"reactor.lock.primitive": "lock", "reactor.lock.acquired": True}, 1)


@step(x=input("x"), coordination=[with_lock(key="obs-step-park", auto_extend=False)])
def locked_step(inputs: Any, ctx: Any) -> int:
    return int(inputs.x)


class StepLocked(Reactor, name="obs.step_locked"):
    x = Input(int)
    work = locked_step
    returns = "work"
    background = Background(all=True)


def test_a_step_level_park_is_reported_once_per_park(
    telemetry: Telemetry, configure: Callable[..., Runtime],
    workers: Callable[[Runtime], Worker],
) -> None:
    parks = _Parks()
    runtime = configure(telemetry.middleware, parks)
    held = Lock(runtime.storage.locks, "obs-step-park", owner="someone-else", ttl=60)
    held.acquire()
    worker = workers(runtime)
    handle = StepLocked.run(x=5)
    assert parks.parked.wait(10)
    held.release()
    assert handle.wait(10) == Success(5, run_id=handle.run_id)  # type: ignore[union-attr]
    worker.stop(timeout=10)
    jobs = [s for s in telemetry.spans() if s.name == "job run"]
    # every delivery but the last parked once: the step scope reported it, the run scope not
    assert len(parks.events) == len(jobs) - 1 >= 1
    assert {e.step for e in parks.events} == {"work"}
    steps = [s for s in telemetry.spans() if s.name == "step work"]
    assert sum(1 for s in steps for e in s.events if e.name == "reactor.park") == len(parks.events)
