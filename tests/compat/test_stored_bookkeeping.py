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
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.results import RollbackFailure
from reactor.model.run_records import ForeignRef, MapRef
from reactor.model.secrets import Sealed

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "bookkeeping.json").read_text(encoding="utf-8")
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
