"""One masking function for every view (reactor/model/masking.py; docs/security.md, "What each
view shows"): run documents raw and decoded, ``RunView``, ``Failure`` and job bodies."""

from __future__ import annotations

import json
from typing import Any

from reactor.model import codec
from reactor.model.context import Context
from reactor.model.masking import (
    REDACTED,
    is_secret,
    mask_document,
    mask_document_text,
    mask_job_body,
    mask_mapping,
    mask_value,
)
from reactor.model.results import Failure
from reactor.model.run_records import RollbackState, UndoEntry
from reactor.model.run_view import RunView
from reactor.model.secrets import Keyring, generate_key
from reactor.model.status import RunStatus

SECRET = "tok_visa_SECRET_4242"


def _context(**extra: Any) -> Context:
    return Context(
        context_id="run-1", reactor="r", status=RunStatus.FAILED,
        inputs={"card": SECRET, "amount": 3}, redacted=["card"],
        undo_stack=[UndoEntry("s", "step", {"card": SECRET, "n": 1}, None,
                              redacted=("card",))],
        rollback=RollbackState("t", "step", {"token": SECRET, "n": 2},
                               compensate_pending=True, redacted=("token",)),
        composed_contexts={"child": Context(context_id="c", reactor="r2",
                                            inputs={"token": SECRET}, redacted=["token"])},
        **extra,
    )


def test_a_plaintext_document_is_masked_by_its_stored_redacted_lists() -> None:
    raw = json.loads(codec.encode_document(_context().to_document()))
    assert SECRET in json.dumps(raw)
    masked = mask_document(raw)
    assert SECRET not in json.dumps(masked)
    assert masked["inputs"] == {"card": REDACTED, "amount": 3}
    assert masked["undo_stack"][0]["arguments"] == {"card": REDACTED, "n": 1}
    assert masked["rollback"]["arguments"] == {"token": REDACTED, "n": 2}
    assert masked["composed_contexts"]["child"]["context"]["inputs"] == {"token": REDACTED}
    assert list(masked) == list(raw)  # same keys, same order
    assert SECRET in json.dumps(raw)  # the argument is not changed


def test_a_sealed_document_shows_every_envelope_as_redacted_raw_or_decoded() -> None:
    ring = Keyring([generate_key()])
    text = codec.encode_document(_context().to_document(seal=ring.seal))
    raw = json.loads(text)
    assert is_secret(raw["inputs"]["card"])
    masked = mask_document(raw, redacted=[])  # even without the lists: envelopes are masked
    assert masked["inputs"]["card"] == REDACTED
    assert masked["undo_stack"][0]["arguments"]["card"] == REDACTED
    decoded = mask_document(codec.decode_document(text))
    assert decoded["inputs"] == {"card": REDACTED, "amount": 3}
    assert "reactor.Secret" not in mask_document_text(text)


def test_an_old_undo_entry_without_its_own_list_falls_back_to_the_input_names() -> None:
    doc = {"redacted": ["card"], "inputs": {"card": SECRET},
           "undo_stack": [{"step": "s", "arguments": {"card": SECRET}}]}
    assert SECRET not in json.dumps(mask_document(doc))


def test_the_original_text_kept_by_a_quarantine_is_masked_too() -> None:
    original = codec.encode_document(_context().to_document())
    doc = {"inputs": {}, "redacted": [],
           "private_data": {"quarantine": {"reason": "x", "original_document": original}}}
    masked = mask_document(doc)
    assert SECRET not in json.dumps(masked)
    assert masked["private_data"]["quarantine"]["reason"] == "x"
    assert mask_document_text("not json {") == "not json {"


def test_run_view_and_failure_show_no_secret() -> None:
    ring = Keyring([generate_key()])
    failure = Failure("boom", inputs={"card": ring.seal(SECRET), "n": 1}, step_name="s")
    ctx = _context(failure=failure, intermediate_results={"s": {"copy": ring.seal(SECRET)}})
    view = RunView.from_context(ctx)
    assert view.inputs == {"card": REDACTED, "amount": 3}
    assert view.results == {"s": {"copy": REDACTED}}
    assert view.failure is not None and view.failure.inputs == {"card": REDACTED, "n": 1}
    assert view.children["child"].inputs == {"token": REDACTED}
    assert SECRET not in repr(view)
    assert "Sealed" not in repr(failure) and REDACTED in repr(failure)


def test_mask_mapping_and_mask_value() -> None:
    ring = Keyring([generate_key()])
    assert mask_mapping({"a": 1, "b": SECRET}, ["b", "zz"]) == {"a": 1, "b": REDACTED}
    assert mask_value([ring.seal(1), (ring.seal(2), 3)]) == [REDACTED, (REDACTED, 3)]


def test_job_bodies_are_masked_for_dead_letter_views() -> None:
    ring = Keyring([generate_key()])
    plain = '{"id":"j","kind":"run","payload":{"context_id":"x"}}'
    assert mask_job_body(plain) == plain  # identities only: unchanged
    sealed = json.dumps({"payload": {"card": codec.encode(ring.seal(SECRET))}})
    assert json.loads(mask_job_body(sealed)) == {"payload": {"card": REDACTED}}
    named = json.dumps({"payload": {"card_token": SECRET, "n": 1}})
    assert SECRET not in mask_job_body(named, redacted=["card_token"])
    assert mask_job_body("\x00poison") == "\x00poison"
