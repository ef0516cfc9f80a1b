"""The dashboard's operator actions (docs/dashboard.md, "Actions"; docs/operations.md,
"Suspend and unsuspend", "Pause, rewind, fork"): suspend and unsuspend a run, and for a run
held ``failed_paused`` the hold shown with rewind (from the failed step or a completed one)
and cancel; through the API on memory and Redis and through the run page's forms, which need
the session and its CSRF token exactly as the other actions do. Hostile requests answer a
clear error and change nothing."""

from __future__ import annotations

import re
from typing import Any

import httpx

from reactor import Background, Reactor, Retries, step
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from tests.dashboard.conftest import TOKEN, Api
from tests.dashboard.reactors import Review
from tests.engine.recovery_reactors import Journal, chain


def _held(journal: Journal) -> tuple[Any, str]:
    """A run of ``a -> b -> c`` held ``failed_paused`` at ``c``."""
    flow = chain(journal)
    out = flow.run()
    assert out.run_id is not None
    return flow, out.run_id


def _login(client: httpx.Client, run_id: str) -> str:
    """Sign ``client`` in; the CSRF token of the run page of ``run_id``."""
    signed = client.post("/login", data={"token": TOKEN, "next": f"/runs/{run_id}"})
    assert signed.status_code == 303
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get(f"/runs/{run_id}").text)
    assert found, "the page carries no CSRF token"
    return found.group(1)


# ---- API, memory and Redis --------------------------------------------------------------------


def test_suspend_and_unsuspend_a_paused_run(backend: Runtime, api: Api) -> None:
    paused = Review.run(order_id="s-1")
    assert api.json(f"/api/runs/{paused.run_id}")["actions"]["suspend"]["enabled"] is True
    done = api.post(f"/api/runs/{paused.run_id}/suspend", {"reason": "incident", "by": "alice"})
    assert done.status_code == 200, done.text
    assert done.json() == {"run_id": paused.run_id, "status": "suspended",
                           "outcome": "suspended"}
    run = api.json(f"/api/runs/{paused.run_id}")
    assert run["suspension"]["reason"] == "incident" and run["suspension"]["by"] == "alice"
    assert run["actions"]["unsuspend"]["enabled"] is True
    assert run["actions"]["suspend"]["enabled"] is False
    listed = api.json("/api/runs", status="suspended")["runs"]
    assert [r["run_id"] for r in listed] == [paused.run_id]
    back = api.post(f"/api/runs/{paused.run_id}/unsuspend")
    assert back.status_code == 200, back.text
    assert back.json()["status"] == "paused"  # back at its interrupt
    again = api.post(f"/api/runs/{paused.run_id}/unsuspend")
    assert again.status_code == 409 and again.json()["error"] == "not_applicable"


def test_suspend_without_a_by_records_the_dashboard(backend: Runtime, api: Api) -> None:
    paused = Review.run(order_id="s-2")
    assert api.post(f"/api/runs/{paused.run_id}/suspend").status_code == 200
    assert api.json(f"/api/runs/{paused.run_id}")["suspension"]["by"] == "dashboard"


def test_a_held_run_shows_its_hold_is_listed_and_rewinds_once_fixed(
    backend: Runtime, api: Api,
) -> None:
    journal = Journal()
    flow, run_id = _held(journal)
    run = api.json(f"/api/runs/{run_id}")
    assert run["status"] == "failed_paused"
    hold = run["failure_hold"]
    assert (hold["step"], hold["kind"], hold["compensate_pending"]) == ("c", "step", True)
    assert hold["attempt"] == 1  # no retries declared: its one attempt
    assert run["failure"]["step"] == "c" and "bug in c" in run["failure"]["error"]
    assert run["rewind_steps"] == ["c", "a", "b"]  # the failed step first
    acts = run["actions"]
    assert acts["rewind"]["enabled"] and acts["cancel"]["enabled"]
    assert not acts["suspend"]["enabled"] and not acts["retry"]["enabled"]
    listed = api.json("/api/runs", status="failed_paused")["runs"]
    assert [r["run_id"] for r in listed] == [run_id]
    assert api.json("/api/runs", status="failed")["runs"] == []
    journal.broken = False  # the bug is fixed
    done = api.post(f"/api/runs/{run_id}/rewind", {"reason": "fixed", "by": "ops"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert journal.events == ["run a", "run b", "run c", "run c"]
    assert flow.find(run_id).status.value == "completed"


def test_rewind_from_a_completed_step_undoes_it_first(backend: Runtime, api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    journal.broken = False
    done = api.post(f"/api/runs/{run_id}/rewind", {"from_step": "b"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert journal.events == ["run a", "run b", "run c", "undo b", "run b", "run c"]


def test_cancel_rolls_a_held_run_back_once(backend: Runtime, api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    done = api.post(f"/api/runs/{run_id}/cancel", {"reason": "give up"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "cancelled"
    assert journal.events == ["run a", "run b", "run c", "compensate c", "undo b", "undo a"]


def test_hostile_requests_answer_clearly_and_change_nothing(backend: Runtime, api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    unknown_run = api.post("/api/runs/no-such-run/rewind")
    assert unknown_run.status_code == 404
    unknown_step = api.post(f"/api/runs/{run_id}/rewind", {"from_step": "nope"})
    assert unknown_step.status_code == 400 and unknown_step.json()["error"] == "bad_argument"
    assert "nope" in unknown_step.json()["message"]
    control = api.post(f"/api/runs/{run_id}/rewind", {"from_step": "a\x00"})
    assert control.status_code == 400
    too_long = api.post(f"/api/runs/{run_id}/suspend", {"reason": "x" * 1001})
    assert too_long.status_code == 422
    extra = api.post(f"/api/runs/{run_id}/rewind", {"step": "a"})
    assert extra.status_code == 422  # unknown fields are refused, not ignored
    held = api.post(f"/api/runs/{run_id}/suspend")  # held already: rewind, fork or cancel
    assert held.status_code == 409 and held.json()["error"] == "not_applicable"
    not_suspended = api.post(f"/api/runs/{run_id}/unsuspend")
    assert not_suspended.status_code == 409
    paused = Review.run(order_id="h-1")
    not_held = api.post(f"/api/runs/{paused.run_id}/rewind")
    assert not_held.status_code == 409 and "failed_paused" in not_held.json()["message"]
    assert api.json(f"/api/runs/{paused.run_id}")["status"] == "paused"
    run = api.json(f"/api/runs/{run_id}")
    assert run["status"] == "failed_paused" and run["failure_hold"]["step"] == "c"
    assert journal.events == ["run a", "run b", "run c"]  # nothing ran, nothing undone


def test_the_new_actions_need_the_token(memory: Runtime, api: Api, read_only_api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    paused = Review.run(order_id="t-1")
    paths = (f"/api/runs/{run_id}/rewind", f"/api/runs/{paused.run_id}/suspend",
             f"/api/runs/{paused.run_id}/unsuspend")
    for path in paths:
        anonymous = api.post(path, token=None)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"
        refused = read_only_api.post(path, token="anything")
        assert refused.status_code == 403 and refused.json()["error"] == "read_only"
    # one wrong token only: more would throttle this client address for the next tests
    wrong = api.post(paths[0], token="not-the-token")
    assert wrong.status_code == 401 and wrong.json()["error"] == "bad_token"
    assert read_only_api.json(f"/api/runs/{run_id}")["actions"]["rewind"]["enabled"] is False
    assert api.json(f"/api/runs/{run_id}")["status"] == "failed_paused"
    assert api.json(f"/api/runs/{paused.run_id}")["status"] == "paused"
    assert journal.events == ["run a", "run b", "run c"]


# ---- the run page's forms ---------------------------------------------------------------------


def test_the_page_suspends_and_unsuspends_with_session_and_csrf(memory: Runtime, api: Api) -> None:
    paused = Review.run(order_id="f-1")
    client = api.client
    page = client.get(f"/runs/{paused.run_id}")
    assert 'id="suspend-form"' in page.text and 'id="action-suspend" disabled' in page.text
    action = f"/runs/{paused.run_id}/actions/suspend"
    assert client.post(action, data={"reason": "x"}).status_code == 401  # not signed in
    csrf = _login(client, paused.run_id)
    forged = client.post(action, data={"csrf_token": "0" * 64, "reason": "x"})
    assert forged.status_code == 403 and forged.json()["error"] == "bad_csrf"
    assert client.post(action, data={"reason": "x"}).status_code == 403  # no CSRF token
    assert api.json(f"/api/runs/{paused.run_id}")["status"] == "paused"  # nothing changed
    done = client.post(action, data={"csrf_token": csrf, "reason": "carrier incident",
                                     "by": "alice"})
    assert done.status_code == 303 and "notice=suspended" in done.headers["location"]
    shown = client.get(done.headers["location"]).text
    assert 'id="suspension"' in shown and "carrier incident" in shown
    assert 'id="unsuspend-form"' in shown and 'id="suspend-form"' not in shown
    back = client.post(f"/runs/{paused.run_id}/actions/unsuspend", data={"csrf_token": csrf})
    assert back.status_code == 303 and "notice=unsuspended" in back.headers["location"]
    assert api.json(f"/api/runs/{paused.run_id}")["status"] == "paused"


def test_the_page_shows_a_hold_and_rewinds_from_a_picked_step(memory: Runtime, api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    client = api.client
    csrf = _login(client, run_id)
    page = client.get(f"/runs/{run_id}").text
    assert 'id="failure-hold"' in page and 'id="hold-step">c<' in page
    assert 'id="not-rolled-back"' in page and 'id="rolled-back"' not in page
    assert '<option value="c" selected>c (failed)</option>' in page
    assert '<option value="a">a</option>' in page
    assert 'id="action-cancel"' in page and 'id="action-cancel" disabled' not in page
    action = f"/runs/{run_id}/actions/rewind"
    assert client.post(action, data={"from_step": "a"}).status_code == 403  # no CSRF token
    bad = client.post(action, data={"csrf_token": csrf, "from_step": "nope"})
    assert bad.status_code == 400 and 'id="problem">rewind: ' in bad.text
    assert "nope" in bad.text and 'id="failure-hold"' in bad.text  # still held
    missing = client.post("/runs/no-such-run/actions/rewind", data={"csrf_token": csrf})
    assert missing.status_code == 404
    assert journal.events == ["run a", "run b", "run c"]
    journal.broken = False
    done = client.post(action, data={"csrf_token": csrf, "from_step": "a"})
    assert done.status_code == 303 and "notice=rewound" in done.headers["location"]
    assert api.json(f"/api/runs/{run_id}")["status"] == "completed"
    assert journal.events == ["run a", "run b", "run c", "undo b", "undo a",
                              "run a", "run b", "run c"]


def test_the_page_cancels_a_held_run(memory: Runtime, api: Api) -> None:
    journal = Journal()
    _, run_id = _held(journal)
    client = api.client
    csrf = _login(client, run_id)
    done = client.post(f"/runs/{run_id}/actions/cancel", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert api.json(f"/api/runs/{run_id}")["status"] == "cancelled"
    assert journal.count("undo a") == 1 and journal.count("compensate c") == 1


def test_a_suspended_background_run_goes_on_in_a_worker_after_unsuspend(
    memory: Runtime, api: Api,
) -> None:
    journal = Journal()
    journal.broken = False
    flow = chain(journal, handed=Background(all=True))
    handle = flow.run()
    assert api.post(f"/api/runs/{handle.run_id}/suspend").json()["outcome"] == "suspended"
    Worker(memory, liveness_wait=0.0).run_pending()  # its job finds it suspended
    assert journal.events == []
    assert api.post(f"/api/runs/{handle.run_id}/unsuspend").json()["status"] == "running"
    Worker(memory, liveness_wait=0.0).run_pending()
    assert api.json(f"/api/runs/{handle.run_id}")["status"] == "completed"
    assert journal.events == ["run a", "run b", "run c"]


class _Flaky(Reactor, name="tests.dashboard.operator.flaky"):
    """One step that fails on each of its two attempts, held on failure."""

    on_failure = "pause"

    @step(retries=Retries(max_attempts=2, base_delay=0.0))
    def charge(inputs: Any, ctx: Any) -> str:
        raise RuntimeError("gateway down")


def test_the_page_shows_the_attempt_a_held_step_failed_at(memory: Runtime, api: Api) -> None:
    out = _Flaky.run()
    run = api.json(f"/api/runs/{out.run_id}")
    assert run["failure_hold"]["attempt"] == 2
    page = api.client.get(f"/runs/{out.run_id}").text
    assert 'id="hold-attempt">2<' in page and "gateway down" in page
