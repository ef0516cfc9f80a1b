"""Dispatch leases and the marks the engine takes where it enqueues a unit's job
(docs/workers.md, "Sweep cursors and dispatch leases"): a run parked or resumed by its unit is
queued, not lost, to the run sweeper while its job waits in the queue.

Before these marks, a soak on the MongoDB wire server re-dispatched 196 runs and 88 async
steps for 100 orders, nearly every one a copy of a job still in the queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    Background,
    DispatchHandle,
    Input,
    Reactor,
    Success,
    async_step,
    config,
    input,
    result,
    step,
)
from reactor.config import Runtime, Settings
from reactor.engine.dispatch_leases import (
    DispatchLease,
    mark_enqueued,
    router_visibility,
    run_unit,
    runtime_lease,
    step_unit,
)
from reactor.errors import StorageError
from reactor.jobs.sweepers import sweep_runs
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.keys import sweep_dispatch_key
from reactor.testing import TestClock

START = 1_700_000_000.0


class Quote(Reactor, name="test_dispatch_leases.quote"):
    x = Input(int)
    background = Background(all=True)

    @async_step(x=input("x"))
    def price(inputs: Any, ctx: Any) -> int:
        return int(inputs.x) * 10

    @step(v=result("price"))
    def total(inputs: Any, ctx: Any) -> int:
        return int(inputs.v) + 1

    returns = "total"


@pytest.fixture
def manual() -> Iterator[Runtime]:
    clock = ManualClock(START)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock),
        sweeper_interval=5, visibility_timeout=20,
    )
    yield runtime
    config.reset()


@pytest.fixture
def clocked() -> Iterator[tuple[Runtime, TestClock]]:
    clock = TestClock(time.time())
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock), clock=clock)
    yield runtime, clock
    config.reset()


def test_units_are_named_as_the_sweepers_name_them() -> None:
    assert run_unit("r1") == "run:r1"
    assert step_unit("r1", "charge") == "step:r1:charge"


def test_a_sweep_outside_the_chain_has_no_settle_time(manual: Runtime) -> None:
    lease = runtime_lease(manual)
    seen = router_visibility(manual)
    assert lease == DispatchLease.from_settings(manual.settings, visibility=seen)
    assert lease.settle == 0 and not lease.settling(START, START)


def test_the_chain_settles_for_a_visibility_timeout_or_twice_the_queue_latency(
    manual: Runtime,
) -> None:
    visibility = router_visibility(manual)
    assert runtime_lease(manual, lateness=0).settle == visibility
    late = runtime_lease(manual, lateness=100)
    assert late.settle == 200 and late.base == 200 and late.cap == 1600
    assert late.settling(START, START + 199.9) and not late.settling(START, START + 200)


def test_a_mark_keeps_the_sweeper_off_the_unit_for_the_delay_and_one_lease(
    manual: Runtime,
) -> None:
    storage = manual.storage
    mark_enqueued(manual, run_unit("r1"), delay=7.0)
    marker = storage.periods.marker(sweep_dispatch_key("run:r1"))
    assert marker is not None and marker.marked_at == START
    base = runtime_lease(manual).base
    assert isinstance(storage, MemoryStorage)
    storage.advance(7.0 + base - 0.01)
    assert storage.periods.marker(sweep_dispatch_key("run:r1")) is not None
    storage.advance(0.02)
    assert storage.periods.marker(sweep_dispatch_key("run:r1")) is None


def test_a_standing_mark_is_left_as_it_is(manual: Runtime) -> None:
    storage = manual.storage
    assert isinstance(storage, MemoryStorage)
    mark_enqueued(manual, run_unit("r1"))
    storage.advance(5.0)
    mark_enqueued(manual, run_unit("r1"))
    marker = storage.periods.marker(sweep_dispatch_key("run:r1"))
    assert marker is not None and marker.marked_at == START


def test_a_failed_mark_is_logged_and_never_raised(
    manual: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        raise StorageError("periods store down")

    monkeypatch.setattr(manual.storage.periods, "mark", broken)
    with caplog.at_level(logging.WARNING, logger="reactor.sweeper"):
        mark_enqueued(manual, run_unit("r1"))
    assert "event=dispatch_mark_failed unit=run:r1 error=StorageError" in caplog.text


def test_a_parked_run_is_left_alone_while_its_delayed_job_waits_in_the_queue(
    clocked: tuple[Runtime, TestClock],
) -> None:
    """The reader parks on its async unit: its liveness stamp lapses with the park's delay,
    but its job may wait far longer in a slow queue; the mark covers the delay and one
    lease."""
    rt, clock = clocked
    handle = Quote.run(x=4)
    assert isinstance(handle, DispatchHandle)
    assert Worker(rt, liveness_wait=0.0).run_pending(max_jobs=1) == 1  # the run parks
    marker = rt.storage.periods.marker(sweep_dispatch_key(run_unit(handle.run_id)))
    assert marker is not None
    clock.advance(runtime_lease(rt).base)  # the stamp lapsed long ago; the job still queued
    counts = sweep_runs(rt.storage, rt.router, lease=runtime_lease(rt))
    assert counts.leased == 1 and counts.redispatched == 0


def test_a_unit_that_resumes_its_owner_marks_it_queued(
    clocked: tuple[Runtime, TestClock],
) -> None:
    """The async unit's handler enqueues its parked owner whose stamp lapsed: the owner's new
    job is marked, so a sweep right after enqueues no copy of it."""
    rt, clock = clocked
    handle = Quote.run(x=4)
    assert isinstance(handle, DispatchHandle)
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending(max_jobs=1) == 1  # the run dispatches its unit and parks
    clock.advance(3600)  # every stamp and mark lapsed; both jobs are due
    router = rt.router
    assert isinstance(router, LocalRouter)
    deliveries = router.receive(10, wait_seconds=0)
    unit = next(d for d in deliveries if d.job.kind == "step")
    for other in deliveries:
        if other is not unit:
            router.ack(other)  # the owner's parked job is lost
    assert rt.storage.periods.marker(sweep_dispatch_key(run_unit(handle.run_id))) is None
    router.retry(unit, 0)
    assert worker.run_pending(max_jobs=1) == 1  # the unit completes and resumes its owner
    assert rt.storage.periods.marker(sweep_dispatch_key(run_unit(handle.run_id))) is not None
    counts = sweep_runs(rt.storage, rt.router, lease=runtime_lease(rt))
    assert counts.redispatched == 0
    worker.run_pending()  # the owner's one job drains the run
    assert handle.wait(5) == Success(41, run_id=handle.run_id)


def test_settings_without_a_router_visibility_use_the_setting() -> None:
    class Bare:
        pass

    runtime = Runtime(
        storage=MemoryStorage(), router=Bare(),  # type: ignore[arg-type]
        settings=Settings(visibility_timeout=45),
    )
    assert router_visibility(runtime) == 45
    assert runtime_lease(runtime, lateness=0).settle == 45
