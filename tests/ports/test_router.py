"""Job envelopes and dead letters on hostile input (reactor/ports/router.py; docs/workers.md,
"Hostile input")."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from typing import Any

import pytest

from reactor.errors import DeserializationError, EncodeError
from reactor.model import codec
from reactor.ports.router import MAX_ENVELOPE_BYTES, DeadLetter, Job


def envelope(payload: str) -> str:
    return '{"id":"j1","kind":"run","payload":' + payload + "}"


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def with_little_stack(fn: Callable[[], Any], headroom: int = 40) -> Any:
    """Call ``fn`` from deep inside a recursion: ``headroom`` frames below the limit."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]

    def down(n: int) -> Any:
        return fn() if n <= 0 else down(n - 1)

    return down(sys.getrecursionlimit() - depth - headroom)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (envelope('{"note":"caf\u00e9"}').encode("latin-1"), "not UTF-8"),
        (envelope('{"x":' + deep(5000) + "}"), "deeper than"),
        (envelope('{"x":' + deep(codec.MAX_DEPTH) + "}"), "deeper than 200"),
        (envelope('{"x":"' + "a" * MAX_ENVELOPE_BYTES + '"}'), "MAX_ENVELOPE_BYTES"),
        (b"\xff" * (MAX_ENVELOPE_BYTES + 1), "MAX_ENVELOPE_BYTES"),
        ("NaN", "malformed JSON"),
        (12, "text or bytes"),
    ],
    ids=["latin1", "5000-deep", "just-too-deep", "too-large", "too-large-bytes", "nan", "int"],
)
def test_from_json_refuses_hostile_bodies_with_deserialization_errors(
    body: Any, reason: str
) -> None:
    with pytest.raises(DeserializationError, match=reason):
        Job.from_json(body)
    with pytest.raises(DeserializationError, match=reason):
        with_little_stack(lambda: Job.from_json(body))


def test_from_json_reads_utf8_bytes_and_an_envelope_at_the_bound() -> None:
    payload = '{"note":"caf\u00e9","x":' + deep(codec.MAX_DEPTH - 2) + "}"
    job = with_little_stack(lambda: Job.from_json(envelope(payload).encode("utf-8")))
    assert job.payload["note"] == "caf\u00e9"


def test_to_json_refuses_what_from_json_would_dead_letter() -> None:
    nested: Any = 0
    for _ in range(codec.MAX_DEPTH):
        nested = [nested]
    with pytest.raises(EncodeError, match="job envelope nests deeper"):
        Job(kind="run", payload={"x": nested}).to_json()
    with pytest.raises(EncodeError, match="MAX_ENVELOPE_BYTES"):
        Job(kind="run", payload={"x": "a" * MAX_ENVELOPE_BYTES}).to_json()
    job = Job(kind="run", payload={"context_id": "c1", "reactor": "r"})
    assert with_little_stack(lambda: Job.from_json(job.to_json())) == job


def test_dead_letters_keep_the_raw_body_as_text_or_base64() -> None:
    text = DeadLetter.from_raw('{"a": 1}', "why", 1.0)
    assert (text.body, text.body_encoding, text.raw_body()) == ('{"a": 1}', "text", b'{"a": 1}')
    utf8 = DeadLetter.from_raw("caf\u00e9".encode(), "why", 1.0)
    assert (utf8.body, utf8.body_encoding) == ("caf\u00e9", "text")
    raw = b"\xff\xfe\x00 binary"
    binary = DeadLetter.from_raw(raw, "why", 2.0)
    assert binary.body_encoding == "base64"
    assert binary.body == base64.b64encode(raw).decode() and binary.raw_body() == raw
    assert DeadLetter("old", "r", 0.0).body_encoding == "text"  # the field's default
    with pytest.raises(ValueError, match="not base64"):
        DeadLetter("***", "r", 0.0, body_encoding="base64").raw_body()
