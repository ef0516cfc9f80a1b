"""A step whose code the engine cannot call as it will is a ``DefinitionError`` when the class or
step is declared (docs/concepts.md, "Definition errors"; reactor/dsl/callables.py), not a
failure in the middle of a run or a rollback."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from reactor import Input, Reactor, Step, async_step, input, step
from reactor.errors import DefinitionError

# ----------------------------------------------------------------------------- Step classes


def test_a_run_method_that_needs_an_argument_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"Charge\.run: the engine calls it with no "
                                              r"argument .*'amount'"):

        class Charge(Step):
            amount = Input(int)

            def run(self, amount: int) -> int:  # type: ignore[override]
                return amount


@pytest.mark.parametrize("hook", ["undo", "compensate"])
def test_an_undo_or_compensate_that_needs_an_argument_is_refused(hook: str) -> None:
    def needs(self: Any, value: Any) -> None:
        return None

    with pytest.raises(DefinitionError, match=rf"Refund\.{hook}: the engine calls it with no "
                                              "argument"):
        type("Refund", (Step,), {"run": lambda self: 1, hook: needs})


def test_a_hook_without_self_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"Bare\.run: .*too many positional"):

        class Bare(Step):
            def run() -> int:  # type: ignore[misc] # noqa: N805 - the mistake under test
                return 1


def test_a_hook_that_is_not_callable_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"Broken\.undo must be a method"):

        class Broken(Step):
            def run(self) -> int:
                return 1

            undo = None  # type: ignore[assignment]


def test_an_inherited_bad_hook_is_refused_on_the_subclass() -> None:
    class Mixin:
        def compensate(self, error: Any) -> None:
            return None

    with pytest.raises(DefinitionError, match=r"Mixed\.compensate"):

        class Mixed(Mixin, Step):  # type: ignore[misc]
            def run(self) -> int:
                return 1


def test_a_constructor_the_engine_cannot_call_is_refused() -> None:
    with pytest.raises(DefinitionError, match=r"Built\.__init__: the engine builds the step "
                                              r"as Built\(inputs, context"):

        class Built(Step):
            def __init__(self, inputs: Any) -> None:
                super().__init__(inputs)

            def run(self) -> int:
                return 1


def test_callable_hooks_in_every_form_are_accepted() -> None:
    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    class Fine(Step):
        n = Input(int)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

        def run(self, extra: int = 0) -> int:
            return int(self.inputs.n) + extra

        @logged
        def undo(self) -> None:
            return None

        @staticmethod
        def compensate() -> None:
            return None

    class R(Reactor):
        n = Input(int)
        s = step(Fine, n=input("n"))

    assert R.run(n=2).value == {"s": 2}


# ----------------------------------------------------------------------------- function steps


def test_a_function_step_that_cannot_take_inputs_and_ctx_is_refused() -> None:
    def one(inputs: Any) -> int:
        return 1

    with pytest.raises(DefinitionError, match=r"the engine calls its run as run\(inputs, ctx\)"):
        step(one)
    with pytest.raises(DefinitionError, match=r"run\(inputs, ctx\)"):
        step()(one)
    with pytest.raises(DefinitionError, match=r"run\(inputs, ctx\)"):
        async_step(one)
    with pytest.raises(DefinitionError, match=r"run\(inputs, ctx\)"):
        step(lambda: 1)


def test_function_undo_and_compensate_must_take_the_engine_arguments() -> None:
    spec = step(lambda inputs, ctx: 1)
    with pytest.raises(DefinitionError, match=r"undo\(result, inputs, ctx\)"):
        spec.undo(lambda inputs, ctx: None)
    with pytest.raises(DefinitionError, match=r"compensate\(error, inputs, ctx\)"):
        spec.compensate(lambda error: None)
    spec.undo(lambda result, inputs, ctx: None)
    spec.compensate(lambda *args: None)
    assert spec.undo_function is not None and spec.compensate_function is not None


def test_a_reactor_declaring_a_bad_function_step_is_never_created() -> None:
    with pytest.raises(
        DefinitionError, match=r"half': the engine calls its run as run\(inputs, ctx\): missing"
    ):

        class R(Reactor):
            @step()
            def half(inputs: Any, ctx: Any, extra: Any) -> int:
                return 1
