"""In-process fake services of the fulfilment demo: inventory, ledger, carrier and mailer.

The fakes are small but behave like the real thing where the saga depends on it:

* money is :class:`~decimal.Decimal`, never float;
* every method is thread-safe (one lock per service);
* every mutating call is idempotent on a business key (``reserve`` per order and SKU,
  ``authorize`` per order, ``capture`` per authorization, ``book`` per order, ``send`` per order
  and kind), so a retried step never double-books;
* every undo is idempotent: releasing a released reservation, voiding a voided authorization,
  refunding a refunded capture, cancelling a cancelled shipment or recalling a recalled e-mail
  is a no-op that returns ``False``;
* every state change is appended to a shared :class:`AuditLog`, which never holds a card token.

Failures are deterministic so the demo's numbers never change:

* :class:`Inventory` raises :class:`OutOfStock` when a SKU's free stock (from
  ``data/inventory.json``) is smaller than the requested quantity;
* :class:`Ledger` raises :class:`CardDeclined` for the tokens in :data:`DECLINED_CARD_TOKENS`;
* :class:`Carrier` raises :class:`Undeliverable` for the postal codes in
  :data:`UNDELIVERABLE_POSTAL_CODES` and :class:`CarrierUnavailable` (a transient error worth
  retrying) for every booking of an order whose sequence number falls into
  :data:`CARRIER_OUTAGE_WINDOWS` — the fake's stand-in for "the carrier API was down while these
  orders were processed", so retries never help and the step exhausts them.

Steps reach the services through the module-level :data:`SERVICES` registry, which the runner
fills (:meth:`ServiceRegistry.install` or :meth:`ServiceRegistry.use`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from .models import Address, order_sequence

__all__ = [
    "CARRIER_OUTAGE_WINDOWS",
    "DATA_DIR",
    "DECLINED_CARD_TOKENS",
    "INVENTORY_PATH",
    "ORDERS_PATH",
    "SERVICES",
    "SHIPPABLE_COUNTRIES",
    "UNDELIVERABLE_POSTAL_CODES",
    "AuditEvent",
    "AuditLog",
    "Authorization",
    "Capture",
    "CardDeclined",
    "Carrier",
    "CarrierUnavailable",
    "CatalogItem",
    "Inventory",
    "Ledger",
    "LedgerError",
    "Mailer",
    "Message",
    "OutOfStock",
    "Reservation",
    "ServiceError",
    "ServiceRegistry",
    "Services",
    "Shipment",
    "Undeliverable",
    "UnknownSku",
    "load_catalog",
]

#: Directory holding the committed dataset (``orders.jsonl``, ``inventory.json``).
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The committed order dataset, one JSON object per line.
ORDERS_PATH = DATA_DIR / "orders.jsonl"
#: The committed catalog with prices and stock levels per SKU.
INVENTORY_PATH = DATA_DIR / "inventory.json"

#: Card tokens the fake ledger declines, with the decline code it reports (Stripe-style test
#: tokens). Any other token is approved.
DECLINED_CARD_TOKENS: Mapping[str, str] = {
    "tok_chargeDeclined": "generic_decline",
    "tok_chargeDeclinedInsufficientFunds": "insufficient_funds",
    "tok_chargeDeclinedExpiredCard": "expired_card",
}

#: ``(country, postal_code)`` pairs the fake carrier does not deliver to (islands it does not
#: serve); booking to one fails permanently.
UNDELIVERABLE_POSTAL_CODES: frozenset[tuple[str, str]] = frozenset(
    {
        ("DE", "27498"),  # Heligoland
        ("GB", "ZE2 9QJ"),  # Shetland
        ("FR", "97133"),  # Saint-Barthélemy
    }
)

#: Countries the carrier ships to at all.
SHIPPABLE_COUNTRIES: frozenset[str] = frozenset({"DE", "FR", "NL", "ES", "IT", "GB", "US"})

#: Inclusive ranges of order sequence numbers during which the carrier API is down: every
#: booking attempt for those orders raises :class:`CarrierUnavailable`.
CARRIER_OUTAGE_WINDOWS: tuple[tuple[int, int], ...] = ((61, 64), (488, 492), (905, 907))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class ServiceError(Exception):
    """Base of the errors the fake services raise on purpose.

    Attributes:
        code: a stable, machine-readable reason (``"out_of_stock"``, ``"card_declined"``, ...);
            the runner's failure breakdown groups by it.
        retryable: whether retrying the same call later may succeed. reactor reads this
            attribute: ``False`` stops a step's retries at once (docs/concepts.md, "Retries").
    """

    code = "service_error"
    retryable = False


class UnknownSku(ServiceError):
    """A SKU is not in the catalog."""

    code = "unknown_sku"


class OutOfStock(ServiceError):
    """Not enough free stock of a SKU for a reservation.

    Attributes:
        sku: the SKU.
        requested: units asked for.
        available: units free at the time of the call.
    """

    code = "out_of_stock"

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"out of stock: {sku} (requested {requested}, available {available})")
        self.sku = sku
        self.requested = requested
        self.available = available


class CardDeclined(ServiceError):
    """The card issuer declined an authorization.

    Attributes:
        decline_code: the issuer's reason (``"insufficient_funds"``, ...).
    """

    code = "card_declined"

    def __init__(self, decline_code: str) -> None:
        super().__init__(f"card declined: {decline_code}")
        self.decline_code = decline_code


class LedgerError(ServiceError):
    """A ledger operation is not allowed in the current state (e.g. voiding a live capture)."""

    code = "ledger_error"


class Undeliverable(ServiceError):
    """The carrier does not deliver to the address (permanent)."""

    code = "undeliverable_address"


class CarrierUnavailable(ServiceError):
    """The carrier API did not answer (transient; worth retrying)."""

    code = "carrier_outage"
    retryable = True


# --------------------------------------------------------------------------------------------
# Audit log
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One state change of a fake service.

    Attributes:
        seq: position in the log (1-based, gap-free).
        service: ``"inventory"``, ``"ledger"``, ``"carrier"`` or ``"mailer"``.
        action: what happened (``"reserve"``, ``"release"``, ``"release.noop"``, ...).
        order_id: the order the change belongs to.
        ref: the id of the object changed (reservation, authorization, ...), or ``""``.
        detail: small JSON-able extra facts (never a card token).
    """

    seq: int
    service: str
    action: str
    order_id: str
    ref: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)


class AuditLog:
    """A thread-safe, append-only list of :class:`AuditEvent` shared by all services."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[AuditEvent] = []

    def record(
        self, service: str, action: str, order_id: str, ref: str = "", **detail: Any
    ) -> AuditEvent:
        """Appends an event and returns it.

        Args:
            service: the service name.
            action: what happened.
            order_id: the order concerned.
            ref: the id of the object changed.
            **detail: extra facts; must not contain secrets.

        Returns:
            The appended event.
        """
        with self._lock:
            event = AuditEvent(len(self._events) + 1, service, action, order_id, ref, detail)
            self._events.append(event)
            return event

    def events(self, order_id: str | None = None) -> list[AuditEvent]:
        """Returns a copy of the log, optionally only the events of one order."""
        with self._lock:
            if order_id is None:
                return list(self._events)
            return [e for e in self._events if e.order_id == order_id]

    def events_since(self, count: int) -> list[AuditEvent]:
        """Returns the events appended after the first ``count`` (``seq > count``), oldest
        first; cheap for a small tail, unlike copying the whole log with :meth:`events`."""
        with self._lock:
            return self._events[max(count, 0):]

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)


def _ids(prefix: str) -> Iterator[str]:
    """Yields ``PREFIX-000001``, ``PREFIX-000002``, ... (not thread-safe; call under a lock)."""
    for n in itertools.count(1):
        yield f"{prefix}-{n:06d}"


# --------------------------------------------------------------------------------------------
# Inventory
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatalogItem:
    """One SKU of the catalog.

    Attributes:
        sku: the stock-keeping unit.
        name: product name.
        prices: unit price per currency code.
        on_hand: units in the warehouse when the demo starts.
        discontinued: the SKU may no longer be sold.
    """

    sku: str
    name: str
    prices: Mapping[str, Decimal]
    on_hand: int
    discontinued: bool = False


def load_catalog(path: Path = INVENTORY_PATH) -> dict[str, CatalogItem]:
    """Reads the catalog file (``data/inventory.json``).

    Args:
        path: the JSON file: ``{"skus": {SKU: {"name", "prices": {CUR: "9.90"}, "on_hand",
            "discontinued"}}}``.

    Returns:
        ``{sku: CatalogItem}``.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not valid JSON or lacks a field.
    """
    raw = json.loads(path.read_text(encoding="utf-8"))
    try:
        return {
            sku: CatalogItem(
                sku=sku,
                name=str(item["name"]),
                prices={cur: Decimal(p) for cur, p in item["prices"].items()},
                on_hand=int(item["on_hand"]),
                discontinued=bool(item.get("discontinued", False)),
            )
            for sku, item in raw["skus"].items()
        }
    except (KeyError, TypeError, ArithmeticError) as exc:
        raise ValueError(f"malformed catalog {path}: {exc!r}") from exc


@dataclass(frozen=True, slots=True)
class Reservation:
    """Units of one SKU held for one order.

    Attributes:
        id: ``RSV-000001``.
        order_id: the order holding the units.
        sku: the SKU.
        quantity: units held.
        status: ``"active"`` while held, ``"released"`` after :meth:`Inventory.release`.
    """

    id: str
    order_id: str
    sku: str
    quantity: int
    status: Literal["active", "released"] = "active"


class Inventory:
    """Warehouse stock with reservations.

    Free stock of a SKU is ``on_hand - sum(active reservations)``; stock is conserved: a
    reservation moves units from free to held, a release moves them back.
    """

    def __init__(self, catalog: Mapping[str, CatalogItem], audit: AuditLog) -> None:
        """Creates the inventory.

        Args:
            catalog: the SKUs with their starting ``on_hand`` stock.
            audit: the shared audit log.
        """
        self.catalog: dict[str, CatalogItem] = dict(catalog)
        self._audit = audit
        self._lock = threading.Lock()
        self._ids = _ids("RSV")
        self._free: dict[str, int] = {sku: item.on_hand for sku, item in catalog.items()}
        self._reservations: dict[str, Reservation] = {}
        self._by_key: dict[tuple[str, str], str] = {}

    def reserve(self, order_id: str, sku: str, quantity: int) -> Reservation:
        """Holds ``quantity`` units of ``sku`` for ``order_id``.

        Idempotent per ``(order_id, sku)``: while a reservation for that key is active it is
        returned unchanged.

        Args:
            order_id: the order.
            sku: the SKU.
            quantity: units to hold (> 0).

        Returns:
            The active reservation.

        Raises:
            UnknownSku: ``sku`` is not in the catalog.
            OutOfStock: fewer than ``quantity`` units are free.
            ValueError: ``quantity`` is not positive.
        """
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        with self._lock:
            if sku not in self._free:
                raise UnknownSku(f"unknown SKU {sku}")
            existing = self._by_key.get((order_id, sku))
            if existing is not None and self._reservations[existing].status == "active":
                return self._reservations[existing]
            free = self._free[sku]
            if free < quantity:
                self._audit.record(
                    "inventory", "reserve.rejected", order_id, "", sku=sku,
                    requested=quantity, available=free,
                )
                raise OutOfStock(sku, quantity, free)
            reservation = Reservation(next(self._ids), order_id, sku, quantity)
            self._free[sku] = free - quantity
            self._reservations[reservation.id] = reservation
            self._by_key[(order_id, sku)] = reservation.id
            self._audit.record(
                "inventory", "reserve", order_id, reservation.id, sku=sku, quantity=quantity
            )
            return reservation

    def release(self, reservation_id: str) -> bool:
        """Returns a reservation's units to free stock.

        Args:
            reservation_id: the id :meth:`reserve` returned.

        Returns:
            ``True`` if the units were released now, ``False`` if the reservation was already
            released (a no-op).

        Raises:
            KeyError: no such reservation.
        """
        with self._lock:
            reservation = self._reservations[reservation_id]
            if reservation.status == "released":
                self._audit.record("inventory", "release.noop", reservation.order_id,
                                   reservation_id)
                return False
            self._reservations[reservation_id] = replace(reservation, status="released")
            self._free[reservation.sku] += reservation.quantity
            self._audit.record(
                "inventory", "release", reservation.order_id, reservation_id,
                sku=reservation.sku, quantity=reservation.quantity,
            )
            return True

    def release_for(self, order_id: str, sku: str) -> bool:
        """Releases the active reservation of ``(order_id, sku)``, if any (for compensation).

        Returns:
            ``True`` if a reservation was released, ``False`` if there was none active.
        """
        with self._lock:
            rid = self._by_key.get((order_id, sku))
        return self.release(rid) if rid is not None else False

    def free(self, sku: str) -> int:
        """Units of ``sku`` not held by any active reservation."""
        with self._lock:
            return self._free[sku]

    def reservations(self, order_id: str | None = None, *, active_only: bool = True
                     ) -> list[Reservation]:
        """Lists reservations, optionally of one order, by default only the active ones."""
        with self._lock:
            return [
                r for r in self._reservations.values()
                if (order_id is None or r.order_id == order_id)
                and (not active_only or r.status == "active")
            ]


# --------------------------------------------------------------------------------------------
# Ledger
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authorization:
    """A hold on the customer's card.

    Attributes:
        id: ``AUTH-000001``.
        order_id: the order paid for.
        amount: the amount held.
        currency: its currency.
        card_last4: the last four characters of the token, for display.
        status: ``"authorized"`` (held), ``"captured"`` (turned into a :class:`Capture`) or
            ``"voided"`` (released).
    """

    id: str
    order_id: str
    amount: Decimal
    currency: str
    card_last4: str
    status: Literal["authorized", "captured", "voided"] = "authorized"


@dataclass(frozen=True, slots=True)
class Capture:
    """Money taken from an authorization.

    Attributes:
        id: ``CAP-000001``.
        authorization_id: the authorization captured.
        order_id: the order paid for.
        amount: the amount taken.
        currency: its currency.
        status: ``"captured"`` (money held by the shop) or ``"refunded"``.
    """

    id: str
    authorization_id: str
    order_id: str
    amount: Decimal
    currency: str
    status: Literal["captured", "refunded"] = "captured"


class Ledger:
    """A payment processor: authorize, capture, refund, void.

    An authorization that was captured cannot be voided while its capture is live: refund the
    capture first (which is what a saga rolled back in reverse order does).
    """

    def __init__(self, audit: AuditLog,
                 declined_tokens: Mapping[str, str] = DECLINED_CARD_TOKENS) -> None:
        """Creates the ledger.

        Args:
            audit: the shared audit log.
            declined_tokens: ``{card_token: decline_code}`` of cards to decline.
        """
        self._audit = audit
        self._declined = dict(declined_tokens)
        self._lock = threading.Lock()
        self._auth_ids = _ids("AUTH")
        self._cap_ids = _ids("CAP")
        self._auths: dict[str, Authorization] = {}
        self._captures: dict[str, Capture] = {}
        self._open_auth_by_order: dict[str, str] = {}

    def authorize(self, order_id: str, card_token: str, amount: Decimal, currency: str
                  ) -> Authorization:
        """Places a hold of ``amount`` on the card.

        Idempotent per order: while the order has an open (``"authorized"``) authorization it is
        returned unchanged.

        Args:
            order_id: the order.
            card_token: the card's vault token (secret; only its last four characters are kept).
            amount: the amount to hold (> 0).
            currency: ISO 4217 code.

        Returns:
            The authorization.

        Raises:
            CardDeclined: the card is declined.
            ValueError: ``amount`` is not positive.
        """
        if amount <= 0:
            raise ValueError(f"amount must be positive, got {amount}")
        with self._lock:
            existing = self._open_auth_by_order.get(order_id)
            if existing is not None and self._auths[existing].status == "authorized":
                return self._auths[existing]
            decline = self._declined.get(card_token)
            if decline is not None:
                self._audit.record("ledger", "authorize.declined", order_id, "",
                                   decline_code=decline, amount=str(amount), currency=currency)
                raise CardDeclined(decline)
            auth = Authorization(next(self._auth_ids), order_id, amount, currency,
                                 card_token[-4:])
            self._auths[auth.id] = auth
            self._open_auth_by_order[order_id] = auth.id
            self._audit.record("ledger", "authorize", order_id, auth.id,
                               amount=str(amount), currency=currency)
            return auth

    def void(self, authorization_id: str) -> bool:
        """Releases an authorization's hold.

        Returns:
            ``True`` if voided now; ``False`` (no-op) if already voided, or captured and its
            capture refunded.

        Raises:
            KeyError: no such authorization.
            LedgerError: the authorization's capture is still live (refund it first).
        """
        with self._lock:
            auth = self._auths[authorization_id]
            if auth.status == "captured":
                live = [c for c in self._captures.values()
                        if c.authorization_id == auth.id and c.status == "captured"]
                if live:
                    raise LedgerError(f"cannot void {auth.id}: capture {live[0].id} is live")
                self._audit.record("ledger", "void.noop", auth.order_id, auth.id)
                return False
            if auth.status == "voided":
                self._audit.record("ledger", "void.noop", auth.order_id, auth.id)
                return False
            self._auths[auth.id] = replace(auth, status="voided")
            self._audit.record("ledger", "void", auth.order_id, auth.id)
            return True

    def void_open(self, order_id: str) -> bool:
        """Voids the order's open authorization, if any (for compensation).

        Returns:
            ``True`` if an authorization was voided.
        """
        with self._lock:
            aid = self._open_auth_by_order.get(order_id)
            if aid is None or self._auths[aid].status != "authorized":
                return False
        return self.void(aid)

    def capture(self, authorization_id: str) -> Capture:
        """Takes the full authorized amount.

        Idempotent per authorization: a live capture of it is returned unchanged.

        Raises:
            KeyError: no such authorization.
            LedgerError: the authorization was voided, or its capture was refunded.
        """
        with self._lock:
            auth = self._auths[authorization_id]
            if auth.status == "captured":
                for cap in self._captures.values():
                    if cap.authorization_id == auth.id and cap.status == "captured":
                        return cap
                raise LedgerError(f"{auth.id} was captured and refunded")
            if auth.status == "voided":
                raise LedgerError(f"{auth.id} is voided")
            cap = Capture(next(self._cap_ids), auth.id, auth.order_id, auth.amount,
                          auth.currency)
            self._captures[cap.id] = cap
            self._auths[auth.id] = replace(auth, status="captured")
            self._audit.record("ledger", "capture", auth.order_id, cap.id,
                               amount=str(cap.amount), currency=cap.currency)
            return cap

    def refund(self, capture_id: str) -> bool:
        """Returns a capture's money to the customer.

        Returns:
            ``True`` if refunded now, ``False`` (no-op) if already refunded.

        Raises:
            KeyError: no such capture.
        """
        with self._lock:
            cap = self._captures[capture_id]
            if cap.status == "refunded":
                self._audit.record("ledger", "refund.noop", cap.order_id, cap.id)
                return False
            self._captures[cap.id] = replace(cap, status="refunded")
            self._audit.record("ledger", "refund", cap.order_id, cap.id,
                               amount=str(cap.amount), currency=cap.currency)
            return True

    def authorizations(self, order_id: str | None = None) -> list[Authorization]:
        """Lists all authorizations, optionally of one order."""
        with self._lock:
            return [a for a in self._auths.values() if order_id is None or a.order_id == order_id]

    def captures(self, order_id: str | None = None, *, live_only: bool = True) -> list[Capture]:
        """Lists captures, optionally of one order, by default only the live (not refunded)."""
        with self._lock:
            return [
                c for c in self._captures.values()
                if (order_id is None or c.order_id == order_id)
                and (not live_only or c.status == "captured")
            ]


# --------------------------------------------------------------------------------------------
# Carrier
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shipment:
    """A booked parcel pickup.

    Attributes:
        id: ``SHP-000001``.
        order_id: the order shipped.
        tracking_number: the carrier's tracking number.
        country: destination country.
        postal_code: destination postal code.
        status: ``"booked"`` or ``"cancelled"``.
    """

    id: str
    order_id: str
    tracking_number: str
    country: str
    postal_code: str
    status: Literal["booked", "cancelled"] = "booked"


class Carrier:
    """A parcel carrier: book and cancel shipments."""

    def __init__(
        self,
        audit: AuditLog,
        undeliverable: frozenset[tuple[str, str]] = UNDELIVERABLE_POSTAL_CODES,
        outage_windows: tuple[tuple[int, int], ...] = CARRIER_OUTAGE_WINDOWS,
        countries: frozenset[str] = SHIPPABLE_COUNTRIES,
    ) -> None:
        """Creates the carrier.

        Args:
            audit: the shared audit log.
            undeliverable: ``(country, postal_code)`` pairs it rejects.
            outage_windows: inclusive order-sequence ranges during which it is down.
            countries: destination countries it serves.
        """
        self._audit = audit
        self._undeliverable = undeliverable
        self._outages = outage_windows
        self.countries = countries
        self._lock = threading.Lock()
        self._ids = _ids("SHP")
        self._shipments: dict[str, Shipment] = {}
        self._by_order: dict[str, str] = {}
        self._attempts: dict[str, int] = {}

    def in_outage(self, order_id: str) -> bool:
        """Whether the carrier is down while ``order_id`` is processed (by its sequence)."""
        seq = order_sequence(order_id)
        return any(lo <= seq <= hi for lo, hi in self._outages)

    def book(self, order_id: str, address: Address, parcels: int) -> Shipment:
        """Books a pickup of ``parcels`` parcels to ``address``.

        Idempotent per order: a booked shipment of the order is returned unchanged.

        Raises:
            CarrierUnavailable: the carrier is in an outage window (transient).
            Undeliverable: the address is not served (permanent).
        """
        with self._lock:
            self._attempts[order_id] = self._attempts.get(order_id, 0) + 1
            if self.in_outage(order_id):
                self._audit.record("carrier", "book.unavailable", order_id, "",
                                   attempt=self._attempts[order_id])
                raise CarrierUnavailable("carrier API unavailable (503)")
            if (address.country not in self.countries
                    or (address.country, address.postal_code) in self._undeliverable):
                self._audit.record("carrier", "book.rejected", order_id, "",
                                   country=address.country, postal_code=address.postal_code)
                raise Undeliverable(
                    f"carrier does not deliver to {address.country} {address.postal_code}"
                )
            existing = self._by_order.get(order_id)
            if existing is not None and self._shipments[existing].status == "booked":
                return self._shipments[existing]
            sid = next(self._ids)
            shipment = Shipment(sid, order_id, f"1Z{order_sequence(order_id):08d}{sid[-6:]}",
                                address.country, address.postal_code)
            self._shipments[sid] = shipment
            self._by_order[order_id] = sid
            self._audit.record("carrier", "book", order_id, sid, parcels=parcels,
                               country=address.country)
            return shipment

    def cancel(self, shipment_id: str) -> bool:
        """Cancels a shipment.

        Returns:
            ``True`` if cancelled now, ``False`` (no-op) if already cancelled.

        Raises:
            KeyError: no such shipment.
        """
        with self._lock:
            shipment = self._shipments[shipment_id]
            if shipment.status == "cancelled":
                self._audit.record("carrier", "cancel.noop", shipment.order_id, shipment_id)
                return False
            self._shipments[shipment_id] = replace(shipment, status="cancelled")
            self._audit.record("carrier", "cancel", shipment.order_id, shipment_id)
            return True

    def cancel_for(self, order_id: str) -> bool:
        """Cancels the order's booked shipment, if any (for compensation)."""
        with self._lock:
            sid = self._by_order.get(order_id)
        return self.cancel(sid) if sid is not None else False

    def attempts(self, order_id: str) -> int:
        """How many times :meth:`book` was called for ``order_id``."""
        with self._lock:
            return self._attempts.get(order_id, 0)

    def shipments(self, order_id: str | None = None, *, booked_only: bool = True
                  ) -> list[Shipment]:
        """Lists shipments, optionally of one order, by default only the booked ones."""
        with self._lock:
            return [
                s for s in self._shipments.values()
                if (order_id is None or s.order_id == order_id)
                and (not booked_only or s.status == "booked")
            ]


# --------------------------------------------------------------------------------------------
# Mailer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """An e-mail in the outbox.

    Attributes:
        id: ``MSG-000001``.
        order_id: the order it is about.
        kind: ``"confirmation"``.
        to: recipient address.
        subject: subject line.
        status: ``"queued"`` (will be delivered) or ``"recalled"`` (pulled from the outbox).
    """

    id: str
    order_id: str
    kind: str
    to: str
    subject: str
    status: Literal["queued", "recalled"] = "queued"


class Mailer:
    """An outbox: messages are queued and can be recalled until delivered."""

    def __init__(self, audit: AuditLog) -> None:
        """Creates the mailer.

        Args:
            audit: the shared audit log.
        """
        self._audit = audit
        self._lock = threading.Lock()
        self._ids = _ids("MSG")
        self._messages: dict[str, Message] = {}
        self._by_key: dict[tuple[str, str], str] = {}

    def send(self, order_id: str, kind: str, to: str, subject: str) -> Message:
        """Queues a message; idempotent per ``(order_id, kind)`` while it is queued."""
        with self._lock:
            existing = self._by_key.get((order_id, kind))
            if existing is not None and self._messages[existing].status == "queued":
                return self._messages[existing]
            msg = Message(next(self._ids), order_id, kind, to, subject)
            self._messages[msg.id] = msg
            self._by_key[(order_id, kind)] = msg.id
            self._audit.record("mailer", "send", order_id, msg.id, kind=kind)
            return msg

    def recall(self, message_id: str) -> bool:
        """Pulls a message from the outbox.

        Returns:
            ``True`` if recalled now, ``False`` (no-op) if already recalled.

        Raises:
            KeyError: no such message.
        """
        with self._lock:
            msg = self._messages[message_id]
            if msg.status == "recalled":
                self._audit.record("mailer", "recall.noop", msg.order_id, msg.id)
                return False
            self._messages[msg.id] = replace(msg, status="recalled")
            self._audit.record("mailer", "recall", msg.order_id, msg.id)
            return True

    def messages(self, order_id: str | None = None, *, queued_only: bool = True
                 ) -> list[Message]:
        """Lists messages, optionally of one order, by default only the queued ones."""
        with self._lock:
            return [
                m for m in self._messages.values()
                if (order_id is None or m.order_id == order_id)
                and (not queued_only or m.status == "queued")
            ]


# --------------------------------------------------------------------------------------------
# The bundle and its registry
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Services:
    """The four fake services sharing one audit log.

    Attributes:
        inventory: stock and reservations.
        ledger: card payments.
        carrier: shipments.
        mailer: the e-mail outbox.
        audit: every state change of the four.
    """

    inventory: Inventory
    ledger: Ledger
    carrier: Carrier
    mailer: Mailer
    audit: AuditLog

    @classmethod
    def create(cls, catalog: Mapping[str, CatalogItem] | None = None) -> Services:
        """Builds fresh services.

        Args:
            catalog: the SKUs and starting stock; defaults to ``data/inventory.json``.

        Returns:
            Services with empty state and a shared audit log.
        """
        audit = AuditLog()
        return cls(
            inventory=Inventory(load_catalog() if catalog is None else catalog, audit),
            ledger=Ledger(audit),
            carrier=Carrier(audit),
            mailer=Mailer(audit),
            audit=audit,
        )


class ServiceRegistry:
    """Where steps find the services of the current demo run (one slot, thread-safe).

    The runner installs a :class:`Services` bundle before running orders; steps call
    :meth:`get`. Tests use :meth:`use` to install fresh services for one block.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: Services | None = None

    def install(self, services: Services | None) -> None:
        """Makes ``services`` current (``None`` uninstalls)."""
        with self._lock:
            self._services = services

    def get(self) -> Services:
        """Returns the current services.

        Raises:
            RuntimeError: none are installed.
        """
        with self._lock:
            services = self._services
        if services is None:
            raise RuntimeError("no services installed: call SERVICES.install(...) first")
        return services

    @contextmanager
    def use(self, services: Services) -> Iterator[Services]:
        """Installs ``services`` for the ``with`` block, then restores the previous ones."""
        with self._lock:
            previous, self._services = self._services, services
        try:
            yield services
        finally:
            with self._lock:
                self._services = previous


#: The registry steps look services up in.
SERVICES = ServiceRegistry()
