"""Input declarations, contracts and the frozen Inputs object (docs/concepts.md,
"Reactors and steps")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from reactor.dsl.inputs import Input, InputContract, Inputs
from reactor.errors import InputValidationError, UndeclaredInputError


class Address(BaseModel):
    city: str


class Opaque:
    pass


def _contract(**inputs: Input) -> InputContract:
    return InputContract("T", [decl.bound(name) for name, decl in inputs.items()])


def test_presence_means_key_exists_falsy_values_are_kept() -> None:
    c = _contract(flag=Input(bool), n=Input(int), s=Input(str), xs=Input(list))
    assert c.validate({"flag": False, "n": 0, "s": "", "xs": []}) == {
        "flag": False, "n": 0, "s": "", "xs": []
    }


def test_defaults_apply_to_absent_or_none() -> None:
    c = _contract(n=Input(int, default=5))
    assert c.validate({}) == {"n": 5}
    assert c.validate({"n": None}) == {"n": 5}
    assert c.validate({"n": 0}) == {"n": 0}


def test_required_absent_and_unknown_names_fail_with_field_errors() -> None:
    c = _contract(n=Input(int), name=Input(str))
    with pytest.raises(InputValidationError) as caught:
        c.validate({"n": "x", "typo": 1}, step_name="s")
    assert caught.value.field_errors == {
        "typo": ["unexpected input (not declared)"],
        "n": ["Input should be a valid integer, unable to parse string as an integer"],
        "name": ["field required"],
    }
    assert caught.value.step_name == "s"


def test_constraints_and_nested_model_errors_name_the_field_path() -> None:
    c = _contract(amount=Input(Decimal, gt=0), addr=Input(Address))
    with pytest.raises(InputValidationError) as caught:
        c.validate({"amount": "-1", "addr": {"city": 3}})
    assert caught.value.field_errors == {
        "amount": ["Input should be greater than 0"],
        "addr.city": ["Input should be a valid string"],
    }
    ok = c.validate({"amount": "2.5", "addr": {"city": "Oslo"}})
    assert ok == {"amount": Decimal("2.5"), "addr": Address(city="Oslo")}


def test_messages_never_include_the_value() -> None:
    c = _contract(pin=Input(int, redact=True))
    with pytest.raises(InputValidationError) as caught:
        c.validate({"pin": "secret-pin"})
    assert "secret-pin" not in str(caught.value)


def test_arbitrary_classes_are_isinstance_checked() -> None:
    c = _contract(thing=Input(Opaque))
    thing = Opaque()
    assert c.validate({"thing": thing})["thing"] is thing
    with pytest.raises(InputValidationError):
        c.validate({"thing": 1})


def test_redaction_and_defaults_without_validation() -> None:
    c = _contract(token=Input(str, redact=True), n=Input(int, default=1))
    assert c.redacted == {"token"}
    assert c.redact({"token": "t", "n": 2}) == {"token": "[REDACTED]", "n": 2}
    assert c.with_defaults({"token": -1}) == {"token": -1, "n": 1}


def test_inputs_object_is_frozen_and_rejects_undeclared_names() -> None:
    inputs = Inputs({"a": 1}, declared={"a", "b"})
    assert inputs.a == 1 and inputs["a"] == 1 and inputs.b is None
    assert "a" in inputs and list(inputs) == ["a"] and len(inputs) == 1
    assert inputs.to_dict() == {"a": 1} and inputs == {"a": 1}
    with pytest.raises(UndeclaredInputError):
        _ = inputs.c
    with pytest.raises(AttributeError):
        inputs.a = 2
    copy: Any = inputs.to_dict()
    copy["a"] = 3
    assert inputs.a == 1


def test_mutable_defaults_are_copied_per_validation() -> None:
    c = _contract(tags=Input(list, default=[]))
    first = c.validate({})["tags"]
    first.append("x")
    assert c.validate({})["tags"] == []


def test_an_unresolvable_input_type_fails_at_class_creation_naming_owner_and_input() -> None:
    from reactor import Reactor, Step
    from reactor.errors import DefinitionError

    with pytest.raises(DefinitionError, match=r"BadTypes: input 'order'.*notatype"):

        class BadTypes(Reactor, name="test_inputs.bad_types"):
            order = Input("notatype")

    with pytest.raises(DefinitionError, match=r"BadStep: input 'x'"):

        class BadStep(Step):
            x = Input("alsonotatype")


def test_execute_with_non_mapping_inputs_is_an_input_validation_error() -> None:
    from reactor import Reactor

    class Plain(Reactor, name="test_inputs.plain"):
        n = Input(int, default=1)

    with pytest.raises(InputValidationError, match=r"Plain\.execute.*mapping.*list"):
        Plain.execute([1, 2])  # type: ignore[arg-type]
