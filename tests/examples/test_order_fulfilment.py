"""End-to-end tests of the order fulfilment demo (examples/order_fulfilment/).

The saga runs on the first 150 committed orders, which hold every failure reason. Expected
outcomes come from an independent oracle (:func:`_predict`) that replays the dataset against
the catalog and the fake services' published rules without reactor, and are also pinned as
numbers so a change to the dataset is noticed.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from rich.console import Console

from examples.order_fulfilment import generate_orders
from examples.order_fulfilment.models import Order
from examples.order_fulfilment.run import (
    DemoReport,
    check_invariants,
    load_orders,
    main,
    render_run,
    run_demo,
)
from examples.order_fulfilment.saga import SHIPMENT_RETRIES, Fulfil
from examples.order_fulfilment.services import (
    CARRIER_OUTAGE_WINDOWS,
    DECLINED_CARD_TOKENS,
    INVENTORY_PATH,
    ORDERS_PATH,
    SERVICES,
    UNDELIVERABLE_POSTAL_CODES,
    Services,
    load_catalog,
)

SUBSET = 150

#: The outcome counts of the first 150 orders (pinned; the oracle must agree).
EXPECTED_SUBSET = {
    "completed": 136,
    "invalid_order": 1,
    "out_of_stock": 2,
    "card_declined": 3,
    "undeliverable_address": 4,
    "carrier_outage": 4,
}


def _predict(orders: list[Order]) -> dict[str, str]:
    """Predicts each order's outcome from the data alone (no reactor, no fake services).

    Mirrors the saga's order of checks: validation, stock (units held only by completed
    orders), card, carrier outage (checked before the address), address.
    """
    catalog = load_catalog()
    free = {sku: item.on_hand for sku, item in catalog.items()}
    fate: dict[str, str] = {}
    for order in orders:
        seq = order.sequence
        address = (order.shipping_address.country, order.shipping_address.postal_code)
        if any(catalog[line.sku].discontinued for line in order.lines):
            fate[order.id] = "invalid_order"
        elif any(free[line.sku] < line.quantity for line in order.lines):
            fate[order.id] = "out_of_stock"
        elif order.card_token() in DECLINED_CARD_TOKENS:
            fate[order.id] = "card_declined"
        elif any(lo <= seq <= hi for lo, hi in CARRIER_OUTAGE_WINDOWS):
            fate[order.id] = "carrier_outage"
        elif address in UNDELIVERABLE_POSTAL_CODES:
            fate[order.id] = "undeliverable_address"
        else:
            fate[order.id] = "completed"
            for line in order.lines:
                free[line.sku] -= line.quantity
    return fate


@pytest.fixture(scope="module")
def subset() -> list[Order]:
    return load_orders(limit=SUBSET)


@pytest.fixture(scope="module")
def report(subset: list[Order]) -> tuple[DemoReport, Services]:
    services = Services.create()
    return run_demo(subset, services, real_sleep=False), services


# ------------------------------------------------------------------------------ the dataset


def test_committed_dataset_is_what_the_generator_writes() -> None:
    assert INVENTORY_PATH.read_text(encoding="utf-8") == generate_orders.render_inventory()
    assert ORDERS_PATH.read_text(encoding="utf-8") == generate_orders.render_orders(
        generate_orders.generate_orders()
    )


def test_generator_check_mode_detects_a_stale_file(tmp_path: Path) -> None:
    assert generate_orders.main(["--out", str(tmp_path)]) == 0
    assert generate_orders.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "orders.jsonl").write_text("{}\n", encoding="utf-8")
    assert generate_orders.main(["--out", str(tmp_path), "--check"]) == 1


def test_dataset_is_realistic_and_consistent() -> None:
    orders = load_orders()
    assert len(orders) >= 1000
    assert len({o.id for o in orders}) == len(orders)
    catalog = load_catalog()
    for order in orders:
        assert sum((ln.line_total for ln in order.lines), Decimal("0")) == order.subtotal
        assert order.subtotal + order.shipping_fee == order.total
        for line in order.lines:
            assert catalog[line.sku].prices[order.currency] == line.unit_price
    raw = json.loads(ORDERS_PATH.read_text(encoding="utf-8").splitlines()[0])
    assert isinstance(raw["total"], str) and isinstance(raw["lines"][0]["unit_price"], str)
    assert set(raw) >= {"id", "customer", "shipping_address", "lines", "payment", "currency"}
    fate = Counter(_predict(orders).values())
    failed = len(orders) - fate["completed"]
    assert 0.02 * len(orders) <= failed <= 0.08 * len(orders)  # "a few percent"
    assert all(fate[r] >= 5 for r in EXPECTED_SUBSET if r != "completed")


def test_the_subset_holds_every_failure_reason(subset: list[Order]) -> None:
    assert Counter(_predict(subset).values()) == EXPECTED_SUBSET


def test_card_tokens_never_leak_from_the_model() -> None:
    order = load_orders(limit=1)[0]
    token = order.card_token()
    assert token.startswith("tok_")
    assert token not in repr(order)
    assert token not in order.model_dump_json()


# ------------------------------------------------------------------------------ the saga


def test_outcomes_match_the_oracle_and_the_pinned_counts(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, _ = report
    predicted = _predict(subset)
    actual = {o.order_id: (o.reason or o.status) for o in demo.outcomes}
    assert actual == predicted
    counts = demo.counts()
    assert counts["completed"] == EXPECTED_SUBSET["completed"]
    assert counts["failed"] == SUBSET - EXPECTED_SUBSET["completed"]
    assert counts["rollback_failures"] == 0
    assert dict(demo.reasons()) == {k: v for k, v in EXPECTED_SUBSET.items() if k != "completed"}


def test_invariants_hold_after_the_run(report: tuple[DemoReport, Services]) -> None:
    demo, _ = report
    assert demo.violations == []


def test_failed_steps_are_the_expected_ones(report: tuple[DemoReport, Services]) -> None:
    demo, _ = report
    steps = {o.reason: o.step for o in demo.outcomes if o.reason}
    assert steps["invalid_order"] == "validate"
    assert steps["out_of_stock"] == "reserve"
    assert steps["carrier_outage"] == "book_shipment"
    assert steps["undeliverable_address"] == "book_shipment"
    assert steps["card_declined"] is not None and steps["card_declined"].startswith("payment")


def test_carrier_outage_exhausts_retries_with_backoff(
    report: tuple[DemoReport, Services],
) -> None:
    demo, services = report
    outages = [o for o in demo.outcomes if o.reason == "carrier_outage"]
    assert outages
    for o in outages:
        assert services.carrier.attempts(o.order_id) == SHIPMENT_RETRIES.max_attempts
    undeliverable = [o for o in demo.outcomes if o.reason == "undeliverable_address"]
    for o in undeliverable:  # a rejected address is permanent: never retried
        assert services.carrier.attempts(o.order_id) == 1
    per_order = [SHIPMENT_RETRIES.delay(n) for n in range(1, SHIPMENT_RETRIES.max_attempts)]
    assert demo.retry_sleeps == per_order * len(outages)


def test_a_late_failure_undoes_everything_in_reverse_order(
    report: tuple[DemoReport, Services],
) -> None:
    demo, services = report
    outage = next(o for o in demo.outcomes if o.reason == "carrier_outage")
    actions = [(e.service, e.action) for e in services.audit.events(outage.order_id)]
    undo = [a for a in actions if a[1] in ("refund", "void", "void.noop", "release")]
    # The payment is undone first — refund the capture, then void the authorization (a no-op
    # once its capture is refunded) — and only then are the reservations released.
    assert undo[:2] == [("ledger", "refund"), ("ledger", "void.noop")]
    assert set(undo[2:]) == {("inventory", "release")}
    assert actions.index(("ledger", "capture")) < actions.index(("ledger", "refund"))


def test_out_of_stock_releases_the_lines_reserved_before_it(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, services = report
    planted = next(o for o in demo.outcomes if o.order_id == "ORD-000131")
    assert planted.reason == "out_of_stock"
    actions = [e.action for e in services.audit.events("ORD-000131")]
    order = next(o for o in subset if o.id == "ORD-000131")
    earlier_lines = len(order.lines) - 1  # the oversold line is the last one
    assert actions.count("reserve") == earlier_lines
    assert actions.count("release") == earlier_lines
    assert "reserve.rejected" in actions
    assert not any(e.service == "ledger" for e in services.audit.events("ORD-000131"))


def test_find_returns_the_failed_run_with_secrets_redacted(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, services = report
    declined = next(o for o in demo.outcomes if o.reason == "card_declined")
    assert declined.run_id is not None
    view = Fulfil.find(declined.run_id)
    assert view.status == "failed"
    assert view.inputs["card_token"] == "[REDACTED]"
    assert view.failure is not None and view.failure.rollback_failures == []
    assert view.undo_stack == ()
    assert any(e.type == "failed" for e in view.trace) or any(
        e.type == "failed" for child in view.children.values() for e in child.trace
    )
    token = next(o for o in subset if o.id == declined.order_id).card_token()
    out = io.StringIO()
    render_run(Console(file=out, width=160), declined.run_id, services)
    assert declined.order_id in out.getvalue()
    assert token not in out.getvalue()
    assert token not in repr(view)


def test_completed_run_is_stored_as_completed(report: tuple[DemoReport, Services]) -> None:
    demo, _ = report
    done = next(o for o in demo.outcomes if o.status == "completed")
    assert done.run_id is not None
    view = Fulfil.find(done.run_id)
    assert view.status == "completed"
    assert set(view.results) >= {"validate", "reserve", "payment", "book_shipment",
                                 "send_confirmation"}


def test_undoing_a_completed_run_reverses_every_effect(subset: list[Order]) -> None:
    services = Services.create()
    order = subset[0]
    with SERVICES.use(services):
        done = Fulfil.execute({"order": order, "card_token": order.card_token()})
        assert done.success and done.run_id is not None
        assert services.mailer.messages(order.id) and services.carrier.shipments(order.id)
        undone = Fulfil.undo(done.run_id)
    assert undone.success
    assert Fulfil.find(done.run_id).status == "cancelled"
    assert services.inventory.reservations(order.id) == []
    assert services.ledger.captures(order.id) == []
    assert services.carrier.shipments(order.id) == []
    assert services.mailer.messages(order.id) == []
    for line in order.lines:
        assert services.inventory.free(line.sku) == load_catalog()[line.sku].on_hand
    actions = [e.action for e in services.audit.events(order.id)]
    undo_actions = actions[actions.index("send") + 1:]  # newest step first
    assert undo_actions == ["recall", "cancel", "refund", "void.noop"] + ["release"] * len(
        order.lines)


def test_invariant_checker_reports_leftover_effects(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, services = report
    failed = next(o for o in demo.outcomes if o.reason == "carrier_outage")
    order = next(o for o in subset if o.id == failed.order_id)
    with SERVICES.use(services):
        leaked = services.inventory.reserve(order.id, order.lines[0].sku, 1)
        try:
            problems = check_invariants(subset, demo.outcomes, services)
        finally:
            services.inventory.release(leaked.id)
    assert any(order.id in p and "reservation" in p for p in problems)
    assert check_invariants(subset, demo.outcomes, services) == []


def test_the_outcome_is_deterministic(subset: list[Order],
                                      report: tuple[DemoReport, Services]) -> None:
    demo, _ = report
    again = run_demo(subset[:70], Services.create(), real_sleep=False)
    assert [(o.order_id, o.status, o.reason) for o in again.outcomes] == [
        (o.order_id, o.status, o.reason) for o in demo.outcomes[:70]
    ]


# ------------------------------------------------------------------------------ the CLI


def test_main_prints_summary_trace_and_passes_the_invariants() -> None:
    out = io.StringIO()
    code = main(["--limit", "70"], console=Console(file=out, width=160), real_sleep=False)
    text = out.getvalue()
    assert code == 0, text
    assert "Order fulfilment" in text and "Failure reasons" in text
    assert "carrier_outage" in text and "Trace of ORD-0000" in text
    assert "Invariants hold" in text
    assert "[REDACTED]" in text
    assert "the caller (synchronous)" in text and "in-process retry sleep (s)" in text


def test_main_rejects_a_bad_limit_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--limit", "0"], console=Console(file=io.StringIO()))
    assert info.value.code == 2
    out = io.StringIO()
    assert main(["--orders", str(tmp_path / "none.jsonl")], console=Console(file=out)) == 2
    assert "cannot load orders" in out.getvalue()
