"""The manual review of large orders in the order-fulfilment demo (``FulfilWithReview``,
examples/order_fulfilment/saga.py; docs/run-control.md, "Interrupts").

One order above the review threshold at a time, on a fresh in-process runtime with a manual
clock: it pauses at ``manual_review`` with its money captured and its stock reserved; an
approval ships it; a rejection fails the run and the rollback refunds and releases; a malformed
payload is refused and counted (and the last allowed one rolls the run back); a review sent
after the timeout expires the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from examples.order_fulfilment.models import Order, ReviewDecision
from examples.order_fulfilment.run import Review, _outcome, check_invariants, load_orders
from examples.order_fulfilment.saga import (
    REVIEW_MAX_ATTEMPTS,
    REVIEW_THRESHOLD,
    REVIEW_TIMEOUT,
    Fulfil,
    FulfilWithReview,
    needs_review,
    review_correlation_id,
)
from examples.order_fulfilment.services import SERVICES, Services, load_catalog
from reactor import (
    Failure,
    InterruptAlreadyResumedError,
    InterruptExpiredError,
    InterruptNotFoundError,
    InterruptPayloadError,
    Paused,
    RunStatus,
    Success,
    config,
)
from reactor.memory import LocalRouter, MemoryStorage
from reactor.testing import TestClock

#: ORD-000033 (456.90 EUR, 3 lines, 2 units at most per line): a clean large order.
LARGE = "ORD-000033"

APPROVE = {"approved": True, "reviewer": "ops.sam", "note": "called the customer"}
REJECT = {"approved": False, "reviewer": "ops.sam", "note": "address on a fraud list"}


@pytest.fixture
def clock() -> Iterator[TestClock]:
    clock = TestClock(1_700_000_000.0)
    config.configure(storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock),
                     clock=clock)
    yield clock
    config.reset()


@pytest.fixture
def services(clock: TestClock) -> Iterator[Services]:
    services = Services.create()
    with SERVICES.use(services):
        yield services


@pytest.fixture(scope="module")
def large() -> Order:
    order = next(o for o in load_orders(limit=40) if o.id == LARGE)
    assert order.total > REVIEW_THRESHOLD
    return order


def _pause(order: Order) -> Paused:
    paused = FulfilWithReview.execute({"order": order, "card_token": order.card_token()})
    assert isinstance(paused, Paused), paused
    return paused


def _resume(order: Order, payload: Any) -> Any:
    return FulfilWithReview.resume(correlation_id=review_correlation_id(order.id),
                                   payload=payload)


def _assert_rolled_back(order: Order, services: Services) -> None:
    """Nothing of the order is left: stock back, capture refunded, authorization closed."""
    assert services.inventory.reservations(order.id) == []
    assert services.ledger.captures(order.id) == []
    assert all(a.status != "authorized" for a in services.ledger.authorizations(order.id))
    assert services.carrier.shipments(order.id) == []
    assert services.mailer.messages(order.id) == []
    on_hand = load_catalog()
    for line in order.lines:
        assert services.inventory.free(line.sku) == on_hand[line.sku].on_hand
    actions = [e.action for e in services.audit.events(order.id)]
    capture = actions.index("capture")
    assert actions[capture + 1:] == ["refund", "void.noop"] + ["release"] * len(order.lines)


def test_only_orders_above_the_threshold_are_reviewed(large: Order) -> None:
    assert needs_review(large) and needs_review(large, large.total - 1)
    assert not needs_review(large, large.total)  # "above": equal is not reviewed
    assert not needs_review(large, None)
    review = FulfilWithReview.definition.steps["manual_review"]
    assert review.kind == "interrupt" and review.interrupt is not None
    assert review.interrupt.schema is ReviewDecision
    assert review.interrupt.timeout == REVIEW_TIMEOUT
    assert review.interrupt.max_attempts == REVIEW_MAX_ATTEMPTS
    assert FulfilWithReview.definition.steps["book_shipment"].wait_for == ("apply_review",)
    assert "manual_review" not in Fulfil.definition.steps


def test_a_large_order_pauses_after_payment_before_anything_ships(
    large: Order, services: Services, clock: TestClock
) -> None:
    paused = _pause(large)
    assert paused.step == "manual_review"
    assert paused.correlation_id == review_correlation_id(large.id) == f"review:{large.id}"
    assert paused.timeout == REVIEW_TIMEOUT and paused.deadline == clock.now() + REVIEW_TIMEOUT
    assert paused.run_id is not None
    view = FulfilWithReview.find(paused.run_id)
    assert view.status is RunStatus.PAUSED
    assert view.interrupt is not None and view.interrupt.attempts == 0
    assert len(services.inventory.reservations(large.id)) == len(large.lines)
    assert len(services.ledger.captures(large.id)) == 1
    assert services.carrier.shipments(large.id) == [] and services.mailer.messages(large.id) == []


def test_an_approval_ships_the_order(large: Order, services: Services) -> None:
    paused = _pause(large)
    done = _resume(large, APPROVE)
    assert isinstance(done, Success) and done.run_id == paused.run_id
    view = FulfilWithReview.find(paused.run_id or "")
    assert view.status is RunStatus.COMPLETED
    assert view.results["manual_review"] == ReviewDecision(**APPROVE)
    assert view.results["apply_review"] == {"reviewer": "ops.sam", "note": "called the customer"}
    assert len(services.carrier.shipments(large.id)) == 1
    assert len(services.mailer.messages(large.id)) == 1
    outcome = _outcome(large, done, reviewed=True)
    review = Review(large.id, paused.run_id or "", large.total, large.currency,
                    ReviewDecision(**APPROVE), status="completed")
    assert check_invariants([large], [outcome], services, review_threshold=REVIEW_THRESHOLD,
                            reviews=[review]) == []
    with pytest.raises(InterruptAlreadyResumedError):  # a second answer is refused
        FulfilWithReview.resume(paused.run_id, payload=REJECT)
    with pytest.raises(InterruptNotFoundError):  # and the correlation id was released
        _resume(large, REJECT)
    assert FulfilWithReview.find(paused.run_id or "").status is RunStatus.COMPLETED


def test_a_rejection_fails_the_run_and_rolls_back_payment_and_stock(
    large: Order, services: Services
) -> None:
    paused = _pause(large)
    failed = _resume(large, REJECT)
    assert isinstance(failed, Failure) and failed.run_id == paused.run_id
    assert failed.step_name == "apply_review" and failed.rollback_failures == []
    assert "rejected by ops.sam: address on a fraud list" in failed.message
    _assert_rolled_back(large, services)
    view = FulfilWithReview.find(paused.run_id or "")
    assert view.status is RunStatus.FAILED and view.undo_stack == ()
    assert view.results["manual_review"] == ReviewDecision(**REJECT)
    outcome = _outcome(large, failed, reviewed=True)
    assert outcome.reason == "review_rejected"
    review = Review(large.id, paused.run_id or "", large.total, large.currency,
                    ReviewDecision(**REJECT), status="failed")
    assert check_invariants([large], [outcome], services, review_threshold=REVIEW_THRESHOLD,
                            reviews=[review]) == []


@pytest.mark.parametrize(("payload", "fields"), [
    ({"approved": "yes"}, {"approved", "reviewer"}),                 # text, no reviewer
    ({"approved": True, "reviewer": ""}, {"reviewer"}),             # blank reviewer
    ({"approved": False, "reviewer": "x", "score": 3}, {"score"}),  # an unknown field
    ("approve", {"payload"}),                                       # not an object at all
])
def test_a_malformed_review_is_refused_counted_and_the_run_stays_paused(
    large: Order, services: Services, payload: Any, fields: set[str]
) -> None:
    paused = _pause(large)
    with pytest.raises(InterruptPayloadError) as info:
        _resume(large, payload)
    error = info.value
    assert set(error.field_errors) == fields
    assert (error.attempts, error.max_attempts, error.exhausted) == (1, REVIEW_MAX_ATTEMPTS,
                                                                     False)
    assert error.failure is None
    view = FulfilWithReview.find(paused.run_id or "")
    assert view.status is RunStatus.PAUSED
    assert view.interrupt is not None and view.interrupt.attempts == 1
    assert services.carrier.shipments(large.id) == []  # nothing moved on
    assert len(services.ledger.captures(large.id)) == 1  # nor back
    done = _resume(large, APPROVE)  # a corrected answer is still accepted
    assert isinstance(done, Success)
    assert len(services.carrier.shipments(large.id)) == 1


def test_the_last_allowed_malformed_review_rolls_the_run_back(
    large: Order, services: Services
) -> None:
    paused = _pause(large)
    for attempt in range(1, REVIEW_MAX_ATTEMPTS + 1):
        with pytest.raises(InterruptPayloadError) as info:
            _resume(large, {"approved": True})
        assert info.value.attempts == attempt
    assert info.value.exhausted
    assert isinstance(info.value.failure, Failure)
    assert info.value.failure.step_name == "manual_review"
    assert FulfilWithReview.find(paused.run_id or "").status is RunStatus.FAILED
    _assert_rolled_back(large, services)


def test_a_review_after_the_timeout_expires_the_run_and_rolls_it_back(
    large: Order, services: Services, clock: TestClock
) -> None:
    paused = _pause(large)
    clock.advance(REVIEW_TIMEOUT - 1)
    assert FulfilWithReview.find(paused.run_id or "").status is RunStatus.PAUSED
    clock.advance(2)
    with pytest.raises(InterruptExpiredError) as info:
        _resume(large, APPROVE)
    assert isinstance(info.value.failure, Failure)
    assert FulfilWithReview.find(paused.run_id or "").status is RunStatus.FAILED
    _assert_rolled_back(large, services)
