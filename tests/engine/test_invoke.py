"""Calling user code: signals, exceptions and interruptions (docs/concepts.md, "Rollback")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.dsl import Input, step
from reactor.engine.invoke import capture, trimmed_traceback
from reactor.errors import SignalOutsideStepError, UndeclaredInputError
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.signals import fail, halt, skip, succeed
from reactor.model.status import RunStatus


def _deep(signal: Any, *args: Any) -> None:
    def level2() -> None:
        signal(*args)

    def level1() -> None:
        try:
            level2()
        except Exception:  # a user's broad handler must not swallow a signal
            raise AssertionError("signal swallowed") from None

    level1()


@pytest.mark.parametrize(
    ("signal", "args", "expected"),
    [
        (fail, ("bad",), Failure("bad")),
        (halt, ("stop",), Halt("stop")),
        (skip, (3,), Skipped(3)),
        (succeed, (4,), Success(4)),
    ],
)
def test_signals_from_any_depth_are_not_swallowed_by_except_exception(
    signal: Any, args: tuple[Any, ...], expected: Any
) -> None:
    invocation = capture(_deep, signal, *args)
    assert invocation.result == expected
    assert type(invocation.result) is type(expected)
    assert not invocation.raised


def test_signals_work_inside_undo_and_compensate(events: list[str]) -> None:
    class S(Step):
        def run(self) -> str:
            return "done"

        def undo(self) -> None:
            try:
                fail("cannot undo")
            except Exception:
                events.append("swallowed")

    class Boom(Step):
        def run(self) -> None:
            raise RuntimeError("x")

        def compensate(self) -> None:
            try:
                fail("cannot compensate")
            except Exception:
                events.append("swallowed")

    class R(Reactor):
        s = step(S)
        boom = step(Boom, wait_for=["s"])

    r = R.run()
    assert isinstance(r, Failure)
    assert events == []
    assert [(f.step, f.kind, f.reason, f.message) for f in r.rollback_failures] == [
        ("boom", "compensate", "returned_failure", "cannot compensate"),
        ("s", "undo", "returned_failure", "cannot undo"),
    ]


def test_signal_outside_a_step_body_is_an_error() -> None:
    with pytest.raises(SignalOutsideStepError):
        fail("nowhere")


class _CustomBase(BaseException):
    """A user BaseException subclass that is not an interruption."""


@pytest.mark.parametrize(
    "exc", [ValueError("v"), NotImplementedError("n"), _CustomBase("c"), RecursionError("r")]
)
def test_every_non_interruption_exception_is_a_failure(exc: BaseException) -> None:
    def body() -> None:
        raise exc

    invocation = capture(body)
    assert invocation.raised
    assert isinstance(invocation.result, Failure) and invocation.result.error is exc
    assert invocation.result.traceback is not None
    assert "reactor/engine" not in invocation.result.traceback


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError])
def test_interruptions_propagate(exc_type: type[BaseException]) -> None:
    def body() -> None:
        raise exc_type()

    with pytest.raises(exc_type):
        capture(body)


def test_missing_run_fails_the_step_with_a_clear_message() -> None:
    class NoRun(Step):
        pass

    class R(Reactor):
        s = step(NoRun)

    r = R.run()
    assert isinstance(r, Failure)
    assert isinstance(r.error, NotImplementedError)
    assert "NoRun does not define run()" in r.message


def test_undeclared_input_read_fails_and_is_not_retried() -> None:
    class S(Step):
        a = Input(int, default=1)

        def run(self) -> Any:
            return self.inputs.b

    r = S.call({})
    assert isinstance(r, Failure) and isinstance(r.error, UndeclaredInputError)
    assert not r.is_retryable


def test_custom_base_exception_in_a_run_rolls_back(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

        @a.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo a")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> None:
            raise _CustomBase("odd")

    r = R.run()
    assert isinstance(r, Failure) and isinstance(r.error, _CustomBase)
    assert events == ["undo a"]
    assert R.find(r.run_id or "").status is RunStatus.FAILED


def test_trimmed_traceback_keeps_user_frames() -> None:
    def user_code() -> None:
        raise ValueError("where")

    try:
        user_code()
    except ValueError as exc:
        text = trimmed_traceback(exc)
    assert "user_code" in text and text.endswith("ValueError: where\n")
