"""``./scripts/demo --dashboard`` (docs/dashboard.md, "Running it", "Schedules"): the demo runs
with its own options, then the dashboard is served on the runtime holding its runs, with the
example's ``settlement`` schedule running beside it (docs/schedules.md, "Schedules"): its first
scheduled run has finished, and is listed with its last and next ticks, when the dashboard
comes up."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from examples.order_fulfilment import dashboard
from examples.order_fulfilment.schedules import (
    PERIOD_SECONDS,
    SETTLEMENT,
    Settlement,
    start_settlement,
)
from examples.order_fulfilment.services import SERVICES, Services
from reactor import RunStatus, config
from reactor.dashboard import start_dashboard
from reactor.memory import LocalRouter, MemoryStorage
from reactor.schedules import declared, unregister


def _listed(runtime: Any) -> dict[str, Any]:
    """What a dashboard on ``runtime`` shows of the schedules: the API's rows and the page."""
    server = start_dashboard(runtime)
    try:
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            rows = client.get("/api/schedules").json()["schedules"]
            page = client.get("/schedules").text
    finally:
        server.stop()
    return {"rows": {r["name"]: r for r in rows}, "page": page}


def test_the_demo_runs_then_its_runs_and_a_scheduled_run_are_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served: dict[str, Any] = {}
    demo_args: list[Any] = []

    def fake_demo(argv: Any) -> int:
        demo_args.append(list(argv))
        return 0

    def fake_serve(runtime: Any, **options: Any) -> None:
        served.update(runtime=runtime, listed=_listed(runtime), **options)

    monkeypatch.setattr(dashboard, "run_demo_main", fake_demo)
    monkeypatch.setattr(dashboard, "serve", fake_serve)
    try:
        code = dashboard.main(["--limit", "5", "--port", "9001", "--token", "demo-token-1"])
        assert code == 0 and demo_args == [["--limit", "5"]]
        assert served["runtime"] is config.current()
        assert (served["host"], served["port"], served["token"]) == (
            "127.0.0.1", 9001, "demo-token-1")
        assert dashboard.SERVICES.get() is not None  # a retry from the page finds services
        row = served["listed"]["rows"]["settlement"]
        assert row["reactor"] == Settlement.reactor_name and row["spec"] == "every 60 s"
        assert row["last_action"] == "run" and row["last_run_status"] == "completed"
        assert row["last_tick"] is not None and row["next_tick"] > row["last_tick"]
        assert f'href="/runs/{row["last_run_id"]}"' in served["listed"]["page"]
        run = Settlement.find(row["last_run_id"])
        assert run.idempotency_key is not None and "schedule:settlement:" in run.idempotency_key
    finally:
        dashboard.SERVICES.install(None)
        unregister(SETTLEMENT.name)
        config.reset()


def test_the_settlement_runs_every_period_once_per_tick() -> None:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    SERVICES.install(Services.create())
    scheduled = start_settlement(runtime)
    try:
        first = scheduled.wait_first_run(timeout=60)
        assert first.last_run_status is RunStatus.COMPLETED and first.last_tick is not None
        assert first.next_tick is not None and first.next_tick > first.last_tick
        assert first.last_tick % PERIOD_SECONDS == 0 == first.next_tick % PERIOD_SECONDS
        done = Settlement.find(first.last_run_id)  # type: ignore[arg-type]
        assert done.results["settle"] == {
            "tick": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(first.last_tick)),
            "captures": 0, "total": "0"}
        assert SETTLEMENT.name in declared()
        again = start_settlement(runtime)  # declared again: no change
        try:  # a pass at the settled tick starts nothing: one run per tick
            assert again.scheduler.tick(first.last_tick + 1) == []
        finally:
            again.stop()
    finally:
        scheduled.stop()
        SERVICES.install(None)
        unregister(SETTLEMENT.name)
        config.reset()
