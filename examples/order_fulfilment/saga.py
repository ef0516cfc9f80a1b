"""The fulfilment saga: validate, reserve stock per line, charge, ship, confirm.

Structure (each arrow is a dependency; on a failure, completed steps are undone newest first)::

    validate ──> reserve (map: ReserveLine per line item, atomic; lock per SKU)
                   └──> payment (compose: Payment = authorize ──> capture)
                          └──> book_shipment (function step, 3 attempts; carrier semaphore)
                                 └──> send_confirmation

**Coordination** (docs/coordination.md): each line's ``ReserveStock`` runs under the lock
``sku:<SKU>`` (:data:`SKU_LOCK`: one reservation of a SKU at a time, as a warehouse bin would
allow), and every ``book_shipment`` attempt holds one of :data:`CARRIER_SLOTS` leases of the
semaphore ``carrier`` (:data:`CARRIER_SEMAPHORE`: the carrier's API takes that many bookings at
once). Synchronous runs never contend; in workers a held lock or a full semaphore parks the unit
(docs/coordination.md, "Contention"). The dashboard's coordination panel shows them on an order's
run page (the semaphore) and on each ``reserve`` element's (the lock).

Orders whose total is above the review threshold (:data:`REVIEW_THRESHOLD` by default; the
runner chooses the reactor with :func:`needs_review`) run :class:`FulfilWithReview`, the same
saga with a manual review between payment and shipping::

    ... payment ──> manual_review (interrupt: the run pauses until a reviewer resumes it)
                      └──> apply_review (a rejection fails here) ──> book_shipment ──> ...

``manual_review`` is an ``interrupt`` (docs/run-control.md, "Interrupts"): the run is stored
``paused`` with the correlation id ``review:<order id>`` until
``FulfilWithReview.resume(correlation_id=..., payload={"approved", "reviewer", "note"})``
brings a :class:`~examples.order_fulfilment.models.ReviewDecision`. An approval ships the order;
a rejection fails ``apply_review`` with :class:`ReviewRejected`, and the rollback refunds the
capture, voids the authorization and releases the stock. A review not given within
:data:`REVIEW_TIMEOUT` seconds expires (the next resume fails and rolls back the run).

Every step that changes a fake service has a real ``undo`` (release the reservation, refund the
capture, void the authorization, cancel the shipment, recall the e-mail) and a ``compensate``
that cleans up anything its own failed attempt may have left behind (looked up by the
service's idempotency key). All undos are idempotent, so a rollback that is replayed (e.g. by
``Reactor.undo(run_id)`` after a crash) does no harm.

The card token travels as the separate ``card_token`` input declared ``redact=True``: it is
shown as ``"[REDACTED]"`` in traces, failures and ``Fulfil.find(run_id).inputs``; inside the
stored ``order`` input the model's :class:`~pydantic.SecretStr` keeps it masked as well.

Steps find the fake services through :data:`~examples.order_fulfilment.services.SERVICES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from reactor import (
    Input,
    Reactor,
    Retries,
    Step,
    codec,
    compose,
    element,
    fail,
    input,
    interrupt,
    map_step,
    result,
    step,
    with_lock,
    with_semaphore,
)

from .models import Order, ReviewDecision
from .services import SERVICES, ServiceError

__all__ = [
    "CARRIER_SEMAPHORE",
    "CARRIER_SLOTS",
    "REVIEW_MAX_ATTEMPTS",
    "REVIEW_THRESHOLD",
    "REVIEW_TIMEOUT",
    "SHIPMENT_RETRIES",
    "SKU_LOCK",
    "ApplyReview",
    "Authorize",
    "Capture",
    "Fulfil",
    "FulfilWithReview",
    "InvalidOrder",
    "Payment",
    "ReserveLine",
    "ReserveStock",
    "ReviewRejected",
    "SendConfirmation",
    "ValidateOrder",
    "book_shipment",
    "book_shipment_step",
    "cancel_failed_booking",
    "cancel_shipment",
    "needs_review",
    "review_correlation_id",
]

if not codec.is_registered(Order):
    # The stored run keeps the order; the codec writes it with model_dump(mode="json"), in
    # which the card token is masked (see models.PaymentMethod).
    codec.register_model(Order, tag="examples.order_fulfilment.Order")
if not codec.is_registered(ReviewDecision):
    # The resumed review is stored as the manual_review step's result.
    codec.register_model(ReviewDecision, tag="examples.order_fulfilment.ReviewDecision")

#: Bookings the carrier's API takes at once: the limit of :data:`CARRIER_SEMAPHORE`.
CARRIER_SLOTS: Final = 4

#: ``book_shipment``'s coordination: one lease of the semaphore ``carrier`` per attempt
#: (a synchronous caller waits up to 5 s for one; a worker parks).
CARRIER_SEMAPHORE: Final = with_semaphore(key="carrier", limit=CARRIER_SLOTS, wait=5, lease=30)

#: ``ReserveStock``'s coordination: the lock ``sku:<SKU>`` while a line's units are reserved
#: (a synchronous caller waits up to 5 s for it; a worker parks).
SKU_LOCK: Final = with_lock(key=lambda inputs: f"sku:{inputs.sku}", ttl=30, wait=5)

#: Retry policy of ``book_shipment``: 3 attempts, 0.01 s then 0.02 s apart.
SHIPMENT_RETRIES = Retries(max_attempts=3, backoff="exponential", base_delay=0.01)


#: Orders whose ``total`` is above this amount (in the order's own currency: the demo does not
#: convert) pause for a manual review (:class:`FulfilWithReview`). The runner's
#: ``--review-threshold`` overrides it.
REVIEW_THRESHOLD: Final = Decimal("400.00")

#: Seconds a large order may wait for its review (12 hours, below the default ``context_ttl``
#: of a day, which a paused run must outlive: docs/run-control.md, "Interrupts"). A review
#: sent later fails the run and rolls it back (lazy expiry).
REVIEW_TIMEOUT: Final = 12 * 3600.0

#: Malformed review payloads accepted before the run fails and is rolled back.
REVIEW_MAX_ATTEMPTS: Final = 3


class InvalidOrder(ServiceError):
    """The order cannot be fulfilled as placed (a validation rule failed; permanent)."""

    code = "invalid_order"


class ReviewRejected(ServiceError):
    """A reviewer rejected a large order at its manual review (permanent: the run fails and
    is rolled back)."""

    code = "review_rejected"


def needs_review(order: Order, threshold: Decimal | None = REVIEW_THRESHOLD) -> bool:
    """Whether ``order`` is reviewed by hand before it ships.

    Args:
        order: the order.
        threshold: the amount its ``total`` must exceed (in the order's currency), or
            ``None`` to review nothing.

    Returns:
        ``True`` when ``order.total > threshold``: run it as :class:`FulfilWithReview`.
    """
    return threshold is not None and order.total > threshold


def review_correlation_id(order_id: str) -> str:
    """The correlation id a large order's ``manual_review`` interrupt registers.

    Args:
        order_id: the order's id (``"ORD-000135"``).

    Returns:
        ``"review:<order id>"``, which a reviewer passes to ``FulfilWithReview.resume``.
    """
    return f"review:{order_id}"


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------


class ValidateOrder(Step):
    """Checks an order against the catalog and the carrier's coverage; no side effects.

    Rules: distinct SKUs; every SKU in the catalog and not discontinued; unit prices equal the
    catalog price in the order currency; ``subtotal`` equals the sum of the lines and ``total``
    equals ``subtotal + shipping_fee``; the destination country is served by the carrier.

    Returns:
        ``{"order_id", "currency", "total": Decimal, "parcels": int, "lines": [{"sku",
        "quantity", "unit_price": Decimal}, ...]}`` — the ``lines`` feed the ``reserve`` map.

    Fails (not retryable) with :class:`InvalidOrder` naming the first broken rule.
    """

    order = Input(Order)

    def run(self) -> dict[str, Any]:
        """Validates ``self.inputs.order``; see the class docstring."""
        order: Order = self.inputs.order
        services = SERVICES.get()
        catalog = services.inventory.catalog
        skus = [line.sku for line in order.lines]
        if len(set(skus)) != len(skus):
            fail(InvalidOrder(f"{order.id}: a SKU appears on two lines"), retryable=False)
        for line in order.lines:
            item = catalog.get(line.sku)
            if item is None:
                fail(InvalidOrder(f"{order.id}: unknown SKU {line.sku}"), retryable=False)
            if item.discontinued:
                fail(InvalidOrder(f"{order.id}: SKU {line.sku} is discontinued"),
                     retryable=False)
            if item.prices.get(order.currency) != line.unit_price:
                fail(InvalidOrder(f"{order.id}: price of {line.sku} is not the catalog price"),
                     retryable=False)
        subtotal = sum((line.line_total for line in order.lines), Decimal("0"))
        if subtotal != order.subtotal or order.subtotal + order.shipping_fee != order.total:
            fail(InvalidOrder(f"{order.id}: amounts do not add up"), retryable=False)
        if order.shipping_address.country not in services.carrier.countries:
            fail(InvalidOrder(f"{order.id}: no shipping to {order.shipping_address.country}"),
                 retryable=False)
        return {
            "order_id": order.id,
            "currency": order.currency,
            "total": order.total,
            "parcels": 1 + sum(line.quantity for line in order.lines) // 10,
            "lines": [
                {"sku": line.sku, "quantity": line.quantity, "unit_price": line.unit_price}
                for line in order.lines
            ],
        }


# --------------------------------------------------------------------------------------------
# reserve (map element)
# --------------------------------------------------------------------------------------------


class ReserveStock(Step):
    """Holds the units of one line item in the warehouse, under the lock ``sku:<SKU>``
    (:data:`SKU_LOCK`).

    Returns:
        ``{"reservation_id", "sku", "quantity"}``.

    Raises (as the step's failure, not retried):
        OutOfStock: not enough free units.
    """

    order_id = Input(str, min_length=1)
    sku = Input(str, min_length=1)
    quantity = Input(int, gt=0)
    coordination = (SKU_LOCK,)

    def run(self) -> dict[str, Any]:
        """Reserves ``quantity`` units of ``sku`` for ``order_id``."""
        reservation = SERVICES.get().inventory.reserve(
            self.inputs.order_id, self.inputs.sku, self.inputs.quantity
        )
        return {"reservation_id": reservation.id, "sku": reservation.sku,
                "quantity": reservation.quantity}

    def undo(self) -> bool:
        """Releases the reservation ``run`` made (a no-op if it is already released)."""
        return SERVICES.get().inventory.release(self.result["reservation_id"])

    def compensate(self) -> bool:
        """Releases whatever this order holds of this SKU after a failed ``run``."""
        return SERVICES.get().inventory.release_for(self.inputs.order_id, self.inputs.sku)


class ReserveLine(Reactor, name="order_fulfilment.reserve_line"):
    """Map element: reserves the stock of one line item (``line`` is a ``validate`` line)."""

    line = Input(dict)
    order_id = Input(str)
    reserve = step(ReserveStock, order_id=input("order_id"), sku=input("line", "sku"),
                   quantity=input("line", "quantity"))
    returns = "reserve"


# --------------------------------------------------------------------------------------------
# payment (composed reactor)
# --------------------------------------------------------------------------------------------


class Authorize(Step):
    """Places a hold for the order total on the customer's card.

    Returns:
        ``{"id", "amount": Decimal, "currency", "card_last4"}``.

    Raises (as the step's failure, not retried):
        CardDeclined: the issuer declined.
    """

    order_id = Input(str, min_length=1)
    amount = Input(Decimal, gt=0)
    currency = Input(str, pattern=r"^[A-Z]{3}$")
    card_token = Input(str, redact=True, min_length=1)

    def run(self) -> dict[str, Any]:
        """Authorizes ``amount`` on the card."""
        auth = SERVICES.get().ledger.authorize(
            self.inputs.order_id, self.inputs.card_token, self.inputs.amount,
            self.inputs.currency,
        )
        return {"id": auth.id, "amount": auth.amount, "currency": auth.currency,
                "card_last4": auth.card_last4}

    def undo(self) -> bool:
        """Voids the authorization (its capture was refunded first, by the reverse order)."""
        return SERVICES.get().ledger.void(self.result["id"])

    def compensate(self) -> bool:
        """Voids any open authorization the failed attempt left for this order."""
        return SERVICES.get().ledger.void_open(self.inputs.order_id)


class Capture(Step):
    """Takes the authorized money.

    Returns:
        ``{"id", "authorization_id", "amount": Decimal, "currency"}``.
    """

    authorization = Input(str, min_length=1)

    def run(self) -> dict[str, Any]:
        """Captures the full authorized amount."""
        cap = SERVICES.get().ledger.capture(self.inputs.authorization)
        return {"id": cap.id, "authorization_id": cap.authorization_id, "amount": cap.amount,
                "currency": cap.currency}

    def undo(self) -> bool:
        """Refunds the capture (a no-op if it is already refunded)."""
        return SERVICES.get().ledger.refund(self.result["id"])


class Payment(Reactor, name="order_fulfilment.payment"):
    """Authorize then capture; rolled back as refund then void."""

    order_id = Input(str)
    amount = Input(Decimal, gt=0)
    currency = Input(str)
    card_token = Input(str, redact=True)
    authorize = step(Authorize)
    capture = step(Capture, authorization=result("authorize", "id"))
    returns = "capture"


# --------------------------------------------------------------------------------------------
# confirmation
# --------------------------------------------------------------------------------------------


class SendConfirmation(Step):
    """Queues the order confirmation e-mail.

    Returns:
        ``{"message_id", "tracking_number", "capture_id"}``.
    """

    order = Input(Order)
    shipment = Input(dict)
    payment = Input(dict)

    def run(self) -> dict[str, Any]:
        """Queues the e-mail to the customer."""
        order: Order = self.inputs.order
        tracking = self.inputs.shipment["tracking_number"]
        msg = SERVICES.get().mailer.send(
            order.id, "confirmation", order.customer.email,
            f"Order {order.id} is on its way (tracking {tracking})",
        )
        return {"message_id": msg.id, "tracking_number": tracking,
                "capture_id": self.inputs.payment["id"]}

    def undo(self) -> bool:
        """Recalls the e-mail from the outbox."""
        return SERVICES.get().mailer.recall(self.result["message_id"])


# --------------------------------------------------------------------------------------------
# shipment
# --------------------------------------------------------------------------------------------


def book_shipment(inputs: Any, ctx: Any) -> dict[str, Any]:
    """Books the parcel with the carrier (retried on outages, not on a rejected address).

    Args:
        inputs: the step inputs ``order`` (an :class:`Order`) and ``parcels``.
        ctx: the step context (unused).

    Returns:
        ``{"id", "tracking_number"}``.

    Raises:
        CarrierUnavailable: the carrier is down (retried by :data:`SHIPMENT_RETRIES`).
        Undeliverable: the carrier does not serve the address (permanent).
    """
    order: Order = inputs.order
    shipment = SERVICES.get().carrier.book(order.id, order.shipping_address, inputs.parcels)
    return {"id": shipment.id, "tracking_number": shipment.tracking_number}


def cancel_shipment(result: Mapping[str, Any], inputs: Any, ctx: Any) -> bool:
    """Undo of ``book_shipment``: cancels the booked shipment (a no-op if it is already
    cancelled).

    Returns:
        Whether a shipment was cancelled now.
    """
    return SERVICES.get().carrier.cancel(result["id"])


def cancel_failed_booking(error: Any, inputs: Any, ctx: Any) -> bool:
    """Compensate of ``book_shipment``: cancels any shipment a failed booking attempt left
    for this order.

    Returns:
        Whether a shipment was cancelled now.
    """
    return SERVICES.get().carrier.cancel_for(inputs.order.id)


def book_shipment_step(after: str) -> Any:
    """Declares the ``book_shipment`` step (with its undo, compensate, retries and the carrier
    semaphore :data:`CARRIER_SEMAPHORE`), run once step ``after`` completed.

    Args:
        after: the step shipping waits for (``"payment"`` in :class:`Fulfil`,
            ``"apply_review"`` in :class:`FulfilWithReview`).

    Returns:
        The step declaration, to assign as ``book_shipment`` in a reactor class.
    """
    spec = step(book_shipment, order=input("order"), parcels=result("validate", "parcels"),
                wait_for=[after], retries=SHIPMENT_RETRIES, coordination=CARRIER_SEMAPHORE)
    spec.undo(cancel_shipment)
    spec.compensate(cancel_failed_booking)
    return spec


# --------------------------------------------------------------------------------------------
# manual review
# --------------------------------------------------------------------------------------------


class ApplyReview(Step):
    """Enforces the reviewer's decision: an approval passes, a rejection fails the run.

    No side effects, so nothing to undo or compensate: a rejection's rollback is the earlier
    steps' undos (refund, void, release).

    Returns:
        ``{"reviewer", "note"}`` of an approval.

    Raises (as the step's failure, not retried):
        ReviewRejected: the reviewer rejected the order (the message names the reviewer and
            the note).
    """

    order_id = Input(str, min_length=1)
    decision = Input(ReviewDecision)

    def run(self) -> dict[str, Any]:
        """Passes an approval on; fails a rejection."""
        decision: ReviewDecision = self.inputs.decision
        if not decision.approved:
            fail(ReviewRejected(f"{self.inputs.order_id}: rejected by {decision.reviewer}: "
                                f"{decision.note or 'no reason given'}"), retryable=False)
        return {"reviewer": decision.reviewer, "note": decision.note}


# --------------------------------------------------------------------------------------------
# the saga
# --------------------------------------------------------------------------------------------


class Fulfil(Reactor, name="order_fulfilment.fulfil"):
    """Fulfils one order end to end; see the module docstring.

    Inputs:
        order: the :class:`~examples.order_fulfilment.models.Order`.
        card_token: the raw card token (``order.card_token()``); redacted everywhere.

    Returns:
        The ``send_confirmation`` result.
    """

    order = Input(Order)
    card_token = Input(str, redact=True)

    validate = step(ValidateOrder, order=input("order"))
    reserve = map_step(
        ReserveLine,
        source=result("validate", "lines"),
        args={"line": element("reserve"), "order_id": input("order", "id")},
        atomic=True,
    )
    payment = compose(
        Payment,
        order_id=input("order", "id"),
        amount=result("validate", "total"),
        currency=result("validate", "currency"),
        card_token=input("card_token"),
        wait_for=["reserve"],
    )

    book_shipment = book_shipment_step(after="payment")
    send_confirmation = step(SendConfirmation, order=input("order"),
                             shipment=result("book_shipment"), payment=result("payment"))

    returns = "send_confirmation"


class FulfilWithReview(Fulfil, name="order_fulfilment.fulfil_reviewed"):
    """:class:`Fulfil` for a large order: a manual review between payment and shipping (see
    the module docstring; docs/run-control.md, "Interrupts").

    Inherits every step of :class:`Fulfil` and adds ``manual_review`` (an interrupt: the run
    pauses, stored ``paused``, correlation id ``review:<order id>``, payload schema
    :class:`~examples.order_fulfilment.models.ReviewDecision`, :data:`REVIEW_TIMEOUT` seconds,
    :data:`REVIEW_MAX_ATTEMPTS` malformed payloads) and ``apply_review`` (a rejection fails
    it); ``book_shipment`` waits for ``apply_review``.

    Inputs, returns: as :class:`Fulfil`. Resume with
    ``FulfilWithReview.resume(correlation_id=review_correlation_id(order.id), payload=...)``.
    """

    manual_review = interrupt(
        wait_for="payment",
        correlation_id=input("order", "id", transform=review_correlation_id),
        schema=ReviewDecision,
        max_attempts=REVIEW_MAX_ATTEMPTS,
        timeout=REVIEW_TIMEOUT,
    )
    apply_review = step(ApplyReview, order_id=input("order", "id"),
                        decision=result("manual_review"))
    book_shipment = book_shipment_step(after="apply_review")
