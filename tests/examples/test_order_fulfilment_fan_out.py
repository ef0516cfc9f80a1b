"""``./scripts/demo --workers N``: the worker variant reserves stock with a fan-out map, and a
failed payment releases the reservations through the map's distributed rollback; the
invariant check still holds.

The demo runs in worker threads; the single-order tests at the end run the same saga with the
testing kit (docs/testing.md): the ``reactor_env`` fixture's queue run to completion in the
test's thread, an injected fault, and the rollback-order assertions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.order_fulfilment.models import Order
from examples.order_fulfilment.run import load_orders, run_demo
from examples.order_fulfilment.saga_workers import RESERVE_BATCH_SIZE, FulfilInWorkers
from examples.order_fulfilment.services import DECLINED_CARD_TOKENS, SERVICES, Services
from reactor import DispatchHandle, MapResultEnumerator, config
from reactor.testing import (
    TestEnvironment,
    assert_completed,
    assert_failed,
    assert_rolled_back,
    assert_trace,
)

LIMIT = 60


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def test_reservations_fan_out_and_a_declined_card_rolls_them_back_distributed() -> None:
    assert FulfilInWorkers.definition.steps["reserve"].fan_out is not None
    orders = load_orders(limit=LIMIT)
    by_id = {order.id: order for order in orders}
    report = run_demo(orders, Services.create(), workers=2)
    assert report.violations == []
    storage = config.current().storage
    declined = [o for o in report.outcomes if o.reason == "card_declined"]
    completed = [o for o in report.outcomes if o.status == "completed"]
    assert declined and completed
    for outcome in completed:
        view = FulfilInWorkers.find(outcome.run_id or "")
        reserved = view.results["reserve"]
        assert isinstance(reserved, MapResultEnumerator)
        assert len(reserved) == len(by_id[outcome.order_id].lines)
        assert all(r.value["quantity"] > 0 for r in reserved)
    for outcome in declined:
        summary = storage.map_rollbacks.summary(_map_id(outcome.run_id or ""))
        lines = len(by_id[outcome.order_id].lines)
        # one element-rollback job per reserved line settled it, none failed
        assert summary is not None and (summary.total, summary.settled, summary.failed) == (
            lines, lines, 0
        )
    assert any(len(order.lines) > RESERVE_BATCH_SIZE for order in orders)  # several throws


def _map_id(run_id: str) -> str:
    from reactor.engine.checkpoint import load_context
    from reactor.engine.env import make_env

    ctx = load_context(make_env(), run_id)
    assert ctx is not None
    ref = ctx.map_ref("reserve")
    assert ref is not None and ref.fan_out is True
    return ref.map_id


# ------------------------------------------------------------- one order, with the testing kit


@pytest.fixture
def services() -> Iterator[Services]:
    fresh = Services.create()
    with SERVICES.use(fresh):
        yield fresh


def _order(*, declined: bool, skip: int = 0) -> Order:
    """An order of several reservation throws whose card is (or is not) declined."""
    found = [o for o in load_orders(limit=LIMIT)
             if len(o.lines) > RESERVE_BATCH_SIZE
             and (o.card_token() in DECLINED_CARD_TOKENS) is declined]
    return found[skip]


def _fulfil(order: Order) -> DispatchHandle:
    handle = FulfilInWorkers.run(order=order, card_token=order.card_token())
    assert isinstance(handle, DispatchHandle)  # a background run: queued, nothing ran yet
    return handle


def test_one_order_fans_out_and_completes_in_the_test_thread(
    reactor_env: TestEnvironment, services: Services
) -> None:
    order = _order(declined=False)
    handle = _fulfil(order)
    assert [job.kind for job in reactor_env.pending_jobs()] == ["run"]
    reactor_env.run_until_idle()  # the run, each line's job, the collector, the capture unit
    view = assert_completed(handle)
    reserved = view.results["reserve"]
    assert isinstance(reserved, MapResultEnumerator) and len(reserved) == len(order.lines)
    assert len(services.inventory.reservations(order.id)) == len(order.lines)


def test_a_declined_card_releases_every_reservation_newest_first(
    reactor_env: TestEnvironment, services: Services
) -> None:
    order = _order(declined=True)
    handle = _fulfil(order)
    reactor_env.run_until_idle()
    assert_failed(handle, step="authorize", reason="card declined")
    assert_rolled_back(handle, ["authorize", "reserve", "validate"])
    assert services.inventory.reservations(order.id) == []  # the distributed map rollback


def test_a_shipment_failing_on_every_attempt_is_retried_on_the_clock_then_rolled_back(
    reactor_env: TestEnvironment, services: Services
) -> None:
    order = _order(declined=False, skip=1)
    fault = reactor_env.fail_step(FulfilInWorkers, "book_shipment", on_attempt=None)
    handle = _fulfil(order)
    reactor_env.run_until_idle()  # the worker's retry delays pass on the test clock
    assert fault.raised == 3
    assert_failed(handle, step="book_shipment")
    assert_trace(handle, [("retry", "book_shipment"), ("retry", "book_shipment"),
                          ("failed", "book_shipment")], types={"retry", "failed"})
    assert_rolled_back(handle, ["book_shipment", "authorize", "reserve", "validate"])
    assert services.inventory.reservations(order.id) == []
    assert services.ledger.captures(order.id) == []  # nothing was ever captured
