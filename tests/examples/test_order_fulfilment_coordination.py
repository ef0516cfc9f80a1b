"""The demo's coordination scene (the saga module's docstring; docs/coordination.md): every
line's reservation runs under the lock ``sku:<SKU>`` and every booking holds a lease of the
``carrier`` semaphore, so the dashboard's coordination view (docs/dashboard.md, "Coordination
view") shows them on a demo order's runs; the invariants still hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from examples.order_fulfilment.run import load_orders, run_demo
from examples.order_fulfilment.saga import CARRIER_SLOTS, Fulfil
from examples.order_fulfilment.services import Services
from reactor import config
from reactor.dashboard import start_dashboard

LIMIT = 8


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def _step_rows(client: httpx.Client, run_id: str, step: str) -> dict[str, dict[str, Any]]:
    response = client.get(f"/api/runs/{run_id}/coordination")
    assert response.status_code == 200, response.text
    view = response.json()
    assert view["available"] is True, view
    return {row["primitive"]: row for row in view["steps"] if row["step"] == step}


def test_a_demo_order_shows_its_carrier_semaphore_and_its_lines_sku_locks() -> None:
    orders = load_orders(limit=LIMIT)
    report = run_demo(orders, Services.create(), real_sleep=False, review_threshold=None)
    assert report.violations == []
    done = next(o for o in report.outcomes if o.status == "completed")
    order = next(o for o in orders if o.id == done.order_id)
    assert done.run_id is not None
    server = start_dashboard(None)
    try:
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            carrier = _step_rows(client, done.run_id, "book_shipment")
            assert set(carrier) == {"semaphore"}
            row = carrier["semaphore"]
            assert (row["state"], row["key"]) == ("resolved", "carrier")
            assert row["live"]["limit"] == CARRIER_SLOTS and row["live"]["holders"] == []

            lines = Fulfil.find(done.run_id).map_elements("reserve", limit=len(order.lines))
            assert [e.outcome for e in lines.elements] == ["succeeded"] * len(order.lines)
            for line, element in zip(order.lines, lines.elements, strict=True):
                assert element.run_id is not None
                lock = _step_rows(client, element.run_id, "reserve")
                assert set(lock) == {"lock"}
                assert (lock["lock"]["state"], lock["lock"]["key"]) == (
                    "resolved", f"sku:{line.sku}")
                assert lock["lock"]["live"] == {"held": False}  # released when the line was
    finally:
        server.stop()
