"""A run sleeping at a ``sleep`` step, as stored by the version that introduced durable sleep
(docs/schedules.md, "Durable sleep"), loads and is written back byte for byte; a run stored
before sleeps existed (no ``sleep`` key) loads with no sleep marker.

``stored/sleeps.json`` holds the encoded context document of a run ``paused`` at step ``nap``
with its marker ``{"step", "wake_at", "since"}`` in ``private_data``. Never regenerate it: its
value is that an older version wrote it.
"""

from __future__ import annotations

import json
from pathlib import Path

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import PendingSleep
from reactor.model.run_view import RunView
from reactor.model.status import RunStatus

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "sleeps.json").read_text(encoding="utf-8")
)
OLDER: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "bookkeeping.json").read_text(encoding="utf-8")
)


def test_a_stored_sleeping_run_loads_and_is_written_back_byte_for_byte() -> None:
    ctx = Context.from_document(codec.decode_document(STORED["sleeping"]))
    assert ctx.status is RunStatus.PAUSED
    assert ctx.engine_state.sleep == PendingSleep(
        step="nap", wake_at=1_700_007_200.0, since=1_700_000_000.0
    )
    assert codec.encode_document(ctx.to_document()) == STORED["sleeping"]
    view = RunView.from_context(ctx)
    assert view.sleeping_until == 1_700_007_200.0
    assert view.waiting_for == "sleeping until 2023-11-15T00:13:20+00:00 (step 'nap')"


def test_a_run_stored_before_sleeps_has_no_marker() -> None:
    for text in OLDER.values():
        ctx = Context.from_document(codec.decode_document(text))
        assert ctx.engine_state.sleep is None
        assert RunView.from_context(ctx).sleeping_until is None
