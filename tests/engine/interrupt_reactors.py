"""Reactors with interrupts for ``tests/engine/test_interrupts.py`` (docs/run-control.md,
"Interrupts"), in their own module so another process can import them and resume a run that
this one paused.

Every step body and undo appends to :data:`events` (``"<what>:<order id>[:...]"``), so a test
can assert what ran, and how many times.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, Field

from reactor import Background, Input, Reactor, compose, input, interrupt, result, step

__all__ = [
    "ActiveRefund",
    "Approval",
    "Audit",
    "QueuedRefund",
    "Refund",
    "TimedRefund",
    "events",
    "record",
]

_lock = threading.Lock()
#: What ran, in order (step bodies and undos).
events: list[str] = []


def record(entry: str) -> None:
    """Append ``entry`` to :data:`events` (thread-safe)."""
    with _lock:
        events.append(entry)


class Approval(BaseModel):
    """The payload a manager sends back."""

    approver: str = Field(min_length=1)
    approved: bool


def _reserve(inputs: Any, ctx: Any) -> dict[str, str]:
    record(f"reserve:{inputs.order_id}")
    return {"reservation": f"r-{inputs.order_id}"}


def _unreserve(result: Any, inputs: Any, ctx: Any) -> None:
    record(f"unreserve:{inputs.order_id}")


def _pay(inputs: Any, ctx: Any) -> str:
    record(f"pay:{inputs.order_id}:{inputs.approval.approver}")
    return f"refunded {inputs.order_id} by {inputs.approval.approver}"


def _refund_key(order_id: str) -> str:
    return f"refund:{order_id}"


class Refund(Reactor, name="tests.interrupts.refund"):
    """Reserve, wait for an approval (three attempts, no timeout), then pay."""

    order_id = Input(str)
    returns = "pay"

    reserve = step(_reserve, order_id=input("order_id"))
    reserve.undo(_unreserve)
    approval = interrupt(
        wait_for="reserve",
        correlation_id=input("order_id", transform=_refund_key),
        schema=Approval,
        max_attempts=3,
    )
    pay = step(_pay, order_id=input("order_id"), approval=result("approval"))


class TimedRefund(Reactor, name="tests.interrupts.timed_refund"):
    """As :class:`Refund`, but the approval expires lazily after 60 s."""

    order_id = Input(str)
    returns = "pay"

    reserve = step(_reserve, order_id=input("order_id"))
    reserve.undo(_unreserve)
    approval = interrupt(wait_for="reserve", schema=Approval, timeout=60)
    pay = step(_pay, order_id=input("order_id"), approval=result("approval"))


class ActiveRefund(Reactor, name="tests.interrupts.active_refund"):
    """As :class:`Refund`, but a delayed job expires the approval after 1 s."""

    order_id = Input(str)
    returns = "pay"

    reserve = step(_reserve, order_id=input("order_id"))
    reserve.undo(_unreserve)
    approval = interrupt(wait_for="reserve", schema=Approval, timeout=1, expiry="active")
    pay = step(_pay, order_id=input("order_id"), approval=result("approval"))


class QueuedRefund(Reactor, name="tests.interrupts.queued_refund"):
    """:class:`Refund` run by a worker from the start (``Background(all=True)``)."""

    order_id = Input(str)
    returns = "pay"
    background = Background(all=True)

    reserve = step(_reserve, order_id=input("order_id"))
    reserve.undo(_unreserve)
    approval = interrupt(
        wait_for="reserve", correlation_id=input("order_id", transform=_refund_key),
        schema=Approval,
    )
    pay = step(_pay, order_id=input("order_id"), approval=result("approval"))


def _open(inputs: Any, ctx: Any) -> str:
    record(f"open:{inputs.order_id}")
    return f"case-{inputs.order_id}"


def _close(result: Any, inputs: Any, ctx: Any) -> None:
    record(f"close:{inputs.order_id}")


class Audit(Reactor, name="tests.interrupts.audit"):
    """Open a case, then run :class:`Refund` as composed child ``refund``: its interrupt pauses
    this run at step path ``refund.approval``."""

    order_id = Input(str)

    open_case = step(_open, order_id=input("order_id"))
    open_case.undo(_close)
    refund = compose(Refund, wait_for="open_case", order_id=input("order_id"))
