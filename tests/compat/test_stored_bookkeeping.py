"""Run bookkeeping stored by the previous version (dicts read by key) loads into the typed run
records and is written back byte for byte (docs/protocol.md, "Contexts"; the records:
reactor/model/run_records.py).

``stored/bookkeeping.json`` holds encoded context documents written by the code before the
records existed: a run aborted mid-rollback (an interruption and a pending compensate, rollback
failures, secret argument names), its undo stack holding an entry of every kind (a leaf step
whose result is stored once as ``result_of_step``, a compose step, an inline and a fan-out map,
an ``async_reactor`` step, an entry with a key a newer version added), retry counters, trace
entries with their details in both orders, inline and fan-out map references and a reference
of an unknown kind; the same run with its secrets sealed; and the sparse shapes older writers
left (an undo entry with only its step, a rollback record without ``compensate_failed``, an
integer ``at``). Never regenerate the file: its value is that an older version wrote it.

``stored/map_elements.json`` holds the stored records (base document and incremental segments)
of an inline map's element and a fan-out map's element as the engine wrote them while their
``map_metadata`` was a dict; they load into a ``MapMembership`` and are written back byte for
byte. Never regenerate it either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.records import ContextRecord
from reactor.model.results import RollbackFailure
from reactor.model.run_documents import map_membership_of
from reactor.model.run_records import ForeignRef, MapMembership, MapRef
from reactor.model.secrets import Sealed

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "bookkeeping.json").read_text(encoding="utf-8")
)
ELEMENTS: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "stored" / "map_elements.json").read_text(encoding="utf-8")
)


def _load(name: str) -> Context:
    return Context.from_document(codec.decode_document(STORED[name]))


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_document_is_written_back_byte_for_byte(name: str) -> None:
    assert codec.encode_document(_load(name).to_document()) == STORED[name]


def test_the_records_read_what_the_old_dicts_held() -> None:
    ctx = _load("rolling_back")
    assert ctx.attempts_of("charge") == 2 and ctx.attempts_of("ship") == 3
    assert ctx.attempts_of("pay") is None
    rollback = ctx.rollback
    assert rollback is not None
    assert (rollback.step, rollback.kind, rollback.compensate_pending) == ("ship", "step", True)
    assert rollback.interruption == "KeyboardInterrupt" and rollback.redacted == ("card",)
    assert rollback.failures[1] == RollbackFailure(
        "reserve", "undo", "context_unavailable", "gone", "lines", 1
    )
    steps = [(e.step, e.kind) for e in ctx.undo_stack]
    assert steps == [("charge", "step"), ("pay", "compose"), ("lines", "map"), ("fan", "map"),
                     ("ar", "async_reactor"), ("copy", "step")]
    charge, _, lines, fan, ar, copy = ctx.undo_stack
    assert charge.result is ctx.intermediate_results["charge"]  # result_of_step restored
    assert lines.elements == ((0, "e-0"), (1, "e-1")) and lines.map_id == "m-inline"
    assert fan.fan_out is True and fan.count == 3 and ar.child_run_id == "child-ar"
    assert copy.extra == {"a_newer_key": {"kept": True}}
    inline, fan_ref = ctx.map_ref("lines"), ctx.map_ref("fan")
    assert inline == MapRef("m-inline", {0: "e-0", 1: "e-1"})
    assert fan_ref == MapRef("m-fan", fan_out=True, count=3, started=3)
    assert ctx.composed_contexts["later"] == ForeignRef({"type": "future_ref",
                                                         "anything": [1, 2]})
    child = ctx.child("pay")
    assert child is not None and child.undo_stack[0].result == 2
    failed = ctx.last_trace("failed")
    assert failed is not None and (failed.detail, failed.attempt) == ("carrier down", 3)


def test_sealed_arguments_stay_sealed_in_the_records() -> None:
    ctx = _load("rolling_back_sealed")
    assert isinstance(ctx.undo_stack[0].arguments["card"], Sealed)
    assert ctx.rollback is not None and isinstance(ctx.rollback.arguments["card"], Sealed)
    assert ctx.rollback.arguments["order"] == "o-1"


def test_sparse_shapes_of_older_writers_stay_sparse() -> None:
    ctx = _load("legacy")
    assert ctx.undo_stack[0].absent == {"kind", "arguments", "result"}
    assert ctx.rollback is not None and ctx.rollback.absent == {"compensate_failed"}
    assert ctx.execution_trace[0].at == 1700000000
    assert ctx.retry_context.attempts == {}


def _element_record(name: str) -> ContextRecord:
    stored = ELEMENTS[name]
    return ContextRecord(context_id=stored["context_id"], reactor="compat.line",
                         status="completed", document=stored["document"],
                         created_at=1700000000.0, updated_at=1700000000.0,
                         segments=tuple(stored["segments"]))


@pytest.mark.parametrize("name", sorted(ELEMENTS))
def test_a_stored_map_element_base_is_written_back_byte_for_byte(name: str) -> None:
    base = ELEMENTS[name]["document"]
    ctx = Context.from_document(codec.decode_document(base))
    assert isinstance(ctx.map_metadata, MapMembership)
    assert codec.encode_document(ctx.to_document()) == base


@pytest.mark.parametrize(
    ("name", "index", "parent"),
    [("inline_element", 1, "compat.inline_order"), ("fan_out_element", 2, "compat.fan_order")],
)
def test_a_stored_map_element_reads_its_membership_every_way(
    name: str, index: int, parent: str
) -> None:
    record = _element_record(name)
    ctx = Context.from_document(checkpoints.stored_document(record))
    membership = ctx.map_metadata
    assert membership is not None and membership.extra == {}
    assert (membership.map_step, membership.index, membership.parent_reactor) == (
        "reserve", index, parent
    )
    # the readers of the raw JSON (dashboard) and of the decoded document (sweepers) agree
    assert map_membership_of(checkpoints.raw_document(record)) == membership
    assert map_membership_of(checkpoints.stored_document(record)) == membership
    # every segment's head rewrites map_metadata as the engine wrote it
    for segment in ELEMENTS[name]["segments"]:
        head = json.loads(segment)["head"]
        assert json.dumps(ctx.head_document()["map_metadata"]) == json.dumps(head["map_metadata"])


def test_a_newer_key_in_a_stored_map_element_is_kept() -> None:
    base = ELEMENTS["inline_element"]["document"].replace(
        '"parent_reactor":"compat.inline_order"}',
        '"parent_reactor":"compat.inline_order","a_newer_key":[1]}',
    )
    ctx = Context.from_document(codec.decode_document(base))
    assert ctx.map_metadata is not None and ctx.map_metadata.extra == {"a_newer_key": [1]}
    assert codec.encode_document(ctx.to_document()) == base
