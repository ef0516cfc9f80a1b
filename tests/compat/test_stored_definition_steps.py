"""Runs stored with per-step shape digests and ``needs_version`` runs (2027-01) load and are
written back byte for byte (docs/deploys.md, "Fingerprints" and "Compatibility rules").

``stored/definitions_steps.json`` holds encoded context documents as this release wrote
them: a completed run whose ``private_data.definition`` has ``steps`` (step name -> 8 hex
digits), and a run a worker held ``needs_version`` (``private_data.needs_version``). Never
regenerate the file. The release before wrote ``definition`` without ``steps``
(``stored/definitions.json``): those runs still load, with ``steps`` unset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import DefinitionStamp, VersionHold
from reactor.model.status import RunStatus

HERE = Path(__file__).parent / "stored"
STORED: dict[str, str] = json.loads(
    (HERE / "definitions_steps.json").read_text(encoding="utf-8")
)
OLDER: dict[str, str] = json.loads((HERE / "definitions.json").read_text(encoding="utf-8"))


def _load(text: str) -> Context:
    return Context.from_document(codec.decode_document(text))


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_document_is_written_back_byte_for_byte(name: str) -> None:
    assert codec.encode_document(_load(STORED[name]).to_document()) == STORED[name]


def test_a_run_reads_its_step_digests() -> None:
    stamp = _load(STORED["stepped_completed"]).engine_state.definition
    assert stamp == DefinitionStamp("ca96129b27f0f4ad", "2027-01")
    assert stamp is not None and stamp.steps == {"reserve": "6beecbff", "charge": "76747034"}


def test_a_held_run_reads_its_status_and_reason() -> None:
    ctx = _load(STORED["needs_version_held"])
    assert ctx.status is RunStatus.NEEDS_VERSION
    held = ctx.engine_state.needs_version
    assert isinstance(held, VersionHold)
    assert (held.step, held.rule, held.status) == ("charge", "pending_step_rewired", "running")
    assert held.fingerprint == "c3981956eea3a68d" and "charge" in held.reason


@pytest.mark.parametrize("name", sorted(OLDER))
def test_runs_stored_before_step_digests_load_without_them(name: str) -> None:
    ctx = _load(OLDER[name])
    assert ctx.engine_state.definition is not None
    assert ctx.engine_state.definition.steps is None
    assert ctx.engine_state.needs_version is None
    assert codec.encode_document(ctx.to_document()) == OLDER[name]
