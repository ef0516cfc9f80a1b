"""The dashboard's actions (docs/dashboard.md, "Actions"): retry, undo, cancel and resume
through the API on memory and Redis, the engine's refusals as 4xx answers, and the token
they need."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Input, Reactor, input, registry, step
from reactor.config import Runtime
from reactor.dashboard import actions
from tests.dashboard.conftest import Api
from tests.dashboard.reactors import Interrupted, Review, Shop, controls

SECRET = "tok_SECRET_visa_4242"


def _failed_shop() -> str:
    controls["ship_fails"] = True
    failed = Shop.run(order_id="o-1", items=["a"], card_token=SECRET)
    controls["ship_fails"] = False
    assert not failed.success
    return str(failed.run_id)


def test_actions_need_the_token(memory: Runtime, api: Api, read_only_api: Api) -> None:
    run_id = _failed_shop()
    anonymous = api.post(f"/api/runs/{run_id}/retry", token=None)
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"
    wrong = api.post(f"/api/runs/{run_id}/retry", token="not-the-token")
    assert wrong.status_code == 401 and wrong.json()["error"] == "bad_token"
    refused = read_only_api.post(f"/api/runs/{run_id}/retry", token="anything-at-all")
    assert refused.status_code == 403 and refused.json()["error"] == "read_only"
    assert read_only_api.json(f"/api/runs/{run_id}")["actions"]["retry"] == {
        "enabled": False,
        "reason": "the dashboard is read-only (start it with a token to enable actions)",
    }
    assert read_only_api.json("/api/capabilities")["read_only"] is True
    assert api.json(f"/api/runs/{run_id}")["status"] == "failed"  # nothing was retried


def test_retry_starts_a_new_run_linked_both_ways(backend: Runtime, api: Api) -> None:
    old = _failed_shop()
    response = api.post(f"/api/runs/{old}/retry")
    assert response.status_code == 200, response.text
    done = response.json()
    new = done["run_id"]
    assert new != old and done["retried_from"] == old and done["status"] == "completed"
    assert api.json(f"/api/runs/{new}")["links"]["retried_from"] == old
    assert api.json(f"/api/runs/{old}")["links"]["retries"] == [new]

    again = api.post(f"/api/runs/{new}/retry")
    assert again.status_code == 409 and again.json()["error"] == "not_applicable"
    missing = api.post("/api/runs/no-such-run/retry")
    assert missing.status_code == 404


def test_undo_finishes_an_aborted_runs_rollback(backend: Runtime, api: Api) -> None:
    with pytest.raises(KeyboardInterrupt) as caught:
        Interrupted.run(order_id="o-2")
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    response = api.post(f"/api/runs/{run_id}/undo")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    run = api.json(f"/api/runs/{run_id}")
    assert run["pending_compensation"] is None and run["undo_stack"] == []
    types = [(e["type"], e["step"]) for e in run["trace"]]
    assert ("compensate", "charge") in types and ("undo", "reserve") in types


def test_resume_continues_a_paused_run(backend: Runtime, api: Api) -> None:
    paused = Review.run(order_id="r-1")
    response = api.post(f"/api/runs/{paused.run_id}/resume",
                        {"payload": {"approved": True}, "step": "approval"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
    results = api.json(f"/api/runs/{paused.run_id}")["results"]
    assert results["finish"] == "approved: {'approved': True}"
    again = api.post(f"/api/runs/{paused.run_id}/resume", {"payload": 1})
    assert again.status_code == 409
    bad = api.post(f"/api/runs/{paused.run_id}/resume", {"payload": 1, "extra": 2})
    assert bad.status_code == 422 and bad.json()["fields"] == ["extra"]


@pytest.mark.parametrize("loose", ["no", "false", 0, "0"])
def test_cancel_refuses_a_rollback_flag_that_is_not_a_boolean(
    backend: Runtime, api: Api, loose: object
) -> None:
    # a lax "no" or 0 would cancel without rolling anything back
    paused = Review.run(order_id=f"r-loose-{loose}")
    response = api.post(f"/api/runs/{paused.run_id}/cancel", {"rollback": loose})
    assert response.status_code == 422 and response.json()["fields"] == ["rollback"]
    assert api.json(f"/api/runs/{paused.run_id}")["status"] == "paused"


def test_cancel_stops_a_paused_run_when_reactor_has_cancel(backend: Runtime, api: Api) -> None:
    paused = Review.run(order_id="r-2")
    response = api.post(f"/api/runs/{paused.run_id}/cancel",
                        {"reason": "customer called", "rollback": True})
    if not actions.cancel_supported():
        assert response.status_code == 409 and response.json()["error"] == "unsupported"
        return
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    cancelled = api.json(f"/api/runs/{paused.run_id}")
    assert cancelled["status"] == "cancelled"
    assert cancelled["cancel"]["reason"] == "customer called"
    finished = api.post(f"/api/runs/{paused.run_id}/cancel")
    assert finished.status_code in (200, 409)  # idempotent, or refused as finished


class Ghost(Reactor, name="tests.dashboard.ghost"):
    """Unregistered by its test, like a reactor the dashboard process never imported."""

    order_id = Input(str)

    @step(order_id=input("order_id"))
    def fail(inputs: Any, ctx: Any) -> str:
        raise ValueError("always")


def test_a_reactor_the_dashboard_did_not_import(memory: Runtime, api: Api) -> None:
    failed = Ghost.run(order_id="g-1")
    registry.unregister(Ghost.reactor_name)
    try:
        run = api.json(f"/api/runs/{failed.run_id}")
        assert run["graph"] is None and "--import" in run["definition_error"]
        assert run["coordination"]["available"] is False
        assert run["trace"] and run["failure"]["error"] == "always"
        refused = api.post(f"/api/runs/{failed.run_id}/retry")
        assert refused.status_code == 409
        assert refused.json()["error"] == "reactor_not_imported"
    finally:
        registry.register(Ghost.reactor_name, Ghost)
