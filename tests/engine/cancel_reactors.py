"""Reactors for ``tests/engine/test_cancel.py`` (docs/run-control.md, "Cancel").

Every step body, undo and compensate appends to :data:`events` (``"<what>:<step>:<order>"``),
so a test can assert what ran, in which order, and how many times. A step built with
``blocks=True`` waits in its body on the :class:`Gate` registered for its order id (if any):
the test learns the run id when the body starts, cancels, then releases the body. No test
sleeps on a hope: every wait is an event with a bound.
"""

from __future__ import annotations

import threading
from typing import Any

from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    compose,
    element,
    input,
    interrupt,
    map_step,
    result,
    step,
    with_lock,
    with_ordered_lock,
    with_semaphore,
)

__all__ = [
    "Approve",
    "Fan",
    "Five",
    "Flaky",
    "Gate",
    "Item",
    "Nested",
    "Parked",
    "Queued",
    "events",
    "gate",
    "interrupt_first_undo",
    "record",
]

#: The longest a blocked body waits for its gate (a safety net, never reached in a pass).
GATE_LIMIT = 60.0

_lock = threading.Lock()
#: What ran, in order (step bodies, undos and compensates).
events: list[str] = []
_gates: dict[str, Gate] = {}
_interrupted: set[str] = set()


def record(entry: str) -> None:
    """Append ``entry`` to :data:`events` (thread-safe)."""
    with _lock:
        events.append(entry)


class Gate:
    """Holds a blocking step body of one order until the test releases it.

    Attributes:
        entered: set when the body started (``run_id`` is then the root run's id).
        release: set by the test to let the body return.
        run_id: the root run id the body runs in.
    """

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.run_id = ""


def gate(order_id: str) -> Gate:
    """Register (and return) the gate the blocking step of ``order_id`` waits on."""
    made = Gate()
    _gates[order_id] = made
    return made


def interrupt_first_undo(order_id: str) -> None:
    """Make the next undo of :class:`Flaky`'s ``reserve`` for ``order_id`` raise
    ``SystemExit`` (the process running the rollback stops in the middle of it)."""
    _interrupted.add(order_id)


def _leaf(name: str, *, blocks: bool = False) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(f"run:{name}:{inputs.order_id}")
        held = _gates.get(inputs.order_id) if blocks else None
        if held is not None:
            held.run_id = ctx.root_run_id
            held.entered.set()
            if not held.release.wait(GATE_LIMIT):
                raise TimeoutError(f"the gate of {inputs.order_id} was never released")
        return f"{name}:{inputs.order_id}"

    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


def _step(name: str, *, blocks: bool = False, wait_for: str | None = None,
          coordination: Any = None) -> Any:
    spec = step(_leaf(name, blocks=blocks), order_id=input("order_id"), wait_for=wait_for,
                coordination=coordination)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:{name}:{inputs.order_id}")

    @spec.compensate
    def compensate(error: Any, inputs: Any, ctx: Any) -> None:
        record(f"compensate:{name}:{inputs.order_id}")

    return spec


class Five(Reactor, name="tests.cancel.five"):
    """s1 -> s2 -> s3 (blocks on its gate; a step-level semaphore) -> s4 -> s5, under a
    reactor-level lock keyed by the order."""

    order_id = Input(str)
    coordination = with_lock(key=lambda i: f"cancel-order:{i.order_id}", ttl=30)

    s1 = _step("s1")
    s2 = _step("s2", wait_for="s1")
    s3 = _step("s3", blocks=True, wait_for="s2",
               coordination=with_semaphore(key=lambda i: f"cancel-pool:{i.order_id}", limit=2))
    s4 = _step("s4", wait_for="s3")
    s5 = _step("s5", wait_for="s4")


class Approve(Reactor, name="tests.cancel.approve"):
    """reserve, then an interrupt waiting for an approval, then pay."""

    order_id = Input(str)
    reserve = _step("reserve")
    approval = interrupt(
        wait_for="reserve", correlation_id=input("order_id", transform=lambda v: f"cancel:{v}")
    )
    pay = _step("pay", wait_for="approval")


class Nested(Reactor, name="tests.cancel.nested"):
    """open, then the composed :class:`Approve` (which pauses inside the child)."""

    order_id = Input(str)
    open = _step("open")
    inner = compose(Approve, order_id=input("order_id"), wait_for="open")


class Queued(Reactor, name="tests.cancel.queued"):
    """One step, run by a worker, in an ordered line per ``line`` (tickets at enqueue)."""

    order_id = Input(str)
    line = Input(str)
    background = Background(all=True)
    coordination = with_ordered_lock(key=lambda i: f"cancel-line:{i.line}")
    work = _step("work")


class Parked(Reactor, name="tests.cancel.parked"):
    """A worker run under a reactor-level lock and semaphore (it parks when the semaphore
    is full, keeping the lock it took)."""

    order_id = Input(str)
    background = Background(all=True)
    coordination = [
        with_lock(key=lambda i: f"cancel-parked-lock:{i.order_id}", ttl=30),
        with_semaphore(key=lambda i: f"cancel-parked-pool:{i.order_id}", limit=1),
    ]
    work = _step("work")


class Item(Reactor, name="tests.cancel.item"):
    """A fan-out map element: one undoable step per item."""

    order_id = Input(str)
    item = Input(int)

    @step(order_id=input("order_id"), item=input("item"))
    def take(inputs: Any, ctx: Any) -> int:
        record(f"run:item{inputs.item}:{inputs.order_id}")
        return int(inputs.item)

    @take.undo
    def put_back(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:item{inputs.item}:{inputs.order_id}")


class Fan(Reactor, name="tests.cancel.fan"):
    """prepare, then a fan-out map of six :class:`Item` elements in batches of two."""

    order_id = Input(str)
    prepare = _step("prepare")

    @step(order_id=input("order_id"), ready=result("prepare"))
    def items(inputs: Any, ctx: Any) -> list[int]:
        return [0, 1, 2, 3, 4, 5]

    taken = map_step(
        Item, source=result("items"),
        args={"order_id": input("order_id"), "item": element("taken")},
        fan_out=FanOut(batch_size=2),
    )


class Flaky(Reactor, name="tests.cancel.flaky"):
    """reserve (its undo can be interrupted once: :func:`interrupt_first_undo`), then an
    interrupt."""

    order_id = Input(str)

    @step(order_id=input("order_id"))
    def reserve(inputs: Any, ctx: Any) -> str:
        record(f"run:reserve:{inputs.order_id}")
        return "r"

    @reserve.undo
    def unreserve(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:reserve:{inputs.order_id}")
        if inputs.order_id in _interrupted:
            _interrupted.discard(inputs.order_id)
            raise SystemExit("the process running the rollback stops")

    approval = interrupt(wait_for="reserve")
