"""The fulfilment saga in background workers, with payment capture as an ``async_step``.

``./scripts/demo --workers 2`` runs this variant: the whole run moves to a worker
(``Background(all=True)``), and the capture is dispatched as its own ``step`` job while the run
continues::

    validate ──> reserve (fan-out map: one ReserveLine job per line item, atomic)
                   └──> authorize ──> book_shipment (3 attempts)
                                        └──> capture (async_step: its own job)
                                               └──> send_confirmation (reads result("capture"))

The ``reserve`` map fans out (``fan_out=FanOut(batch_size=2)``): each line item is reserved by
its own ``map_element`` job, and the run resumes once the map's collector saw every line settle.
When a later step fails (a declined card at ``authorize``, an undeliverable address), the
reservations are released through the map's **distributed rollback**: one
``map_element_rollback`` job per reserved line, after which the run finishes its rollback
(:mod:`reactor.engine.maps.rollback`). An out-of-stock line fails the map atomically: the lines
reserved so far are released the same way.

An async unit is never on its parent's undo stack, so the capture runs last among the steps
that can fail: a failed order has at most an authorization (voided by the rollback), never a
capture. ``send_confirmation`` reads ``result("capture")``, which makes it wait for the unit
(inside a worker the reader parks instead of blocking a thread); a failed capture arrives as a
``Failure`` object, which the ``payment`` input contract (``dict``) rejects, so the run rolls
back (compensation is opt-in). Every other step is the synchronous saga's own
(:mod:`.saga`), so the same invariant check applies.
"""

from __future__ import annotations

from typing import Any

from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    Step,
    async_step,
    element,
    input,
    map_step,
    result,
    step,
)

from .models import Order
from .saga import Authorize, Fulfil, ReserveLine, SendConfirmation, book_shipment_step
from .services import SERVICES

__all__ = ["RESERVE_BATCH_SIZE", "CaptureUnit", "FulfilInWorkers"]

#: Reservation element jobs enqueued per throw by the fan-out ``reserve`` map (small, so an
#: order with several lines shows the batch chain: the line ending a throw enqueues the next).
RESERVE_BATCH_SIZE = 2

class CaptureUnit(Step):
    """Takes the authorized money, as an async unit (no ``undo``: a unit is never undone).

    Returns:
        ``{"id", "authorization_id", "amount": Decimal, "currency"}``.
    """

    authorization = Input(str, min_length=1)

    def run(self) -> dict[str, Any]:
        """Captures the full authorized amount."""
        cap = SERVICES.get().ledger.capture(self.inputs.authorization)
        return {"id": cap.id, "authorization_id": cap.authorization_id, "amount": cap.amount,
                "currency": cap.currency}


class FulfilInWorkers(Reactor, name="order_fulfilment.fulfil_workers"):
    """Fulfils one order in a background worker; see the module docstring.

    Inputs:
        order: the :class:`~examples.order_fulfilment.models.Order`.
        card_token: the raw card token (``order.card_token()``); redacted everywhere.

    Returns:
        The ``send_confirmation`` result.
    """

    order = Input(Order)
    card_token = Input(str, redact=True)
    background = Background(all=True)

    validate = Fulfil.definition.steps["validate"]
    reserve = map_step(
        ReserveLine,
        source=result("validate", "lines"),
        args={"line": element("reserve"), "order_id": input("order", "id")},
        atomic=True,
        fan_out=FanOut(batch_size=RESERVE_BATCH_SIZE),
    )
    authorize = step(
        Authorize,
        order_id=input("order", "id"),
        amount=result("validate", "total"),
        currency=result("validate", "currency"),
        card_token=input("card_token"),
        wait_for=["reserve"],
    )
    book_shipment = book_shipment_step(after="authorize")
    capture = async_step(CaptureUnit, authorization=result("authorize", "id"),
                         wait_for=["book_shipment"])
    send_confirmation = step(SendConfirmation, order=input("order"),
                             shipment=result("book_shipment"), payment=result("capture"))

    returns = "send_confirmation"
