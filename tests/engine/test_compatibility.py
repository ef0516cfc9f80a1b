"""Compatibility rules: a run a process cannot safely continue under its definition is never
run silently (docs/deploys.md, "Compatibility rules"; reactor/engine/compatibility.py).

Each test starts a run under one definition of a reactor name (``V1``) and continues it under
another (``V2``, registered under the same name as a new release would be): in a worker the
run is stored ``needs_version`` with the rule and step, nothing of it runs; a synchronous
caller gets a ``DefinitionMismatchError`` and nothing changes; ``resume_version`` continues it
once the old definition is back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, config, registry
from reactor.config import Runtime
from reactor.dsl import Input, input, result, step
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.errors import DefinitionMismatchError, RunStateError
from reactor.jobs.worker import Worker
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import configure_on

NAME = "tests.compat_rules.flow"


@pytest.fixture(params=["memory", "redis"])
def runtime(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on memory and Redis (a fresh namespace), on a test clock."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="compat")
    config.reset()
    registry.unregister(NAME)


def _flow(events: list[str], *, with_a: bool = True, undo: bool = True,
          b_reads: str = "a", extra: bool = False) -> type[Reactor]:
    """A release of the reactor :data:`NAME`: ``a`` (with an undo) hands its result to
    ``b``; a worker runs ``b`` (``Background(after="a")``). ``with_a=False`` removes ``a``,
    ``undo=False`` drops its undo, ``b_reads="order"`` rewires ``b`` to the input,
    ``extra=True`` adds a step ``c`` after ``b`` (and changes ``b``'s body)."""
    registry.unregister(NAME)

    class Flow(Reactor, name=NAME):
        background = Background(before="b")
        order = Input(str)

        if with_a:
            @step(order=input("order"))
            def a(inputs: Any, ctx: Any) -> str:
                events.append("run a")
                return f"r-{inputs.order}"

            if undo:
                @a.undo
                def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                    events.append("undo a")

        @step(reservation=result("a") if with_a and b_reads == "a" else input("order"))
        def b(inputs: Any, ctx: Any) -> str:
            events.append(f"run b {inputs.reservation}{' (v2)' if extra else ''}")
            return "charged"

        if extra:
            @step(wait_for=["b"])
            def c(inputs: Any, ctx: Any) -> str:
                events.append("run c")
                return "c"

    return Flow


def _switch(to: type[Reactor]) -> None:
    """Register ``to`` under :data:`NAME`, as a deploy of another release would."""
    registry.unregister(NAME)
    registry.register(NAME, to)


def _started(runtime: Runtime, v1: type[Reactor]) -> str:
    handle = v1.run(order="o-1")
    assert isinstance(handle, DispatchHandle)
    return handle.run_id


def _work(runtime: Runtime) -> None:
    Worker(runtime, liveness_wait=0.0).run_pending()


def _status(runtime: Runtime, run_id: str) -> RunStatus:
    stored = load_context(make_env(runtime), run_id, open_secrets=False)
    assert stored is not None
    return stored.status


def _held(runtime: Runtime, run_id: str) -> Any:
    stored = load_context(make_env(runtime), run_id, open_secrets=False)
    assert stored is not None
    assert stored.status is RunStatus.NEEDS_VERSION
    return stored.engine_state.needs_version


# ------------------------------------------------------------------ the worker's run job


def test_a_completed_step_removed_holds_the_run_until_its_version_is_back(
    runtime: Runtime, caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    v1 = _flow(events)
    run_id = _started(runtime, v1)
    assert events == ["run a"]
    _flow(events, with_a=False)  # the new release no longer declares a
    with caplog.at_level(logging.WARNING, logger="reactor.deploys"):
        _work(runtime)
    held = _held(runtime, run_id)
    assert (held.step, held.rule, held.status) == ("a", "completed_step_removed", "running")
    assert events == ["run a"]  # b did not run, a is not lost
    assert any("event=needs_version" in r.getMessage() and run_id in r.getMessage()
               for r in caplog.records)
    view = v1.find(run_id)
    assert view.status is RunStatus.NEEDS_VERSION and view.needs_version == held
    _work(runtime)  # no job left: nothing re-dispatches it
    assert _status(runtime, run_id) is RunStatus.NEEDS_VERSION
    with pytest.raises(DefinitionMismatchError) as caught:  # still the new release
        registry.get(NAME).resume_version(run_id)
    assert caught.value.step == "a"
    _switch(v1)  # the old release is deployed again
    handle = v1.resume_version(run_id)
    assert isinstance(handle, DispatchHandle)
    _work(runtime)
    assert _status(runtime, run_id) is RunStatus.COMPLETED
    assert events == ["run a", "run b r-o-1"]
    assert v1.find(run_id).needs_version is None
    with pytest.raises(RunStateError):
        v1.resume_version(run_id)


def test_a_pending_step_rewired_is_not_run_with_other_inputs(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    _flow(events, b_reads="order")
    _work(runtime)
    held = _held(runtime, run_id)
    assert (held.step, held.rule) == ("b", "pending_step_rewired")
    assert events == ["run a"]


def test_a_completed_step_that_lost_its_undo_is_held(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    _flow(events, undo=False)
    _work(runtime)
    held = _held(runtime, run_id)
    assert (held.step, held.rule) == ("a", "undo_removed")
    assert events == ["run a"]


def test_body_changes_and_steps_added_after_the_position_continue(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    _flow(events, extra=True)
    _work(runtime)
    assert _status(runtime, run_id) is RunStatus.COMPLETED
    assert events == ["run a", "run b r-o-1 (v2)", "run c"]
