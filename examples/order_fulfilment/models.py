"""The order data model of the fulfilment demo (pydantic v2).

One :class:`Order` is one line of ``data/orders.jsonl``. Money is :class:`decimal.Decimal`,
written in the file as decimal strings (``"19.90"``) so no amount ever passes through a float.
The card token is a :class:`pydantic.SecretStr`: it never appears in ``repr``, logs or JSON
dumps (``model_dump(mode="json")`` writes ``"**********"``); code that must hand it to the
ledger calls :meth:`Order.card_token`.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictBool, field_serializer

__all__ = [
    "CURRENCIES",
    "ORDER_ID_PATTERN",
    "Address",
    "Currency",
    "Customer",
    "LineItem",
    "Money",
    "Order",
    "PaymentMethod",
    "ReviewDecision",
    "order_sequence",
]

#: Currencies the shop sells in (ISO 4217 codes).
CURRENCIES: tuple[str, ...] = ("EUR", "GBP", "USD")

#: An ISO 4217 currency code the shop sells in.
Currency = Literal["EUR", "GBP", "USD"]

#: A non-negative amount with at most two decimal places (cents).
Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=2)]

#: Order ids are ``ORD-`` followed by a zero-padded 6-digit sequence number.
ORDER_ID_PATTERN = r"^ORD-\d{6}$"

_ORDER_ID_RE = re.compile(ORDER_ID_PATTERN)


def order_sequence(order_id: str) -> int:
    """Returns the sequence number encoded in an order id (``"ORD-000042"`` -> ``42``).

    Args:
        order_id: an id matching :data:`ORDER_ID_PATTERN`.

    Returns:
        The integer sequence number (1-based in the dataset).

    Raises:
        ValueError: ``order_id`` does not match :data:`ORDER_ID_PATTERN`.
    """
    if not _ORDER_ID_RE.match(order_id):
        raise ValueError(f"not an order id: {order_id!r}")
    return int(order_id[4:])


class _Frozen(BaseModel):
    """Base of the demo's models: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Customer(_Frozen):
    """Who placed the order.

    Attributes:
        name: full name as typed at checkout.
        email: where the confirmation goes.
    """

    name: str = Field(min_length=1, max_length=120)
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", max_length=254)


class Address(_Frozen):
    """A shipping address.

    Attributes:
        street: street and house number.
        city: city name.
        postal_code: the postal code as written in the country (e.g. ``"10115"``,
            ``"SW1A 1AA"``).
        country: ISO 3166-1 alpha-2 country code (``"DE"``).
    """

    street: str = Field(min_length=1, max_length=200)
    city: str = Field(min_length=1, max_length=100)
    postal_code: str = Field(min_length=2, max_length=12)
    country: str = Field(pattern=r"^[A-Z]{2}$")


class LineItem(_Frozen):
    """One line of an order: a quantity of one SKU at a unit price.

    Attributes:
        sku: the stock-keeping unit (key of ``data/inventory.json``).
        quantity: units ordered (1..50).
        unit_price: price of one unit in the order currency.
    """

    sku: str = Field(pattern=r"^[A-Z0-9]+(?:-[A-Z0-9]+)*$", max_length=32)
    quantity: int = Field(ge=1, le=50)
    unit_price: Money

    @property
    def line_total(self) -> Decimal:
        """``quantity * unit_price`` in the order currency."""
        return self.unit_price * self.quantity


class PaymentMethod(_Frozen):
    """The card the customer pays with.

    Attributes:
        token: an opaque card token from the payment vault; secret (never logged).
        brand: card brand, for display only.
    """

    token: SecretStr
    brand: Literal["visa", "mastercard", "amex"]

    @field_serializer("token", when_used="json")
    def _dump_token(self, token: SecretStr) -> str:
        """JSON dumps carry the masked form, never the token itself."""
        return str(token)


class Order(_Frozen):
    """One customer order, as read from ``data/orders.jsonl``.

    Attributes:
        id: ``ORD-`` plus a 6-digit sequence number (see :func:`order_sequence`).
        placed_at: ISO 8601 UTC timestamp of checkout (informational).
        customer: who ordered.
        shipping_address: where the parcel goes.
        lines: the line items (1..6, distinct SKUs).
        payment: the card to charge.
        currency: the order currency; every amount is in it.
        subtotal: sum of the line totals.
        shipping_fee: shipping charged to the customer.
        total: ``subtotal + shipping_fee``; the amount charged.
    """

    id: str = Field(pattern=ORDER_ID_PATTERN)
    placed_at: str
    customer: Customer
    shipping_address: Address
    lines: tuple[LineItem, ...] = Field(min_length=1, max_length=6)
    payment: PaymentMethod
    currency: Currency
    subtotal: Money
    shipping_fee: Money
    total: Money

    @property
    def sequence(self) -> int:
        """The order's sequence number (see :func:`order_sequence`)."""
        return order_sequence(self.id)

    def card_token(self) -> str:
        """Returns the raw card token, for handing to the ledger only."""
        return self.payment.token.get_secret_value()


class ReviewDecision(_Frozen):
    """A reviewer's answer to the ``manual_review`` interrupt of a large order: the payload
    ``FulfilWithReview.resume`` must bring (the interrupt's ``schema``; docs/run-control.md,
    "Interrupts").

    Attributes:
        approved: ``true`` ships the order; ``false`` fails the run, which then refunds the
            payment and releases the stock. Strict: ``"yes"`` or ``1`` are refused.
        reviewer: who decided (1..80 characters).
        note: an optional reason (at most 500 characters), shown in the rejection message.
    """

    approved: StrictBool
    reviewer: str = Field(min_length=1, max_length=80)
    note: str | None = Field(default=None, max_length=500)
