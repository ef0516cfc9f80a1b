"""``./scripts/demo --dashboard`` (docs/dashboard.md, "Running it"): the demo runs with its own
options, then the dashboard is served on the runtime holding its runs."""

from __future__ import annotations

from typing import Any

import pytest

from examples.order_fulfilment import dashboard
from reactor import config


def test_the_demo_runs_then_its_runs_are_served(monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {}
    demo_args: list[Any] = []

    def fake_demo(argv: Any) -> int:
        demo_args.append(list(argv))
        return 0

    def fake_serve(runtime: Any, **options: Any) -> None:
        served.update(runtime=runtime, **options)

    monkeypatch.setattr(dashboard, "run_demo_main", fake_demo)
    monkeypatch.setattr(dashboard, "serve", fake_serve)
    try:
        code = dashboard.main(["--limit", "5", "--port", "9001", "--token", "demo-token-1"])
        assert code == 0 and demo_args == [["--limit", "5"]]
        assert served["runtime"] is config.current()
        assert (served["host"], served["port"], served["token"]) == (
            "127.0.0.1", 9001, "demo-token-1")
        assert dashboard.SERVICES.get() is not None  # a retry from the page finds services
    finally:
        dashboard.SERVICES.install(None)
        config.reset()
