"""``./scripts/demo --workers N``: the worker variant reserves stock with a fan-out map, and a
failed payment releases the reservations through the map's distributed rollback (issue 8
"Done when"); the invariant check still holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.order_fulfilment.run import load_orders, run_demo
from examples.order_fulfilment.saga_workers import RESERVE_BATCH_SIZE, FulfilInWorkers
from examples.order_fulfilment.services import Services
from reactor import MapResultEnumerator, config

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
    ref = ctx.composed_contexts["reserve"]
    assert ref["fan_out"] is True
    return str(ref["map_id"])
