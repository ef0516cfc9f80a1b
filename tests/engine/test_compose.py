"""Compose steps (docs/concepts.md, "Compose")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from reactor import Reactor, Step
from reactor.dsl import (
    Input,
    compose,
    input,
    result,
    step,
)
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus


def _payment(events: list[str], *, capture_fails: bool = False, undo_fails: bool = False) -> Any:
    class Authorize(Step):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)

        def run(self) -> dict[str, Any]:
            events.append("authorize")
            return {"id": "auth-1"}

        def undo(self) -> None:
            events.append("void authorization")
            if undo_fails:
                raise RuntimeError("gateway down")

    class Capture(Step):
        authorization = Input(str)

        def run(self) -> str:
            events.append("capture")
            if capture_fails:
                raise RuntimeError("capture declined")
            return f"cap-{self.inputs.authorization}"

        def undo(self) -> None:
            events.append("refund")

    class Payment(Reactor):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)
        authorize = step(Authorize)
        capture = step(Capture, authorization=result("authorize", "id"))
        returns = "capture"

    return Payment


def test_child_runs_inline_embedded_in_the_parent(events: list[str]) -> None:
    Payment = _payment(events)

    class Order(Reactor):
        total = Input(Decimal)
        token = Input(str, redact=True)
        payment = compose(Payment, amount=input("total"), card_token=input("token"))
        returns = "payment"

    r = Order.run(total=Decimal("9.50"), token="tok_secret")
    assert isinstance(r, Success) and r.value == "cap-auth-1"
    view = Order.find(r.run_id or "")
    child = view.children["payment"]
    assert child.status is RunStatus.COMPLETED
    assert child.parent_run_id == r.run_id and child.root_run_id == r.run_id
    assert child.inputs == {"amount": Decimal("9.50"), "card_token": "[REDACTED]"}
    assert child.results == {"authorize": {"id": "auth-1"}, "capture": "cap-auth-1"}


def test_failed_child_rolls_itself_back_before_the_parent(events: list[str]) -> None:
    Payment = _payment(events, capture_fails=True)

    class Order(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            events.append("reserve")
            return "r"

        @reserve.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("release")

        payment = compose(Payment, amount=Decimal(1), card_token="t", wait_for=["reserve"])

    r = Order.run()
    assert isinstance(r, Failure)
    assert r.step_name == "payment" and str(r.error) == "capture declined"
    assert events == ["reserve", "authorize", "capture", "void authorization", "release"]
    view = Order.find(r.run_id or "")
    assert view.children["payment"].status is RunStatus.FAILED
    assert view.status is RunStatus.FAILED


def test_child_rollback_failures_are_flattened_into_the_parent(events: list[str]) -> None:
    Payment = _payment(events, capture_fails=True, undo_fails=True)

    class Order(Reactor):
        payment = compose(Payment, amount=Decimal(1), card_token="t")

    r = Order.run()
    assert isinstance(r, Failure)
    assert [(f.step, f.kind, f.reason) for f in r.rollback_failures] == [
        ("payment.authorize", "undo", "raised")
    ]


def test_undoing_a_completed_compose_replays_the_child_stack(events: list[str]) -> None:
    Payment = _payment(events, undo_fails=True)

    class Order(Reactor):
        payment = compose(Payment, amount=Decimal(1), card_token="t")

        @step(wait_for=["payment"])
        def ship(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("no courier")

    r = Order.run()
    assert isinstance(r, Failure) and r.step_name == "ship"
    assert events == ["authorize", "capture", "refund", "void authorization"]
    assert [(f.step, f.kind, f.reason) for f in r.rollback_failures] == [
        ("payment.authorize", "undo", "raised")
    ]
    view = Order.find(r.run_id or "")
    assert view.children["payment"].undo_stack == ()
    assert view.children["payment"].status is RunStatus.CANCELLED


def test_invalid_child_inputs_fail_the_compose_step_without_running_it(
    events: list[str],
) -> None:
    Payment = _payment(events)

    class Order(Reactor):
        payment = compose(Payment, amount=Decimal(-5), card_token="t")

    r = Order.run()
    assert isinstance(r, Failure) and r.step_name == "payment"
    assert r.validation_errors == {"amount": ["Input should be greater than 0"]}
    assert events == []


def test_child_halt_halts_the_parent() -> None:
    from reactor.model.signals import halt

    class Child(Reactor):
        stop = step(lambda inputs, ctx: halt("later"))

    class Parent(Reactor):
        child = compose(Child)
        after = step(lambda inputs, ctx: 1, wait_for=["child"])

    r = Parent.run()
    assert r.halted and Parent.find(r.run_id or "").status is RunStatus.HALTED
