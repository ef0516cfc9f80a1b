"""Inline map steps (docs/concepts.md, "Inline map")."""

from __future__ import annotations

from typing import Any

from reactor import Reactor
from reactor.config import Runtime
from reactor.dsl import (
    Input,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.model.results import Failure, MapResults, Success
from reactor.model.run_records import MapMembership
from reactor.model.signals import halt
from reactor.model.status import RunStatus


def _element_reactor(events: list[str], *, fail_on: tuple[str, ...] = ()) -> Any:
    class Reserve(Reactor):
        sku = Input(str)
        order_id = Input(str)

        @step(sku=input("sku"))
        def reserve(inputs: Any, ctx: Any) -> str:
            events.append(f"reserve {inputs.sku}@{ctx.element_index}")
            if inputs.sku in fail_on:
                raise RuntimeError(f"no stock for {inputs.sku}")
            if inputs.sku == "halt":
                halt("paused stock")
            return f"res-{inputs.sku}"

        @reserve.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"release {inputs.sku}@{ctx.element_index}")

        returns = "reserve"

    return Reserve


def _order(element_reactor: Any, *, atomic: bool = True) -> Any:
    class Order(Reactor):
        order_id = Input(str)
        lines = Input(list)
        reserve = map_step(
            element_reactor,
            source=input("lines"),
            args={"sku": element("reserve", "sku"), "order_id": input("order_id")},
            atomic=atomic,
        )

    return Order


def test_each_element_has_its_own_stored_context_with_index_metadata(
    events: list[str], runtime: Runtime
) -> None:
    Order = _order(_element_reactor(events))
    r = Order.run(order_id="o1", lines=[{"sku": "a"}, {"sku": "b"}])
    assert isinstance(r, Success) and r.value == {"reserve": ["res-a", "res-b"]}
    assert events == ["reserve a@0", "reserve b@1"]
    env = make_env(runtime)
    parent = load_context(env, r.run_id or "")
    assert parent is not None
    ref = parent.map_ref("reserve")
    assert ref is not None and not ref.is_fan_out and sorted(ref.elements) == [0, 1]
    assert ref.to_stored()["elements"].keys() == {"0", "1"}
    for index in (0, 1):
        element_ctx = load_context(env, ref.elements[index])
        assert element_ctx is not None
        assert element_ctx.map_metadata == MapMembership(
            map_step="reserve", map_id=ref.map_id, index=index,
            parent_reactor=Order.reactor_name,
        )
        assert element_ctx.parent_context_id == r.run_id
        assert element_ctx.status is RunStatus.COMPLETED


def test_atomic_failure_rolls_back_completed_elements_highest_index_first(
    events: list[str],
) -> None:
    Order = _order(_element_reactor(events, fail_on=("c",)))
    r = Order.run(order_id="o1", lines=[{"sku": "a"}, {"sku": "b"}, {"sku": "c"},
                                        {"sku": "d"}])
    assert isinstance(r, Failure)
    assert r.step_name == "reserve" and str(r.error) == "no stock for c"
    assert events == [
        "reserve a@0", "reserve b@1", "reserve c@2",  # d never starts
        "release b@1", "release a@0",
    ]


def test_atomic_rollback_failures_carry_map_step_and_element_index(events: list[str]) -> None:
    class Element(Reactor):
        sku = Input(str)

        @step(sku=input("sku"))
        def reserve(inputs: Any, ctx: Any) -> str:
            if inputs.sku == "bad":
                raise RuntimeError("bad")
            return str(inputs.sku)

        @reserve.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            raise RuntimeError(f"cannot release {result}")

    class Order(Reactor):
        lines = Input(list)
        reserve = map_step(Element, source=input("lines"), args={"sku": element("reserve")})

    r = Order.run(lines=["x", "y", "bad"])
    assert isinstance(r, Failure)
    assert [(f.step, f.map_step, f.element_index) for f in r.rollback_failures] == [
        ("reserve", "reserve", 1), ("reserve", "reserve", 0)
    ]


def test_collect_mode_returns_successes_and_failures(events: list[str]) -> None:
    Order = _order(_element_reactor(events, fail_on=("b",)), atomic=False)
    r = Order.run(order_id="o1", lines=[{"sku": "a"}, {"sku": "b"}, {"sku": "c"}])
    assert isinstance(r, Success)
    results = r.value["reserve"]
    assert isinstance(results, MapResults) and len(results) == 3
    assert results.values() == ["res-a", "res-c"]
    assert [str(f.error) for f in results.failures()] == ["no stock for b"]
    assert results.failed_indexes() == [1]
    assert events == ["reserve a@0", "reserve b@1", "reserve c@2"]
    # The stored value round-trips through the codec.
    stored = Order.find(r.run_id or "").results["reserve"]
    assert isinstance(stored, MapResults) and stored.values() == ["res-a", "res-c"]


def test_undoing_a_completed_map_undoes_each_element(events: list[str], runtime: Runtime) -> None:
    Element = _element_reactor(events)

    class Order(Reactor):
        order_id = Input(str)
        lines = Input(list)
        reserve = map_step(
            Element, source=input("lines"),
            args={"sku": element("reserve", "sku"), "order_id": input("order_id")},
        )

        @step(x=result("reserve"))
        def pay(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("declined")

    r = Order.run(order_id="o1", lines=[{"sku": "a"}, {"sku": "b"}])
    assert isinstance(r, Failure) and r.step_name == "pay"
    assert events[2:] == ["release b@1", "release a@0"]
    env = make_env(runtime)
    parent = load_context(env, r.run_id or "")
    assert parent is not None
    ref = parent.map_ref("reserve")
    assert ref is not None
    for element_id in ref.elements.values():
        element_ctx = load_context(env, element_id)
        assert element_ctx is not None
        assert element_ctx.status is RunStatus.CANCELLED and element_ctx.undo_stack == []


def test_element_halt_halts_the_run(events: list[str]) -> None:
    Order = _order(_element_reactor(events))
    r = Order.run(order_id="o", lines=[{"sku": "a"}, {"sku": "halt"}, {"sku": "c"}])
    assert r.halted
    assert events == ["reserve a@0", "reserve halt@1"]
    assert Order.find(r.run_id or "").status is RunStatus.HALTED


def test_non_sequence_source_fails_without_running_elements(events: list[str]) -> None:
    Order = _order(_element_reactor(events))
    r = Order.run(order_id="o", lines=[])
    assert r.success and r.value == {"reserve": []}

    class Bad(Reactor):
        text = Input(str)
        reserve = map_step(_element_reactor(events), source=input("text"),
                           args={"sku": element("reserve"), "order_id": "x"})

    r2 = Bad.run(text="abc")
    assert isinstance(r2, Failure) and "sequence" in r2.message
    assert events == []


def test_invalid_element_inputs_fail_the_element(events: list[str]) -> None:
    Order = _order(_element_reactor(events), atomic=False)
    r = Order.run(order_id="o", lines=[{"sku": "a"}, {"sku": 5}])
    assert isinstance(r, Success)
    failure = r.value["reserve"][1]
    assert isinstance(failure, Failure)
    assert failure.validation_errors == {"sku": ["Input should be a valid string"]}
