"""Argument templates (docs/concepts.md, "Arguments and wiring")."""

from __future__ import annotations

import pytest

from reactor.dsl.templates import (
    ElementRef,
    InputRef,
    ResultRef,
    ValueRef,
    element,
    input,
    normalise_path,
    result,
    value,
)


def test_path_spellings() -> None:
    assert normalise_path(None) == ()
    assert normalise_path("a.b") == ("a", "b")
    assert normalise_path(["a", 0]) == ("a", 0)
    assert normalise_path(3) == (3,)
    with pytest.raises(TypeError):
        normalise_path(["a", 1.5])  # type: ignore[list-item]


def test_constructors() -> None:
    assert input("order", "id") == InputRef(path=("id",), name="order")
    assert result("s") == ResultRef(step="s")
    assert value(0) == ValueRef(value=0)
    assert element("m", "sku") == ElementRef(path=("sku",), map_step="m")
    assert result("s", "a.b").describe() == "result('s')"
