"""The engine's typed bookkeeping (reactor/model/engine_state.py; docs/protocol.md,
"Contexts"): every ``private_data`` key earlier versions wrote loads into a typed field and is
written back in the same shape, unknown keys are kept, malformed values are refused with a
``DeserializationError`` naming the field, and the quarantine's original text stays masked."""

from __future__ import annotations

import json
import re
import traceback
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import (
    STORED_KEYS,
    AsyncStepRef,
    CancelRequest,
    EngineState,
    KeyedTicket,
    ParkedHold,
    PendingInterrupt,
    Quarantine,
    Suspension,
    Waiting,
)
from reactor.model.masking import mask_document
from reactor.model.records import OrderedTicket
from reactor.model.run_links import RunLinks
from reactor.model.run_view import RunView
from reactor.model.secrets import Keyring, generate_key
from reactor.model.status import RunStatus

STORED_CONTEXTS = Path(__file__).parent.parent / "compat" / "stored" / "contexts.json"

#: One value for every ``private_data`` key the code before the typed state could write, in
#: the shape it wrote it, keyed by the constant that named it: ``ADMITTED``,
#: ``RATE_LIMIT_CHARGED``, ``ORDERED_TICKET`` (``"ordered_lock"``), ``STEP_ORDERED_TICKETS``
#: (``"step_ordered_locks"``), ``PARKED_HOLDS`` and ``WAITING`` (engine/coordination/);
#: ``ASYNC_STEPS`` (engine/async_step.py, and the bare ``"waiting"`` literal there);
#: ``VALIDATE_INPUTS`` (engine/background.py and engine/maps/fan_out.py), ``HANDED_OFF``
#: (engine/background.py), ``ARGUMENT_ERROR`` (engine/maps/fan_out.py); ``QUARANTINE_KEY``
#: (engine/quarantine.py, with ``original_truncated`` when only a prefix was kept);
#: ``IDEMPOTENCY_KEY``, ``RETRIED_FROM``, ``RETRIES`` (model/run_links.py).
OLD_PRIVATE_DATA: dict[str, Any] = {
    "admitted": True,
    "rate_limit_charged": True,
    "ordered_lock": {"key": "ledger:7", "nonce": 3, "epoch": 2},
    "step_ordered_locks": {"apply": {"key": "queue", "nonce": 1, "epoch": 5}},
    "parked_holds": {
        "@reactor": [{"primitive": "lock", "key": "acct:7", "owner": "run-1"}],
        "post": [
            {"primitive": "lock", "key": "ledger", "owner": "run-1"},
            {"primitive": "semaphore", "key": "pool", "holder": "4f1c-holder"},
        ],
    },
    "waiting": {"scope": "post", "primitive": "semaphore", "key": "pool"},
    "async_steps": {"charge": {"dispatched_at": 1700000000.25}},
    "validate_inputs": True,
    "argument_error": "ArgumentResolutionError: map source has 2 elements now",
    "handed_off": "after",
    "idempotency_key": "order-7",
    "retried_from": "run-0",
    "retries": ["run-2", "run-3"],
    "quarantine": {
        "reason": "DeserializationError: bad", "original_status": "running",
        "original_document": '{"schema_version": "1"', "original_truncated": True,
    },
}


#: Keys added since the typed state (an older version keeps them in its unknown keys).
NEW_KEYS = frozenset({"interrupt", "cancel", "deadline", "suspension", "suspend_generation",
                      "failure_hold", "forked_from", "definition", "needs_version",
                      "sleep"})
# docs/run-control.md, "Interrupts", "Cancel"; docs/concepts.md, "Run deadlines";
# docs/operations.md, "Suspend and unsuspend", "Pause, rewind, fork"; docs/deploys.md,
# "Fingerprints", "Compatibility rules"; docs/schedules.md, "Durable sleep"


def test_every_key_the_old_code_wrote_loads_into_its_typed_field() -> None:
    assert set(OLD_PRIVATE_DATA) == STORED_KEYS - NEW_KEYS
    state = EngineState.from_json(json.loads(json.dumps(OLD_PRIVATE_DATA)))
    assert state == EngineState(
        admitted=True,
        rate_limit_charged=True,
        ordered_ticket=KeyedTicket("ledger:7", nonce=3, epoch=2),
        step_ordered_tickets={"apply": KeyedTicket("queue", nonce=1, epoch=5)},
        parked_holds={
            "@reactor": (ParkedHold("lock", "acct:7", "run-1"),),
            "post": (ParkedHold("lock", "ledger", "run-1"),
                     ParkedHold("semaphore", "pool", "4f1c-holder")),
        },
        waiting=Waiting(scope="post", primitive="semaphore", key="pool"),
        async_steps={"charge": AsyncStepRef(dispatched_at=1700000000.25)},
        validate_inputs=True,
        argument_error="ArgumentResolutionError: map source has 2 elements now",
        handed_off="after",
        links=RunLinks(idempotency_key="order-7", retried_from="run-0",
                       retries=("run-2", "run-3")),
        quarantine=Quarantine("DeserializationError: bad", "running",
                              '{"schema_version": "1"', original_truncated=True),
    )
    assert state.extra == {}
    assert state.ordered_ticket is not None
    assert state.ordered_ticket.ticket == OrderedTicket(nonce=3, epoch=2)
    # written back exactly as the old code wrote it: old readers read new documents too
    assert state.to_json() == OLD_PRIVATE_DATA


def test_every_stored_document_of_the_old_version_reads_and_writes_back_unchanged() -> None:
    stored: dict[str, dict[str, Any]] = json.loads(STORED_CONTEXTS.read_text(encoding="utf-8"))
    seen: set[str] = set()
    for name, document in stored.items():
        ctx = Context.from_document(codec.decode_document(json.dumps(document)))
        assert ctx.to_document()["private_data"] == document["private_data"], name
        seen |= set(document["private_data"])
    assert seen == {"idempotency_key", "retries", "retried_from", "handed_off",
                    "validate_inputs", "waiting", "quarantine"}
    parked = Context.from_document(codec.decode_document(json.dumps(stored["parked_on_lock"])))
    assert parked.engine_state.handed_off == "all"
    assert parked.engine_state.waiting == Waiting("@reactor", "lock", "sku:a")
    original = stored["retried_original"]["private_data"]["retries"]
    retried = Context.from_document(codec.decode_document(json.dumps(stored["retried_original"])))
    assert retried.engine_state.links.retries == tuple(original)


def test_a_cancel_request_round_trips_and_reads_as_a_claim() -> None:
    stored = {"cancel": {"reason": "ops", "rollback": False, "requested_at": 1700000000}}
    state = EngineState.from_json(stored)
    assert state.cancel == CancelRequest("ops", False, 1700000000.0)
    assert state.to_json() == stored
    assert CancelRequest.decode(state.cancel.encode()) == state.cancel
    assert EngineState.from_json({"cancel": {}}).cancel == CancelRequest()
    with pytest.raises(DeserializationError, match=r"'private_data\.cancel\.rollback'"):
        EngineState.from_json({"cancel": {"rollback": "no"}})
    with pytest.raises(DeserializationError, match="'cancel claim' must be an object"):
        CancelRequest.decode("[1]")


def test_a_deadline_and_a_deadlines_stop_request_round_trip() -> None:
    """docs/concepts.md, "Run deadlines": ``deadline`` is stored as epoch seconds; a cancel
    request's ``cause`` is written only when set, so a cancel's stored form is unchanged."""
    stored = {"deadline": 1700000060,
              "cancel": {"reason": "its deadline passed", "rollback": True,
                         "requested_at": 1700000061.5, "cause": "deadline"}}
    state = EngineState.from_json(stored)
    assert state.deadline == 1700000060.0
    assert state.cancel == CancelRequest("its deadline passed", True, 1700000061.5, "deadline")
    assert state.to_json() == stored
    assert CancelRequest.decode(state.cancel.encode()).cause == "deadline"
    assert "cause" not in CancelRequest("ops").to_json()
    assert EngineState().to_json() == {}
    with pytest.raises(DeserializationError, match=r"'private_data\.deadline'"):
        EngineState.from_json({"deadline": "soon"})
    with pytest.raises(DeserializationError, match=r"'private_data\.cancel\.cause'"):
        EngineState.from_json({"cancel": {"cause": "boredom"}})


def test_a_suspension_round_trips_and_reads_as_a_claim() -> None:
    stored = {"suspension": {"reason": "incident", "by": "alice", "at": 1700000000,
                             "resume": "paused"},
              "suspend_generation": 2}
    state = EngineState.from_json(stored)
    assert state.suspension == Suspension("incident", "alice", 1700000000.0, "paused")
    assert state.suspend_generation == 2
    assert state.to_json() == stored
    assert Suspension.decode(state.suspension.encode()) == state.suspension
    assert EngineState(suspend_generation=0).to_json() == {}
    with pytest.raises(DeserializationError, match=r"'private_data\.suspension\.resume'"):
        EngineState.from_json({"suspension": {"resume": "later"}})
    with pytest.raises(DeserializationError, match=r"'private_data\.suspend_generation'"):
        EngineState.from_json({"suspend_generation": "2"})


def test_a_pending_interrupt_round_trips_every_field() -> None:
    stored = {"interrupt": {
        "step": "review.approval", "correlation_id": "refund:o-1", "paused_at": 1700000000,
        "timeout": 60, "deadline": 1700000060.5, "expiry": "active", "max_attempts": 3,
        "attempts": 1,
    }}
    state = EngineState.from_json(stored)
    assert state.interrupt == PendingInterrupt(
        "review.approval", "refund:o-1", 1700000000.0, 60.0, 1700000060.5, "active", 3, 1
    )
    assert state.to_json() == stored
    bare = EngineState.from_json({"interrupt": {"step": "approval"}})
    assert bare.interrupt == PendingInterrupt("approval")
    view = RunView.from_context(Context(context_id="r", reactor="x", engine_state=state))
    assert view.interrupt == state.interrupt


def test_defaults_are_not_written_and_a_stored_null_reads_as_the_default() -> None:
    assert EngineState().to_json() == {}
    assert EngineState.from_json({k: None for k in STORED_KEYS}) == EngineState()
    assert EngineState.from_json({"parked_holds": {}, "retries": []}).to_json() == {}
    legacy = EngineState.from_json({"ordered_lock": {"key": "k", "nonce": 1}})
    assert legacy.ordered_ticket == KeyedTicket("k", 1, epoch=0)  # a legacy ticket


def test_unknown_keys_are_kept_and_written_back() -> None:
    stored = {"admitted": True, "future_fact": {"n": 1, "at": [1, 2]}, "flag": "x"}
    state = EngineState.from_json(stored)
    assert state.admitted is True
    assert state.extra == {"future_fact": {"n": 1, "at": [1, 2]}, "flag": "x"}
    updated = state.with_async_step("u", AsyncStepRef(5.0))
    assert updated.to_json() == {**stored, "async_steps": {"u": {"dispatched_at": 5.0}}}
    ctx = Context(context_id="r", reactor="x", engine_state=state)
    text = codec.encode_document(ctx.to_document())
    again = Context.from_document(codec.decode_document(text))
    assert again.engine_state == state


def test_extra_never_shadows_a_typed_field() -> None:
    with pytest.raises(ValueError, match="admitted"):
        EngineState(extra={"admitted": True})


@pytest.mark.parametrize(("private_data", "field"), [
    ({"admitted": "yes"}, "private_data.admitted"),
    ({"rate_limit_charged": 1}, "private_data.rate_limit_charged"),
    ({"ordered_lock": "k:1"}, "private_data.ordered_lock"),
    ({"ordered_lock": {"key": "k", "nonce": "1", "epoch": 0}}, "private_data.ordered_lock.nonce"),
    ({"ordered_lock": {"nonce": 1, "epoch": 0}}, "private_data.ordered_lock"),
    ({"step_ordered_locks": {"apply": {"key": 3, "nonce": 1}}},
     "private_data.step_ordered_locks.apply.key"),
    ({"parked_holds": {"post": {"primitive": "lock"}}}, "private_data.parked_holds.post"),
    ({"parked_holds": {"post": [{"primitive": "lock", "key": "k", "owner": 7}]}},
     "private_data.parked_holds.post[0].owner"),
    ({"parked_holds": {"post": [{"primitive": "mutex", "key": "k", "owner": "o"}]}},
     "private_data.parked_holds.post[0].primitive"),
    ({"parked_holds": {"post": [{"primitive": "semaphore", "key": "k", "owner": "o"}]}},
     "private_data.parked_holds.post[0]"),
    ({"waiting": {"scope": "s", "primitive": "lock"}}, "private_data.waiting"),
    ({"waiting": {"scope": 1, "primitive": "lock", "key": "k"}}, "private_data.waiting.scope"),
    ({"waiting": {"scope": "s", "primitive": "nap", "key": "k"}},
     "private_data.waiting.primitive"),
    ({"async_steps": {"u": {"dispatched_at": "now"}}}, "private_data.async_steps.u.dispatched_at"),
    ({"async_steps": ["u"]}, "private_data.async_steps"),
    ({"validate_inputs": "true"}, "private_data.validate_inputs"),
    ({"argument_error": ["x"]}, "private_data.argument_error"),
    ({"handed_off": "later"}, "private_data.handed_off"),
    ({"idempotency_key": 7}, "private_data.idempotency_key"),
    ({"retried_from": {"id": "r"}}, "private_data.retried_from"),
    ({"retries": "run-2"}, "private_data.retries"),
    ({"retries": ["run-2", 3]}, "private_data.retries[1]"),
    ({"quarantine": {"reason": "r", "original_status": "running"}}, "private_data.quarantine"),
    ({"interrupt": {"correlation_id": "c"}}, "private_data.interrupt"),
    ({"interrupt": {"step": 3}}, "private_data.interrupt.step"),
    ({"interrupt": {"step": "a", "expiry": "eager"}}, "private_data.interrupt.expiry"),
    ({"interrupt": {"step": "a", "max_attempts": "3"}}, "private_data.interrupt.max_attempts"),
    ({"interrupt": {"step": "a", "deadline": True}}, "private_data.interrupt.deadline"),
    ({"quarantine": {"reason": "r", "original_status": "running", "original_document": "{",
                     "original_truncated": "yes"}}, "private_data.quarantine.original_truncated"),
])
def test_a_malformed_value_is_refused_naming_its_field(
    private_data: dict[str, Any], field: str
) -> None:
    named = re.escape(f"'{field}'")
    with pytest.raises(DeserializationError, match=named):
        EngineState.from_json(private_data)
    document = Context(context_id="r", reactor="x").to_document()
    document["private_data"] = private_data
    with pytest.raises(DeserializationError, match=named):
        Context.from_document(codec.decode_document(codec.encode_document(document)))


@pytest.mark.parametrize(("private_data", "message"), [
    # strict: a bool is not an int, an int is not a bool, nothing is coerced
    ({"ordered_lock": {"key": "k", "nonce": True}},
     "'private_data.ordered_lock.nonce' must be int, got bool"),
    ({"ordered_lock": {"key": "k", "nonce": 1.0}},
     "'private_data.ordered_lock.nonce' must be int, got float"),
    ({"ordered_lock": {"key": "k", "nonce": 1, "epoch": None}},
     "'private_data.ordered_lock.epoch' must be int, got NoneType"),
    ({"admitted": 1}, "'private_data.admitted' must be bool, got int"),
    ({"async_steps": {"u": {"dispatched_at": True}}},
     "'private_data.async_steps.u.dispatched_at' must be a number, got bool"),
    ({"async_steps": {"u": {"dispatched_at": "1700000000"}}},
     "'private_data.async_steps.u.dispatched_at' must be a number, got str"),
    ({"async_steps": {"u": {"dispatched_at": Decimal("1700000000")}}},  # the codec's decimal
     "'private_data.async_steps.u.dispatched_at' must be a number, got Decimal"),
    ({"retries": ("run-2",)}, "'private_data.retries' must be a list, got tuple"),  # its tuple
    ({1: "x"}, "'private_data' keys must be str, got int"),  # the codec's dict of any keys
    ({"async_steps": {1: {"dispatched_at": 1.0}}},
     "'private_data.async_steps' keys must be str, got int"),
    ({"step_ordered_locks": {"apply": ["q", 1]}},
     "'private_data.step_ordered_locks.apply' must be an object, got list"),
    ({"parked_holds": {"lock": ["lock"]}},
     "'private_data.parked_holds.lock[0]' must be an object, got str"),
    ({"parked_holds": {"post": [{"key": "k", "owner": "o"}]}},
     "'private_data.parked_holds.post[0]' has no 'primitive'"),
    ({"parked_holds": {"post": [{"primitive": "semaphore", "key": "k", "owner": "o"}]}},
     "'private_data.parked_holds.post[0]' has no 'holder'"),
    ({"parked_holds": {"post": [{"primitive": "mutex", "key": "k", "owner": "o"}]}},
     "'private_data.parked_holds.post[0].primitive' must be one of lock, semaphore, got 'mutex'"),
    ({"handed_off": "later"},
     "'private_data.handed_off' must be one of all, after, before, got 'later'"),
    ({"quarantine": {"reason": "r", "original_status": "running", "original_document": "{",
                     "original_truncated": None}},
     "'private_data.quarantine.original_truncated' must be bool, got NoneType"),
])
def test_the_message_names_the_full_path_and_the_expected_type(
    private_data: dict[str, Any], message: str
) -> None:
    with pytest.raises(DeserializationError) as refused:
        EngineState.from_json(private_data)
    assert str(refused.value) == f"context field {message}"


def test_the_refusal_does_not_chain_the_stored_text() -> None:
    secret = "tok_visa_SECRET_4242"
    with pytest.raises(DeserializationError) as refused:
        EngineState.from_json({"quarantine": {
            "reason": "r", "original_status": "running", "original_document": "{",
            "original_truncated": secret,
        }})
    # a logged traceback shows the message only, never pydantic's quote of the stored value
    assert secret not in "".join(traceback.format_exception(refused.value))


def test_accepted_forms_read_as_before() -> None:
    state = EngineState.from_json({
        "async_steps": {"u": {"dispatched_at": 1700000000}},  # int epoch seconds
        "ordered_lock": {"key": "k", "nonce": 1, "epoch": 0, "later": True},  # a key not read
        "waiting": {"primitive": "lock", "key": "k"},  # no scope
    })
    assert state.async_steps["u"] == AsyncStepRef(1700000000.0)
    assert isinstance(state.async_steps["u"].dispatched_at, float)
    assert state.ordered_ticket == KeyedTicket("k", 1)
    assert state.waiting == Waiting(None, "lock", "k")


def test_the_unit_record_readers_name_their_own_path() -> None:
    # reactor/jobs/handlers/step.py reads a unit's park state with these, under "data.*"
    assert ParkedHold.from_json({"primitive": "lock", "key": "k", "owner": "o"}) == ParkedHold(
        "lock", "k", "o"
    )
    with pytest.raises(DeserializationError, match=re.escape("'data.ticket.key' must be str")):
        KeyedTicket.from_json({"key": 1, "nonce": 1}, "data.ticket")
    with pytest.raises(DeserializationError, match=re.escape("'data.holds[1]' has no 'holder'")):
        ParkedHold.from_json({"primitive": "semaphore", "key": "k"}, "data.holds[1]")
    with pytest.raises(DeserializationError, match=re.escape("'data.holds[0].owner' must be str")):
        ParkedHold.from_json({"primitive": "lock", "key": "k", "owner": 7}, "data.holds[0]")


def test_private_data_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(DeserializationError, match="private_data"):
        EngineState.from_json(["admitted"])
    document = Context(context_id="r", reactor="x").to_document()
    document["private_data"] = "admitted"
    with pytest.raises(DeserializationError, match="private_data"):
        Context.from_document(document)


def test_updates_return_new_values_and_leave_the_old_one_alone() -> None:
    state = EngineState()
    hold = ParkedHold("semaphore", "pool", "h-1")
    parked = state.with_parked_holds("post", [hold])
    assert parked.parked_holds == {"post": (hold,)} and state.parked_holds == {}
    assert parked.with_parked_holds("post", ()).parked_holds == {}
    ticketed = state.with_step_ticket("apply", KeyedTicket.of("q", OrderedTicket(2, 1)))
    assert ticketed.step_ordered_tickets["apply"] == KeyedTicket("q", 2, 1)
    assert ticketed.with_step_ticket("apply", None).step_ordered_tickets == {}
    links = RunLinks(retried_from="a").with_retry("b").with_retry("c")
    assert links == RunLinks(retried_from="a", retries=("b", "c"))
    given = {"u": AsyncStepRef(1.0)}
    copied = EngineState(async_steps=given)
    given["v"] = AsyncStepRef(2.0)
    assert set(copied.async_steps) == {"u"}  # a private copy
    quarantined = Quarantine("r", "running", "0123456789").truncated(4)
    assert (quarantined.original_document, quarantined.original_truncated) == ("0123", True)


def test_run_view_shows_the_links() -> None:
    ctx = Context(context_id="r", reactor="x", engine_state=EngineState(
        links=RunLinks(idempotency_key="k", retried_from="a", retries=("b",))
    ))
    view = RunView.from_context(ctx)
    assert (view.idempotency_key, view.retried_from, view.retries) == ("k", "a", ("b",))


def test_the_quarantined_original_text_is_masked_in_the_stored_document() -> None:
    secret = "tok_visa_SECRET_4242"
    ring = Keyring([generate_key()])
    original = Context(context_id="r", reactor="x", status=RunStatus.RUNNING,
                       inputs={"card": secret}, redacted=["card"])
    for sealed in (None, ring.seal):
        text = codec.encode_document(original.to_document(sealed))
        ctx = Context(context_id="r", reactor="x", status=RunStatus.FAILED,
                      engine_state=EngineState(quarantine=Quarantine("r", "running", text)))
        stored = codec.encode_document(ctx.to_document())
        masked = json.dumps(mask_document(json.loads(stored)))
        assert secret not in masked and "reactor.Secret" not in masked
        assert json.loads(masked)["private_data"]["quarantine"]["reason"] == "r"
