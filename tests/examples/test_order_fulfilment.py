"""End-to-end tests of the order fulfilment demo (examples/order_fulfilment/).

The saga runs on the first 150 committed orders, which hold every failure reason and both
decisions of the manual review. Expected outcomes come from an independent oracle
(:func:`_predict`) that replays the dataset against the catalog, the fake services' published
rules and the demo reviewer's rule without reactor, and are also pinned as numbers so a change
to the dataset is noticed. The review itself is tested order by order in
``test_order_fulfilment_review.py``.
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
    BULK_UNITS,
    REVIEWER,
    DemoReport,
    Outcome,
    check_invariants,
    load_orders,
    main,
    render_run,
    run_demo,
)
from examples.order_fulfilment.saga import (
    REVIEW_THRESHOLD,
    SHIPMENT_RETRIES,
    Fulfil,
    FulfilWithReview,
)
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
    "completed": 134,
    "invalid_order": 1,
    "out_of_stock": 2,
    "card_declined": 3,
    "undeliverable_address": 4,
    "carrier_outage": 4,
    "review_rejected": 2,
}

#: The orders of the subset paused for review, and the demo reviewer's decision (pinned).
EXPECTED_REVIEWS = {"ORD-000027": True, "ORD-000033": True, "ORD-000111": False,
                    "ORD-000135": False}


def _predict(orders: list[Order]) -> dict[str, str]:
    """Predicts each order's outcome from the data alone (no reactor, no fake services).

    Mirrors the saga's order of checks: validation, stock, card, then — for an order above the
    review threshold — the review (rejected when a line holds ``BULK_UNITS`` or more units),
    carrier outage (checked before the address), address. Units are held by completed orders,
    and by every order that reached its review: the reviews are given after all orders ran, so
    a rejected (or later failing) reviewed order holds its stock meanwhile.
    """
    catalog = load_catalog()
    free = {sku: item.on_hand for sku, item in catalog.items()}
    fate: dict[str, str] = {}
    for order in orders:
        seq = order.sequence
        address = (order.shipping_address.country, order.shipping_address.postal_code)
        reviewed = order.total > REVIEW_THRESHOLD
        if any(catalog[line.sku].discontinued for line in order.lines):
            fate[order.id] = "invalid_order"
            continue
        if any(free[line.sku] < line.quantity for line in order.lines):
            fate[order.id] = "out_of_stock"
            continue
        if order.card_token() in DECLINED_CARD_TOKENS:
            fate[order.id] = "card_declined"
            continue
        if reviewed:
            for line in order.lines:
                free[line.sku] -= line.quantity
        if reviewed and any(line.quantity >= BULK_UNITS for line in order.lines):
            fate[order.id] = "review_rejected"
        elif any(lo <= seq <= hi for lo, hi in CARRIER_OUTAGE_WINDOWS):
            fate[order.id] = "carrier_outage"
        elif address in UNDELIVERABLE_POSTAL_CODES:
            fate[order.id] = "undeliverable_address"
        else:
            fate[order.id] = "completed"
            if not reviewed:
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
    assert steps["review_rejected"] == "apply_review"


def test_the_large_orders_were_reviewed_as_the_oracle_says(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, _ = report
    assert demo.review_threshold == REVIEW_THRESHOLD
    assert {r.order_id: r.decision.approved for r in demo.reviews} == EXPECTED_REVIEWS
    assert all(r.decision.reviewer == REVIEWER for r in demo.reviews)
    outcome = {o.order_id: o for o in demo.outcomes}
    for review in demo.reviews:
        assert outcome[review.order_id].reviewed
        assert review.status == ("completed" if review.decision.approved else "failed")
        view = FulfilWithReview.find(review.run_id)
        assert view.results["manual_review"] == review.decision
        assert [e.type for e in view.trace if e.step == "manual_review"][:1] == ["paused"]
    # only orders above the threshold ran with a review (131 and 136 ran out of stock first)
    assert {o.order_id for o in demo.outcomes if o.reviewed} == {
        o.id for o in subset if o.total > REVIEW_THRESHOLD}
    assert "paused" not in demo.counts()
    # the first review met a malformed payload first: refused, counted, then decided
    first = demo.reviews[0]
    assert first.refused == ("approved", "reviewer") and first.attempts == 1
    assert all(not r.refused for r in demo.reviews[1:])


def test_a_rejected_review_refunds_and_releases_what_the_run_took(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, services = report
    rejected = next(r for r in demo.reviews if not r.decision.approved)
    order = next(o for o in subset if o.id == rejected.order_id)
    actions = [(e.service, e.action) for e in services.audit.events(order.id)]
    capture = actions.index(("ledger", "capture"))
    assert actions[capture + 1:] == [("ledger", "refund"), ("ledger", "void.noop")] + [
        ("inventory", "release")] * len(order.lines)
    assert services.inventory.reservations(order.id) == []
    assert services.ledger.captures(order.id) == []
    assert services.carrier.attempts(order.id) == 0  # never reached the carrier


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
    assert check_invariants(subset, demo.outcomes, services,
                            review_threshold=demo.review_threshold, reviews=demo.reviews) == []


def test_invariant_checker_reports_review_violations(
    subset: list[Order], report: tuple[DemoReport, Services]
) -> None:
    demo, services = report

    def problems(outcomes: list[Outcome]) -> list[str]:
        return check_invariants(subset, outcomes, services,
                                review_threshold=demo.review_threshold, reviews=demo.reviews)

    assert problems(demo.outcomes) == []
    big = next(i for i, o in enumerate(demo.outcomes) if o.reviewed and o.status == "completed")
    skipped = list(demo.outcomes)
    skipped[big] = Outcome(demo.outcomes[big].order_id, None, "completed")  # ran unreviewed
    assert any("without manual review" in p for p in problems(skipped))
    left = list(demo.outcomes)
    left[big] = Outcome(demo.outcomes[big].order_id, None, "paused", step="manual_review",
                        reviewed=True)
    assert any("still paused at manual_review" in p for p in problems(left))
    # without the threshold, a reviewed outcome is itself a violation
    assert any("ran with manual review" in p
               for p in check_invariants(subset, demo.outcomes, services))


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
    # the first 70 orders hold two above the threshold: paused, then approved
    assert "Manual review of orders above 400.00" in text
    assert "ORD-000027" in text and "ORD-000033" in text and "approved" in text
    assert "malformed payload" in text and "ran with a manual review" in text


def test_main_reviews_per_the_threshold_option() -> None:
    out = io.StringIO()
    code = main(["--limit", "150", "--review-threshold", "500"],
                console=Console(file=out, width=160), real_sleep=False)
    text = out.getvalue()
    assert code == 0, text
    assert "Manual review of orders above 500" in text
    assert "ORD-000135" in text and "rejected" in text and "Service audit log of ORD-000135" in text
    out = io.StringIO()
    assert main(["--limit", "40", "--review-threshold", "off"],
                console=Console(file=out, width=160), real_sleep=False) == 0
    assert "Manual review" not in out.getvalue()
    for bad in ("cheap", "-1", "nan"):
        with pytest.raises(SystemExit) as info:
            main(["--review-threshold", bad], console=Console(file=io.StringIO()))
        assert info.value.code == 2


def test_main_rejects_a_bad_limit_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--limit", "0"], console=Console(file=io.StringIO()))
    assert info.value.code == 2
    out = io.StringIO()
    assert main(["--orders", str(tmp_path / "none.jsonl")], console=Console(file=out)) == 2
    assert "cannot load orders" in out.getvalue()
