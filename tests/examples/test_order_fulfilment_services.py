"""Tests of the fulfilment demo's fake services (examples/order_fulfilment/services.py)."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest

from examples.order_fulfilment.models import Address
from examples.order_fulfilment.services import (
    CARRIER_OUTAGE_WINDOWS,
    SERVICES,
    CardDeclined,
    CarrierUnavailable,
    CatalogItem,
    LedgerError,
    OutOfStock,
    Services,
    Undeliverable,
    UnknownSku,
    load_catalog,
)

_HOME = Address(street="Hauptstraße 1", city="Berlin", postal_code="10115", country="DE")
_ISLAND = Address(street="Lung Wai 3", city="Helgoland", postal_code="27498", country="DE")


def _services(stock: int = 5) -> Services:
    catalog = {
        "SKU-A": CatalogItem("SKU-A", "A", {"EUR": Decimal("9.90")}, stock),
        "SKU-B": CatalogItem("SKU-B", "B", {"EUR": Decimal("1.00")}, 100),
    }
    return Services.create(catalog)


def test_reserve_and_release_conserve_stock_and_release_is_idempotent() -> None:
    svc = _services(stock=5)
    r = svc.inventory.reserve("ORD-000001", "SKU-A", 3)
    assert svc.inventory.free("SKU-A") == 2
    assert svc.inventory.reserve("ORD-000001", "SKU-A", 3) == r  # idempotent per key
    assert svc.inventory.free("SKU-A") == 2
    assert svc.inventory.release(r.id) is True
    assert svc.inventory.release(r.id) is False  # already released: no-op
    assert svc.inventory.free("SKU-A") == 5
    assert svc.inventory.reservations("ORD-000001") == []
    actions = [e.action for e in svc.audit.events("ORD-000001")]
    assert actions == ["reserve", "release", "release.noop"]


def test_reserve_rejects_more_than_free_stock_and_unknown_skus() -> None:
    svc = _services(stock=2)
    with pytest.raises(OutOfStock) as info:
        svc.inventory.reserve("ORD-000001", "SKU-A", 3)
    assert (info.value.requested, info.value.available, info.value.code) == (3, 2, "out_of_stock")
    assert info.value.retryable is False
    with pytest.raises(UnknownSku):
        svc.inventory.reserve("ORD-000001", "NOPE", 1)
    assert svc.inventory.free("SKU-A") == 2


def test_release_for_releases_by_business_key() -> None:
    svc = _services()
    svc.inventory.reserve("ORD-000001", "SKU-A", 1)
    assert svc.inventory.release_for("ORD-000001", "SKU-A") is True
    assert svc.inventory.release_for("ORD-000001", "SKU-A") is False
    assert svc.inventory.release_for("ORD-000002", "SKU-A") is False


def test_concurrent_reservations_never_oversell() -> None:
    svc = _services(stock=50)
    errors: list[Exception] = []

    def worker(n: int) -> None:
        try:
            svc.inventory.reserve(f"ORD-{n:06d}", "SKU-A", 1)
        except OutOfStock as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(80)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(svc.inventory.reservations()) == 50
    assert len(errors) == 30
    assert svc.inventory.free("SKU-A") == 0


def test_ledger_authorize_capture_refund_void_in_reverse_order() -> None:
    svc = _services()
    auth = svc.ledger.authorize("ORD-000001", "tok_secret_1234", Decimal("19.80"), "EUR")
    assert auth.card_last4 == "1234"
    cap = svc.ledger.capture(auth.id)
    assert svc.ledger.capture(auth.id) == cap  # idempotent
    assert cap.amount == Decimal("19.80")
    with pytest.raises(LedgerError):
        svc.ledger.void(auth.id)  # the capture is live: refund first
    assert svc.ledger.refund(cap.id) is True
    assert svc.ledger.refund(cap.id) is False
    assert svc.ledger.void(auth.id) is False  # captured and refunded: nothing left to void
    assert svc.ledger.captures("ORD-000001") == []
    assert all("tok_secret" not in str(e) for e in svc.audit.events())


def test_ledger_declines_known_tokens_and_void_is_idempotent() -> None:
    svc = _services()
    with pytest.raises(CardDeclined) as info:
        svc.ledger.authorize("ORD-000001", "tok_chargeDeclinedExpiredCard", Decimal("5"), "EUR")
    assert info.value.decline_code == "expired_card"
    assert svc.ledger.authorizations("ORD-000001") == []
    auth = svc.ledger.authorize("ORD-000002", "tok_ok_0000", Decimal("5"), "EUR")
    assert svc.ledger.void(auth.id) is True
    assert svc.ledger.void(auth.id) is False
    assert svc.ledger.void_open("ORD-000002") is False
    with pytest.raises(LedgerError):
        svc.ledger.capture(auth.id)


def test_carrier_outage_rejection_booking_and_cancel() -> None:
    svc = _services()
    lo, _hi = CARRIER_OUTAGE_WINDOWS[0]
    down = f"ORD-{lo:06d}"
    for _ in range(2):
        with pytest.raises(CarrierUnavailable) as info:
            svc.carrier.book(down, _HOME, 1)
    assert info.value.retryable is True
    assert svc.carrier.attempts(down) == 2
    with pytest.raises(Undeliverable) as rejected:
        svc.carrier.book("ORD-000002", _ISLAND, 1)
    assert rejected.value.retryable is False
    shipment = svc.carrier.book("ORD-000003", _HOME, 1)
    assert svc.carrier.book("ORD-000003", _HOME, 1) == shipment
    assert svc.carrier.cancel(shipment.id) is True
    assert svc.carrier.cancel(shipment.id) is False
    assert svc.carrier.cancel_for("ORD-000003") is False
    assert svc.carrier.shipments() == []


def test_mailer_send_is_idempotent_and_recall_is_a_noop_twice() -> None:
    svc = _services()
    msg = svc.mailer.send("ORD-000001", "confirmation", "a@example.com", "hi")
    assert svc.mailer.send("ORD-000001", "confirmation", "a@example.com", "hi") == msg
    assert svc.mailer.recall(msg.id) is True
    assert svc.mailer.recall(msg.id) is False
    assert svc.mailer.messages() == []


def test_registry_requires_installed_services_and_restores_previous() -> None:
    outer, inner = _services(), _services()
    with pytest.raises(RuntimeError):
        SERVICES.get()
    with SERVICES.use(outer):
        assert SERVICES.get() is outer
    with pytest.raises(RuntimeError):
        SERVICES.get()
        with SERVICES.use(inner):
            assert SERVICES.get() is inner
        assert SERVICES.get() is outer
    with pytest.raises(RuntimeError):
        SERVICES.get()


def test_committed_catalog_has_limited_and_discontinued_skus() -> None:
    catalog = load_catalog()
    assert len(catalog) >= 15
    assert any(item.discontinued for item in catalog.values())
    assert sorted(item.on_hand for item in catalog.values() if not item.discontinued)[0] <= 5
    for item in catalog.values():
        assert set(item.prices) == {"EUR", "GBP", "USD"}
        assert all(p > 0 and p == p.quantize(Decimal("0.01")) for p in item.prices.values())
