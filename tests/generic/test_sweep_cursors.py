"""DocumentSweepCursorStore on the memory document store (docs/protocol.md, "Sweep cursors")."""

from __future__ import annotations

import pytest

from reactor.generic.sweep_cursors import SWEEP_CURSORS, DocumentSweepCursorStore
from reactor.memory import ManualClock, MemoryDocumentStore, MemoryProbe


def test_a_store_built_without_a_ttl_keeps_cursors_a_day() -> None:
    """``ttl`` defaults to 86400 s, the ``context_ttl`` setting's default (docs/protocol.md,
    "Conventions": sweep cursors are durable run state)."""
    clock = ManualClock()
    docs = MemoryDocumentStore(clock=clock)
    cursors = DocumentSweepCursorStore(docs)
    cursors.save("runs", "c1")
    assert MemoryProbe(docs).ttl(SWEEP_CURSORS, "runs") == pytest.approx(86400.0)
    clock.advance(86400.0 - 1)
    assert cursors.load("runs") == "c1"
    clock.advance(1)
    assert cursors.load("runs") is None
