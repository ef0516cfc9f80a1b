"""Job payloads: typed, identity-only, and poison payloads are reported with their reason."""

from __future__ import annotations

import pytest

from reactor.errors import DeserializationError
from reactor.ports.payloads import (
    PAYLOAD_TYPES,
    MapElementPayload,
    RunPayload,
    StepPayload,
    job,
    parse_payload,
)
from reactor.ports.router import JOB_KINDS, Job


def test_every_job_kind_has_a_payload_type() -> None:
    assert set(PAYLOAD_TYPES) == set(JOB_KINDS)


def test_job_round_trips_through_the_envelope() -> None:
    original = job(RunPayload(context_id="c1", reactor="orders.fulfil"), attempt=2)
    decoded = Job.from_json(original.to_json())
    assert decoded == original
    parsed = parse_payload(decoded)
    assert parsed == RunPayload(context_id="c1", reactor="orders.fulfil")


def test_step_payload_carries_contention_attempts() -> None:
    payload = StepPayload(
        root_context_id="r", reactor="x", step_context_id="c", step_name="s",
        contention_attempts=3,
    )
    assert parse_payload(job(payload)) == payload


def test_legacy_fail_fast_is_read_as_atomic() -> None:
    parsed = parse_payload(Job(kind="map_element", payload={"map_id": "m", "index": 1,
                                                            "fail_fast": True}))
    assert isinstance(parsed, MapElementPayload)
    assert parsed.atomic is True


def test_unknown_kind_is_a_deserialization_error() -> None:
    with pytest.raises(DeserializationError, match="unknown job kind 'explode'"):
        parse_payload(Job(kind="explode", payload={}))


def test_missing_field_names_the_field() -> None:
    with pytest.raises(DeserializationError, match="context_id"):
        parse_payload(Job(kind="run", payload={"reactor": "x"}))


def test_negative_index_is_rejected() -> None:
    with pytest.raises(DeserializationError, match="index"):
        parse_payload(Job(kind="map_element", payload={"map_id": "m", "index": -1}))


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"id": "", "kind": "run", "payload": {}}',
     '{"id": "a", "kind": "run", "payload": []}',
     '{"id": "a", "kind": "run", "payload": {}, "attempt": -1}',
     '{"id": "a", "kind": "run", "payload": {}, "not_before": "soon"}'],
)
def test_malformed_envelopes_are_deserialization_errors(text: str) -> None:
    with pytest.raises(DeserializationError):
        Job.from_json(text)
