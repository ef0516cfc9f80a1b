"""Runs waiting on an in-flight unit are not lost (docs/workers.md, "Sweep cursors and dispatch
leases", "Waiting runs are not lost"), on the memory adapter.

A fan-out owner holds no liveness lock while its elements run; the run sweeper used to
re-enqueue it once per dispatch lease all the same, and on a slow backend those copies
competed with the elements themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    DispatchHandle,
    FanOut,
    Input,
    Reactor,
    Success,
    config,
    element,
    input,
    map_step,
    step,
)
from reactor.config import Runtime
from reactor.engine.waiting import waiting_on
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import EngineState, Waiting
from reactor.model.records import ContextRecord, StepResultRecord
from reactor.model.status import RunStatus


class Double(Reactor, name="test_waiting.double"):
    n = Input(int)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Owner(Reactor, name="test_waiting.owner"):
    items = Input(list)
    doubled = map_step(Double, source=input("items"), args={"n": element("doubled")},
                       fan_out=FanOut(batch_size=3))


@pytest.fixture
def stepped() -> Iterator[Runtime]:
    rt = config.configure(storage=MemoryStorage(clock=ManualClock(1_700_000_000.0)),
                          router=LocalRouter(visibility_timeout=30))
    yield rt
    config.reset()


def _queued_kinds(rt: Runtime) -> list[str]:
    router = rt.router
    assert isinstance(router, LocalRouter)
    deliveries = router.receive(100, wait_seconds=0)
    for delivery in deliveries:
        router.retry(delivery, 0)
    return sorted(d.job.kind for d in deliveries)


def _expire_dispatch_marks(rt: Runtime) -> None:
    storage = rt.storage
    assert isinstance(storage, MemoryStorage)
    storage.advance(10_000)  # every dispatch lease and episode marker lapses


def test_the_run_sweeper_leaves_an_owner_waiting_on_its_map_alone(stepped: Runtime) -> None:
    handle = Owner.run(items=[1, 2, 3])
    assert isinstance(handle, DispatchHandle)
    assert _queued_kinds(stepped) == ["map_element"] * 3
    counts = run_sweeps(stepped).runs
    assert counts is not None
    assert (counts.inspected, counts.redispatched, counts.waiting) == (1, 0, 1)
    # the map sweeper re-dispatches the queued elements once (a first tick after a burst
    # does: docs/workers.md, "Sweep cursors and dispatch leases"); the owner is not copied
    assert "run" not in _queued_kinds(stepped)
    record = stepped.storage.contexts.load(handle.run_id)
    assert record is not None and (waiting_on(stepped.storage, record) or "").startswith("map:")
    Worker(stepped, liveness_wait=0.0).run_pending()
    result = handle.wait(timeout=1)
    assert isinstance(result, Success) and list(result.value["doubled"].values()) == [2, 4, 6]


def test_an_owner_whose_map_finished_but_whose_resume_was_lost_is_redispatched(
    stepped: Runtime,
) -> None:
    handle = Owner.run(items=[1, 2])
    assert isinstance(handle, DispatchHandle)
    worker = Worker(stepped, liveness_wait=0.0)
    assert worker.run_pending(max_jobs=2) == 2  # both elements; the collector's jobs follow
    router = stepped.router
    assert isinstance(router, LocalRouter)
    while True:  # run the collector, then lose the owner's resume
        (delivery,) = router.receive(1, wait_seconds=0)
        if delivery.job.kind == "run":
            router.ack(delivery)
            break
        router.retry(delivery, 0)
        worker.run_pending(max_jobs=1)
    assert handle.status() is RunStatus.RUNNING
    record = stepped.storage.contexts.load(handle.run_id)
    assert record is not None and waiting_on(stepped.storage, record) is None
    _expire_dispatch_marks(stepped)
    counts = run_sweeps(stepped).runs
    assert counts is not None and (counts.redispatched, counts.waiting) == (1, 0)
    worker.run_pending()
    result = handle.wait(timeout=1)
    assert isinstance(result, Success) and list(result.value["doubled"].values()) == [2, 4]


def _parked_on_async_step(storage: MemoryStorage, status: str) -> ContextRecord:
    ctx = Context(context_id=f"parked-{status}", reactor="test_waiting.parked",
                  status=RunStatus.RUNNING,
                  engine_state=EngineState(waiting=Waiting("read", "async_step", "charge")))
    now = storage.now()
    storage.step_results.put(StepResultRecord(
        context_id=ctx.context_id, step_name="charge", status=status,  # type: ignore[arg-type]
        root_context_id=ctx.context_id, reactor="test_waiting.parked",
        dispatched_at=now, updated_at=now,
    ))
    return ContextRecord(ctx.context_id, "test_waiting.parked", "running",
                         codec.encode_document(ctx.to_document()), now, now)


def test_a_run_parked_on_an_async_step_waits_until_the_step_completes() -> None:
    storage = MemoryStorage()
    assert waiting_on(storage, _parked_on_async_step(storage, "dispatched")) == (
        "async_step:charge")
    assert waiting_on(storage, _parked_on_async_step(storage, "completed")) is None


def test_a_run_that_cannot_be_decoded_waits_for_nothing() -> None:
    storage = MemoryStorage()
    record = ContextRecord("bad", "x", "running", '{"not": "a context"}', 1.0, 1.0)
    assert waiting_on(storage, record) is None
