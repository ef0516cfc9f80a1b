"""Quarantine of unreadable stored contexts (reactor/engine/quarantine.py) and its use by the
job handlers: a corrupt ``running`` record is stored ``failed`` with its text and the reason,
dead-lettered once, and never re-dispatched by a sweep (no crash loop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    async_step,
    config,
    element,
    input,
    map_step,
    step,
)
from reactor.config import Runtime
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.quarantine import quarantine_info
from reactor.errors import DeserializationError, SchemaVersionError
from reactor.jobs.sweepers import sweep_maps, sweep_runs, sweep_steps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.results import Failure
from reactor.model.status import RunStatus

CORRUPT = '{"schema_version": "1", "status": "running", "context_id": 42'  # cut short
FUTURE = '{"schema_version": 999, "status": "running"}'


class Doubler(Reactor, name="test_quarantine.doubler"):
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class WithUnit(Reactor, name="test_quarantine.with_unit"):
    @async_step()
    def unit(inputs: Any, ctx: Any) -> str:
        return "done"


class Twice(Reactor, name="test_quarantine.twice"):
    n = Input(int)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Owner(Reactor, name="test_quarantine.owner"):
    items = Input(list)
    doubled = map_step(Twice, source=input("items"), args={"n": element("doubled")},
                       fan_out=FanOut(batch_size=10))


@pytest.fixture
def rt() -> Iterator[Runtime]:
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock)
    )
    yield runtime
    config.reset()


def _corrupt(rt: Runtime, run_id: str, text: str = CORRUPT) -> str:
    record = rt.storage.contexts.load(run_id)
    assert record is not None
    rt.storage.contexts.save(replace(record, status="running", document=text))
    return record.document


def _stored_running_run(rt: Runtime, text: str = CORRUPT) -> str:
    handle = Doubler.run(n=2)
    assert isinstance(handle, DispatchHandle)
    _corrupt(rt, handle.run_id, text)
    return handle.run_id


@pytest.mark.parametrize(("text", "error"), [(CORRUPT, DeserializationError),
                                              (FUTURE, SchemaVersionError)])
def test_a_corrupt_running_run_is_stored_failed_and_never_swept_again(
    rt: Runtime, text: str, error: type[Exception]
) -> None:
    run_id = _stored_running_run(rt, text)
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending() == 1
    assert worker.jobs_dead_lettered == 1
    (dead,) = rt.router.dead_letters()
    assert run_id in dead.reason and error.__name__ in dead.reason
    view = Doubler.find(run_id)
    assert view.status is RunStatus.FAILED
    assert isinstance(view.failure, Failure)
    assert view.failure.exception_class == f"reactor.errors.{error.__name__}"
    assert run_id in view.failure.message and view.failure.is_retryable is False
    record = rt.storage.contexts.load(run_id)
    assert record is not None and record.status == "failed"
    # no loop: the next sweeps find nothing to re-dispatch and nothing is dead-lettered again
    for _ in range(3):
        assert sweep_runs(rt.storage, rt.router).redispatched == 0
        assert worker.run_pending() == 0
    assert len(rt.router.dead_letters()) == 1


def test_the_quarantine_document_keeps_the_original_text_and_the_reason(rt: Runtime) -> None:
    run_id = _stored_running_run(rt)
    Worker(rt, liveness_wait=0.0).run_pending()
    from reactor.engine.checkpoint import load_context
    from reactor.engine.env import make_env

    ctx = load_context(make_env(rt), run_id)
    assert ctx is not None
    info = quarantine_info(ctx)
    assert info is not None
    assert info.original_document == CORRUPT
    assert info.original_status == "running"
    assert run_id in info.reason and "DeserializationError" in info.reason


def test_a_corrupt_segment_quarantines_the_run_keeping_base_and_segments(
    rt: Runtime,
) -> None:
    handle = Doubler.run(n=2)
    assert isinstance(handle, DispatchHandle)
    record = rt.storage.contexts.load(handle.run_id)
    assert record is not None
    segments = ('{"schema_version":"1","head":',)  # a checkpoint cut short
    rt.storage.contexts.save(replace(record, status="running", base="b", segments=segments))
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending() == 1 and worker.jobs_dead_lettered == 1
    view = Doubler.find(handle.run_id)
    assert view.status is RunStatus.FAILED
    from reactor.engine.checkpoint import load_context
    from reactor.engine.env import make_env

    ctx = load_context(make_env(rt), handle.run_id)
    assert ctx is not None
    info = quarantine_info(ctx)
    assert info is not None and handle.run_id in info.reason
    kept = json.loads(info.original_document)
    assert kept == {"base": record.document, "segments": list(segments)}
    for _ in range(2):  # no loop
        assert sweep_runs(rt.storage, rt.router).redispatched == 0


def test_waiting_on_a_quarantined_run_returns_its_failure(rt: Runtime) -> None:
    handle = Doubler.run(n=2)
    assert isinstance(handle, DispatchHandle)
    _corrupt(rt, handle.run_id)
    Worker(rt, liveness_wait=0.0).run_pending()
    result = handle.wait(timeout=1)
    assert isinstance(result, Failure) and handle.run_id in result.message


def test_find_and_undo_name_the_run_of_a_corrupt_document(rt: Runtime) -> None:
    run_id = _stored_running_run(rt)
    with pytest.raises(DeserializationError, match=run_id):
        Doubler.find(run_id)
    with pytest.raises(DeserializationError, match=run_id):
        Doubler.undo(run_id)
    with pytest.raises(DeserializationError, match=run_id):
        Reactor.find(run_id)


def test_a_corrupt_root_fails_its_async_step_unit_and_is_quarantined(rt: Runtime) -> None:
    out = WithUnit.run()
    run_id = out.run_id
    assert run_id is not None
    _corrupt(rt, run_id)
    worker = Worker(rt, liveness_wait=0.0)
    worker.run_pending()
    record = rt.storage.step_results.get(run_id, "unit")
    assert record is not None and record.status == "completed"
    assert record.outcome is not None and run_id in record.outcome
    assert WithUnit.find(run_id).status is RunStatus.FAILED
    assert sweep_steps(rt.storage, rt.router).redispatched == 0
    assert sweep_runs(rt.storage, rt.router).redispatched == 0


def test_a_corrupt_map_element_settles_as_a_failure_naming_it(rt: Runtime) -> None:
    handle = Owner.run(items=[1, 2])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    from reactor.engine.maps.dispatcher import element_context_id

    element_id = element_context_id(meta.map_id, 0)
    _corrupt(rt, element_id)
    worker = Worker(rt, liveness_wait=0.0)
    worker.run_pending()
    assert Twice.find(element_id).status is RunStatus.FAILED
    assert rt.storage.maps.missing_indices(meta.map_id, meta.count) == []
    result = handle.wait(timeout=1)
    assert isinstance(result, Failure) and element_id in result.message
    counts = sweep_maps(rt.storage, rt.router)
    assert counts.redispatched == 0 and counts.errors == 0


def test_a_duplicate_delivery_of_a_settled_element_leaves_its_context_alone(
    rt: Runtime,
) -> None:
    # A settled element's context keeps its undo stack for the map's rollback: a duplicate
    # delivery finds the slot stored before it decodes anything, so a context this worker
    # cannot read (a codec type it lacks) is left as it is, not quarantined.
    from reactor.engine.maps.dispatcher import element_context_id
    from reactor.ports.payloads import MapElementPayload, job

    handle = Owner.run(items=[1, 2])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    worker = Worker(rt, liveness_wait=0.0)
    worker.run_pending()
    assert handle.wait(timeout=1).success
    element_id = element_context_id(meta.map_id, 0)
    _corrupt(rt, element_id)
    slots = rt.storage.maps.result_slots(meta.map_id, [0, 1])
    counter = rt.storage.maps.counter(meta.map_id)
    rt.router.enqueue(job(MapElementPayload(map_id=meta.map_id, index=0)))
    worker.run_pending()
    record = rt.storage.contexts.load(element_id)
    assert record is not None and record.document == CORRUPT and record.status == "running"
    assert rt.storage.maps.result_slots(meta.map_id, [0, 1]) == slots
    assert rt.storage.maps.counter(meta.map_id) == counter


def test_a_map_whose_owner_is_corrupt_settles_instead_of_looping(rt: Runtime) -> None:
    handle = Owner.run(items=[1, 2])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    for index in range(meta.count):  # the elements' pending contexts are gone
        from reactor.engine.maps.dispatcher import element_context_id

        rt.storage.contexts.delete(element_context_id(meta.map_id, index))
    _corrupt(rt, handle.run_id)
    worker = Worker(rt, liveness_wait=0.0)
    worker.run_pending()
    assert rt.storage.maps.missing_indices(meta.map_id, meta.count) == []
    assert Owner.find(handle.run_id).status is RunStatus.FAILED
    assert sweep_maps(rt.storage, rt.router).redispatched == 0
    assert sweep_runs(rt.storage, rt.router).redispatched == 0


def test_quarantine_leaves_readable_and_unknown_reactor_records_alone(rt: Runtime) -> None:
    from reactor.engine.env import make_env
    from reactor.engine.quarantine import quarantine

    env = make_env(rt)
    handle = Doubler.run(n=2)
    assert isinstance(handle, DispatchHandle)
    before = rt.storage.contexts.load(handle.run_id)
    assert quarantine(env, handle.run_id, DeserializationError("stale")) is None
    assert rt.storage.contexts.load(handle.run_id) == before  # readable: not rewritten
    assert before is not None
    rt.storage.contexts.save(replace(before, reactor="not.registered.here", document=CORRUPT))
    assert quarantine(env, handle.run_id, DeserializationError("corrupt")) is None
    after = rt.storage.contexts.load(handle.run_id)
    assert after is not None and after.document == CORRUPT  # cannot judge: left for an operator
    assert quarantine(env, "no-such-run", DeserializationError("gone")) is None
