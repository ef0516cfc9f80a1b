"""The brief's Fulfil/Payment shape end to end: class and function steps, compose, map,
pydantic inputs, retries, undo/compensate hooks."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel

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
from reactor.model import codec
from reactor.model.results import Failure, Success
from reactor.model.signals import fail
from reactor.model.status import RunStatus


class Line(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    id: str
    lines: list[Line]
    payment: dict[str, str]


def _reactors(events: list[str], *, shipping_fails: int = 0) -> Any:
    class Authorize(Step):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)

        def run(self) -> dict[str, str]:
            events.append(f"authorize {self.inputs.amount}")
            return {"id": "auth-1"}

        def undo(self) -> None:
            events.append(f"void {self.result['id']}")

    class Capture(Step):
        authorization = Input(str)

        def run(self) -> str:
            events.append("capture")
            return "cap-1"

        def undo(self) -> None:
            events.append("refund")

    class Payment(Reactor):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)
        authorize = step(Authorize, amount=input("amount"), card_token=input("card_token"))
        capture = step(Capture, authorization=result("authorize", "id"))
        returns = "capture"

    class ReserveLine(Reactor):
        line = Input(Line)
        order_id = Input(str)

        @step(line=input("line"))
        def reserve(inputs: Any, ctx: Any) -> str:
            events.append(f"reserve {inputs.line.sku}")
            return f"res-{inputs.line.sku}"

        @reserve.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"release {inputs.line.sku}")

        returns = "reserve"

    class ValidateOrder(Step):
        order = Input(Order)

        def run(self) -> dict[str, Any]:
            order = self.inputs.order
            if not order.lines:
                fail("empty order", retryable=False)
            total = sum(Decimal(line.qty) * Decimal("2.50") for line in order.lines)
            return {"lines": order.lines, "total": total}

    attempts = {"n": 0}

    class Fulfil(Reactor):
        order = Input(Order)
        validate = step(ValidateOrder, order=input("order"))
        reserve = map_step(
            ReserveLine,
            source=result("validate", "lines"),
            args={"line": element("reserve"), "order_id": input("order", "id")},
            atomic=True,
        )
        payment = compose(
            Payment, amount=result("validate", "total"),
            card_token=input("order", "payment.token"),
        )

        @step(order=input("order"), wait_for=["payment", "reserve"],
              retries=Retries(max_attempts=3, base_delay=0.01))
        def book_shipment(inputs: Any, ctx: Any) -> str:
            attempts["n"] += 1
            if attempts["n"] <= shipping_fails:
                raise ConnectionError("courier API timeout")
            events.append(f"book {inputs.order.id}")
            return "ship-1"

        @book_shipment.undo
        def cancel_shipment(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"cancel {result}")

        @book_shipment.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate shipment: {error}")

        returns = "book_shipment"

    return Fulfil


ORDER = {
    "id": "o-1",
    "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
    "payment": {"token": "tok_live"},
}


def test_happy_path(events: list[str], sleeps: list[float]) -> None:
    Fulfil = _reactors(events, shipping_fails=1)
    r = Fulfil.run(order=ORDER)
    assert isinstance(r, Success) and r.value == "ship-1"
    assert events == ["reserve a", "reserve b", "authorize 7.50", "capture", "book o-1"]
    assert sleeps == [0.01]
    assert codec.is_registered(Order)  # registered automatically for storage
    view = Fulfil.find(r.run_id or "")
    assert view.status is RunStatus.COMPLETED
    assert view.inputs["order"] == Order.model_validate(ORDER)
    assert view.children["payment"].inputs["card_token"] == "[REDACTED]"


def test_failure_rolls_back_compose_and_map(events: list[str], sleeps: list[float]) -> None:
    Fulfil = _reactors(events, shipping_fails=5)
    r = Fulfil.run(order=ORDER)
    assert isinstance(r, Failure) and r.step_name == "book_shipment"
    assert isinstance(r.error, ConnectionError)
    assert events == [
        "reserve a", "reserve b", "authorize 7.50", "capture",
        "compensate shipment: courier API timeout",
        "refund", "void auth-1",  # the composed payment, newest first
        "release b", "release a",  # the map's elements, highest index first
    ]
    assert sleeps == [0.01, 0.02]
    assert r.rollback_failures == []
    child = Fulfil.find(r.run_id or "").children["payment"]
    assert child.inputs["card_token"] == "[REDACTED]"  # the order itself is not secret
    assert child.status is RunStatus.CANCELLED


def test_invalid_order_fails_before_any_step(events: list[str]) -> None:
    Fulfil = _reactors(events)
    r = Fulfil.run(order={"id": "o", "lines": [{"sku": 1}], "payment": {}})
    assert isinstance(r, Failure)
    assert r.validation_errors == {
        "order.lines.0.sku": ["Input should be a valid string"],
        "order.lines.0.qty": ["Field required"],
    }
    assert events == []
