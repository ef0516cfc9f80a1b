"""Reactors the dashboard tests run (docs/dashboard.md): a shop saga with a map, a composed
payment, retries and a rollback; reactors that coordinate (locks, semaphores, rate limits,
periods, ordered locks, a secret-keyed lock, an unregistered named rate limit); an async step
that parks on a lock; a pausing reactor; and a step that holds a lock until told to let go.
"""

from __future__ import annotations

import threading
from typing import Any

from reactor import (
    Background,
    Input,
    Reactor,
    Retries,
    Step,
    async_step,
    compose,
    element,
    input,
    interrupt,
    map_step,
    result,
    step,
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)

__all__ = [
    "HOLDING",
    "Fetcher",
    "Guarded",
    "HoldPick",
    "Interrupted",
    "Pay",
    "Picker",
    "Review",
    "Sequenced",
    "Shop",
    "ShopItem",
    "controls",
]

#: Test switches the step bodies read (reset by the fixtures).
controls: dict[str, Any] = {"ship_fails": False, "card_declined": False}


class HoldGate:
    """Lets a test hold a lock inside a running step body for as long as it needs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def reset(self) -> None:
        self.entered.clear()
        self.release.clear()


#: The gate :class:`HoldPick`'s body waits at.
HOLDING = HoldGate()


class ReserveStock(Step):
    """One item of an order: a sku starting with ``bad`` is out of stock."""

    sku = Input(str)
    order_id = Input(str)

    def run(self) -> dict[str, Any]:
        if self.inputs.sku.startswith("bad"):
            raise LookupError(f"out of stock: {self.inputs.sku}")
        return {"sku": self.inputs.sku, "order": self.inputs.order_id}

    def undo(self) -> None:
        return None


class ShopItem(Reactor, name="tests.dashboard.shop_item"):
    """The map element: reserve one item."""

    sku = Input(str)
    order_id = Input(str)
    reserve = step(ReserveStock)
    returns = "reserve"


class Pay(Reactor, name="tests.dashboard.pay"):
    """The composed payment: authorize, then capture."""

    order_id = Input(str)
    card_token = Input(str, redact=True)

    @step(order_id=input("order_id"), card_token=input("card_token"))
    def authorize(inputs: Any, ctx: Any) -> dict[str, str]:
        if controls["card_declined"]:
            raise PermissionError("card declined")
        return {"auth": f"auth-{inputs.order_id}"}

    @authorize.undo
    def void(result: Any, inputs: Any, ctx: Any) -> None:
        return None

    @step(authorization=result("authorize", "auth"))
    def capture(inputs: Any, ctx: Any) -> str:
        return f"captured {inputs.authorization}"

    @capture.undo
    def refund(result: Any, inputs: Any, ctx: Any) -> None:
        return None

    returns = "capture"


class Shop(Reactor, name="tests.dashboard.shop"):
    """An order: validate, reserve each item (a map that collects failures), pay (compose),
    ship (retried, may fail: then everything rolls back)."""

    order_id = Input(str)
    items = Input(list)
    card_token = Input(str, redact=True)

    @step(order_id=input("order_id"))
    def validate(inputs: Any, ctx: Any) -> str:
        return f"valid {inputs.order_id}"

    reserve = map_step(
        ShopItem, source=input("items"),
        args={"sku": element("reserve"), "order_id": input("order_id")},
        atomic=False, wait_for=["validate"],
    )
    payment = compose(Pay, order_id=input("order_id"), card_token=input("card_token"),
                      wait_for=["reserve"])

    @step(order_id=input("order_id"), wait_for=["payment"],
          retries=Retries(max_attempts=2, base_delay=0.0))
    def ship(inputs: Any, ctx: Any) -> str:
        if controls["ship_fails"]:
            raise ConnectionError("carrier down")
        return f"shipped {inputs.order_id}"

    @ship.undo
    def cancel_shipment(result: Any, inputs: Any, ctx: Any) -> None:
        return None

    returns = "ship"


class HoldPick(Reactor, name="tests.dashboard.hold_pick"):
    """Takes the lock ``sku:<sku>`` and keeps it until :data:`HOLDING` is released."""

    sku = Input(str)

    @step(sku=input("sku"), coordination=[with_lock(key=lambda i: f"sku:{i.sku}", ttl=60)])
    def hold(inputs: Any, ctx: Any) -> str:
        HOLDING.entered.set()
        if not HOLDING.release.wait(60):
            raise TimeoutError("the test never released the lock")
        return "held"


class Picker(Reactor, name="tests.dashboard.picker"):
    """Runs in a worker: ``pick`` needs the lock ``sku:<sku>`` and a semaphore slot (two
    gates), ``pack`` needs a lock and a semaphore too, ``charge`` keys its lock on the secret
    card, ``notify`` uses a named rate limit nobody registered."""

    background = Background(all=True)
    sku = Input(str)
    card = Input(str, redact=True)
    coordination = [with_rate_limit(key="picker-api", limit=1000, period="day")]

    @step(sku=input("sku"), coordination=[
        with_lock(key=lambda i: f"sku:{i.sku}", ttl=30),
        with_semaphore(key="pickers", limit=2),
    ])
    def pick(inputs: Any, ctx: Any) -> str:
        return f"picked {inputs.sku}"

    @step(sku=input("sku"), wait_for=["pick"], coordination=[
        with_lock(key=lambda i: f"pack:{i.sku}"), with_semaphore(key="packers", limit=1),
    ])
    def pack(inputs: Any, ctx: Any) -> str:
        return "packed"

    @step(card=input("card"), wait_for=["pack"],
          coordination=[with_lock(key=lambda i: f"card:{i.card}")])
    def charge(inputs: Any, ctx: Any) -> str:
        return "charged"

    @step(wait_for=["charge"], coordination=[with_rate_limit("tests-dashboard-unregistered")])
    def notify(inputs: Any, ctx: Any) -> str:
        return "notified"


class Guarded(Reactor, name="tests.dashboard.guarded"):
    """Synchronous: every primitive, every step reached; ``charge`` keys its lock on the
    secret card, ``settle`` on a constant."""

    account = Input(str)
    card = Input(str, redact=True)
    coordination = [with_lock(key=lambda i: f"account:{i.account}")]

    @step(account=input("account"), coordination=[
        with_period(key=lambda i: f"statement:{i.account}", every="day"),
        with_ordered_lock(key="ledger-line"),
    ])
    def statement(inputs: Any, ctx: Any) -> str:
        return "statement"

    @step(card=input("card"), wait_for=["statement"], coordination=[
        with_lock(key=lambda i: f"card:{i.card}"), with_semaphore(key="cards", limit=5),
        with_rate_limit(key="card-api", limits={"hour": 10, "day": 100}),
    ])
    def charge(inputs: Any, ctx: Any) -> str:
        return "charged"

    @step(wait_for=["charge"], coordination=[with_lock(key="constant-key")])
    def settle(inputs: Any, ctx: Any) -> str:
        return "settled"


class Sequenced(Reactor, name="tests.dashboard.sequenced"):
    """Runs in a worker; ``post`` goes strictly in ticket order on the line ``ledger``."""

    background = Background(all=True)
    entry = Input(str)

    @step(entry=input("entry"), coordination=[with_ordered_lock(key="ledger")])
    def post(inputs: Any, ctx: Any) -> str:
        return f"posted {inputs.entry}"


class Fetcher(Reactor, name="tests.dashboard.fetcher"):
    """A synchronous parent whose async step ``fetch`` needs the lock ``supplier``."""

    supplier = Input(str)

    @step(supplier=input("supplier"))
    def prepare(inputs: Any, ctx: Any) -> str:
        return "prepared"

    @async_step(supplier=input("supplier"), wait_for=["prepare"],
                coordination=[with_lock(key=lambda i: f"supplier:{i.supplier}")])
    def fetch(inputs: Any, ctx: Any) -> str:
        return f"fetched from {inputs.supplier}"


class Interrupted(Reactor, name="tests.dashboard.interrupted"):
    """Stops with a KeyboardInterrupt in its second step: stored ``aborted``, its compensate
    pending."""

    order_id = Input(str)

    @step(order_id=input("order_id"))
    def reserve(inputs: Any, ctx: Any) -> str:
        return "reserved"

    @reserve.undo
    def release(result: Any, inputs: Any, ctx: Any) -> None:
        return None

    @step(order_id=input("order_id"), wait_for=["reserve"])
    def charge(inputs: Any, ctx: Any) -> str:
        raise KeyboardInterrupt

    @charge.compensate
    def void(error: Any, inputs: Any, ctx: Any) -> None:
        return None


class Review(Reactor, name="tests.dashboard.review"):
    """Pauses for an approval, then finishes."""

    order_id = Input(str)

    @step(order_id=input("order_id"))
    def hold(inputs: Any, ctx: Any) -> str:
        return f"hold {inputs.order_id}"

    approval = interrupt(wait_for="hold")

    @step(approval=result("approval"))
    def finish(inputs: Any, ctx: Any) -> str:
        return f"approved: {inputs.approval}"

    returns = "finish"
