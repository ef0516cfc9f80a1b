"""Fan-out map steps (docs/fan_out.md), on the memory adapter.

Most tests use the inline router (every job runs nested inside ``enqueue``, so a run finishes
before ``Reactor.run`` returns); the throw-by-throw tests use a local router
whose jobs are processed one at a time with :meth:`Worker.run_pending`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from reactor import (
    DefinitionError,
    DispatchHandle,
    Failure,
    FanOut,
    Input,
    MapResultEnumerator,
    Reactor,
    Success,
    compose,
    config,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.config import Runtime
from reactor.engine.maps.dispatcher import element_context_id
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.records import MapMetadata
from reactor.model.results import RollbackFailure
from reactor.model.status import RunStatus
from reactor.ports.payloads import MapElementPayload, RunPayload, job, parse_payload
from reactor.ports.router import Job
from reactor.ports.serialization import record_from_dict

EVENTS: list[str] = []


class Square(Reactor, name="test_fan_out.square"):
    n = Input(int)

    @step(n=input("n"))
    def square(inputs: Any, ctx: Any) -> int:
        EVENTS.append(f"run {inputs.n}")
        if inputs.n < 0:
            raise ValueError(f"negative {inputs.n}")
        return int(inputs.n) ** 2

    @square.undo
    def unsquare(value: Any, inputs: Any, ctx: Any) -> None:
        EVENTS.append(f"undo {inputs.n}")
        if inputs.n == 13:
            raise RuntimeError("cannot undo 13")

    returns = "square"


class Inner(Reactor, name="test_fan_out.inner"):
    """An element that itself maps (its map must run inline)."""

    n = Input(int)

    @step(n=input("n"))
    def pair(inputs: Any, ctx: Any) -> list[int]:
        return [inputs.n, inputs.n + 100]

    nested = map_step(Square, source=result("pair"), args={"n": element("nested")},
                      fan_out=FanOut(batch_size=1))


def _owner(*, atomic: bool = True, batch_size: int = 3, elem: Any = Square) -> Any:
    class Owner(Reactor):
        items = Input(list)
        mapped = map_step(elem, source=input("items"), args={"n": element("mapped")},
                          atomic=atomic, fan_out=FanOut(batch_size=batch_size))

    return Owner


def _all_maps(rt: Runtime) -> list[MapMetadata]:
    """Every fan-out map stored, settled ones included (the sweep index lists unsettled ones)."""
    storage = rt.storage
    assert isinstance(storage, MemoryStorage)
    heads = storage.documents.scan("maps")
    return [record_from_dict(MapMetadata, head["meta"]) for _key, head in heads if head["meta"]]


@pytest.fixture(autouse=True)
def _clear() -> None:
    EVENTS.clear()


def test_fan_out_option_shapes() -> None:
    assert FanOut().batch_size == 50
    assert FanOut.coerce(True) == FanOut() and FanOut.coerce(None) is None
    spec = map_step(Square, source=input("items"), fan_out=FanOut(batch_size=7))
    assert spec.fan_out == FanOut(batch_size=7)
    with pytest.raises(DefinitionError):
        FanOut(batch_size=0)
    with pytest.raises(DefinitionError):
        map_step(Square, source=input("items"), fan_out="yes")


def test_value_is_a_lazy_enumerator_of_element_results(runtime: Runtime) -> None:
    result = _owner(atomic=False).run(items=[1, -2, 3, 4])
    assert isinstance(result, Success)
    mapped = result.value["mapped"]
    assert isinstance(mapped, MapResultEnumerator) and len(mapped) == 4
    assert list(mapped.values()) == [1, 9, 16]
    assert [f.message for f in mapped.failures()] == ["negative -2"]
    assert list(mapped.failed_indexes()) == [1]
    assert [type(r).__name__ for r in mapped] == ["Success", "Failure", "Success", "Success"]
    # stored as {map_id, count} only: reading it back gives an equal enumerator
    view = _owner(atomic=False).find(result.run_id or "")
    assert view.results["mapped"] == mapped


def test_enumerator_reads_slots_in_bounded_pages(runtime: Runtime) -> None:
    result = _owner().run(items=list(range(10)))
    assert isinstance(result, Success)
    mapped = result.value["mapped"]
    pages: list[tuple[int, int]] = []
    maps = runtime.storage.maps

    class Spy:
        def results_page(self, map_id: str, *, offset: int, limit: int) -> list[Any]:
            pages.append((offset, limit))
            return maps.results_page(map_id, offset=offset, limit=limit)

    lazy = MapResultEnumerator(mapped.map_id, 10, page_size=4, store=Spy())  # type: ignore[arg-type]
    assert pages == []  # nothing read until iterated
    assert sum(1 for _ in lazy.successes()) == 10
    assert pages == [(0, 4), (4, 4), (8, 4)]


def test_each_element_has_its_own_context_and_the_index_records_fresh_elements(
    runtime: Runtime,
) -> None:
    result = _owner().run(items=[5, 6, 7])
    assert isinstance(result, Success)
    map_id = result.value["mapped"].map_id
    maps = runtime.storage.maps
    ids = [element_context_id(map_id, i) for i in range(3)]
    assert sorted(maps.element_ids(map_id)) == sorted(ids)
    for index, context_id in enumerate(ids):
        element_run = Square.find(context_id)
        assert element_run.status is RunStatus.COMPLETED
        assert element_run.results["square"] == (5 + index) ** 2
    meta = maps.metadata(map_id)
    assert meta is not None and (meta.count, meta.batch_size, meta.atomic) == (3, 3, True)
    assert meta.owner_context_id == result.run_id


def test_atomic_failure_skips_later_elements_and_rolls_back_the_completed_ones(
    runtime: Runtime,
) -> None:
    result = _owner(batch_size=2).run(items=[1, 2, -3, 4, 5, 6, 7])
    assert isinstance(result, Failure)
    assert result.step_name == "mapped" and result.message == "negative -3"
    # the failure stopped the map: the next throws were settled as skipped, never run
    assert EVENTS == ["run 1", "run 2", "run -3", "undo 2", "undo 1"]
    assert runtime.storage.maps.scan() == []  # settled: out of the sweep index
    (meta,) = _all_maps(runtime)
    assert runtime.storage.maps.count_results(meta.map_id) == 7  # every index settled
    assert runtime.storage.maps.failed_context(meta.map_id) == element_context_id(meta.map_id, 2)
    assert runtime.storage.maps.count_elements(meta.map_id) == 3  # only started elements
    owner = _owner(batch_size=2).find(result.run_id or "")
    assert owner.status is RunStatus.FAILED and owner.undo_stack == ()


def test_an_undo_failure_is_tagged_with_map_step_and_element_index(runtime: Runtime) -> None:
    result = _owner().run(items=[12, 13, -1])
    assert isinstance(result, Failure)
    assert result.rollback_failures == [
        RollbackFailure(step="square", kind="undo", reason="raised",
                        message="RuntimeError: cannot undo 13", map_step="mapped",
                        element_index=1),
    ]


def test_empty_source_succeeds_without_dispatching(runtime: Runtime) -> None:
    result = _owner().run(items=[])
    assert isinstance(result, Success)
    assert list(result.value["mapped"]) == [] and runtime.storage.maps.scan() == []


def test_a_map_inside_a_map_element_runs_inline(runtime: Runtime) -> None:
    result = _owner(elem=Inner).run(items=[1, 2])
    assert isinstance(result, Success)
    assert [r.value["nested"] for r in result.value["mapped"]] == [[1, 10201], [4, 10404]]
    assert len(_all_maps(runtime)) == 1  # only the outer map fanned out


def test_undo_of_a_completed_run_rolls_back_in_process_in_chunks(runtime: Runtime) -> None:
    owner = _owner(batch_size=50)
    result = owner.run(items=list(range(150)))
    assert isinstance(result, Success)
    map_id = result.value["mapped"].map_id
    assert runtime.storage.contexts.delete(element_context_id(map_id, 42))  # forced expiry
    EVENTS.clear()
    undone = owner.undo(result.run_id or "")
    assert isinstance(undone, Failure)
    assert undone.rollback_failures == [
        RollbackFailure(step="mapped", kind="undo", reason="context_unavailable",
                        message="map element 42 context expired", map_step="mapped",
                        element_index=42),
        RollbackFailure(step="square", kind="undo", reason="raised",
                        message="RuntimeError: cannot undo 13", map_step="mapped",
                        element_index=13),
    ]
    assert sorted(EVENTS) == sorted(f"undo {i}" for i in range(150) if i != 42)
    assert owner.find(result.run_id or "").status is RunStatus.CANCELLED


def test_legacy_fail_fast_payload_is_read_as_atomic() -> None:
    payload = parse_payload(Job(kind="map_element",
                                payload={"map_id": "m", "index": 3, "fail_fast": False}))
    assert isinstance(payload, MapElementPayload) and payload.atomic is False


# ------------------------------------------------------------------------------ throw by throw


@pytest.fixture
def stepped() -> Runtime:
    return config.configure(storage=MemoryStorage(), router=LocalRouter(visibility_timeout=30))


def _pending(rt: Runtime) -> list[Job]:
    router = rt.router
    assert isinstance(router, LocalRouter)
    deliveries = router.receive(100, wait_seconds=0)
    for delivery in deliveries:
        router.retry(delivery, 0)
    return [d.job for d in deliveries]


def _kinds(jobs: Sequence[Job]) -> list[str]:
    return sorted(j.kind for j in jobs)


def test_one_throw_at_a_time_and_the_owner_never_redispatches(stepped: Runtime) -> None:
    owner = _owner(batch_size=2)
    handle = owner.run(items=[1, 2, 3, 4, 5])
    assert isinstance(handle, DispatchHandle)
    maps = stepped.storage.maps
    (meta,) = maps.scan()
    assert maps.offset(meta.map_id) == 2
    assert _kinds(_pending(stepped)) == ["map_element", "map_element"]
    # a spurious resume of the owner (e.g. the run sweeper), queued behind the first throw
    stepped.router.enqueue(job(RunPayload(context_id=handle.run_id, reactor=owner.reactor_name)))
    worker = Worker(stepped, liveness_wait=0.0)
    assert worker.run_pending(max_jobs=1) == 1  # element 0: not a batch end
    assert maps.offset(meta.map_id) == 2
    assert worker.run_pending(max_jobs=1) == 1  # element 1 ends the throw: claims the next
    assert maps.offset(meta.map_id) == 4
    assert worker.run_pending(max_jobs=1) == 1  # the owner adopts nothing, dispatches nothing
    assert maps.offset(meta.map_id) == 4 and handle.status() is RunStatus.RUNNING
    assert _kinds(_pending(stepped)) == ["map_element", "map_element"]
    worker.run_pending()
    result = handle.wait(timeout=1)
    assert isinstance(result, Success) and list(result.value["mapped"].values()) == [
        1, 4, 9, 16, 25,
    ]
    assert maps.count_results(meta.map_id) == 5 and maps.claim_owner_signal(meta.map_id) is False


def test_a_fan_out_map_inside_a_composed_child_runs_inline(runtime: Runtime) -> None:
    child = _owner()

    class Parent(Reactor):
        items = Input(list)
        inner = compose(child, items=input("items"))

    result = Parent.run(items=[2, 3])
    assert isinstance(result, Success)
    assert list(result.value["inner"]["mapped"]) == [4, 9]  # the inline map's list of values
    assert runtime.storage.maps.scan() == []
