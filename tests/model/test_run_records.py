"""The typed run records (reactor/model/run_records.py; docs/protocol.md, "Contexts"): every
stored shape reads and writes back unchanged (keys, order, absent keys, unknown keys), and a
malformed field raises ``DeserializationError`` naming it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactor.errors import DeserializationError
from reactor.model.results import RollbackFailure
from reactor.model.run_records import (
    RESULT_OF_STEP,
    MapMembership,
    MapRef,
    RetryCounters,
    RollbackState,
    TraceRecord,
    UndoEntry,
)

_names = st.text("abcdefgh_", min_size=1, max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
    max_leaves=6,
)
#: Keys a newer version might add (never one a record knows).
_unknown = st.dictionaries(st.sampled_from(["later", "zz_new", "v2"]), _json, max_size=2)


def _ordered(value: dict[str, Any]) -> str:
    return json.dumps(value)  # compares keys, values and key order


# ------------------------------------------------------------------------------ undo entries

#: Undo entries exactly as the engine writes them (reactor/engine/executor.py, compose.py,
#: async_reactor.py, maps/inline.py, maps/fan_out.py), ``redacted`` appended last.
_UNDO_SHAPES: list[dict[str, Any]] = [
    {"step": "s", "kind": "step", "arguments": {"a": 1}, "result": {"v": 2}},
    {"step": "s", "kind": "step", "arguments": {"card": "x"}, "result": 3, "redacted": ["card"]},
    {"step": "c", "kind": "compose", "arguments": {"n": 1}, "result": None},
    {"step": "ar", "kind": "async_reactor", "arguments": {}, "result": None,
     "child_run_id": "child"},
    {"step": "m", "kind": "map", "arguments": {"map_id": "m1"}, "result": None,
     "map_id": "m1", "elements": [[0, "e0"], [2, "e2"]]},
    {"step": "f", "kind": "map", "arguments": {"map_id": "m2"}, "result": None,
     "map_id": "m2", "fan_out": True, "count": 4},
    {"step": "old"},
    {"step": "old", "kind": "step", "arguments": {}},
]


@pytest.mark.parametrize("shape", _UNDO_SHAPES)
def test_every_undo_shape_round_trips_in_order(shape: dict[str, Any]) -> None:
    entry = UndoEntry.from_stored(shape)
    assert _ordered(entry.to_stored()) == _ordered(shape)


def test_an_undo_result_recorded_as_the_step_result_is_stored_once() -> None:
    value = {"big": "x"}
    entry = UndoEntry("s", "step", {}, value, redacted=("k",))
    stored = entry.to_stored({"s": value})
    assert _ordered(stored) == _ordered(
        {"step": "s", "kind": "step", "arguments": {}, "redacted": ["k"], RESULT_OF_STEP: True}
    )
    back = UndoEntry.from_stored(stored, {"s": value})
    assert back == entry and back.result is value
    assert entry.to_stored({"s": {"big": "x"}})["result"] is value  # equal is not the same


def test_undo_arguments_named_redacted_are_sealed_only_when_stored() -> None:
    entry = UndoEntry("s", "step", {"card": "4242", "n": 1}, None, redacted=("card",))
    stored = entry.to_stored(seal=lambda v: f"sealed({v})")
    assert stored["arguments"] == {"card": "sealed(4242)", "n": 1}
    assert entry.arguments["card"] == "4242"


@given(
    kind=st.none() | _names, arguments=st.dictionaries(_names, _json, max_size=3),
    result=_json, child=st.none() | _names, map_id=st.none() | _names,
    fan_out=st.none() | st.booleans(), count=st.none() | st.integers(0, 9),
    elements=st.none() | st.lists(st.tuples(st.integers(0, 9), _names), max_size=3),
    redacted=st.none() | st.lists(_names, max_size=2), extra=_unknown,
    absent=st.sets(st.sampled_from(["kind", "arguments", "result"])),
)
def test_any_undo_entry_round_trips(
    kind: Any, arguments: Any, result: Any, child: Any, map_id: Any, fan_out: Any, count: Any,
    elements: Any, redacted: Any, extra: Any, absent: Any,
) -> None:
    entry = UndoEntry(
        "s", None if "kind" in absent else kind, {} if "arguments" in absent else arguments,
        None if "result" in absent else result, child_run_id=child, map_id=map_id,
        fan_out=fan_out, count=count, elements=None if elements is None else tuple(elements),
        redacted=None if redacted is None else tuple(redacted), extra=extra,
        absent=frozenset(absent),
    )
    stored = entry.to_stored()
    assert UndoEntry.from_stored(json.loads(json.dumps(stored))) == entry
    assert absent.isdisjoint(stored)
    if extra:
        assert list(stored)[-len(extra):] == list(extra)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"kind": "step"}, "'step'"),
        ({"step": 3}, "'step'"),
        ({"step": "s", "kind": 1}, "'kind'"),
        ({"step": "s", "arguments": [1]}, "'arguments'"),
        ({"step": "s", "elements": [["0", "e"]]}, "'elements'"),
        ({"step": "s", "elements": [[True, "e"]]}, "'elements'"),
        ({"step": "s", "redacted": "card"}, "'redacted'"),
        ({"step": "s", "count": "3"}, "'count'"),
        ({"step": "s", "fan_out": "yes"}, "'fan_out'"),
        ({"step": "s", "child_run_id": 7}, "'child_run_id'"),
    ],
)
def test_a_malformed_undo_entry_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(DeserializationError, match=field):
        UndoEntry.from_stored(raw, where="undo_stack[0]")


def test_an_undo_entry_that_is_no_object_is_refused() -> None:
    with pytest.raises(DeserializationError, match=r"undo_stack\[4\] must be an object"):
        UndoEntry.from_stored([1], where="undo_stack[4]")


# ------------------------------------------------------------------------------ rollback

_FAILURE = RollbackFailure("a", "undo", "raised", "m", "map", 2)
_ROLLBACK_SHAPES: list[dict[str, Any]] = [
    {"step": "s", "kind": "step", "arguments": {"a": 1}, "compensate_pending": True,
     "compensate_failed": False, "failures": []},
    {"step": None, "kind": None, "arguments": {}, "compensate_pending": False,
     "compensate_failed": True, "failures": [_FAILURE], "redacted": ["a"],
     "interruption": "KeyboardInterrupt"},
    {"step": "s", "kind": "step", "arguments": {}, "compensate_pending": True,
     "failures": [_FAILURE]},
    {"step": "s", "arguments": {}, "compensate_pending": False, "compensate_failed": False,
     "failures": [], "v2": {"new": 1}},
]


@pytest.mark.parametrize("shape", _ROLLBACK_SHAPES)
def test_every_rollback_shape_round_trips_in_order(shape: dict[str, Any]) -> None:
    state = RollbackState.from_stored(shape)
    assert state.to_stored() == shape and list(state.to_stored()) == list(shape)


def test_rollback_changes_are_new_records() -> None:
    state = RollbackState("s", "step", {"card": "x"}, compensate_pending=True,
                          redacted=("card",))
    more = state.with_failures([_FAILURE])
    assert state.failures == () and more.failures == (_FAILURE,)
    assert more.to_stored(seal=lambda v: "S")["arguments"] == {"card": "S"}


def test_raw_rollback_failures_read_from_their_tagged_form() -> None:
    raw = {"step": "s", "failures": [
        {"__t": "reactor.RollbackFailure", "v": {"step": "a", "kind": "undo", "reason": "raised",
                                                 "message": "m", "map_step": "map",
                                                 "element_index": 2}},
        {"__t": "reactor.RollbackFailure", "v": {"step": "a", "kind": "explode"}},
    ]}
    assert RollbackState.from_stored(raw, raw_failures=True).failures == (_FAILURE,)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"step": 3}, "'step'"),
        ({"step": "s", "arguments": [1]}, "'arguments'"),
        ({"step": "s", "compensate_pending": "yes"}, "'compensate_pending'"),
        ({"step": "s", "compensate_failed": 1}, "'compensate_failed'"),
        ({"step": "s", "failures": ["x"]}, "'failures'"),
        ({"step": "s", "failures": {}}, "'failures'"),
        ({"step": "s", "redacted": [1]}, "'redacted'"),
        ({"step": "s", "interruption": 5}, "'interruption'"),
    ],
)
def test_a_malformed_rollback_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(DeserializationError, match=field):
        RollbackState.from_stored(raw)


# ------------------------------------------------------------------------------ trace


@given(
    type_=_names, step=st.none() | _names,
    at=st.integers(0, 2**40) | st.floats(0, 2e9, allow_nan=False),
    details=st.lists(st.sampled_from(["attempt", "detail", "primitive", "later"]),
                     unique=True, max_size=4),
)
def test_any_trace_entry_round_trips_with_its_detail_order(
    type_: str, step: str | None, at: float, details: list[str]
) -> None:
    values = {"attempt": 2, "detail": "why", "primitive": "lock", "later": [1]}
    raw = {"type": type_, "step": step, "at": at, **{k: values[k] for k in details}}
    entry = TraceRecord.from_stored(raw)
    assert json.dumps(entry.to_stored()) == json.dumps(raw)
    assert entry.attempt == (2 if "attempt" in details else None)
    assert entry.detail == ("why" if "detail" in details else None)


def test_a_new_trace_entry_leaves_unset_details_out() -> None:
    entry = TraceRecord.of("failed", "s", 1.5, detail="boom", attempt=None)
    assert entry.to_stored() == {"type": "failed", "step": "s", "at": 1.5, "detail": "boom"}


def test_a_lost_hold_entry_reads_its_primitive_key_and_time() -> None:
    entry = TraceRecord.of("hold_lost", "s", 1.0, primitive="lock", key="k", lost_at=2.5,
                           detail="lost")
    assert list(entry.to_stored()) == ["type", "step", "at", "primitive", "key", "lost_at",
                                       "detail"]
    assert (entry.primitive, entry.key, entry.lost_at) == ("lock", "k", 2.5)
    assert TraceRecord.from_stored(entry.to_stored()) == entry


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"step": "s", "at": 1.0}, "'type'"),
        ({"type": 1, "step": "s", "at": 1.0}, "'type'"),
        ({"type": "run", "step": 2, "at": 1.0}, "'step'"),
        ({"type": "run", "step": "s"}, "'at'"),
        ({"type": "run", "step": "s", "at": "now"}, "'at'"),
        ({"type": "run", "step": "s", "at": 1.0, "attempt": "2"}, "'attempt'"),
        ({"type": "run", "step": "s", "at": 1.0, "detail": 3}, "'detail'"),
        ({"type": "hold_lost", "step": "s", "at": 1.0, "primitive": 1}, "'primitive'"),
        ({"type": "hold_lost", "step": "s", "at": 1.0, "key": ["k"]}, "'key'"),
        ({"type": "hold_lost", "step": "s", "at": 1.0, "lost_at": "later"}, "'lost_at'"),
    ],
)
def test_a_malformed_trace_entry_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(DeserializationError, match=field):
        TraceRecord.from_stored(raw)


# ------------------------------------------------------------------------------ retries


@pytest.mark.parametrize(
    "shape", [{}, {"attempts": {}}, {"attempts": {"a": 2, "b": 1}}, {"attempts": {}, "v2": 1},
              {"attempts": {"a": 2}, "spent": {"a": 0.5, "b": 3}}]
)
def test_every_retry_shape_round_trips(shape: dict[str, Any]) -> None:
    assert RetryCounters.from_stored(shape).to_stored() == shape


def test_counting_attempts_materialises_the_attempts_object() -> None:
    counters = RetryCounters()
    assert counters.attempts_of("a") is None and counters.to_stored() == {}
    counted = counters.counted("a", 2)
    assert counted.attempts_of("a") == 2 and counters.attempts_of("a") is None
    assert counted.counted("a", None).to_stored() == {"attempts": {}}


def test_time_spent_is_kept_per_step_and_dropped_when_no_step_keeps_any() -> None:
    """docs/concepts.md, "Time limits": ``spent`` exists only while a step keeps a figure, so
    a run that never handed a limited retry to the queue stores what it always did."""
    counters = RetryCounters().counted("a", 1)
    assert counters.spent_of("a") == 0.0
    kept = counters.with_spent("a", 0.25).with_spent("b", 1)
    assert kept.spent_of("a") == 0.25 and kept.spent_of("b") == 1.0
    assert kept.to_stored() == {"attempts": {"a": 1}, "spent": {"a": 0.25, "b": 1.0}}
    dropped = kept.with_spent("a", None).with_spent("b", None)
    assert dropped.spent is None and dropped.to_stored() == {"attempts": {"a": 1}}


@pytest.mark.parametrize("raw", [[1], {"attempts": [1]}, {"attempts": {"a": "2"}},
                                 {"attempts": {"a": True}}, {"spent": [1]},
                                 {"spent": {"a": "1"}}, {"spent": {"a": True}},
                                 {"spent": {"a": -1}}, {"spent": {"a": float("nan")}},
                                 {"spent": {"a": float("inf")}}])
def test_malformed_retry_counters_are_refused(raw: Any) -> None:
    with pytest.raises(DeserializationError, match="retry_context"):
        RetryCounters.from_stored(raw)


# ------------------------------------------------------------------------------ map references

_MAP_SHAPES: list[dict[str, Any]] = [
    {"type": "map_ref", "map_id": "m", "elements": {}},
    {"type": "map_ref", "map_id": "m", "elements": {"0": "e0", "1": "e1"}},
    {"type": "map_ref", "map_id": "m", "fan_out": True, "count": 3, "elements": {}},
    {"type": "map_ref", "map_id": "m", "fan_out": True, "count": 3, "elements": {},
     "started": 3},
    {"type": "map_ref", "map_id": "m", "elements": {}, "later": {"x": 1}},
]


@pytest.mark.parametrize("shape", _MAP_SHAPES)
def test_every_map_ref_round_trips_in_order(shape: dict[str, Any]) -> None:
    ref = MapRef.from_stored(shape)
    assert _ordered(ref.to_stored()) == _ordered(shape)


def test_an_inline_ref_names_its_elements_by_index() -> None:
    ref = MapRef("m").with_element(1, "e1").with_element(0, "e0")
    assert ref.elements == {1: "e1", 0: "e0"} and not ref.is_fan_out
    assert ref.to_stored()["elements"] == {"1": "e1", "0": "e0"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"type": "compose"}, "'type'"),
        ({"type": "map_ref"}, "'map_id'"),
        ({"type": "map_ref", "map_id": 1}, "'map_id'"),
        ({"type": "map_ref", "map_id": "m", "elements": [1]}, "'elements'"),
        ({"type": "map_ref", "map_id": "m", "elements": {"x": "e"}}, "'elements'"),
        ({"type": "map_ref", "map_id": "m", "count": "3"}, "'count'"),
        ({"type": "map_ref", "map_id": "m", "started": 1.5}, "'started'"),
        ({"type": "map_ref", "map_id": "m", "fan_out": 1}, "'fan_out'"),
    ],
)
def test_a_malformed_map_ref_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(DeserializationError, match=field):
        MapRef.from_stored(raw)


# ------------------------------------------------------------------------------ map membership

#: ``map_metadata`` as the inline and fan-out maps store it, and with a key a newer version adds.
_MEMBERSHIP_SHAPES: list[dict[str, Any]] = [
    {"map_step": "lines", "map_id": "m1", "index": 0, "parent_reactor": "orders"},
    {"map_step": "lines", "map_id": "m1", "index": 7, "parent_reactor": "orders",
     "later": {"x": 1}},
]


@pytest.mark.parametrize("shape", _MEMBERSHIP_SHAPES)
def test_every_map_membership_shape_round_trips_in_order(shape: dict[str, Any]) -> None:
    membership = MapMembership.from_stored(shape)
    assert _ordered(membership.to_stored()) == _ordered(shape)
    assert (membership.map_step, membership.map_id, membership.parent_reactor) == (
        "lines", "m1", "orders"
    )
    assert membership.index == shape["index"]


@given(step=_names, map_id=_names, index=st.integers(min_value=0), parent=_names,
       extra=_unknown)
def test_any_map_membership_round_trips(
    step: str, map_id: str, index: int, parent: str, extra: dict[str, Any]
) -> None:
    stored = {"map_step": step, "map_id": map_id, "index": index, "parent_reactor": parent,
              **extra}
    membership = MapMembership.from_stored(json.loads(json.dumps(stored)))
    assert membership == MapMembership(step, map_id, index, parent, extra)
    assert _ordered(membership.to_stored()) == _ordered(stored)


def test_a_map_membership_keeps_unknown_keys_after_the_known_ones() -> None:
    membership = MapMembership.from_stored(
        {"later": 1, "map_step": "s", "map_id": "m", "index": 2, "parent_reactor": "p"}
    )
    assert membership.extra == {"later": 1}
    assert list(membership.to_stored()) == ["map_step", "map_id", "index", "parent_reactor",
                                            "later"]


def test_a_map_membership_shows_as_a_read_only_mapping() -> None:
    shown = MapMembership("s", "m", 2, "p").as_mapping()
    assert shown == {"map_step": "s", "map_id": "m", "index": 2, "parent_reactor": "p"}
    with pytest.raises(TypeError):
        shown["index"] = 3  # type: ignore[index]


_WHOLE = {"map_step": "s", "map_id": "m", "index": 2, "parent_reactor": "p"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({k: v for k, v in _WHOLE.items() if k != "map_step"}, "'map_step'"),
        ({**_WHOLE, "map_step": None}, "'map_step'"),
        ({k: v for k, v in _WHOLE.items() if k != "map_id"}, "'map_id'"),
        ({**_WHOLE, "map_id": 7}, "'map_id'"),
        ({k: v for k, v in _WHOLE.items() if k != "index"}, "'index'"),
        ({**_WHOLE, "index": None}, "'index'"),
        ({**_WHOLE, "index": "2"}, "'index'"),
        ({**_WHOLE, "index": 2.0}, "'index'"),
        ({**_WHOLE, "index": True}, "'index'"),
        ({**_WHOLE, "index": -1}, "'index'"),
        ({k: v for k, v in _WHOLE.items() if k != "parent_reactor"}, "'parent_reactor'"),
        ({**_WHOLE, "parent_reactor": ["p"]}, "'parent_reactor'"),
    ],
)
def test_a_malformed_map_membership_names_its_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(DeserializationError, match=field):
        MapMembership.from_stored(raw, "context field 'map_metadata'")


@pytest.mark.parametrize("raw", [None, [], "lines", 3, [["map_step", "s"]]])
def test_a_map_membership_that_is_no_object_is_refused(raw: Any) -> None:
    with pytest.raises(DeserializationError, match="map_metadata"):
        MapMembership.from_stored(raw)


_hostile_membership = _json | st.dictionaries(
    st.sampled_from(["map_step", "map_id", "index", "parent_reactor", "later"]),
    _json | st.integers(min_value=-2, max_value=2) | _names, max_size=5,
)


@given(_hostile_membership)
def test_hostile_map_metadata_reads_whole_or_is_refused(raw: Any) -> None:
    try:
        membership = MapMembership.from_stored(raw)
    except DeserializationError:
        return
    assert membership.to_stored() == raw and membership.index >= 0
    assert all(isinstance(v, str)
               for v in (membership.map_step, membership.map_id, membership.parent_reactor))


@pytest.mark.parametrize(
    ("raw", "index"),
    [(None, None), ({}, None), ({"index": 3}, 3), (_WHOLE, 2), ({"index": "3"}, None),
     ({"index": True}, None), ({"index": -1}, None), ([3], None)],
)
def test_the_index_of_a_partial_map_metadata(raw: Any, index: int | None) -> None:
    assert MapMembership.index_in(raw) == index
