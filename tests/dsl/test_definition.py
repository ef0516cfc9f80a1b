"""Definition errors raised at class creation (docs/concepts.md, "Definition errors")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.dsl import (
    Input,
    Retries,
    compose,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.errors import DefinitionError


class Needs(Step):
    amount = Input(int)
    note = Input(str, default="")

    def run(self) -> int:
        return int(self.inputs.amount)


class Child(Reactor):
    x = Input(int)
    s = step(lambda inputs, ctx: inputs.x, x=input("x"))


def _noop(inputs: Any, ctx: Any) -> None:
    return None


def test_unknown_step_in_result() -> None:
    with pytest.raises(DefinitionError, match="names no step"):

        class R(Reactor):
            a = step(_noop, x=result("missing"))


def test_unknown_step_in_wait_for() -> None:
    with pytest.raises(DefinitionError, match="wait_for names no step"):

        class R(Reactor):
            a = step(_noop, wait_for=["ghost"])


def test_cycle() -> None:
    with pytest.raises(DefinitionError, match="cycle"):

        class R(Reactor):
            a = step(_noop, x=result("c"))
            b = step(_noop, x=result("a"))
            c = step(_noop, wait_for=["b"])


def test_self_dependency() -> None:
    with pytest.raises(DefinitionError, match="own result"):

        class R(Reactor):
            a = step(_noop, x=result("a"))


def test_unwired_required_input() -> None:
    with pytest.raises(DefinitionError, match="required input 'amount'"):

        class R(Reactor):
            s = step(Needs)


def test_by_name_wiring_takes_the_reactor_input() -> None:
    class R(Reactor):
        amount = Input(int)
        s = step(Needs)

    assert R.definition.steps["s"].arguments["amount"] == input("amount")
    assert "note" not in R.definition.steps["s"].arguments  # optional: default applies


def test_argument_not_declared_by_the_step_class() -> None:
    with pytest.raises(DefinitionError, match="declares no input"):

        class R(Reactor):
            s = step(Needs, amount=1, typo=2)


def test_returns_naming_no_step() -> None:
    with pytest.raises(DefinitionError, match="returns"):

        class R(Reactor):
            a = step(_noop)
            returns = "b"


@pytest.mark.parametrize("name", ["run", "undo", "find", "execute", "definition", "_private"])
def test_reserved_step_names(name: str) -> None:
    with pytest.raises(DefinitionError, match="reserved"):
        type("R", (Reactor,), {name: step(_noop), "__module__": __name__})


@pytest.mark.parametrize("name", ["to_dict", "context", "result", "retries", "_x"])
def test_reserved_input_names(name: str) -> None:
    with pytest.raises(DefinitionError, match="reserved"):
        type("S", (Step,), {name: Input(int)})


def test_input_template_naming_an_undeclared_reactor_input() -> None:
    with pytest.raises(DefinitionError, match="no declared reactor input"):

        class R(Reactor):
            a = step(_noop, x=input("nope"))


def test_element_outside_its_map() -> None:
    with pytest.raises(DefinitionError, match="only valid in the args"):

        class R(Reactor):
            a = step(_noop, x=element("a"))

    with pytest.raises(DefinitionError, match="only valid in the args"):

        class M(Reactor):
            xs = Input(list)
            m = map_step(Child, source=input("xs"), args={"x": element("other")})


def test_retries_on_compose_and_map_are_rejected() -> None:
    with pytest.raises(DefinitionError, match="only leaf steps retry"):
        compose(Child, x=1, retries=Retries(max_attempts=2))
    with pytest.raises(DefinitionError, match="only leaf steps retry"):
        map_step(Child, source=input("xs"), retries=Retries(max_attempts=2))


def test_compose_child_inputs_are_checked() -> None:
    with pytest.raises(DefinitionError, match="required input 'x'"):

        class R(Reactor):
            c = compose(Child)

    with pytest.raises(DefinitionError, match="declares no input"):

        class R2(Reactor):
            c = compose(Child, x=1, y=2)


def test_declaration_argument_types_are_checked() -> None:
    with pytest.raises(DefinitionError):
        step(int)  # type: ignore[call-overload]
    with pytest.raises(DefinitionError):
        compose(Needs)
    with pytest.raises(DefinitionError):
        map_step(Child, source=[1, 2])
    with pytest.raises(DefinitionError):
        step(_noop, retries=3)  # type: ignore[arg-type]


def _noop_undo(result: Any, inputs: Any, ctx: Any) -> None:
    return None


def test_undo_decorator_only_on_function_steps() -> None:
    spec = step(Needs, amount=1)
    with pytest.raises(DefinitionError, match="function steps only"):
        spec.undo(_noop)
    fn_spec = step(_noop)
    fn_spec.undo(_noop_undo)
    with pytest.raises(DefinitionError, match="already has"):
        fn_spec.undo(_noop_undo)


def test_invalid_input_constraints() -> None:
    with pytest.raises(DefinitionError, match="invalid type or constraints"):

        class S(Step):
            n = Input(int, not_a_constraint=1)


def test_subclasses_inherit_and_extend_steps_and_inputs() -> None:
    class Base(Reactor):
        a = Input(int)
        first = step(lambda inputs, ctx: inputs.a, a=input("a"))

    class Derived(Base):
        b = Input(int)
        second = step(lambda inputs, ctx: inputs.x + 1, x=result("first"))
        returns = "second"

    assert list(Derived.definition.steps) == ["first", "second"]
    assert Derived.definition.contract.names == {"a", "b"}
    assert Derived.run(a=1, b=0).value == 2


@pytest.mark.parametrize("name", ["run", "find", "undo", "execute", "returns", "_x"])
def test_reserved_reactor_input_names(name: str) -> None:
    with pytest.raises(DefinitionError, match="reserved"):
        type("R", (Reactor,), {name: Input(int), "__module__": __name__})


def test_step_only_reserved_names_are_fine_for_reactor_inputs() -> None:
    class R(Reactor):
        context = Input(str)
        s = step(lambda inputs, ctx: inputs.c, c=input("context"))

    assert R.run(context="x").value == {"s": "x"}


def test_generator_bodies_are_rejected_and_async_ones_accepted() -> None:
    """A generator (sync or async) returns no result: refused at declaration; an ``async def``
    body is a step body like a plain one (docs/concepts.md, "Async steps")."""

    async def agen(inputs: Any, ctx: Any) -> Any:
        yield None

    def gen(inputs: Any, ctx: Any) -> Any:
        yield None

    async def body(inputs: Any, ctx: Any) -> None:
        return None

    for bad in (agen, gen):
        with pytest.raises(DefinitionError, match="generator"):
            step(bad)
        with pytest.raises(DefinitionError, match="generator"):
            step()(bad)
        with pytest.raises(DefinitionError, match="generator"):
            step(_noop).undo(bad)
    with pytest.raises(DefinitionError, match="generator"):

        class S(Step):
            async def run(self) -> Any:
                yield None

    async def undo(result: Any, inputs: Any, ctx: Any) -> None:
        return None

    step(body)
    step(_noop).undo(undo)

    class A(Step):
        async def run(self) -> None:
            return None

    assert A.call({}).value is None
