"""Rollback semantics (docs/concepts.md, "Rollback")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.dsl import (
    Input,
    input,
    result,
    step,
)
from reactor.errors import ArgumentResolutionError, CompensationError, InputValidationError
from reactor.model.results import Failure, RollbackFailure, Success
from reactor.model.signals import fail
from reactor.model.status import RunStatus


def _recording_step(events: list[str], name: str, *, undo_fails: str | None = None) -> Any:
    """A function step that logs its run and undo (optionally failing the undo)."""

    def run(inputs: Any, ctx: Any) -> str:
        events.append(f"run {name}")
        return name

    spec = step(run, **{})

    @spec.undo
    def _(result: Any, inputs: Any, ctx: Any) -> Any:
        events.append(f"undo {name}")
        if undo_fails == "return":
            return Failure(f"cannot undo {name}")
        if undo_fails == "raise":
            raise RuntimeError(f"undo {name} exploded")
        return None

    return spec


def test_undo_newest_first_across_dag_branches(events: list[str]) -> None:
    class R(Reactor):
        left1 = _recording_step(events, "left1")
        right1 = _recording_step(events, "right1")
        left2 = step(lambda inputs, ctx: events.append("run left2"), x=result("left1"))
        right2 = step(lambda inputs, ctx: events.append("run right2"), x=result("right1"))

        @step(wait_for=["left2", "right2"])
        def boom(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("boom")

    for name in ("left2", "right2"):
        spec = R.definition.steps[name]
        assert spec.undo_function is None
    r = R.run()
    assert isinstance(r, Failure)
    runs = [e for e in events if e.startswith("run")]
    undos = [e for e in events if e.startswith("undo")]
    assert runs == ["run left1", "run right1", "run left2", "run right2"]
    assert undos == ["undo right1", "undo left1"]  # newest completed first
    view = R.find(r.run_id or "")
    assert [e.type for e in view.trace][-6:] == ["failed", "compensate"] + ["undo"] * 4
    assert [e.step for e in view.trace if e.type == "undo"] == [
        "right2", "left2", "right1", "left1"
    ]
    assert view.undo_stack == ()
    assert view.status is RunStatus.FAILED


def test_compensate_runs_once_when_the_body_started(events: list[str]) -> None:
    class Charge(Step):
        def run(self) -> None:
            events.append("charge")
            raise RuntimeError("declined")

        def compensate(self) -> None:
            events.append(f"compensate {type(self.error).__name__} {self.failure.step_name}")

    class R(Reactor):
        charge = step(Charge)

    r = R.run()
    assert isinstance(r, Failure)
    assert isinstance(r.error, RuntimeError) and r.step_name == "charge"
    assert events == ["charge", "compensate RuntimeError charge"]


def test_no_compensate_when_argument_resolution_fails(events: list[str]) -> None:
    class R(Reactor):
        first = _recording_step(events, "first")

        @step(x=result("first", "missing.key"))
        def second(inputs: Any, ctx: Any) -> None:
            events.append("second body")

        @second.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("compensate second")

    r = R.run()
    assert isinstance(r, Failure)
    assert isinstance(r.error, ArgumentResolutionError)
    assert not r.is_retryable
    assert events == ["run first", "undo first"]


def test_no_compensate_when_step_inputs_are_invalid(events: list[str]) -> None:
    class Typed(Step):
        amount = Input(int, gt=0)

        def run(self) -> None:
            events.append("body")

        def compensate(self) -> None:
            events.append("compensate")

    class R(Reactor):
        first = _recording_step(events, "first")
        typed = step(Typed, amount=result("first"))

    r = R.run()
    assert isinstance(r, Failure)
    assert isinstance(r.error, InputValidationError)
    assert r.validation_errors == {"amount": ["Input should be a valid integer, unable to "
                                              "parse string as an integer"]}
    assert events == ["run first", "undo first"]


def test_rollback_failures_are_collected_and_never_stop_the_rest(events: list[str]) -> None:
    class R(Reactor):
        a = _recording_step(events, "a")
        b = _recording_step(events, "b", undo_fails="return")
        c = _recording_step(events, "c", undo_fails="raise")

        @step(wait_for=["a", "b", "c"])
        def boom(inputs: Any, ctx: Any) -> None:
            fail("no")

    r = R.run()
    assert isinstance(r, Failure)
    assert r.error == "no"  # undo failures do not change the error
    assert [e for e in events if e.startswith("undo")] == ["undo c", "undo b", "undo a"]
    assert [(f.step, f.kind, f.reason) for f in r.rollback_failures] == [
        ("c", "undo", "raised"),
        ("b", "undo", "returned_failure"),
    ]
    assert "undo c exploded" in r.rollback_failures[0].message
    view = R.find(r.run_id or "")
    assert [e.type for e in view.trace].count("undo_failure") == 2


def test_failing_compensate_turns_error_into_compensation_error(events: list[str]) -> None:
    class R(Reactor):
        a = _recording_step(events, "a")

        @step(wait_for=["a"])
        def pay(inputs: Any, ctx: Any) -> None:
            raise ValueError("card declined")

        @pay.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate saw {error}")
            raise RuntimeError("refund API down")

    r = R.run()
    assert isinstance(r, Failure)
    assert isinstance(r.error, CompensationError)
    assert r.error.step_name == "pay" and r.step_name == "pay"
    assert isinstance(r.error.original, ValueError)
    assert [(f.step, f.kind, f.reason) for f in r.rollback_failures] == [
        ("pay", "compensate", "raised")
    ]
    assert events == ["run a", "compensate saw card declined", "undo a"]  # undo still ran


def test_undo_entries_are_popped_only_after_the_undo_returns(events: list[str]) -> None:
    class R(Reactor):
        a = _recording_step(events, "a")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> str:
            return "b"

        @b.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            raise KeyboardInterrupt

        @step(wait_for=["b"])
        def boom(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("boom")

    with pytest.raises(KeyboardInterrupt) as caught:
        R.run()
    # b's entry is still on the stack: its undo never returned.
    view = R.find(caught.value.reactor_run_id)  # type: ignore[attr-defined]
    assert view.status is RunStatus.ABORTED
    assert view.undo_stack == ("a", "b")
    assert events == ["run a"]


def test_undo_and_compensate_skip_input_validation(events: list[str]) -> None:
    class Strict(Step):
        amount = Input(int, gt=0)

        def run(self) -> int:
            return int(self.inputs.amount)

        def undo(self) -> None:
            events.append(f"undo {self.inputs.amount} -> {self.result}")

    # Called directly, undo never enforces the contract.
    assert isinstance(Strict.call_undo(5, {"amount": -1}), Success)
    assert events == ["undo -1 -> 5"]


def test_failures_collected_before_an_interruption_survive_it(events: list[str]) -> None:
    class R(Reactor):
        a = _recording_step(events, "a", undo_fails="raise")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> str:
            return "b"

        @b.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo b")
            if events.count("undo b") == 1:
                raise KeyboardInterrupt

        @step(wait_for=["b"])
        def c(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("boom")

        @c.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            raise RuntimeError("compensate broke")

    with pytest.raises(KeyboardInterrupt) as caught:
        R.run()
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    undone = R.undo(run_id)
    assert isinstance(undone, Failure)
    # The compensate failure was recorded before the interruption and is still reported.
    assert [(f.step, f.kind) for f in undone.rollback_failures] == [
        ("c", "compensate"), ("a", "undo")
    ]
    assert events == ["run a", "undo b", "undo b", "undo a"]  # b's undo is repeated


def test_rollback_failure_helpers() -> None:
    f = RollbackFailure(step="capture", kind="undo", reason="raised", message="x")
    assert f.nested("payment").step == "payment.capture"
    placed = f.in_map("reserve", 2)
    assert (placed.map_step, placed.element_index) == ("reserve", 2)
    assert placed.in_map("outer", 5) == placed  # keeps the innermost attribution


def test_reactor_input_redaction_in_failure_inputs() -> None:
    class R(Reactor):
        token = Input(str, redact=True)
        user = Input(str)

        @step(token=input("token"), user=input("user"))
        def charge(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("declined")

    r = R.run(token="secret-token", user="ann")
    assert isinstance(r, Failure)
    assert r.inputs == {"token": "[REDACTED]", "user": "ann"}
