"""``./scripts/demo --workers 2``: the order-fulfilment runs in background workers, payment
capture as an ``async_step``; the same invariant check must hold."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console

from examples.order_fulfilment.run import load_orders, main, run_demo
from examples.order_fulfilment.saga_workers import FulfilInWorkers
from examples.order_fulfilment.services import Services
from reactor import config
from reactor.engine.async_step import outcome_of
from reactor.model.results import Success

LIMIT = 120


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def test_worker_mode_keeps_every_invariant_and_captures_through_the_unit() -> None:
    orders = load_orders(limit=LIMIT)
    services = Services.create()
    report = run_demo(orders, services, workers=2)
    assert report.violations == []
    assert report.workers == 2 and report.retry_sleeps == []  # nothing sleeps in workers
    # the delays the workers scheduled are read back from the runs' retry trace entries
    traced = [e for o in report.outcomes if o.run_id is not None
              for e in FulfilInWorkers.find(o.run_id).trace if e.type == "retry"]
    assert len(report.worker_retry_delays) == len(traced) > 0
    assert all(delay > 0 for delay in report.worker_retry_delays)
    counts = report.counts()
    assert counts["completed"] + counts["failed"] == LIMIT
    assert counts["completed"] > 0 and counts["failed"] > 0
    storage = config.current().storage
    for outcome in report.outcomes:
        assert outcome.run_id is not None
        view = FulfilInWorkers.find(outcome.run_id)
        assert view.status == outcome.status
        record = storage.step_results.get(outcome.run_id, "capture")
        if outcome.status == "completed":
            # the capture ran as its own unit, and its value reached send_confirmation
            assert record is not None and record.status == "completed"
            captured = outcome_of(record)
            assert isinstance(captured, Success)
            assert captured.value["id"] == view.results["send_confirmation"]["capture_id"]
        else:
            assert record is None  # failed before the capture: never dispatched


def test_main_with_workers_prints_the_summary_and_passes_the_invariants() -> None:
    out = io.StringIO()
    code = main(["--limit", "60", "--workers", "2"], console=Console(file=out, width=160))
    text = out.getvalue()
    assert code == 0, text
    assert "Invariants hold" in text and "orders processed" in text
    assert "background workers (2 worker threads)" in text
    assert "retry delays scheduled in workers (s)" in text
    assert "in-process retry sleep" not in text


def test_main_rejects_a_negative_worker_count() -> None:
    with pytest.raises(SystemExit):
        main(["--workers", "-1"], console=Console(file=io.StringIO()))
