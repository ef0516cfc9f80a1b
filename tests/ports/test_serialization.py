"""reactor.ports.serialization: one JSON shape per record, run-page keys and cursors."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reactor.model import records as r
from reactor.ports.serialization import (
    RECORD_TYPES,
    decode_page_cursor,
    encode_page_cursor,
    page_key,
    record_from_dict,
    record_from_json,
    record_to_dict,
    record_to_json,
)

SAMPLES: list[Any] = [
    r.ContextRecord("c1", "R", "running", '{"k":1}', 1.5, 2.5, "p", "root", True),
    r.RunSummary("c1", "R", "completed", 1.0, 2.0, None, False),
    r.RunPage((r.RunSummary("c1", "R", "running", 1.0, 2.0),), "cursor"),
    r.StepResultRecord(
        "c1",
        "s",
        "dispatched",
        "c1",
        "R",
        1.0,
        2.0,
        3.0,
        "lock:k",
        2,
        None,
        {"ticket": {"nonce": 1}},
    ),
    r.MapMetadata(
        "m", 3, "p", "R", "s", "E", "o", "R", 50, True, 1.0, True, "outer", 4, {"x": [1, 2]}
    ),
    r.MapRollbackMetadata("m", 3, 50, "s", "o", "R", "E", 1.0, "compensate"),
    r.RollbackOutcome(None, "context_unavailable", '[{"e":1}]'),
    r.RollbackSummary(3, 2, 1, 1),
    r.LockInfo("o", 2, None),
    r.SemaphoreState(2, {"a": 1.5}),
    r.RateWindow("minute", 60.0, 10),
    r.RateDecision(False, 1.5, 0),
    r.PeriodMarker(None, 1.0),
    r.OrderedTicket(3, 1),
    r.OrderedGate("wait", 1.0, 2, 0),
    r.OrderedLockState(3, 1, 0, 2, {2: 1.5, 3: 2.5}),
]


def test_every_record_type_has_a_sample() -> None:
    assert {type(s) for s in SAMPLES} == set(RECORD_TYPES)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda s: type(s).__name__)
def test_records_round_trip_through_json(record: Any) -> None:
    value = json.loads(json.dumps(record_to_dict(record), allow_nan=False))
    assert record_from_dict(type(record), value) == record
    assert record_from_json(type(record), record_to_json(record)) == record


def test_to_dict_is_json_native_with_string_keys() -> None:
    state = r.OrderedLockState(3, 1, 0, 2, {2: 1.5})
    assert record_to_dict(state)["in_flight"] == {"2": 1.5}
    page = record_to_dict(SAMPLES[2])
    assert page["runs"] == [record_to_dict(SAMPLES[2].runs[0])]


def test_from_dict_coerces_types_and_fills_defaults() -> None:
    stored = {
        "map_id": "m",
        "total": "3",
        "batch_size": 50.0,
        "step_name": "s",
        "owner_context_id": "o",
        "owner_reactor": "R",
        "element_reactor": "E",
        "started_at": 1,
        "unknown": "ignored",
    }
    meta = record_from_dict(r.MapRollbackMetadata, stored)
    assert meta.kind == "undo" and meta.total == 3 and meta.batch_size == 50
    assert isinstance(meta.started_at, float)
    step = record_from_dict(
        r.StepResultRecord,
        {
            "context_id": "c",
            "step_name": "s",
            "status": "completed",
            "root_context_id": "c",
            "reactor": "R",
            "dispatched_at": 1,
            "updated_at": 2,
        },
    )
    assert step.data == {} and step.contention_attempts == 0 and step.parked_until is None


def test_from_dict_rejects_missing_fields_and_bad_literals() -> None:
    with pytest.raises(KeyError):
        record_from_dict(r.LockInfo, {"owner": "o", "count": 1})
    with pytest.raises(ValueError):
        record_from_dict(r.RollbackOutcome, {"index": 1, "outcome": "exploded"})


def test_non_records_are_type_errors() -> None:
    with pytest.raises(TypeError):
        record_to_dict({"a": 1})

    @dataclasses.dataclass
    class Odd:
        value: complex

    with pytest.raises(TypeError):
        record_from_dict(Odd, {"value": 1})


def test_page_keys_sort_newest_first_and_cursors_round_trip() -> None:
    older, newer = page_key(1_700_000_000.0, "a"), page_key(1_700_000_001.5, "b")
    assert newer < older and len(older.split(":")[0]) == 17
    assert page_key(-5.0, "x").startswith("9" * 17)
    cursor = encode_page_cursor(older)
    assert "=" not in cursor and decode_page_cursor(cursor) == older


@pytest.mark.parametrize("cursor", ["", "!!", encode_page_cursor("not-a-page-key"), "YQ=="])
def test_malformed_cursors_are_value_errors(cursor: str) -> None:
    with pytest.raises(ValueError):
        decode_page_cursor(cursor)
