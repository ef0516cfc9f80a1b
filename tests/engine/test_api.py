"""Run, find and undo by id (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.config import Runtime
from reactor.dsl import (
    Input,
    compose,
    element,
    input,
    map_step,
    step,
)
from reactor.errors import (
    DeserializationError,
    InputValidationError,
    RunNotFoundError,
    RunStateError,
    UndoError,
)
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus


def _interrupted_run(reactor: Any, **inputs: Any) -> str:
    with pytest.raises(KeyboardInterrupt) as caught:
        reactor.run(**inputs)
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    assert isinstance(run_id, str)
    assert any(run_id in note for note in caught.value.__notes__)
    return run_id


def test_invalid_inputs_store_a_failed_run_and_run_no_step(events: list[str]) -> None:
    class R(Reactor):
        amount = Input(int, gt=0)
        token = Input(str, redact=True)
        s = step(lambda inputs, ctx: events.append("ran"))

    r = R.run(amount=0, token="secret", extra=1)
    assert isinstance(r, Failure) and isinstance(r.error, InputValidationError)
    assert not r.is_retryable and r.step_name is None
    assert r.validation_errors == {
        "extra": ["unexpected input (not declared)"],
        "amount": ["Input should be greater than 0"],
    }
    assert r.inputs == {"amount": 0, "token": "[REDACTED]", "extra": 1}
    assert events == []
    view = R.find(r.run_id or "")
    assert view.status is RunStatus.FAILED
    assert view.inputs["token"] == "[REDACTED]"
    assert view.failure is not None and view.failure.validation_errors == r.validation_errors


def test_find_shows_a_redacted_view(events: list[str]) -> None:
    class Charge(Step):
        token = Input(str, redact=True)
        amount = Input(int)

        def run(self) -> str:
            raise RuntimeError(f"declined {self.inputs.amount}")

    class R(Reactor):
        token = Input(str, redact=True)
        amount = Input(int)
        charge = step(Charge)

    r = R.run(token="tok_live_123", amount=5)
    assert isinstance(r, Failure)
    view = R.find(r.run_id or "")
    assert view.inputs == {"token": "[REDACTED]", "amount": 5}
    assert view.failure is not None
    assert view.failure.inputs == {"token": "[REDACTED]", "amount": 5}
    assert view.failure.error == "declined 5"  # stored failures keep the message
    assert view.failure.exception_class == "RuntimeError"
    assert "tok_live_123" not in repr(view)
    assert [(e.type, e.step) for e in view.trace] == [("failed", "charge"),
                                                      ("compensate", "charge")]


def test_find_unknown_or_foreign_run_raises() -> None:
    class A(Reactor):
        s = step(lambda inputs, ctx: 1)

    class B(Reactor):
        s = step(lambda inputs, ctx: 1)

    r = A.run()
    with pytest.raises(RunNotFoundError):
        A.find("nope")
    with pytest.raises(RunNotFoundError):
        B.find(r.run_id or "")
    assert Reactor.find(r.run_id or "").reactor == A.reactor_name


def test_malformed_stored_context_raises_deserialization_error(runtime: Runtime) -> None:
    class A(Reactor):
        s = step(lambda inputs, ctx: 1)

    r = A.run()
    record = runtime.storage.contexts.load(r.run_id or "")
    assert record is not None
    runtime.storage.contexts.save(
        dataclasses.replace(record, document='{"schema_version": "1", "context_id": "x"}')
    )
    with pytest.raises(DeserializationError):
        A.find(r.run_id or "")
    runtime.storage.contexts.save(dataclasses.replace(record, document="not json"))
    with pytest.raises(DeserializationError):
        A.undo(r.run_id or "")


def test_aborted_run_keeps_its_stack_and_undo_finishes_it(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> str:
            events.append("run a")
            return "a"

        @a.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"undo a {result}")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> None:
            events.append("run b")
            raise KeyboardInterrupt

        @b.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate b ({error})")

    run_id = _interrupted_run(R)
    assert events == ["run a", "run b"]  # no rollback in the interrupted process
    view = R.find(run_id)
    assert view.status is RunStatus.ABORTED and view.undo_stack == ("a",)
    result = R.undo(run_id)
    assert result == Success(None) and result.run_id == run_id
    assert events[2:] == ["compensate b (step interrupted by KeyboardInterrupt)", "undo a a"]
    assert R.find(run_id).status is RunStatus.CANCELLED
    assert R.undo(run_id).success  # idempotent: nothing left
    assert events[4:] == []


def test_interrupted_compensate_is_rerun_by_undo(events: list[str]) -> None:
    calls = {"compensate": 0}

    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("fails")

        @a.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            calls["compensate"] += 1
            if calls["compensate"] == 1:
                raise SystemExit(1)
            events.append(f"compensated {error}")

    with pytest.raises(SystemExit) as caught:
        R.run()
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    assert R.find(run_id).status is RunStatus.ABORTED
    assert R.undo(run_id).success
    assert events == ["compensated fails"]


def test_abort_inside_a_composed_child_is_finished_from_the_root(events: list[str]) -> None:
    class Child(Reactor):
        @step()
        def c1(inputs: Any, ctx: Any) -> int:
            return 1

        @c1.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo c1")

        @step(wait_for=["c1"])
        def c2(inputs: Any, ctx: Any) -> None:
            raise KeyboardInterrupt

        @c2.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("compensate c2")

    class Parent(Reactor):
        @step()
        def p1(inputs: Any, ctx: Any) -> int:
            return 1

        @p1.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo p1")

        child = compose(Child, wait_for=["p1"])

    run_id = _interrupted_run(Parent)
    view = Parent.find(run_id)
    assert view.status is RunStatus.ABORTED
    assert view.children["child"].status is RunStatus.ABORTED
    assert Parent.undo(run_id).success
    assert events == ["compensate c2", "undo c1", "undo p1"]


def test_abort_inside_a_map_element_is_finished_from_the_root(events: list[str]) -> None:
    class Element(Reactor):
        n = Input(int)

        @step(n=input("n"))
        def work(inputs: Any, ctx: Any) -> int:
            if inputs.n == 2:
                raise KeyboardInterrupt
            return int(inputs.n)

        @work.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"undo {result}")

        @work.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate {inputs.n}")

    class Parent(Reactor):
        ns = Input(list)
        each = map_step(Element, source=input("ns"), args={"n": element("each")})

    run_id = _interrupted_run(Parent, ns=[0, 1, 2, 3])
    assert Parent.undo(run_id).success
    assert events == ["compensate 2", "undo 1", "undo 0"]


def test_undo_a_completed_run_then_it_is_cancelled(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

        @a.undo
        def _(result: Any, inputs: Any, ctx: Any) -> Any:
            events.append("undo a")
            return Failure("refund failed")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> int:
            return 2

        @b.undo
        def _b(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo b")

    r = R.run()
    undone = R.undo(r.run_id or "")
    assert isinstance(undone, Failure) and isinstance(undone.error, UndoError)
    assert [(f.step, f.reason) for f in undone.rollback_failures] == [("a", "returned_failure")]
    assert events == ["undo b", "undo a"]
    view = R.find(r.run_id or "")
    assert view.status is RunStatus.CANCELLED and view.undo_stack == ()


def test_undo_refuses_a_running_run(runtime: Runtime) -> None:
    class R(Reactor):
        s = step(lambda inputs, ctx: 1)

    r = R.run()
    record = runtime.storage.contexts.load(r.run_id or "")
    assert record is not None
    runtime.storage.contexts.save(
        dataclasses.replace(
            record, status="running",
            document=record.document.replace('"status":"completed"', '"status":"running"'),
            segments=tuple(
                text.replace('"status":"completed"', '"status":"running"')
                for text in record.segments
            ),
        )
    )
    with pytest.raises(RunStateError):
        R.undo(r.run_id or "")
    with pytest.raises(RunNotFoundError):
        R.undo("missing")


def test_undo_of_a_failed_run_is_a_no_op(events: list[str]) -> None:
    class R(Reactor):
        s = step(lambda inputs, ctx: 1 / 0)

    r = R.run()
    assert isinstance(r, Failure)
    assert R.undo(r.run_id or "").success
    assert R.find(r.run_id or "").status is RunStatus.FAILED


def test_undo_of_a_halted_run_reaches_the_halted_element(events: list[str]) -> None:
    from reactor.model.signals import halt

    class Element(Reactor):
        n = Input(int)

        @step(n=input("n"))
        def work(inputs: Any, ctx: Any) -> int:
            return int(inputs.n)

        @work.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"undo {result}")

        @step(n=input("n"), wait_for=["work"])
        def gate(inputs: Any, ctx: Any) -> None:
            if inputs.n == 1:
                halt("wait for stock")

    class Parent(Reactor):
        ns = Input(list)
        each = map_step(Element, source=input("ns"), args={"n": element("each")})

    r = Parent.run(ns=[0, 1, 2])
    assert r.halted
    assert Parent.undo(r.run_id or "").success
    assert events == ["undo 1", "undo 0"]
    view = Parent.find(r.run_id or "")
    assert view.status is RunStatus.CANCELLED
    assert [e.detail for e in view.trace if e.type == "undo"] == [None]


def test_trace_marks_rollback_hooks_that_did_nothing() -> None:
    class R(Reactor):
        a = step(lambda inputs, ctx: 1)
        b = step(lambda inputs, ctx: 1 / 0, wait_for=["a"])

    r = R.run()
    details = [(e.type, e.detail) for e in R.find(r.run_id or "").trace if e.type != "run"]
    assert details == [
        ("failed", "division by zero"),
        ("compensate", "compensate skipped (nothing to roll back)"),
        ("undo", "undo skipped (nothing to roll back)"),
    ]


def test_a_second_undo_reports_the_rollback_failures_the_first_stored(events: list[str]) -> None:
    """An undo whose caller never got its result (the process died after the final save) is
    asked again: the second answer carries the first pass's failures, not ``Success``."""

    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

        @a.undo
        def _(result: Any, inputs: Any, ctx: Any) -> Any:
            events.append("undo a")
            return Failure("refund failed")

    r = R.run()
    first = R.undo(r.run_id or "")
    again = R.undo(r.run_id or "")
    assert isinstance(again, Failure) and isinstance(again.error, UndoError)
    assert again.rollback_failures == first.rollback_failures  # type: ignore[union-attr]
    assert [(f.step, f.reason) for f in again.rollback_failures] == [("a", "returned_failure")]
    assert again.run_id == r.run_id
    assert events == ["undo a"]  # nothing replayed
    view = R.find(r.run_id or "")
    assert view.status is RunStatus.CANCELLED
    assert view.failure is not None and len(view.failure.rollback_failures) == 1


def test_undo_of_a_failed_run_whose_rollback_was_incomplete_reports_it(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

        @a.undo
        def _(result: Any, inputs: Any, ctx: Any) -> Any:
            events.append("undo a")
            return Failure("refund failed")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> int:
            raise ValueError("boom")

    r = R.run()
    assert isinstance(r, Failure) and len(r.rollback_failures) == 1
    undone = R.undo(r.run_id or "")
    assert isinstance(undone, Failure) and isinstance(undone.error, UndoError)
    assert undone.rollback_failures == r.rollback_failures
    assert events == ["undo a"]
    assert R.find(r.run_id or "").status is RunStatus.FAILED
