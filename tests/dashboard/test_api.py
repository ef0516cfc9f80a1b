"""The dashboard's JSON API on memory and Redis (docs/dashboard.md, "API"): the runs list with
its cursors and filters, the run detail (masked values, map summaries, step graph, trace with
async-step runs merged, composed children, failure and rollback, pending compensation,
interrupts), map elements, queues and dead letters, and the error answers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from reactor import Worker
from reactor.config import Runtime
from reactor.errors import StorageError
from reactor.ports.router import Job
from tests.dashboard.conftest import Api
from tests.dashboard.reactors import Fetcher, Interrupted, Review, Shop, controls

SECRET = "tok_SECRET_visa_4242"


def _shop(order: str, items: list[str] | None = None) -> Any:
    return Shop.run(order_id=order, items=items or ["a", "b"], card_token=SECRET)


def _walk(api: Api, **params: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = None
    for _ in range(50):
        page = api.json("/api/runs", **params, **({"cursor": cursor} if cursor else {}))
        rows.extend(page["runs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return rows
    raise AssertionError("the cursor walk did not end")


# ---- runs list -------------------------------------------------------------------------------


def test_the_runs_list_pages_newest_first_and_filters(backend: Runtime, api: Api) -> None:
    done = [_shop(f"o-{i}") for i in range(3)]
    controls["ship_fails"] = True
    failed = [_shop(f"f-{i}") for i in range(2)]
    controls["ship_fails"] = False
    middle = time.time()
    paused = Review.run(order_id="r-1")
    ids = [r.run_id for r in (*done, *failed, paused)]

    rows = _walk(api, limit=2)
    assert [r["run_id"] for r in rows] == list(reversed(ids))
    assert {r["reactor"] for r in rows} == {Shop.reactor_name, Review.reactor_name}

    assert [r["run_id"] for r in _walk(api, status="failed", limit=1)] == [
        r.run_id for r in reversed(failed)]
    assert [r["run_id"] for r in _walk(api, status="failed,paused")] == [
        paused.run_id, *(r.run_id for r in reversed(failed))]
    assert [r["run_id"] for r in _walk(api, reactor=Review.reactor_name)] == [paused.run_id]
    assert [r["run_id"] for r in _walk(api, **{"from": str(middle)})] == [paused.run_id]
    assert [r["run_id"] for r in _walk(api, to=str(middle), status="completed")] == [
        r.run_id for r in reversed(done)]
    assert api.json("/api/runs", status="halted") == {"runs": [], "next_cursor": None}


@pytest.mark.parametrize("params, code", [
    ({"cursor": "not-a-cursor"}, "bad_cursor"),
    ({"status": "sleeping"}, "bad_filter"),
    ({"from": "yesterday-ish"}, "bad_filter"),
    ({"to": "nan"}, "bad_filter"),
])
def test_bad_cursors_and_filters_are_400_json(
    memory: Runtime, api: Api, params: dict[str, str], code: str
) -> None:
    response = api.get("/api/runs", **params)
    assert response.status_code == 400
    assert response.json()["error"] == code
    assert "Traceback" not in response.text


def test_a_limit_out_of_range_is_refused_by_name(memory: Runtime, api: Api) -> None:
    response = api.get("/api/runs", limit="0")
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid_request" and body["fields"] == ["limit"]


# ---- run detail ------------------------------------------------------------------------------


def test_a_failed_orders_detail_shows_its_graph_rollback_and_maps(
    backend: Runtime, api: Api
) -> None:
    controls["ship_fails"] = True
    failed = Shop.run(order_id="o-9", items=["a", "bad-1", "b"], card_token=SECRET)
    response = api.get(f"/api/runs/{failed.run_id}")
    assert response.status_code == 200
    assert SECRET not in response.text and "Traceback" not in response.text
    run = response.json()

    assert run["status"] == "failed" and run["reactor"] == Shop.reactor_name
    assert run["inputs"]["card_token"] == "[REDACTED]"
    assert run["inputs"]["items"] == ["a", "bad-1", "b"]
    assert run["failure"]["step"] == "ship" and run["failure"]["error"] == "carrier down"
    assert run["failure"]["rollback_failures"] == []
    assert run["attempts"]["ship"] == 2
    assert run["undo_stack"] == []

    trace = [(e["type"], e["step"]) for e in run["trace"]]
    assert ("failed", "ship") in trace
    assert trace.index(("undo", "payment")) < trace.index(("undo", "reserve"))
    assert [e["at"] for e in run["trace"]] == sorted(e["at"] for e in run["trace"])

    nodes = {n["name"]: n for n in run["graph"]["nodes"]}
    assert nodes["payment"]["depends_on"] == ["reserve"]
    assert nodes["ship"]["state"] == "failed" and nodes["payment"]["state"] == "undone"
    assert nodes["reserve"]["kind"] == "map" and nodes["reserve"]["atomic"] is False
    assert [c["name"] for c in nodes["payment"]["children"]["nodes"]] == ["authorize",
                                                                         "capture"]
    assert nodes["payment"]["children"]["reactor"] == "tests.dashboard.pay"

    (summary,) = run["maps"]
    assert summary["step"] == "reserve" and summary["count"] == 3
    assert summary["counts"]["failed"] == 1
    assert summary["counts"]["succeeded"] + summary["counts"]["undone"] == 2
    (bad,) = summary["failures"]
    assert bad["index"] == 1 and "out of stock" in bad["error"]

    child = run["children"]["payment"]
    assert child["reactor"] == "tests.dashboard.pay" and child["inputs"]["card_token"] == (
        "[REDACTED]")
    assert [(e["type"], e["step"]) for e in child["trace"]][:2] == [("run", "authorize"),
                                                                    ("run", "capture")]
    assert run["actions"]["retry"] == {"enabled": True, "reason": None}
    assert run["actions"]["undo"]["enabled"] is False


def test_a_maps_elements_page_by_outcome_with_their_runs(backend: Runtime, api: Api) -> None:
    shop = Shop.run(order_id="o-m", items=["a", "bad-1", "b", "bad-2"], card_token=SECRET)
    failed = api.json(f"/api/runs/{shop.run_id}/maps/reserve", outcome="failed")
    assert [e["index"] for e in failed["elements"]] == [1, 3]
    assert failed["next_offset"] is None
    element = api.json(f"/api/runs/{failed['elements'][0]['run_id']}")
    assert element["map_element"]["index"] == 1 and element["status"] == "failed"
    assert element["parent_run_id"] == shop.run_id

    first = api.json(f"/api/runs/{shop.run_id}/maps/reserve", limit=1)
    assert [e["index"] for e in first["elements"]] == [0] and first["next_offset"] == 1
    rest = api.json(f"/api/runs/{shop.run_id}/maps/reserve", offset=1, limit=10)
    assert [e["index"] for e in rest["elements"]] == [1, 2, 3]

    assert api.get(f"/api/runs/{shop.run_id}/maps/payment").status_code == 404
    assert api.get(f"/api/runs/{shop.run_id}/maps/reserve", outcome="odd").status_code == 400


def test_a_paused_run_shows_its_interrupt(backend: Runtime, api: Api) -> None:
    paused = Review.run(order_id="r-7")
    run = api.json(f"/api/runs/{paused.run_id}")
    assert run["status"] == "paused"
    assert run["interrupt"]["step"] == "approval"
    nodes = {n["name"]: n["state"] for n in run["graph"]["nodes"]}
    assert nodes == {"hold": "completed", "approval": "paused", "finish": "pending"}
    assert run["actions"]["resume"]["enabled"] is True


def test_a_suspended_run_shows_who_held_it_why_and_its_deadline(
    backend: Runtime, api: Api
) -> None:
    paused = Review.run(order_id="r-8", deadline=3600)
    assert paused.run_id is not None
    assert Review.suspend(paused.run_id, reason="carrier incident", by="alice") == "suspended"
    run = api.json(f"/api/runs/{paused.run_id}")
    assert run["status"] == "suspended"
    assert run["suspension"]["by"] == "alice" and run["suspension"]["resume"] == "paused"
    assert run["suspension"]["reason"] == "carrier incident"
    assert run["deadline"] == pytest.approx(run["created_at"] + 3600, abs=5)
    assert run["actions"]["cancel"]["enabled"] is True
    page = api.get(f"/runs/{paused.run_id}")
    assert page.status_code == 200
    assert "Suspended by an operator" in page.text and "alice" in page.text
    assert "carrier incident" in page.text


def test_an_async_steps_run_is_merged_into_the_trace_by_start_time(
    backend: Runtime, api: Api
) -> None:
    parent = Fetcher.run(supplier="acme")
    assert parent.success
    Worker(backend).run_pending()
    run = api.json(f"/api/runs/{parent.run_id}")
    unit = run["async_steps"]["fetch"]
    assert unit["status"] == "completed" and unit["attempts"] == 1
    assert unit["outcome"] == {"status": "success", "value": "fetched from acme"}
    merged = [e for e in run["trace"] if e["step"] == "fetch" and e["type"] == "run"]
    assert len(merged) == 1 and merged[0]["background"] is True
    assert [e["at"] for e in run["trace"]] == sorted(e["at"] for e in run["trace"])
    assert run["attempts"]["fetch"] == 1
    assert {n["name"]: n["state"] for n in run["graph"]["nodes"]}["fetch"] == "completed"


def test_an_aborted_run_shows_its_pending_compensation(backend: Runtime, api: Api) -> None:
    with pytest.raises(KeyboardInterrupt) as caught:
        Interrupted.run(order_id="o-1")
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    run = api.json(f"/api/runs/{run_id}")
    assert run["status"] == "aborted"
    assert run["pending_compensation"]["step"] == "charge"
    assert run["pending_compensation"]["compensate_pending"] is True
    assert [u["step"] for u in run["undo_stack"]] == ["reserve"]
    assert run["actions"]["undo"]["enabled"] is True


# ---- queues and dead letters -----------------------------------------------------------------


def test_queues_and_dead_letters_with_requeue_and_purge(backend: Runtime, api: Api) -> None:
    for _ in range(2):
        backend.router.enqueue(Job(kind="no-such-kind", payload={"context_id": "r-1"}))
    Worker(backend).run_pending()
    overview = api.json("/api/queues")
    assert overview["dead_letter_admin"] is True
    if overview["inspectable"]:
        assert overview["stats"]["dead_letters"] == 2
    letters = api.json("/api/dead-letters")
    assert len(letters["dead_letters"]) == 2 and letters["pageable"] is True
    first = letters["dead_letters"][0]
    assert first["job"]["kind"] == "no-such-kind" and first["job"]["run_id"] == "r-1"
    assert "no-such-kind" in first["reason"]
    page = api.json("/api/dead-letters", limit=1)
    assert [d["id"] for d in page["dead_letters"]] == [first["id"]]
    assert page["next_cursor"] == first["id"]
    assert api.json(f"/api/dead-letters/{first['id']}")["id"] == first["id"]

    requeued = api.post(f"/api/dead-letters/{first['id']}/requeue")
    assert requeued.status_code == 200 and requeued.json()["job_id"]
    assert api.get(f"/api/dead-letters/{first['id']}").status_code == 404
    assert api.post(f"/api/dead-letters/{first['id']}/requeue").status_code == 404
    purged = api.post("/api/dead-letters/purge", {"all": True})
    assert purged.json() == {"purged": 1}
    assert api.post("/api/dead-letters/purge", {"all": True, "ids": ["x"]}).status_code == 400
    assert api.json("/api/dead-letters")["dead_letters"] == []


# ---- errors ----------------------------------------------------------------------------------


def test_unknown_and_malformed_ids_are_4xx_json(memory: Runtime, api: Api) -> None:
    missing = api.get("/api/runs/no-such-run")
    assert missing.status_code == 404 and missing.json()["error"] == "run_not_found"
    control = api.get("/api/runs/bad%07id")
    assert control.status_code == 400 and control.json()["error"] == "bad_id"
    assert api.get("/api/runs/" + "x" * 300).status_code == 422
    assert api.get("/api/no-such-endpoint").json()["error"] == "not_found"
    assert api.client.delete("/api/runs/x").status_code == 405


def test_an_unexpected_failure_is_a_bare_500(
    memory: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _shop("o-500")

    def broken(*args: Any) -> Any:
        raise RuntimeError("internal detail that must not leak")

    monkeypatch.setattr("reactor.dashboard.api.run_detail", broken)
    response = api.get(f"/api/runs/{run.run_id}")
    assert response.status_code == 500
    assert response.json() == {"error": "internal", "message": "internal error"}
    assert "internal detail" not in response.text


def test_a_failing_backend_is_a_503(
    memory: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _shop("o-503")

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("connection refused")

    monkeypatch.setattr(memory.storage.contexts, "load", down)
    monkeypatch.setattr(memory.storage.contexts, "page", down)
    for path in (f"/api/runs/{run.run_id}", "/api/runs", f"/api/runs/{run.run_id}/coordination"):
        response = api.get(path)
        assert response.status_code == 503, path
        assert response.json()["error"] == "backend_unavailable"
    monkeypatch.setattr(memory.router, "dead_letters", down)
    assert api.get("/api/dead-letters").status_code == 503


def test_the_schema_lists_every_endpoint(memory: Runtime, api: Api) -> None:
    schema = api.json("/api/openapi.json")
    assert set(schema["paths"]) == {
        "/api/capabilities", "/api/runs", "/api/runs/{run_id}",
        "/api/runs/{run_id}/coordination", "/api/runs/{run_id}/maps/{step}",
        "/api/runs/{run_id}/retry", "/api/runs/{run_id}/undo", "/api/runs/{run_id}/cancel",
        "/api/runs/{run_id}/resume", "/api/runs/{run_id}/suspend",
        "/api/runs/{run_id}/unsuspend", "/api/runs/{run_id}/rewind", "/api/queues",
        "/api/dead-letters",
        "/api/dead-letters/purge", "/api/dead-letters/{letter_id}",
        "/api/dead-letters/{letter_id}/requeue", "/api/schedules",
        "/api/schedules/{name}/pause", "/api/schedules/{name}/resume",
    }
    capabilities = api.json("/api/capabilities")
    assert capabilities["read_only"] is False and "retry" in capabilities["actions"]
