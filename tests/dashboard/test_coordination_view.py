"""The coordination view (docs/dashboard.md, "Coordination view") on memory and Redis: one
row per coordinating step per primitive keyed on the step's own arguments, pending rows for
steps not reached, ``key_unavailable`` for keys computed from redacted arguments, the parked
async step's waiting marker read from its own record, and a row error (not a 500) for a named
rate limit nobody registered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Worker
from reactor.config import Runtime
from reactor.coordination.ordered_lock import OrderedLock
from reactor.dashboard.coordination_view import KEY_UNAVAILABLE
from tests.dashboard.conftest import Api
from tests.dashboard.reactors import HOLDING, Fetcher, Guarded, HoldPick, Picker, Sequenced

CARD = "4111-SECRET-CARD"


def _rows(view: dict[str, Any], step: str | None) -> dict[str, dict[str, Any]]:
    rows = view["reactor"] if step is None else [r for r in view["steps"] if r["step"] == step]
    return {r["primitive"]: r for r in rows}


@pytest.fixture
def holder(backend: Runtime) -> Iterator[str]:
    """A run of :class:`HoldPick` inside its step body, holding the lock ``sku:X``."""
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(result=HoldPick.run(sku="X")))
    thread.start()
    assert HOLDING.entered.wait(30), "the holding run never reached its step"
    locked = backend.storage.locks.info("sku:X")
    assert locked is not None
    yield locked.owner
    HOLDING.release.set()
    thread.join(30)
    assert outcome["result"].success


def _parked_picker(backend: Runtime) -> str:
    handle = Picker.run(sku="X", card=CARD)
    assert Worker(backend).run_pending(max_jobs=1) == 1  # the run job parks on sku:X
    return str(handle.run_id)


def test_a_step_with_two_primitives_gives_two_rows_with_live_state(
    backend: Runtime, api: Api, holder: str
) -> None:
    run_id = _parked_picker(backend)
    response = api.get(f"/api/runs/{run_id}/coordination")
    assert response.status_code == 200 and CARD not in response.text
    view = response.json()

    pick = _rows(view, "pick")
    assert set(pick) == {"lock", "semaphore"}
    lock = pick["lock"]
    assert (lock["state"], lock["key"], lock["waiting"]) == ("resolved", "sku:X", True)
    assert lock["live"]["held"] is True and lock["live"]["held_by_this_run"] is False
    assert lock["live"]["holder_run_id"] == holder
    assert 0 < lock["live"]["remaining_ttl"] <= 60 and lock["live"]["fencing_token"] > 0
    semaphore = pick["semaphore"]
    assert (semaphore["state"], semaphore["key"]) == ("resolved", "pickers")
    assert semaphore["live"]["limit"] == 2 and semaphore["live"]["used"] == 0

    (rate,) = _rows(view, None).values()
    assert rate["key"] == "picker-api"
    assert rate["live"]["windows"] == [{"name": "day", "seconds": 86400.0, "limit": 1000,
                                        "used": 1}]

    (marker,) = view["waiting"]
    assert marker == {"source": "run", "step": "pick", "primitive": "lock", "key": "sku:X",
                      "attempts": None, "next_attempt_at": None}

    page = api.get(f"/runs/{run_id}/coordination")
    assert page.status_code == 200 and f'href="/runs/{holder}"' in page.text


def test_steps_not_reached_give_one_pending_row_per_primitive(
    backend: Runtime, api: Api, holder: str
) -> None:
    run_id = _parked_picker(backend)
    view = api.json(f"/api/runs/{run_id}/coordination")
    pack = _rows(view, "pack")
    assert set(pack) == {"lock", "semaphore"}
    assert all(r["state"] == "pending" and r["key"] is None for r in pack.values())
    assert [r["state"] for r in _rows(view, "charge").values()] == ["pending"]
    assert [r["state"] for r in _rows(view, "notify").values()] == ["pending"]


def test_redacted_arguments_and_an_unregistered_rate_limit_are_row_markers(
    backend: Runtime, api: Api
) -> None:
    handle = Picker.run(sku="Y", card=CARD)
    Worker(backend).run_pending()
    response = api.get(f"/api/runs/{handle.run_id}")
    assert response.status_code == 200 and CARD not in response.text
    run = response.json()
    assert run["status"] == "failed" and run["failure"]["step"] == "notify"
    view = run["coordination"]

    (charge,) = _rows(view, "charge").values()
    assert (charge["state"], charge["key"], charge["key_error"]) == (
        "key_unavailable", None, KEY_UNAVAILABLE)
    (notify,) = _rows(view, "notify").values()
    assert notify["state"] == "error" and notify["live"] is None
    assert "tests-dashboard-unregistered" in notify["error"]
    assert {r["state"] for r in _rows(view, "pick").values()} == {"resolved"}
    assert _rows(view, "pack")["lock"]["key"] == "pack:Y"


def test_every_primitive_reports_its_live_state(backend: Runtime, api: Api) -> None:
    done = Guarded.run(account="acme", card=CARD)
    assert done.success
    view = api.json(f"/api/runs/{done.run_id}/coordination")

    (account,) = _rows(view, None).values()
    assert (account["key"], account["live"]) == ("account:acme", {"held": False})

    statement = _rows(view, "statement")
    period = statement["period"]
    assert period["key"] == "statement:acme" and period["live"]["marked"] is True
    assert period["live"]["marked_by_this_run"] is True
    assert period["live"]["bucket"].startswith("period:statement:acme:")
    ordered = statement["ordered_lock"]
    assert ordered["key"] == "ledger-line" and ordered["state"] == "resolved"
    assert ordered["live"]["ticket"] is None and ordered["live"]["in_flight"] == 0  # drained

    charge = _rows(view, "charge")
    assert charge["lock"]["state"] == "key_unavailable"  # keyed on the secret card
    assert charge["semaphore"]["key"] == "cards" and charge["semaphore"]["live"]["used"] == 0
    windows = {w["name"]: (w["limit"], w["used"]) for w in charge["rate_limit"]["live"]["windows"]}
    assert windows == {"hour": (10, 1), "day": (100, 1)}

    (settle,) = _rows(view, "settle").values()
    assert (settle["state"], settle["key"]) == ("resolved", "constant-key")
    assert view["waiting"] == []


def test_a_parked_async_step_shows_its_waiting_marker(backend: Runtime, api: Api) -> None:
    assert backend.storage.locks.acquire("supplier:acme", "another-owner", 60)
    parent = Fetcher.run(supplier="acme")
    assert parent.success
    assert Worker(backend).run_pending(max_jobs=1) == 1  # the unit parks on the lock
    run = api.json(f"/api/runs/{parent.run_id}")

    (marker,) = run["coordination"]["waiting"]
    assert marker["source"] == "async_step" and marker["step"] == "fetch"
    assert (marker["primitive"], marker["key"]) == ("lock", "supplier:acme")
    assert marker["attempts"] == 1
    (lock,) = _rows(run["coordination"], "fetch").values()
    assert lock["key"] == "supplier:acme" and lock["live"]["owner"] == "another-owner"
    assert run["async_steps"]["fetch"]["status"] == "parked"
    assert {n["name"]: n["state"] for n in run["graph"]["nodes"]}["fetch"] == "waiting"


def test_an_ordered_lock_shows_the_runs_place_in_line(backend: Runtime, api: Api) -> None:
    first = OrderedLock(backend.storage.ordered_locks, "ledger").assign()  # someone else's
    handle = Sequenced.run(entry="e-2")
    assert Worker(backend).run_pending(max_jobs=1) == 1  # waits for ticket 1: parks
    view = api.json(f"/api/runs/{handle.run_id}/coordination")
    (row,) = _rows(view, "post").values()
    assert (row["primitive"], row["key"], row["waiting"]) == ("ordered_lock", "ledger", True)
    live = row["live"]
    assert live["cursor"] == 0 and live["next_nonce"] == 2
    ticket = live["ticket"]
    assert (ticket["nonce"], ticket["ahead"], ticket["turn"], ticket["stale"]) == (
        2, 1, False, False)
    assert ticket["fencing_token"] == [first.epoch, 2]
    assert view["waiting"][0]["primitive"] == "ordered_lock"
