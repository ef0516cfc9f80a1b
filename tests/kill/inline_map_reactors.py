"""Reactors the inline-map kill test runs in real worker processes
(``--import tests.kill.inline_map_reactors``; docs/workers.md, "Maps resume").

:class:`InlineShipment` runs ``open``, then the composed :class:`InlinePacking` (``prep``,
then an **inline** map of four :class:`InlineParcel` elements), then ``ship``, which fails when
``fail_ship`` is set. Each element logs ``start:<n>`` / ``done:<n>`` and its undo
``undo:<n>`` to an ``O_APPEND`` log (counted across processes); element 2 blocks on its
**first** entry while the ``block`` file exists, so the test kills the worker with elements 0
and 1 completed and element 2 in flight.
"""

from __future__ import annotations

from typing import Any

from reactor import Background, Input, Reactor, compose, element, input, map_step, step
from tests.kill.reactors import _block_on_first_entry, record

__all__ = ["BLOCKING_ELEMENT", "InlinePackingKill", "InlineParcel", "InlineShipment"]

#: The element whose first execution blocks until its worker is killed.
BLOCKING_ELEMENT = 2


class InlineParcel(Reactor, name="kill.inline_parcel"):
    """One element: ``pack`` logs ``start:<n>``/``done:<n>``, its undo ``undo:<n>``."""

    n = Input(int)
    log_path = Input(str)
    block_path = Input(str)

    @step(n=input("n"), log_path=input("log_path"), block_path=input("block_path"))
    def pack(inputs: Any, ctx: Any) -> int:
        record(inputs.log_path, f"start:{inputs.n}")
        if inputs.n == BLOCKING_ELEMENT:
            _block_on_first_entry(inputs.log_path, inputs.block_path, f"start:{inputs.n}")
        record(inputs.log_path, f"done:{inputs.n}")
        return int(inputs.n)

    @pack.undo
    def unpack(value: Any, inputs: Any, ctx: Any) -> None:
        record(inputs.log_path, f"undo:{inputs.n}")

    returns = "pack"


def _logged(name: str) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"done:{name}")
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


class InlinePackingKill(Reactor, name="kill.inline_packing"):
    """The composed child: ``prep``, then the inline map over ``items``."""

    items = Input(list)
    log_path = Input(str)
    block_path = Input(str)
    prep = step(_logged("prep"), log_path=input("log_path"))
    parcels = map_step(
        InlineParcel, source=input("items"),
        args={"n": element("parcels"), "log_path": input("log_path"),
              "block_path": input("block_path")},
        wait_for="prep",
    )


class InlineShipment(Reactor, name="kill.inline_shipment"):
    """``open`` -> composed :class:`InlinePackingKill` -> ``ship`` (fails with
    ``fail_ship``), in a worker."""

    items = Input(list)
    log_path = Input(str)
    block_path = Input(str)
    fail_ship = Input(bool)
    background = Background(all=True)
    open = step(_logged("open"), log_path=input("log_path"))
    packing = compose(InlinePackingKill, items=input("items"), log_path=input("log_path"),
                      block_path=input("block_path"), wait_for="open")

    @step(log_path=input("log_path"), fail_ship=input("fail_ship"), wait_for="packing")
    def ship(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "done:ship")
        if inputs.fail_ship:
            raise RuntimeError("the carrier refused the shipment")
        return "shipped"
