"""The sweep chain: one tick per window, duplicated ticks collapse (docs/workers.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import make_env
from reactor.jobs.handlers import JobContext, dispatch_job
from reactor.jobs.sweep_tick import lateness, run_sweeps, schedule_next
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.context import Context
from reactor.model.heartbeats import LastHeartbeat
from reactor.model.keys import sweep_window_key
from reactor.model.status import RunStatus
from reactor.ports import Job
from reactor.ports.payloads import RunPayload, SweepPayload, job, parse_payload

START = 1_700_000_000.0  # a multiple of 10


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START + 3)


@pytest.fixture
def runtime(clock: ManualClock) -> Iterator[Runtime]:
    rt = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock),
        sweeper_interval=10,
    )
    yield rt
    config.reset()


def _queued(rt: Runtime) -> list[tuple[float, object]]:
    router = rt.router
    assert isinstance(router, LocalRouter)
    return [(due, parse_payload(Job.from_json(body))) for due, body in router.queued()]


def test_schedule_next_claims_the_next_window_once(runtime: Runtime, clock: ManualClock) -> None:
    window = int(START // 10) + 1
    assert schedule_next(runtime) == window
    assert schedule_next(runtime) is None  # a second worker started with --sweep
    assert _queued(runtime) == [(START + 10, SweepPayload(window=window))]
    info = runtime.storage.locks.info(sweep_window_key(window))
    assert info is not None and info.expires_at == clock() + 20  # 2 x interval, never released


def test_a_tick_sweeps_then_schedules_the_next_and_duplicates_collapse(
    runtime: Runtime, clock: ManualClock
) -> None:
    window = int(START // 10) + 1
    clock.set(START + 10)
    tick = job(SweepPayload(window=window))
    dispatch_job(JobContext(runtime=runtime, job=tick))
    dispatch_job(JobContext(runtime=runtime, job=tick))  # redelivered duplicate
    assert _queued(runtime) == [(START + 20, SweepPayload(window=window + 1))]


def test_a_tick_delivered_early_never_reclaims_its_own_window(
    runtime: Runtime, clock: ManualClock
) -> None:
    window = int(START // 10) + 1
    clock.set(START + 9.5)  # the router delivered the tick half a second early
    dispatch_job(JobContext(runtime=runtime, job=job(SweepPayload(window=window))))
    assert _queued(runtime) == [(START + 20, SweepPayload(window=window + 1))]


def test_run_sweeps_redispatches_lost_runs(runtime: Runtime) -> None:
    ctx = Context(context_id="lost-1", reactor="kill.flow", status=RunStatus.RUNNING)
    Checkpointer(make_env(runtime), ctx).save()
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 1
    assert counts.steps is not None and counts.maps is not None
    assert _queued(runtime)[0][1] == RunPayload(context_id="lost-1", reactor="kill.flow")


def test_a_tick_of_the_chain_leaves_a_freshly_written_run_alone_until_it_settles(
    runtime: Runtime, clock: ManualClock
) -> None:
    """A run written less than one visibility timeout ago (30 s here) had its job enqueued
    right after the write: a tick of the chain takes it as queued and enqueues no copy; after
    that it is lost and re-dispatched (docs/workers.md, "Sweep cursors and dispatch leases").
    Before the settle time, every tick re-dispatched every unit whose job was still queued."""
    ctx = Context(context_id="fresh-1", reactor="kill.flow", status=RunStatus.RUNNING)
    Checkpointer(make_env(runtime), ctx).save()
    clock.advance(29.0)
    counts = run_sweeps(runtime, lateness=0.0)
    assert counts.runs is not None and counts.runs.settling == 1
    assert counts.runs.redispatched == 0 and _queued(runtime) == []
    clock.advance(1.0)
    counts = run_sweeps(runtime, lateness=0.0)
    assert counts.runs is not None and counts.runs.redispatched == 1


def test_a_run_whose_worker_died_mid_heartbeat_step_is_not_taken_as_queued(
    runtime: Runtime, clock: ManualClock
) -> None:
    """A ``running`` run whose last save kept its step in flight's heartbeat was written by
    the worker holding its lock (heartbeats are stored only while an attempt runs); with the
    lock gone, the worker is: the tick re-dispatches it at once instead of waiting out the
    settle time (docs/concepts.md, "Heartbeats"). A kept heartbeat of another step than the
    one in flight does not count. Before, the run waited one visibility timeout after its
    last heartbeat write."""
    ctx = Context(context_id="hb-1", reactor="kill.flow", status=RunStatus.RUNNING,
                  current_step="copy")
    ctx.keep_heartbeat("copy", LastHeartbeat({"offset": 5}, START, 1))
    Checkpointer(make_env(runtime), ctx).save()
    other = Context(context_id="hb-2", reactor="kill.flow", status=RunStatus.RUNNING,
                    current_step="seal")
    other.keep_heartbeat("copy", LastHeartbeat({"offset": 8}, START, 1))
    Checkpointer(make_env(runtime), other).save()
    clock.advance(1.0)
    counts = run_sweeps(runtime, lateness=0.0)
    assert counts.runs is not None and counts.runs.settling == 1
    assert counts.runs.redispatched == 1
    assert [payload for _, payload in _queued(runtime)] == [
        RunPayload(context_id="hb-1", reactor="kill.flow")
    ]


def test_a_late_tick_measures_the_queue_latency_and_settles_longer(
    runtime: Runtime, clock: ManualClock
) -> None:
    """A tick that runs 40 s after its window started saw a queue 40 s behind: a run written
    77 s before is within twice that (80 s), so it is taken as queued; ``reactor sweep`` (no
    lateness) recovers it at once."""
    ctx = Context(context_id="slow-1", reactor="kill.flow", status=RunStatus.RUNNING)
    Checkpointer(make_env(runtime), ctx).save()
    window = int((START + 3) // 10) + 1
    clock.set(window * 10 + 40.0)
    assert lateness(runtime, window) == 40.0
    assert lateness(runtime, 0) is None  # an ad-hoc tick: no settle time
    assert lateness(runtime, window + 10) == 0.0  # an early tick is not late
    dispatch_job(JobContext(runtime=runtime, job=job(SweepPayload(window=window))))
    assert [p for _, p in _queued(runtime) if isinstance(p, RunPayload)] == []
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 1


def test_worker_with_sweep_starts_the_chain(runtime: Runtime) -> None:
    worker = Worker(runtime, sweep=True, poll_seconds=0.05)
    worker.start()
    assert worker.stop(timeout=5)
    assert [p for _, p in _queued(runtime)] == [SweepPayload(window=int(START // 10) + 1)]
