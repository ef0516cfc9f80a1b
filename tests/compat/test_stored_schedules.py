"""Schedule documents as the version that introduced schedules stored them
(docs/protocol.md, "Schedules") load, rebuild their schedule and are written back byte for
byte; a key a later version adds is kept; a malformed one is refused naming the key.

``stored/schedules.json`` holds a stored schedule (definition, cursor, last tick) and a code
schedule's paused state with a pending decision. Never regenerate it: its value is that an
older version wrote it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.errors import StorageError
from reactor.schedules import Schedule
from reactor.schedules.records import Decision, ScheduleState

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "schedules.json").read_text(encoding="utf-8")
)


def test_a_stored_schedule_loads_rebuilds_and_writes_back_unchanged() -> None:
    state = ScheduleState.from_document("nightly", STORED["stored_schedule"])
    assert state.definition is not None and state.cursor == 1893459600.0
    assert state.last is not None and state.last.action == "run"
    assert state.to_document() == STORED["stored_schedule"]
    schedule = Schedule.from_definition("nightly", state.definition)
    assert schedule.spec == "cron '0 2 * * *' (Europe/Paris)" and schedule.jitter == 30.0


def test_a_paused_code_schedule_with_a_pending_decision_loads() -> None:
    state = ScheduleState.from_document("code", STORED["code_schedule_paused_pending"])
    assert state.definition is None and state.paused and state.paused_at == 1893456130.0
    assert state.pending == Decision(1893456120.0, "skip", "overlap: run r1 is running",
                                      1893456090.0, 1893456100.0, "catch-up one")
    assert state.to_document() == STORED["code_schedule_paused_pending"]


def test_unknown_keys_are_kept_and_malformed_ones_refused() -> None:
    newer = json.loads(STORED["stored_schedule"])
    newer["owner_team"] = "billing"
    state = ScheduleState.from_document("nightly", json.dumps(newer))
    assert json.loads(state.to_document())["owner_team"] == "billing"
    broken = json.loads(STORED["stored_schedule"])
    broken["cursor"] = "soon"
    with pytest.raises(StorageError, match="'nightly' is malformed: cursor"):
        ScheduleState.from_document("nightly", json.dumps(broken))
    with pytest.raises(StorageError, match="not a JSON object"):
        ScheduleState.from_document("nightly", "[]")
