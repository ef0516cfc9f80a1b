"""Resuming a composed child instead of re-running it (``reactor.engine.compose``, "Resume").

A crash is simulated by an interruption raised inside a child step: the stored record is put
back as it was at the last checkpoint before that step (what a SIGKILL leaves behind: the
``aborted`` save never happens), then the run is delivered the way a worker resumes it.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step, with_semaphore
from reactor.dsl import (
    Input,
    compose,
    input,
    step,
)
from reactor.engine.env import make_env
from reactor.engine.parks import Park
from reactor.model.records import ContextRecord
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus
from tests.engine.coordination_helpers import (
    deliver,
    enqueue,
    manual_runtime,
    stored,
)


class _Crash:
    """Raise ``KeyboardInterrupt`` once, remembering the record's last checkpoint first."""

    def __init__(self) -> None:
        self.armed = True
        self.snapshot: ContextRecord | None = None

    def maybe(self, run_id: str) -> None:
        if self.armed:
            self.armed = False
            self.snapshot = make_env().storage.contexts.load(run_id)
            raise KeyboardInterrupt

    def restore(self) -> None:
        """Put the pre-crash record back (the ``aborted`` save of a killed process never
        happened)."""
        assert self.snapshot is not None
        make_env().storage.contexts.save(self.snapshot)


def _counted(events: list[str], name: str, *, crash: _Crash | None = None,
             fails: bool = False) -> type[Step]:
    class Counted(Step):
        n = Input(int)

        def run(self) -> str:
            events.append(f"run {name}")
            if crash is not None:
                crash.maybe(self.context.root_run_id)
            if fails:
                raise RuntimeError(f"{name} declined")
            return name

        def undo(self) -> None:
            events.append(f"undo {name}")

    Counted.__name__ = Counted.__qualname__ = f"Counted_{name}"
    return Counted


def _run_and_crash(parent: Any, crash: _Crash) -> str:
    with pytest.raises(KeyboardInterrupt) as caught:
        parent.run(n=1)
    run_id = str(caught.value.reactor_run_id)  # type: ignore[attr-defined]
    crash.restore()
    assert stored(run_id).status is RunStatus.RUNNING
    return run_id


def _child(events: list[str], crash: _Crash, *, c_fails: bool = False) -> Any:
    class Child(Reactor):
        n = Input(int)
        a = step(_counted(events, "a"), n=input("n"))
        b = step(_counted(events, "b", crash=crash), n=input("n"), wait_for=["a"])
        c = step(_counted(events, "c", fails=c_fails), n=input("n"), wait_for=["b"])
        returns = "c"

    return Child


def _parent(events: list[str], child: Any, *, ship_fails: bool = False) -> Any:
    class Parent(Reactor):
        n = Input(int)
        reserve = step(_counted(events, "reserve"), n=input("n"))
        pay = compose(child, n=input("n"), wait_for=["reserve"])
        ship = step(_counted(events, "ship", fails=ship_fails), n=input("n"), wait_for=["pay"])
        returns = "pay"

    return Parent


def _times(events: list[str], entry: str) -> int:
    return events.count(entry)


def test_a_resumed_child_continues_from_its_checkpoint(events: list[str]) -> None:
    crash = _Crash()
    Parent = _parent(events, _child(events, crash))
    run_id = _run_and_crash(Parent, crash)
    child = stored(run_id).child("pay")
    assert child is not None and set(child.intermediate_results) == {"a"}

    result = deliver(Parent.definition, run_id)

    assert result == Success("c")
    assert _times(events, "run a") == 1  # completed before the crash: never run again
    assert _times(events, "run b") == 2  # in flight at the crash: at least once
    assert _times(events, "run c") == 1
    done = stored(run_id)
    assert done.status is RunStatus.COMPLETED
    resumed = done.child("pay")
    assert resumed is not None and resumed.context_id == child.context_id
    assert [e.step for e in resumed.undo_stack] == ["a", "b", "c"]


def test_a_resumed_child_that_fails_undoes_every_completed_step_once(
    events: list[str],
) -> None:
    crash = _Crash()
    Parent = _parent(events, _child(events, crash, c_fails=True))
    run_id = _run_and_crash(Parent, crash)

    result = deliver(Parent.definition, run_id)

    assert isinstance(result, Failure) and result.step_name == "pay"
    for name in ("a", "b", "reserve"):
        assert _times(events, f"undo {name}") == 1, events
    assert _times(events, "run a") == 1
    assert stored(run_id).status is RunStatus.FAILED


def test_a_later_parent_failure_undoes_the_resumed_child_once(events: list[str]) -> None:
    crash = _Crash()
    Parent = _parent(events, _child(events, crash), ship_fails=True)
    run_id = _run_and_crash(Parent, crash)

    result = deliver(Parent.definition, run_id)

    assert isinstance(result, Failure) and result.step_name == "ship"
    assert _times(events, "run a") == 1
    for name in ("a", "b", "c", "reserve"):
        assert _times(events, f"undo {name}") == 1, events


def test_compose_in_compose_resumes_every_level(events: list[str]) -> None:
    crash = _Crash()
    Inner = _child(events, crash, c_fails=True)

    class Middle(Reactor):
        n = Input(int)
        hold = step(_counted(events, "hold"), n=input("n"))
        inner = compose(Inner, n=input("n"), wait_for=["hold"])

    Parent = _parent(events, Middle)
    run_id = _run_and_crash(Parent, crash)
    middle = stored(run_id).child("pay")
    assert middle is not None and middle.child("inner") is not None

    result = deliver(Parent.definition, run_id)

    assert isinstance(result, Failure) and result.step_name == "pay"
    for name in ("reserve", "hold", "a"):
        assert _times(events, f"run {name}") == 1, events
    for name in ("reserve", "hold", "a", "b"):
        assert _times(events, f"undo {name}") == 1, events


def test_stored_child_outcomes_are_adopted_without_running(events: list[str]) -> None:
    crash = _Crash()
    crash.armed = False
    Parent = _parent(events, _child(events, crash))
    first = Parent.run(n=1)
    assert first == Success("c")
    run_id = str(first.run_id)
    # The parent died between the child's final save and its own record of the compose step.
    env = make_env()
    ctx = stored(run_id)
    del ctx.intermediate_results["pay"], ctx.intermediate_results["ship"]
    ctx.undo_stack = [e for e in ctx.undo_stack if e.step == "reserve"]
    ctx.status = RunStatus.RUNNING
    from reactor.engine.checkpoint import Checkpointer

    Checkpointer(env, ctx).save()
    events.clear()

    assert deliver(Parent.definition, run_id) == Success("c")
    assert events == ["run ship"]  # the completed child is adopted, not run again


def test_holds_a_parked_child_recorded_are_re_adopted() -> None:
    _, storage = manual_runtime()
    from reactor.coordination import Semaphore

    runs: list[str] = []

    class Child(Reactor):
        n = Input(int)
        coordination = [with_semaphore(key="child-pool", limit=1)]

        @step(n=input("n"), coordination=[with_semaphore(key="pool", limit=1)])
        def post(inputs: Any, ctx: Any) -> str:
            runs.append("post")
            return "posted"

    class Parent(Reactor):
        n = Input(int)
        pay = compose(Child, n=input("n"))
        returns = "pay"

    blocker = Semaphore(storage.semaphores, "pool", limit=1, holder="other", auto_extend=False)
    assert blocker.try_acquire()
    enqueue(Parent.definition, {"n": 1}, "run-1")
    with pytest.raises(Park):
        deliver(Parent.definition, "run-1")
    child = stored("run-1").child("pay")
    assert child is not None
    assert child.engine_state.parked_holds["@reactor"][0].key == "child-pool"

    assert blocker.release()
    assert deliver(Parent.definition, "run-1") == Success({"post": "posted"})  # re-adopted
    assert runs == ["post"]
    left = storage.semaphores.state("child-pool")
    assert left is None or not left.holders  # released at the end, nothing leaked
