"""Argument resolution (docs/concepts.md, "Arguments and wiring")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from reactor.dsl.templates import element, input, result, value
from reactor.engine.arguments import NO_ELEMENT, read_path, resolve
from reactor.errors import ArgumentResolutionError
from reactor.model.context import Context


@dataclass
class _Order:
    id: str
    lines: list[dict[str, Any]]


def _ctx() -> Context:
    return Context(
        context_id="c",
        reactor="r",
        inputs={"order": _Order("o1", [{"sku": "a"}]), "flag": False, "zero": 0},
        intermediate_results={"validate": {"total": 5, "payment": {"token": "t"}}},
    )


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (input("order", "id"), "o1"),  # attribute
        (input("order", "lines.0.sku"), "a"),  # attribute, index, key
        (input("order", ["lines", 0, "sku"]), "a"),
        (result("validate", "payment.token"), "t"),
        (result("validate"), {"total": 5, "payment": {"token": "t"}}),
        (input("flag"), False),  # false values resolve as themselves
        (input("zero"), 0),
        (value([1, 2]), [1, 2]),
        (result("validate", "total", transform=lambda v: v * 2), 10),
    ],
)
def test_templates_resolve(template: Any, expected: Any) -> None:
    assert resolve(template, _ctx()) == expected


def test_element_template_reads_the_bound_element() -> None:
    assert resolve(element("m", "sku"), _ctx(), {"sku": "z"}) == "z"
    with pytest.raises(ArgumentResolutionError):
        resolve(element("m"), _ctx(), NO_ELEMENT)


@pytest.mark.parametrize(
    "template",
    [
        input("order", "missing"),
        result("validate", "payment.nope"),
        result("other"),
        input("order", "lines.5"),
        result("validate", "total", transform=lambda v: 1 / 0),
    ],
)
def test_resolution_problems_raise_argument_resolution_error(template: Any) -> None:
    with pytest.raises(ArgumentResolutionError):
        resolve(template, _ctx())


def test_read_path_never_reads_private_attributes() -> None:
    with pytest.raises(LookupError):
        read_path(_Order("x", []), ["__class__"])
