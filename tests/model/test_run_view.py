"""RunView and StepContext (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

from reactor.model.context import Context
from reactor.model.run_records import TraceRecord, UndoEntry
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
