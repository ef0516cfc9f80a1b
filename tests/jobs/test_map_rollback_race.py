"""A duplicated ``map_element_rollback`` job racing the first (docs/protocol.md, "Rollback
jobs: lock before read"; docs/fan_out.md, "Rollback"), on every backend's storage.

The map sweeper re-enqueues a rollback position whose job is merely queued, so two jobs for
one position can run at once. A fault hook forces the worst interleaving deterministically:
the first job has done everything it does before it takes the element's lock when the
duplicate runs from start to end (undoes the element, saves, releases the lock, stores the
outcome). The first job must then undo nothing: every completed element's undo runs exactly
once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import DispatchHandle, FanOut, Input, Reactor, config, element, input, map_step, step
from reactor.config import Runtime
from reactor.engine.maps import rollback as map_rollback
from reactor.jobs.handlers import JobContext
from reactor.jobs.handlers.map_element import handle_map_element
from reactor.jobs.handlers.map_element_rollback import handle_map_element_rollback
from reactor.memory import MemoryStorage
from reactor.model.records import MapRollbackMetadata
from reactor.ports.payloads import MapElementPayload, MapElementRollbackPayload, Payload, job
from tests.backends import BACKENDS, backend_urls
from tests.jobs.test_map_handlers import Recorder

#: Side effects of the element steps and their undos, in order.
JOURNAL: list[str] = []


class Seat(Reactor, name="test_map_rollback_race.seat"):
    n = Input(int)

    @step(n=input("n"))
    def book(inputs: Any, ctx: Any) -> int:
        JOURNAL.append(f"book:{inputs.n}")
        return int(inputs.n)

    @book.undo
    def free(value: Any, inputs: Any, ctx: Any) -> None:
        JOURNAL.append(f"free:{inputs.n}")


class Flight(Reactor, name="test_map_rollback_race.flight"):
    seats = Input(list)
    booked = map_step(Seat, source=input("seats"), args={"n": element("booked")},
                      fan_out=FanOut(batch_size=2))


@pytest.fixture(params=BACKENDS)
def rt(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    JOURNAL.clear()
    recorder = Recorder()
    if request.param == "memory":
        storage: Any = MemoryStorage()
    else:
        storage, _router = backend_urls(
            request.param, service_url, f"rr{uuid.uuid4().hex[:10]}", area="race"
        )
    runtime = config.configure(storage=storage, router=recorder)  # type: ignore[arg-type]
    yield runtime
    config.reset()


def _jc(rt: Runtime, payload: Payload) -> JobContext:
    return JobContext(runtime=rt, job=job(payload), liveness_wait=0.0)


def _completed_map_rolling_back(rt: Runtime) -> MapRollbackMetadata:
    """A fan-out map of three completed elements whose distributed rollback started."""
    handle = Flight.run(seats=[1, 2, 3])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    for index in range(3):
        payload = MapElementPayload(map_id=meta.map_id, index=index)
        handle_map_element(_jc(rt, payload), payload)
    rollback = MapRollbackMetadata(
        map_id=meta.map_id, total=3, batch_size=2, step_name="booked",
        owner_context_id=meta.owner_context_id, owner_reactor=meta.owner_reactor,
        element_reactor=Seat.reactor_name, started_at=rt.storage.now(),
    )
    assert rt.storage.map_rollbacks.start(rollback)[0]
    return rollback


def test_a_duplicate_element_rollback_job_racing_the_first_undoes_nothing_again(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rollback = _completed_map_rolling_back(rt)
    assert sorted(JOURNAL) == ["book:1", "book:2", "book:3"]
    payload = MapElementRollbackPayload(map_id=rollback.map_id, position=0)  # element 2
    take_lock = map_rollback.liveness_lock
    raced: list[str] = []

    def duplicate_first(env: Any, key: str, *, wait: float = 0.0) -> Any:
        if not raced:  # the first job is about to take the element's lock: the duplicate
            raced.append(key)  # runs to its end first (undo, save, release, outcome)
            handle_map_element_rollback(_jc(rt, payload), payload)
            assert JOURNAL.count("free:3") == 1
        return take_lock(env, key, wait=wait)

    monkeypatch.setattr(map_rollback, "liveness_lock", duplicate_first)
    handle_map_element_rollback(_jc(rt, payload), payload)
    assert raced  # the hook fired: the two jobs did race
    assert JOURNAL.count("free:3") == 1  # undone exactly once
    assert [e for e in JOURNAL if e.startswith("free")] == ["free:3"]
    outcome = rt.storage.map_rollbacks.outcome(rollback.map_id, 0)
    assert outcome is not None and (outcome.index, outcome.outcome) == (2, "undone")
