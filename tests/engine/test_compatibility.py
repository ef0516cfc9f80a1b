"""Compatibility rules: a run a process cannot safely continue under its definition is never
run silently (docs/deploys.md, "Compatibility rules"; reactor/engine/compatibility.py).

Each test starts a run under one definition of a reactor name (``V1``) and continues it under
another (``V2``, registered under the same name as a new release would be): in a worker the
run is stored ``needs_version`` with the rule and step, nothing of it runs; a synchronous
caller gets a ``DefinitionMismatchError`` and nothing changes; ``resume_version`` continues it
once the old definition is back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Background, DispatchHandle, Reactor, config, registry
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.dsl import Input, input, interrupt, result, step
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.env import make_env
from reactor.errors import DefinitionMismatchError, RunStateError
from reactor.jobs.worker import Worker
from reactor.model.engine_state import DefinitionStamp
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
          b_reads: str = "a", extra: bool = False, mode: str = "worker") -> type[Reactor]:
    """A release of the reactor :data:`NAME`: ``a`` (with an undo) hands its result to
    ``b``; a worker runs ``b`` (``Background(after="a")``). ``with_a=False`` removes ``a``,
    ``undo=False`` drops its undo, ``b_reads="order"`` rewires ``b`` to the input,
    ``extra=True`` adds a step ``c`` after ``b`` (and changes ``b``'s body).
    ``mode="sync"``: all in the caller; ``"gate"``: in the caller, ``b`` after an interrupt
    ``approval``."""
    registry.unregister(NAME)

    class Flow(Reactor, name=NAME):
        background = Background(before="b") if mode == "worker" else None
        if mode == "gate":
            approval = interrupt(wait_for="a" if with_a else None)
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

        @step(reservation=result("a") if with_a and b_reads == "a" else input("order"),
              wait_for=["approval"] if mode == "gate" else None)
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


def test_a_body_change_alone_keeps_the_fingerprint_and_costs_no_judging(
    runtime: Runtime,
) -> None:
    events: list[str] = []
    v1 = _flow(events)
    run_id = _started(runtime, v1)
    v2 = _flow(events)  # the same shape: another release of the bodies
    assert v2.definition is not v1.definition
    assert v2.find(run_id).definition == v2.find(run_id).definition
    _work(runtime)
    assert _status(runtime, run_id) is RunStatus.COMPLETED


def test_cancel_of_a_held_run_rolls_back_what_it_completed(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    v2 = _flow(events, b_reads="order")  # a still declared with its undo
    _work(runtime)
    _held(runtime, run_id)
    v2.cancel(run_id, reason="rolled back instead of deploying the old release")
    assert _status(runtime, run_id) is RunStatus.CANCELLED
    assert events == ["run a", "undo a"]


def test_cancel_of_a_held_run_whose_undo_is_lost_is_refused(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    v2 = _flow(events, with_a=False)
    _work(runtime)
    _held(runtime, run_id)
    with pytest.raises(DefinitionMismatchError) as caught:
        v2.cancel(run_id)
    assert caught.value.step == "a"
    assert _status(runtime, run_id) is RunStatus.NEEDS_VERSION and events == ["run a"]


# ------------------------------------------------------------------ synchronous callers


def test_undo_under_a_definition_without_the_completed_step_changes_nothing(
    runtime: Runtime,
) -> None:
    events: list[str] = []
    v1 = _flow(events, mode="sync")
    run_id = v1.run(order="o-1").run_id
    assert _status(runtime, run_id) is RunStatus.COMPLETED
    v2 = _flow(events, with_a=False, mode="sync")
    with pytest.raises(DefinitionMismatchError) as caught:
        v2.undo(run_id)
    assert caught.value.step == "a" and "completed_step_removed" in str(caught.value)
    # a finished run has nothing to resume: the way out is its old definition, or a migration
    assert "--import MODULE" in str(caught.value) and "resume_version" not in str(caught.value)
    assert _status(runtime, run_id) is RunStatus.COMPLETED and events == ["run a", "run b r-o-1"]
    _switch(v1)
    v1.undo(run_id)
    assert events[-1] == "undo a"


def test_resume_under_a_rewired_pending_step_changes_nothing(runtime: Runtime) -> None:
    events: list[str] = []
    v1 = _flow(events, mode="gate")
    paused = v1.run(order="o-1")
    run_id = paused.run_id
    assert run_id is not None and _status(runtime, run_id) is RunStatus.PAUSED
    v2 = _flow(events, b_reads="order", mode="gate")
    with pytest.raises(DefinitionMismatchError) as caught:
        v2.resume(run_id, payload="ok")
    assert caught.value.step == "b" and "pending_step_rewired" in str(caught.value)
    assert "Reactor.resume_version" in str(caught.value)
    assert _status(runtime, run_id) is RunStatus.PAUSED and events == ["run a"]
    _switch(v1)
    v1.resume(run_id, payload="ok")
    assert _status(runtime, run_id) is RunStatus.COMPLETED
    assert events == ["run a", "run b r-o-1"]


def test_a_run_stored_without_step_digests_is_judged_by_the_rules_that_need_none(
    runtime: Runtime,
) -> None:
    events: list[str] = []
    env = make_env(runtime)
    run_id = _started(runtime, _flow(events))
    ctx = load_context(env, run_id, open_secrets=False)
    assert ctx is not None and ctx.engine_state.definition is not None
    stamp = ctx.engine_state.definition
    assert stamp.steps is not None and set(stamp.steps) == {"a", "b"}
    # as the release before step digests stored it
    ctx.engine_state = replace(ctx.engine_state, definition=DefinitionStamp(
        stamp.fingerprint, stamp.version))
    Checkpointer(env, ctx).save()
    _flow(events, b_reads="order")  # rewired: cannot be told without digests, continued
    _work(runtime)
    assert _status(runtime, run_id) is RunStatus.COMPLETED
    assert events == ["run a", "run b o-1"]


def test_reactor_runs_list_filters_needs_version(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    run_id = _started(runtime, _flow(events))
    other = _started(runtime, _flow(events))
    v2 = _flow(events, b_reads="order")
    _work(runtime)
    v2.cancel(other)  # rolled back: no longer needs_version
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    out = CliRunner().invoke(app, ["runs", "list", "--json", "--status", "needs_version"])
    assert out.exit_code == 0, out.output
    assert [row["run_id"] for row in json.loads(out.stdout)["runs"]] == [run_id]
