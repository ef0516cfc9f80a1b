"""A completed ``async_step`` unit resumes its parked owner whose own ``run`` job was lost
(docs/workers.md, "Async steps (`async_step`)"; "Waiting runs are not lost"), on the memory
adapter with a test clock: one sweep moves the run to its end.

The owner's reader parks on its unit (its run keeps the liveness lock as a stamp until its
re-enqueued job is due); then both the unit's job and the owner's parked job are lost. One
sweep re-dispatches the unit (the owner waits on it: left alone); the unit completes and its
handler enqueues the owner, so a worker drains the run to ``completed`` without a second
sweep.
"""

from __future__ import annotations

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
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from reactor.testing import TestClock


class Quote(Reactor, name="test_async_owner_resume.quote"):
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
def clocked() -> Iterator[tuple[Runtime, TestClock]]:
    clock = TestClock(time.time())
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock), clock=clock)
    yield runtime, clock
    config.reset()


def test_a_completed_unit_resumes_its_parked_owner_whose_job_was_lost(
    clocked: tuple[Runtime, TestClock],
) -> None:
    rt, clock = clocked
    handle = Quote.run(x=4)
    assert isinstance(handle, DispatchHandle)
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending(max_jobs=1) == 1  # the run: dispatches its unit, the reader parks
    ctx = load_context(make_env(rt), handle.run_id)
    assert ctx is not None and ctx.engine_state.waiting is not None
    assert ctx.engine_state.waiting.primitive == "async_step"

    clock.advance(600)  # the park's stamp lapsed; both jobs are due...
    router = rt.router
    assert isinstance(router, LocalRouter)
    lost = router.receive(10, wait_seconds=0)
    assert sorted(d.job.kind for d in lost) == ["run", "step"]
    for delivery in lost:  # ...and lost (acked unprocessed, as a crashed worker's would be)
        router.ack(delivery)
    assert not rt.storage.locks.held(run_liveness_key(handle.run_id))

    counts = run_sweeps(rt)  # one sweep: the unit is lost, its owner waits on it
    assert counts.steps is not None and counts.steps.redispatched == 1
    assert counts.runs is not None and counts.runs.redispatched == 0
    worker.run_pending()  # the unit completes and resumes its owner; no second sweep
    assert Quote.find(handle.run_id).status is RunStatus.COMPLETED
    assert handle.wait(5) == Success(41, run_id=handle.run_id)
