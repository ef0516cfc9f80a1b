"""Embedded workers of ``local://`` (reactor/jobs/embedded.py): ``reactor.configure`` with the
default ``memory://`` + ``local://`` runs background runs and fan-out maps with no separate
worker; ``local://?workers=0`` is a bare queue; ``router_from_url`` alone starts nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    Background,
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
from reactor.engine.dispatch import DispatchHandle
from reactor.errors import AsyncWaitTimeoutError
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter
from reactor.model.status import RunStatus
from reactor.ports.router import Job


class Doubled(Reactor, name="test_embedded.doubled"):
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Square(Reactor, name="test_embedded.square"):
    n = Input(int)

    @step(n=input("n"))
    def square(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) ** 2

    returns = "square"


class Squares(Reactor, name="test_embedded.squares"):
    items = Input(list)
    squares = map_step(Square, source=input("items"), args={"n": element("squares")},
                       fan_out=FanOut(batch_size=2))
    returns = "squares"


def _finished(out: Any) -> Any:
    """The final result of a run that may have finished before ``run()`` returned."""
    return out.wait(timeout=20) if isinstance(out, DispatchHandle) else out


def _worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("reactor-worker-")]


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def test_the_default_runtime_runs_background_runs_without_a_worker() -> None:
    config.configure()  # memory:// + local://
    result = _finished(Doubled.run(n=21))
    assert isinstance(result, Success) and result.value == 42
    assert result.run_id is not None
    assert Doubled.find(result.run_id).status is RunStatus.COMPLETED


def test_the_default_runtime_runs_fan_out_maps() -> None:
    config.configure(router="local://")
    result = _finished(Squares.run(items=[1, 2, 3]))
    assert isinstance(result, Success)
    assert [r.value for r in result.value] == [1, 4, 9]


def test_workers_start_lazily_with_the_url_count_and_stop_on_reset() -> None:
    runtime = config.configure(router="local://?workers=3")
    assert isinstance(runtime.router, LocalRouter) and not runtime.router.has_consumers
    assert _worker_threads() == []  # nothing enqueued yet
    out = Doubled.run(n=1)
    assert len(_worker_threads()) == 3 and runtime.router.has_consumers
    assert isinstance(_finished(out), Success)
    config.reset()
    assert _worker_threads() == []


def test_reconfiguring_stops_the_previous_workers() -> None:
    config.configure(router="local://?workers=2")
    assert isinstance(_finished(Doubled.run(n=1)), Success)
    config.configure(router="local://?workers=0")
    assert _worker_threads() == []


def test_workers_0_is_a_queue_only_and_the_timeout_says_nobody_consumes_it() -> None:
    runtime = config.configure(router="local://?workers=0")
    handle = Doubled.run(n=2)
    assert isinstance(handle, DispatchHandle)
    assert _worker_threads() == []
    with pytest.raises(AsyncWaitTimeoutError, match="no worker consumes"):
        handle.wait(timeout=0.05)
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1  # driven by hand
    result = handle.wait(timeout=1)
    assert isinstance(result, Success) and result.value == 4


def test_router_from_url_alone_gets_no_workers() -> None:
    router = config.router_from_url("local://")
    try:
        router.enqueue(Job(kind="run", payload={}))
        assert _worker_threads() == []
        assert isinstance(router, LocalRouter) and not router.has_consumers
    finally:
        router.close()
