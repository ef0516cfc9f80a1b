"""Runs stored with their definition's fingerprint (2026-12) load and are written back byte for
byte (docs/deploys.md, "Fingerprints").

``stored/definitions.json`` holds encoded context documents as this release wrote them: a
completed run of a reactor labelled ``version = "2026-12"`` (``private_data.definition`` with
``fingerprint`` and ``version``) and one of an unlabelled reactor (``fingerprint`` only). Never
regenerate the file: later releases must read what this one wrote. Runs stored before it
(tests/compat/stored/time_limits.json, recovery.json) have no ``definition``
and load with it unset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import DefinitionStamp
from reactor.model.status import RunStatus

HERE = Path(__file__).parent / "stored"
STORED: dict[str, str] = json.loads((HERE / "definitions.json").read_text(encoding="utf-8"))


def _load(text: str) -> Context:
    return Context.from_document(codec.decode_document(text))


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_document_is_written_back_byte_for_byte(name: str) -> None:
    assert codec.encode_document(_load(STORED[name]).to_document()) == STORED[name]


def test_a_labelled_run_reads_its_fingerprint_and_version() -> None:
    ctx = _load(STORED["labelled_completed"])
    assert ctx.status is RunStatus.COMPLETED
    assert ctx.engine_state.definition == DefinitionStamp("4a2e1e7d44f07c53", "2026-12")


def test_an_unlabelled_run_reads_its_fingerprint_alone() -> None:
    ctx = _load(STORED["unlabelled_completed"])
    assert ctx.engine_state.definition == DefinitionStamp("1840e2c73f89eabe", None)


@pytest.mark.parametrize("older", ["time_limits.json", "recovery.json"])
def test_runs_stored_before_load_without_a_definition(older: str) -> None:
    documents: dict[str, str] = json.loads((HERE / older).read_text(encoding="utf-8"))
    loaded = 0
    for text in documents.values():
        if not isinstance(text, str) or not text.startswith("{"):
            continue
        assert _load(text).engine_state.definition is None
        loaded += 1
    assert loaded > 0
