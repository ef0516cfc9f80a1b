"""Class-based steps called directly (docs/concepts.md, "Reactors and steps")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Step
from reactor.dsl import Input, Retries
from reactor.errors import DefinitionError
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.signals import halt


class Charge(Step):
    amount = Input(int, gt=0)
    currency = Input(str, default="EUR")

    def run(self) -> Any:
        if self.inputs.amount > 100:
            halt("needs review")
        return f"{self.inputs.amount} {self.inputs.currency}"

    def undo(self) -> str:
        return f"refund {self.result}"

    def compensate(self) -> str:
        return f"cleanup after {self.error}"


def test_call_validates_and_runs() -> None:
    assert Charge.call({"amount": 5}) == Success("5 EUR")
    assert Charge.call({"amount": 500}) == Halt("needs review")
    bad = Charge.call({"amount": 0})
    assert isinstance(bad, Failure) and bad.validation_errors == {
        "amount": ["Input should be greater than 0"]
    }


def test_undo_and_compensate_do_not_validate() -> None:
    assert Charge.call_undo("5 EUR", {"amount": -3}) == Success("refund 5 EUR")
    assert Charge.call_compensate(Failure("boom"), {"amount": -3}) == Success(
        "cleanup after boom"
    )


def test_defaults_undo_and_compensate_are_no_ops() -> None:
    class Plain(Step):
        def run(self) -> int:
            return 1

    assert Plain.call_undo(1, {}) == Skipped()
    assert not Plain.has_undo() and Charge.has_undo() and Charge.has_compensate()


def test_fresh_instance_per_action() -> None:
    seen: list[int] = []

    class Stateful(Step):
        def run(self) -> None:
            self.marker = 1

        def undo(self) -> None:
            seen.append(getattr(self, "marker", 0))

    Stateful.call({})
    Stateful.call_undo(None, {})
    assert seen == [0]


def test_contract_is_inherited_and_extended() -> None:
    class Base(Step):
        a = Input(int)

    class Derived(Base):
        b = Input(int, default=2)

    assert Derived.contract.names == {"a", "b"}
    assert Base.contract.names == {"a"}


def test_retries_class_attribute_must_be_a_policy() -> None:
    with pytest.raises(DefinitionError):

        class Bad(Step):
            retries = 3  # type: ignore[assignment]

    class Good(Step):
        retries = Retries(max_attempts=2)

    assert Good.retries == Retries(max_attempts=2)
