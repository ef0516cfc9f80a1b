"""Runs stored with the time-limit and operator-hold bookkeeping of 2026-12 load and are written
back byte for byte (docs/concepts.md, "Time limits", "Heartbeats", "Run deadlines";
docs/operations.md, "Suspend and unsuspend").

``stored/time_limits.json`` holds encoded context documents as this release wrote them: a run
suspended by an operator (status ``suspended``, ``private_data.suspension`` and
``suspend_generation``), with a deadline and a ``retry_context`` keeping the time a step used
of its ``total`` (``spent``) and its last heartbeat (``heartbeats``); and a run its deadline
ended (a cancel request with ``cause: "deadline"``). Never regenerate
the file: later releases must read what this one wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import Suspension
from reactor.model.heartbeats import LastHeartbeat
from reactor.model.status import RunStatus

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "time_limits.json").read_text(encoding="utf-8")
)


def _load(name: str) -> Context:
    return Context.from_document(codec.decode_document(STORED[name]))


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_document_is_written_back_byte_for_byte(name: str) -> None:
    assert codec.encode_document(_load(name).to_document()) == STORED[name]


def test_a_suspended_run_reads_its_hold_deadline_and_kept_time() -> None:
    ctx = _load("suspended_with_deadline_and_kept_time")
    assert ctx.status is RunStatus.SUSPENDED and ctx.current_step == "ship"
    state = ctx.engine_state
    assert state.suspension == Suspension("carrier incident", "alice", 1700000009.0, "running")
    assert state.suspend_generation == 1 and state.deadline == 1700003600.0
    assert ctx.time_spent("charge") == 12.5 and ctx.attempts_of("charge") == 2
    assert ctx.kept_heartbeat("charge") == LastHeartbeat({"offset": 40}, 1700000008.0, 2)


def test_a_run_its_deadline_ended_reads_the_deadlines_request() -> None:
    ctx = _load("failed_by_its_deadline")
    assert ctx.status is RunStatus.FAILED
    assert ctx.engine_state.deadline == 1700000060.0
    assert ctx.engine_state.cancel is not None and ctx.engine_state.cancel.cause == "deadline"
