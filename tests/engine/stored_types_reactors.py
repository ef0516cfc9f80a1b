"""A reactor storing a value of every kind of type a definition declares, for
``tests/engine/test_stored_types_readable.py``: in its own module so a fresh process can
import it and read, undo or retry a run another process stored (docs/concepts.md,
"Decisions": the types are registered with the codec automatically).

No type here is registered with the codec by hand: each is a pydantic model, enum or
dataclass the definition names, and what it stores under it:

========================  ===========================================================
``Order`` (model)         the reactor's input ``order``
``Tier`` (enum)           the reactor's input ``tier``; the ``Charge`` step's input and result
``Line`` (dataclass)      the reactor's input ``lines`` (``list[Line]``)
``Parcel`` (model)        the composed child ``Ship``'s input and result
``Packed`` (dataclass)    the inline map element ``Pack``'s step input and result
``Boxed`` (dataclass)     the fan-out map element ``Box``'s step input and result
``Memo`` (dataclass)      the async unit ``Notify``'s input and result
``Approval`` (model)      the interrupt's payload schema (the interrupt step's result)
========================  ===========================================================
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pydantic import BaseModel

from reactor import (
    FanOut,
    Input,
    Reactor,
    Step,
    async_step,
    compose,
    element,
    input,
    interrupt,
    map_step,
    result,
    step,
)

__all__ = [
    "STORED_TYPES", "Approval", "Boxed", "Line", "Memo", "Order", "Packed", "Parcel", "Shop",
    "Tier",
]


class Order(BaseModel):
    """The order the run is about."""

    order_id: str


class Tier(enum.Enum):
    """A customer's tier."""

    GOLD = "gold"


@dataclasses.dataclass(frozen=True)
class Line:
    """One order line."""

    sku: str


class Parcel(BaseModel):
    """What the composed child ships."""

    order_id: str


@dataclasses.dataclass(frozen=True)
class Packed:
    """One inline map element's packed line."""

    sku: str


@dataclasses.dataclass(frozen=True)
class Boxed:
    """One fan-out map element's boxed line."""

    sku: str


@dataclasses.dataclass(frozen=True)
class Memo:
    """What the async unit sends."""

    text: str


class Approval(BaseModel):
    """The interrupt's payload."""

    approver: str


#: Every type the definition can store, by the name ``Shop.find`` shows it under.
STORED_TYPES: dict[str, type[Any]] = {
    "Order": Order, "Tier": Tier, "Line": Line, "Parcel": Parcel, "Packed": Packed,
    "Boxed": Boxed, "Memo": Memo, "Approval": Approval,
}


class Charge(Step):
    """Returns the tier it charged at (its undo does nothing)."""

    tier = Input(Tier)

    def run(self) -> Tier:
        return self.inputs.tier

    def undo(self) -> None:
        return None


class Keep(Step):
    """Returns its ``value`` input as it is (a ``Parcel``, ``Packed`` or ``Boxed``: each
    subclass declares the type)."""

    def run(self) -> Any:
        return self.inputs.value


class KeepParcel(Keep):
    value = Input(Parcel)


class KeepPacked(Keep):
    value = Input(Packed)


class KeepBoxed(Keep):
    value = Input(Boxed)


class Notify(Step):
    """The async unit: returns its memo."""

    memo = Input(Memo)

    def run(self) -> Memo:
        return self.inputs.memo


class Ship(Reactor, name="tests.stored_types.ship"):
    """The composed child."""

    parcel = Input(Parcel)
    keep = step(KeepParcel, value=input("parcel"))
    returns = "keep"


class Pack(Reactor, name="tests.stored_types.pack"):
    """The inline map's element reactor."""

    line = Input(Line)
    keep = step(KeepPacked, value=input("line", transform=lambda line: Packed(line.sku)))
    returns = "keep"


class Box(Reactor, name="tests.stored_types.box"):
    """The fan-out map's element reactor."""

    line = Input(Line)
    keep = step(KeepBoxed, value=input("line", transform=lambda line: Boxed(line.sku)))
    returns = "keep"


def _finish(inputs: Any, ctx: Any) -> str:
    if inputs.fail:
        raise RuntimeError("asked to fail")
    return f"approved by {inputs.approval.approver}"


class Shop(Reactor, name="tests.stored_types.shop"):
    """Stores a value of every type of :data:`STORED_TYPES`, pauses for an ``Approval``,
    then finishes (or fails, with ``fail=True``, after the approval)."""

    order = Input(Order)
    tier = Input(Tier)
    lines = Input(list[Line])
    fail = Input(bool, default=False)

    charge = step(Charge, tier=input("tier"))
    ship = compose(Ship, parcel=input("order", transform=lambda o: Parcel(order_id=o.order_id)))
    pack = map_step(Pack, source=input("lines"), args={"line": element("pack")})
    box = map_step(Box, source=input("lines"), args={"line": element("box")}, fan_out=FanOut())
    notify = async_step(Notify, memo=input("order", transform=lambda o: Memo(o.order_id)))
    approval = interrupt(wait_for=["charge", "ship", "pack", "box"], schema=Approval)
    finish = step(_finish, approval=result("approval"), memo=result("notify"), fail=input("fail"))
