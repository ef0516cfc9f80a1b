"""A stored document's bookkeeping read for views (reactor/model/run_documents.py): raw JSON in,
typed run records out, an entry that does not read left out instead of failing the view."""

from __future__ import annotations

import json
from typing import Any

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.masking import mask_document
from reactor.model.results import RollbackFailure
from reactor.model.run_documents import (
    embedded_children,
    map_membership_of,
    map_refs_of,
    retry_counters_of,
    rollback_of,
    trace_of,
    undo_stack_of,
)
from reactor.model.run_records import (
    MapMembership,
    MapRef,
    RollbackState,
    TraceRecord,
    UndoEntry,
)
from reactor.model.status import RunStatus

_FAILURE = RollbackFailure("a", "undo", "raised", "boom", "m", 1)


def _raw() -> dict[str, Any]:
    child = Context(context_id="c", reactor="child", status=RunStatus.COMPLETED)
    ctx = Context(
        context_id="r", reactor="x", status=RunStatus.ABORTED, inputs={"card": "4242"},
        redacted=["card"], intermediate_results={"a": 1},
        execution_trace=[TraceRecord("run", "a", 1.0, {"attempt": 2})],
        undo_stack=[UndoEntry("a", "step", {"card": "4242"}, 1, redacted=("card",))],
        rollback=RollbackState("b", "step", {"card": "4242"}, compensate_pending=True,
                               failures=(_FAILURE,), redacted=("card",)),
        composed_contexts={"pay": child, "m": MapRef("m1", {0: "e0"})},
    )
    ctx.count_attempts("a", 2)
    return json.loads(codec.encode_document(ctx.to_document()))


def test_a_raw_masked_document_reads_into_records() -> None:
    document = mask_document(_raw())
    assert trace_of(document) == [TraceRecord("run", "a", 1.0, {"attempt": 2})]
    undo = undo_stack_of(document)
    assert [(e.step, e.arguments["card"]) for e in undo] == [("a", "[REDACTED]")]
    assert undo[0].extra == {"result_of_step": True}  # the raw marker, as stored
    rollback = rollback_of(document)
    assert rollback is not None and rollback.failures == (_FAILURE,)
    assert rollback.arguments == {"card": "[REDACTED]"} and rollback.compensate_pending
    assert retry_counters_of(document).attempts_of("a") == 2
    assert map_refs_of(document) == {"m": MapRef("m1", {0: "e0"})}
    assert list(embedded_children(document)) == ["pay"]
    assert embedded_children(document)["pay"]["context_id"] == "c"


def test_entries_that_do_not_read_are_left_out() -> None:
    document = {
        "execution_trace": [{"type": "run", "step": "a", "at": 1.0}, {"type": 3}, "x"],
        "undo_stack": [{"step": "a"}, {"step": None}, 7],
        "rollback": {"step": 3},
        "retry_context": {"attempts": "many"},
        "composed_contexts": {"bad": {"type": "map_ref", "map_id": 1},
                              "ok": {"type": "map_ref", "map_id": "m", "elements": {}},
                              "child": {"type": "compose", "context": "not a document"}},
    }
    assert [e.step for e in trace_of(document)] == ["a"]
    assert [e.step for e in undo_stack_of(document)] == ["a"]
    assert rollback_of(document) is None
    assert retry_counters_of(document).attempts is None
    assert list(map_refs_of(document)) == ["ok"]
    assert embedded_children(document) == {}


def test_a_document_without_bookkeeping_reads_empty() -> None:
    assert trace_of({}) == [] and undo_stack_of({"undo_stack": "x"}) == []
    assert rollback_of({"rollback": None}) is None and map_refs_of({}) == {}


def test_a_map_element_document_reads_its_membership() -> None:
    membership = MapMembership("lines", "m1", 2, "orders", {"later": 1})
    element = Context(context_id="e", reactor="line", map_metadata=membership)
    raw = json.loads(codec.encode_document(element.to_document()))
    assert map_membership_of(mask_document(raw)) == membership
    assert map_membership_of(codec.decode_document(json.dumps(raw))) == membership
    assert map_membership_of(_raw()) is None  # no map element


def test_a_map_membership_that_does_not_read_is_left_out() -> None:
    for bad in ([1], {"index": 2}, {"map_step": "s", "map_id": "m", "index": "2",
                                    "parent_reactor": "p"}):
        assert map_membership_of({"map_metadata": bad}) is None
    assert map_membership_of({}) is None
