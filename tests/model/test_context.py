"""The Context document and its strict decoding (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from reactor.errors import DeserializationError, SchemaVersionError
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.results import Failure, RollbackFailure
from reactor.model.run_records import (
    MapMembership,
    MapRef,
    RollbackState,
    TraceRecord,
    UndoEntry,
)
from reactor.model.status import RunStatus


def _sample() -> Context:
    child = Context(context_id="child", reactor="child.r", inputs={"x": 1},
                    status=RunStatus.COMPLETED, parent_context_id="root")
    return Context(
        context_id="root",
        reactor="root.r",
        inputs={"amount": Decimal("9.99"), "token": "t"},
        status=RunStatus.FAILED,
        intermediate_results={"a": (1, 2)},
        composed_contexts={"pay": child, "m": MapRef("m1", {0: "e0"})},
        execution_trace=[TraceRecord("run", "a", 1.0)],
        undo_stack=[UndoEntry("a", "step", {}, (1, 2))],
        failure=Failure("boom", step_name="b"),
        rollback=RollbackState.from_stored(
            {"step": "b", "kind": "step", "arguments": {}, "compensate_pending": True,
             "failures": [RollbackFailure("a", "undo", "raised", "m")]}
        ),
        redacted=["token"],
        created_at=1.0,
        updated_at=2.0,
    )


def _round_trip(ctx: Context) -> Context:
    return Context.from_document(codec.decode_document(codec.encode_document(ctx.to_document())))


def test_round_trip_keeps_every_field() -> None:
    ctx = _sample()
    assert _round_trip(ctx) == ctx
    assert isinstance(_round_trip(ctx).composed_contexts["pay"], Context)


def test_redacted_inputs() -> None:
    assert _sample().redacted_inputs() == {"amount": Decimal("9.99"), "token": "[REDACTED]"}


def test_legacy_skipped_status_reads_as_halted() -> None:
    doc = _sample().to_document()
    doc["status"] = "skipped"
    assert Context.from_document(doc).status is RunStatus.HALTED


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("context_id", None),
        ("status", "exploded"),
        ("inputs", [1]),
        ("undo_stack", [1]),
        ("execution_trace", "x"),
        ("created_at", "yesterday"),
        ("failure", "not a failure"),
        ("rollback", {"failures": ["x"]}),
        ("rollback", {"step": 3}),
        ("rollback", {"step": "a", "arguments": [1]}),
        ("undo_stack", [{"step": "m", "elements": [["0", 1]]}]),
        ("undo_stack", [{"step": None}]),
        ("composed_contexts", {"m": {"type": "map_ref", "map_id": "x", "elements": [1]}}),
        ("composed_contexts", {"c": {"type": "compose", "context": {"context_id": "c"}}}),
        ("map_metadata", [1]),
        ("map_metadata", {"map_step": "s", "map_id": "m", "index": "0", "parent_reactor": "p"}),
        ("map_metadata", {"map_step": "s", "index": 0, "parent_reactor": "p"}),
    ],
)
def test_malformed_fields_raise_deserialization_error(key: str, bad: Any) -> None:
    doc = _sample().to_document()
    doc[key] = bad
    with pytest.raises(DeserializationError):
        Context.from_document(doc)


def test_a_map_element_round_trips_its_membership_as_stored() -> None:
    element = Context(context_id="e", reactor="line", parent_context_id="root",
                      map_metadata=MapMembership("lines", "m1", 3, "root.r", {"later": True}))
    doc = element.to_document()
    assert list(doc["map_metadata"].items()) == [
        ("map_step", "lines"), ("map_id", "m1"), ("index", 3), ("parent_reactor", "root.r"),
        ("later", True),
    ]
    assert _round_trip(element) == element
    assert _round_trip(_sample()).map_metadata is None


def test_malformed_map_metadata_is_named_in_the_error() -> None:
    doc = _sample().to_document()
    doc["map_metadata"] = {"map_step": "s", "map_id": "m", "index": -4, "parent_reactor": "p"}
    with pytest.raises(DeserializationError, match=r"map_metadata.*'index'"):
        Context.from_document(doc)


def test_missing_field_and_non_mapping_raise_deserialization_error() -> None:
    doc = _sample().to_document()
    del doc["reactor"]
    with pytest.raises(DeserializationError):
        Context.from_document(doc)
    with pytest.raises(DeserializationError):
        Context.from_document(["not", "a", "dict"])


def test_unknown_schema_version_is_refused() -> None:
    text = codec.encode_document(_sample().to_document()).replace(
        '"schema_version":"1"', '"schema_version":"99"'
    )
    with pytest.raises(SchemaVersionError):
        codec.decode_document(text)
