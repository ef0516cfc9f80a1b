"""RunView and StepContext (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

import pytest

from reactor.model.context import Context
from reactor.model.run_records import MapMembership, TraceRecord, UndoEntry
from reactor.model.run_view import RunView, TraceEntry
from reactor.model.status import RunStatus
from reactor.model.step_context import StepContext


def test_run_view_redacts_and_lists_trace_and_stack() -> None:
    ctx = Context(
        context_id="r", reactor="x", inputs={"token": "t", "n": 1}, redacted=["token"],
        status=RunStatus.COMPLETED,
        execution_trace=[TraceRecord("retry", "a", 3, {"attempt": 1, "detail": "d"})],
        undo_stack=[UndoEntry.from_stored({"step": "a"})],
        composed_contexts={"c": Context(context_id="c", reactor="y")},
    )
    view = RunView.from_context(ctx)
    assert view.inputs == {"token": "[REDACTED]", "n": 1}
    assert view.trace == (TraceEntry("retry", "a", 3.0, 1, "d"),)
    assert view.undo_stack == ("a",)
    assert view.children["c"].run_id == "c"


def test_step_context_element_index() -> None:
    assert StepContext("r", "x", "s").element_index is None
    assert StepContext("r", "x", "s", map_metadata={"index": 3}).element_index == 3
    assert StepContext("r", "x", "s", map_metadata={"index": 3}).map_membership is None


def test_step_context_map_membership_and_its_mapping_derive_from_each_other() -> None:
    membership = MapMembership("lines", "m1", 2, "orders")
    stored = {"map_step": "lines", "map_id": "m1", "index": 2, "parent_reactor": "orders"}
    typed = StepContext("r", "x", "s", map_membership=membership)
    assert typed.map_metadata == stored and typed.element_index == 2
    with pytest.raises(TypeError):
        typed.map_metadata["index"] = 3  # type: ignore[index]
    assert StepContext("r", "x", "s", map_metadata=stored).map_membership == membership


def test_a_map_element_view_shows_its_membership_both_ways() -> None:
    membership = MapMembership("lines", "m1", 2, "orders", {"later": 1})
    view = RunView.from_context(Context(context_id="e", reactor="x", map_metadata=membership))
    assert view.map_membership == membership
    assert view.map_metadata == {"map_step": "lines", "map_id": "m1", "index": 2,
                                 "parent_reactor": "orders", "later": 1}
    with pytest.raises(TypeError):
        view.map_metadata["index"] = 3  # type: ignore[index]
    plain = RunView.from_context(Context(context_id="r", reactor="x"))
    assert plain.map_metadata is None and plain.map_membership is None
