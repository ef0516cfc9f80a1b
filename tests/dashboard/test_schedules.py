"""The schedules page and API (docs/dashboard.md, "Schedules"; docs/schedules.md, "Managing
schedules"): one row per schedule with its last and next ticks and its last run, on memory and
Redis; pause and resume through the API (bearer token) and the page's forms (session and CSRF
token, exactly as the run actions); a schedule whose reactor the dashboard never imported still
listed; hostile names escaped; an unknown schedule refused with a 404 and nothing changed."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from reactor import Input, Reactor, Worker, input, registry, step
from reactor.config import Runtime
from reactor.schedules import (
    Schedule,
    Scheduler,
    add_schedule,
    list_schedules,
    register,
    unregister,
)
from reactor.schedules.records import schedule_store
from tests.dashboard.conftest import TOKEN, Api

HOSTILE = "<script>alert('x')</script>"


class Settle(Reactor, name="tests.dashboard.settle"):
    """The scheduled reactor of these tests."""

    region = Input(str)

    @step(region=input("region"))
    def total(inputs: Any, ctx: Any) -> str:
        return f"settled {inputs.region}"


def _scheduled(runtime: Runtime, name: str = "nightly", every: int = 60) -> dict[str, Any]:
    """Store schedule ``name`` of :class:`Settle`, let a scheduler settle its first tick (a
    pass one period after it was added) and a worker run that tick's run; the run's id and
    the tick."""
    added = add_schedule(Schedule(Settle, every=every, args={"region": "eu"}, name=name,
                                  catchup="one"), runtime=runtime)
    assert added.last_run_id is None and added.next_tick is not None
    (outcome,) = Scheduler(runtime).tick(added.next_tick + 1)
    assert outcome.run_id is not None
    assert Worker(runtime).run_pending() >= 1
    return {"run_id": outcome.run_id, "tick": outcome.tick}


def _row(api: Api, name: str) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {
        r["name"]: r for r in api.json("/api/schedules")["schedules"]}
    return rows[name]


# ---- the listing, memory and Redis ------------------------------------------------------------


def test_no_schedules_is_an_empty_list(backend: Runtime, api: Api) -> None:
    assert api.json("/api/schedules") == {"schedules": [], "stores_schedules": True}
    page = api.get("/schedules")
    assert page.status_code == 200 and 'id="no-schedules"' in page.text
    assert 'id="nav-schedules"' in page.text


def test_a_schedule_is_listed_with_its_ticks_and_last_run(backend: Runtime, api: Api) -> None:
    done = _scheduled(backend)
    row = _row(api, "nightly")
    assert row["reactor"] == Settle.reactor_name and row["reactor_registered"] is True
    assert row["spec"] == "every 60 s" and row["source"] == "stored"
    assert row["paused"] is False and row["last_action"] == "run"
    assert row["last_tick"] == done["tick"]
    assert row["last_run_id"] == done["run_id"] and row["last_run_status"] == "completed"
    assert row["next_tick"] is not None and row["next_tick"] > row["last_tick"]
    assert (row["catchup"], row["overlap"]) == ("one", "skip")
    assert row["actions"] == {"pause": {"enabled": True, "reason": None},
                              "resume": {"enabled": False,
                                         "reason": "the schedule is not paused"}}
    page = api.get("/schedules").text
    assert f'href="/runs/{done["run_id"]}"' in page  # the last run links to its page
    assert "every 60 s" in page and "completed" in page
    assert api.json(f"/api/runs/{done['run_id']}")["status"] == "completed"


def test_a_schedule_of_a_reactor_not_imported_here_is_listed(backend: Runtime, api: Api) -> None:
    _scheduled(backend, name="elsewhere")
    registry.unregister(Settle.reactor_name)
    try:
        row = _row(api, "elsewhere")
        assert row["reactor"] == Settle.reactor_name and row["reactor_registered"] is False
        assert row["last_run_status"] == "completed" and row["next_tick"] is not None
        assert "not registered here" in api.get("/schedules").text
        paused = api.post("/api/schedules/elsewhere/pause")  # its stored state only
        assert paused.status_code == 200 and paused.json()["paused"] is True
    finally:
        registry.register(Settle.reactor_name, Settle)


def test_a_code_schedule_of_this_process_is_listed(memory: Runtime, api: Api) -> None:
    code = Schedule(Settle, cron="0 2 * * *", timezone="Europe/Paris", args={"region": "fr"},
                    name="paris-nightly")
    register(code)
    try:
        row = _row(api, "paris-nightly")
        assert row["source"] == "code" and row["timezone"] == "Europe/Paris"
        assert row["spec"] is not None and "0 2 * * *" in row["spec"]
        assert row["last_tick"] is None and row["next_tick"] is not None
        page = api.get("/schedules").text
        assert "Europe/Paris" in page and "(code)" in page
    finally:
        unregister("paris-nightly")


# ---- pause and resume through the API ---------------------------------------------------------


def test_pause_and_resume_through_the_api(
    backend: Runtime, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    _scheduled(backend)
    caplog.set_level(logging.INFO, logger="reactor.dashboard")
    paused = api.post("/api/schedules/nightly/pause")
    assert paused.status_code == 200, paused.text
    row = paused.json()
    assert row["paused"] is True and row["next_tick"] is None
    assert row["actions"]["resume"]["enabled"] is True
    assert _row(api, "nightly")["paused"] is True
    assert [v.paused for v in list_schedules(runtime=backend)] == [True]
    again = api.post("/api/schedules/nightly/pause")  # already paused: unchanged
    assert again.status_code == 200 and again.json()["paused"] is True
    resumed = api.post("/api/schedules/nightly/resume")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert resumed.json()["next_tick"] is not None
    logged = [r.getMessage() for r in caplog.records if r.name == "reactor.dashboard"]
    assert "event=schedule_paused schedule=nightly by=dashboard" in logged
    assert "event=schedule_resumed schedule=nightly by=dashboard" in logged


def test_an_unknown_or_malformed_schedule_is_refused_and_nothing_changes(
    backend: Runtime, api: Api
) -> None:
    _scheduled(backend)
    before = api.json("/api/schedules")
    missing = api.post("/api/schedules/no-such-schedule/pause")
    assert missing.status_code == 404
    assert missing.json() == {"error": "schedule_not_found",
                              "message": "no schedule named 'no-such-schedule'"}
    assert api.post("/api/schedules/no-such-schedule/resume").status_code == 404
    malformed = api.post("/api/schedules/%3Cscript%3E/pause")
    assert malformed.status_code == 400 and malformed.json()["error"] == "bad_id"
    assert api.post("/api/schedules/nightly/stop").status_code == 404  # no such action
    assert api.json("/api/schedules") == before


def test_the_schedule_actions_need_the_token(
    memory: Runtime, api: Api, read_only_api: Api
) -> None:
    _scheduled(memory)
    for path in ("/api/schedules/nightly/pause", "/api/schedules/nightly/resume"):
        anonymous = api.post(path, token=None)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"
        refused = read_only_api.post(path, token="anything")
        assert refused.status_code == 403 and refused.json()["error"] == "read_only"
    row = _row(read_only_api, "nightly")
    assert row["actions"]["pause"] == {
        "enabled": False,
        "reason": "the dashboard is read-only (start it with a token to enable actions)"}
    assert _row(api, "nightly")["paused"] is False  # nothing changed


# ---- the page's forms -------------------------------------------------------------------------


def _login(client: httpx.Client) -> str:
    """Sign ``client`` in; the CSRF token of the schedules page."""
    signed = client.post("/login", data={"token": TOKEN, "next": "/schedules"})
    assert signed.status_code == 303 and signed.headers["location"].startswith("/schedules")
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/schedules").text)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def test_the_page_pauses_and_resumes_with_session_and_csrf(memory: Runtime, api: Api) -> None:
    _scheduled(memory)
    client = api.client
    page = client.get("/schedules").text
    assert re.search(r'class="schedule-pause" disabled', page)  # not signed in yet
    action = "/schedules/nightly/actions/pause"
    assert client.post(action).status_code == 401
    csrf = _login(client)
    forged = client.post(action, data={"csrf_token": "0" * 64})
    assert forged.status_code == 403 and forged.json()["error"] == "bad_csrf"
    assert client.post(action).status_code == 403  # no CSRF token
    assert _row(api, "nightly")["paused"] is False  # nothing changed
    done = client.post(action, data={"csrf_token": csrf})
    assert done.status_code == 303
    assert done.headers["location"] == "/schedules?notice=schedule_paused"
    shown = client.get(done.headers["location"]).text
    assert 'id="notice"' in shown and 'data-paused="true"' in shown
    assert 'class="schedule-resume"' in shown and 'class="schedule-pause"' not in shown
    back = client.post("/schedules/nightly/actions/resume", data={"csrf_token": csrf})
    assert back.status_code == 303 and "notice=schedule_resumed" in back.headers["location"]
    assert _row(api, "nightly")["paused"] is False

    unknown = client.post("/schedules/ghost/actions/pause", data={"csrf_token": csrf},
                          headers={"accept": "text/html"})
    assert unknown.status_code == 404
    assert "pause: no schedule named &#39;ghost&#39;" in unknown.text
    no_action = client.post("/schedules/nightly/actions/stop", data={"csrf_token": csrf})
    assert no_action.status_code == 404
    assert _row(api, "nightly")["paused"] is False
    client.post("/logout", data={"csrf_token": csrf})


def test_a_hostile_stored_name_is_escaped(memory: Runtime, api: Api) -> None:
    # a schedule document written under a name no reactor API accepts (another client)
    _scheduled(memory, name="plain")
    store = schedule_store(memory.storage)
    record = store.get("plain")
    assert record is not None
    assert store.put(HOSTILE, record.document, expected_version=None) is not None
    rows = api.json("/api/schedules")["schedules"]
    assert HOSTILE in [r["name"] for r in rows]  # the API returns values as stored
    page = api.get("/schedules").text
    assert HOSTILE not in page and "<script>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    refused = api.post(f"/api/schedules/{quote(HOSTILE, safe='')}/pause")
    assert refused.status_code in (400, 404)
    assert api.json("/api/schedules")["schedules"] == rows  # nothing changed
