"""A reactor whose ``Input`` type is a dataclass holding an enum, a nested dataclass and a
pydantic model, none registered by hand, for ``tests/dsl/test_nested_codec_types.py``: in its
own module so a fresh process can import it (docs/concepts.md, "Decisions")."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional

from pydantic import BaseModel

from reactor import Input, Reactor, input, step

__all__ = ["Address", "Line", "Node", "Shipment", "Shipping", "Speed"]


class Speed(enum.Enum):
    """How fast a shipment goes."""

    EXPRESS = "express"


@dataclasses.dataclass(frozen=True)
class Line:
    """One shipped line."""

    sku: str
    speed: Speed


class Address(BaseModel):
    """Where it goes."""

    city: str


@dataclasses.dataclass(frozen=True)
class Node:
    """A self-referencing dataclass (the walk over field types must stop)."""

    name: str
    parent: Optional[Node] = None  # noqa: UP045 - a string annotation resolved by get_type_hints


@dataclasses.dataclass(frozen=True)
class Shipment:
    """The input: every field type needs the codec."""

    speed: Speed
    lines: list[Line]
    address: Address
    route: dict[str, Node]


class Shipping(Reactor, name="tests.dsl.nested_types.shipping"):
    """Returns its shipment as it is."""

    shipment = Input(Shipment)

    @step(shipment=input("shipment"))
    def keep(inputs: Any, ctx: Any) -> Shipment:
        return inputs.shipment  # type: ignore[no-any-return]

    returns = "keep"
