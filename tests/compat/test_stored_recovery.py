"""Runs stored with the recovery bookkeeping of 2026-12 load and are written back byte for byte
(docs/operations.md, "Pause, rewind, fork").

``stored/recovery.json`` holds encoded context documents as this release wrote them: a run held
by ``on_failure="pause"`` (status ``failed_paused``, ``private_data.failure_hold``, its failure
and its whole undo stack) and a run forked from it (``private_data.forked_from``, an undo
stack holding only the step it ran). Never regenerate the file: later releases must read what
this one wrote. Runs stored before it (tests/compat/stored/contexts.json, time_limits.json)
have neither key and load with ``failure_hold`` and ``forked_from`` unset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import FailureHold, ForkOrigin
from reactor.model.status import RunStatus

HERE = Path(__file__).parent / "stored"
STORED: dict[str, str] = json.loads((HERE / "recovery.json").read_text(encoding="utf-8"))


def _load(text: str) -> Context:
    return Context.from_document(codec.decode_document(text))


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_document_is_written_back_byte_for_byte(name: str) -> None:
    assert codec.encode_document(_load(STORED[name]).to_document()) == STORED[name]


def test_a_held_run_reads_its_hold_failure_and_undo_stack() -> None:
    ctx = _load(STORED["held_failed_paused"])
    assert ctx.status is RunStatus.FAILED_PAUSED and ctx.current_step == "c"
    assert ctx.engine_state.failure_hold == FailureHold(
        step="c", kind="step", compensate_pending=True, attempt=None, at=1700000000.0,
    )
    assert ctx.failure is not None and ctx.failure.step_name == "c"
    assert [entry.step for entry in ctx.undo_stack] == ["a", "b"]


def test_a_forked_run_reads_its_origin() -> None:
    ctx = _load(STORED["forked_completed"])
    assert ctx.engine_state.forked_from == ForkOrigin(
        run_id="0a273728-9bf2-4255-bf96-76aa5f5f82c3", step="c"
    )
    assert [entry.step for entry in ctx.undo_stack] == ["c"]


@pytest.mark.parametrize("older", ["contexts.json", "time_limits.json"])
def test_runs_stored_before_load_without_the_new_keys(older: str) -> None:
    documents: dict[str, str] = json.loads((HERE / older).read_text(encoding="utf-8"))
    for text in documents.values():
        if not isinstance(text, str) or not text.startswith("{"):
            continue
        state = _load(text).engine_state
        assert state.failure_hold is None and state.forked_from is None
