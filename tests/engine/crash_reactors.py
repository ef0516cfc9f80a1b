"""Reactors for the crash-recovery tests of ``tests/engine/test_crash_recovery.py``
(docs/run-control.md, "Cancel"; docs/workers.md, "Maps resume").

Every step body and undo appends to :data:`journal` (``"<what>:<step>:<order>"``), so a test
counts exactly how many times each side effect ran.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from reactor import (
    Background,
    Input,
    Reactor,
    async_reactor,
    compose,
    element,
    input,
    map_step,
    step,
)

__all__ = [
    "FlatShipment", "Fork", "Leg", "Packing", "Parcel", "Shipment", "Trio", "Trip", "journal",
    "record", "release",
]

_lock = threading.Lock()
#: What ran, in order (step bodies and undos).
journal: list[str] = []
#: Lets :class:`Fork`'s held branches finish (set by the test; cleared with the journal).
release = threading.Event()


def record(entry: str) -> None:
    """Append ``entry`` to :data:`journal` (thread-safe)."""
    with _lock:
        journal.append(entry)


def _step(name: str, *, wait_for: str | None = None) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(f"run:{name}:{inputs.order_id}")
        return f"{name}:{inputs.order_id}"

    run.__name__ = run.__qualname__ = f"run_{name}"
    spec = step(run, order_id=input("order_id"), wait_for=wait_for)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:{name}:{inputs.order_id}")

    return spec


class Trio(Reactor, name="tests.crash.trio"):
    """a -> b -> c, each undoable, run by a worker."""

    order_id = Input(str)
    background = Background(all=True)
    a = _step("a")
    b = _step("b", wait_for="a")
    c = _step("c", wait_for="b")


class Parcel(Reactor, name="tests.crash.parcel"):
    """A map element: ``pack`` logs ``run:pack<n>:<order>``, its undo ``undo:pack<n>:<order>``."""

    order_id = Input(str)
    n = Input(int)

    @step(order_id=input("order_id"), n=input("n"))
    def pack(inputs: Any, ctx: Any) -> int:
        record(f"run:pack{inputs.n}:{inputs.order_id}")
        return int(inputs.n)

    @pack.undo
    def unpack(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:pack{inputs.n}:{inputs.order_id}")

    returns = "pack"


class Packing(Reactor, name="tests.crash.packing"):
    """A composed child: ``prep``, then an inline map of :class:`Parcel` elements, one per
    item."""

    order_id = Input(str)
    items = Input(list)
    prep = _step("prep")
    parcels = map_step(Parcel, source=input("items"),
                       args={"order_id": input("order_id"), "n": element("parcels")},
                       wait_for="prep")


class Shipment(Reactor, name="tests.crash.shipment"):
    """``open``, the composed :class:`Packing` (its inline map inside), then ``ship``, which
    fails when ``fail_ship`` is set (the whole run is then rolled back); run by a worker."""

    order_id = Input(str)
    fail_ship = Input(bool)
    items = Input(list)
    background = Background(all=True)
    open = _step("open")
    packing = compose(Packing, order_id=input("order_id"), items=input("items"),
                      wait_for="open")

    @step(order_id=input("order_id"), fail_ship=input("fail_ship"), wait_for="packing")
    def ship(inputs: Any, ctx: Any) -> str:
        record(f"run:ship:{inputs.order_id}")
        if inputs.fail_ship:
            raise RuntimeError("the carrier refused the shipment")
        return "shipped"


class FlatShipment(Reactor, name="tests.crash.flat_shipment"):
    """:class:`Shipment` with the inline map at the top level (no composed child)."""

    order_id = Input(str)
    fail_ship = Input(bool)
    items = Input(list)
    background = Background(all=True)
    open = _step("open")
    parcels = map_step(Parcel, source=input("items"),
                       args={"order_id": input("order_id"), "n": element("parcels")},
                       wait_for="open")

    @step(order_id=input("order_id"), fail_ship=input("fail_ship"), wait_for="parcels")
    def ship(inputs: Any, ctx: Any) -> str:
        record(f"run:ship:{inputs.order_id}")
        if inputs.fail_ship:
            raise RuntimeError("the carrier refused the shipment")
        return "shipped"


class Leg(Reactor, name="tests.crash.leg"):
    """An ``async_reactor`` child: ``book`` logs ``run:leg:<order>``, its undo
    ``undo:leg:<order>``."""

    order_id = Input(str)
    book = _step("leg")


class Trip(Reactor, name="tests.crash.trip"):
    """``hotel``, then the :class:`Leg` child run of its own (``async_reactor``)."""

    order_id = Input(str)
    hotel = _step("hotel")
    leg = async_reactor(Leg, args={"order_id": input("order_id")}, wait_for="hotel")


def _held(name: str) -> Any:
    """An ``async def`` branch that logs ``run:<name>:<order>`` once :data:`release` is set."""

    async def run(inputs: Any, ctx: Any) -> str:
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, release.wait, 60.0):
            raise RuntimeError("the test never released the branch")
        record(f"run:{name}:{inputs.order_id}")
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    spec = step(run, order_id=input("order_id"))

    @spec.undo
    async def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:{name}:{inputs.order_id}")

    return spec


class Fork(Reactor, name="tests.crash.fork"):
    """Concurrent branches in a worker (docs/concepts.md, "Concurrency"): ``quick`` and the
    two async ``held`` branches (which wait for :data:`release`) run at once, then ``join``,
    which fails when ``fail_join`` is set."""

    order_id = Input(str)
    fail_join = Input(bool)
    background = Background(all=True)
    max_concurrency = 3
    quick = _step("quick")
    held1 = _held("held1")
    held2 = _held("held2")

    @step(order_id=input("order_id"), fail_join=input("fail_join"),
          wait_for=["quick", "held1", "held2"])
    def join(inputs: Any, ctx: Any) -> str:
        record(f"run:join:{inputs.order_id}")
        if inputs.fail_join:
            raise RuntimeError("the join refused")
        return "joined"
