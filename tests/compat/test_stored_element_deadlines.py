"""A map element stored with a copy of its root's deadline loads and is written back byte for
byte (docs/concepts.md, "Run deadlines": the root's deadline governs every run under it).

``stored/element_deadlines.json`` holds a pending fan-out element as the dispatcher stored it
in 2026-12: its ``private_data`` carries ``deadline`` (until then only a root run's did) next
to its ``map_metadata``. An element stored before has no ``deadline`` and loads as before
(``tests/compat/stored/map_elements.json``). Never regenerate the file: later releases must
read what this one wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.status import RunStatus

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "element_deadlines.json").read_text(encoding="utf-8")
)
NAME = "pending_fan_out_element_with_its_roots_deadline"


def _load(name: str) -> Context:
    return Context.from_document(codec.decode_document(STORED[name]))


def test_an_element_with_its_roots_deadline_is_written_back_byte_for_byte() -> None:
    assert codec.encode_document(_load(NAME).to_document()) == STORED[NAME]


def test_an_element_reads_its_roots_deadline_and_its_membership() -> None:
    ctx = _load(NAME)
    assert ctx.status is RunStatus.PENDING
    assert ctx.engine_state.deadline == 1700000600.0
    assert ctx.engine_state.validate_inputs is True
    assert ctx.map_metadata is not None and ctx.map_metadata.index == 0
    assert ctx.map_metadata.parent_reactor == "shop.wave"
