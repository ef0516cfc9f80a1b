"""Tests of reactor.model.codec: tagged JSON round trips, escaping, documents and errors."""

from __future__ import annotations

import builtins
import dataclasses
import enum
import json
import math
import os
import subprocess
import sys
from collections import OrderedDict, namedtuple
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    ReactorError,
    SchemaVersionError,
)
from reactor.model import codec

# --------------------------------------------------------------------------- test types


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Unregistered(enum.StrEnum):
    A = "a"


class Point(BaseModel):
    x: int
    y: int
    label: str = Field(default="", alias="Label")


class Line(BaseModel):
    start: Point
    stop: Point
    at: datetime


class NotRegisteredModel(BaseModel):
    a: int


@dataclasses.dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


@dataclasses.dataclass
class Box:
    items: list[Any]
    total: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        self.total = len(self.items)


@dataclasses.dataclass
class LooseDataclass:
    a: int


class Temperature:
    """A user type registered through register() with a payload that needs encoding itself."""

    def __init__(self, celsius: Decimal, measured_at: datetime) -> None:
        self.celsius = celsius
        self.measured_at = measured_at

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Temperature)
            and (self.celsius, self.measured_at) == (other.celsius, other.measured_at)
        )

    def __hash__(self) -> int:
        return hash((self.celsius, self.measured_at))


codec.register_enum(Color, tag="tests.codec.Color")
codec.register_enum(Priority)  # default tag
codec.register_model(Point, tag="tests.codec.Point")
codec.register_model(Line, tag="tests.codec.Line")
codec.register_dataclass(Money, tag="tests.codec.Money")
codec.register_dataclass(Box, tag="tests.codec.Box")
# Positional functions, keyword tag: the form reactor.model.results uses.
codec.register(
    Temperature,
    lambda t: {"celsius": t.celsius, "at": t.measured_at},
    lambda d: Temperature(d["celsius"], d["at"]),
    tag="tests.codec.Temperature",
)

PARIS = ZoneInfo("Europe/Paris")
PLUS_0530 = timezone(timedelta(hours=5, minutes=30))


# --------------------------------------------------------------------------- helpers


def same(a: Any, b: Any) -> bool:
    """Equality that also checks types, float signs, Decimal exponents and UTC offsets."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if isinstance(a, datetime | time):
        same_zone = (a.tzinfo is b.tzinfo) or not isinstance(a.tzinfo, ZoneInfo)
        return a.isoformat() == b.isoformat() and a.fold == b.fold and same_zone
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, set | frozenset):
        return sorted(map(codec.dumps, a)) == sorted(map(codec.dumps, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    return bool(a == b)


def roundtrip(value: Any) -> Any:
    """Encode, go through JSON text, decode."""
    return codec.loads(codec.dumps(value))


# --------------------------------------------------------------------------- round trips

TAGGED_CASES: list[tuple[str, Any, str]] = [
    ("aware datetime", datetime(2024, 3, 31, 1, 30, 15, 123456, tzinfo=PLUS_0530), "datetime"),
    ("utc datetime", datetime(2024, 1, 1, tzinfo=UTC), "datetime"),
    ("naive datetime", datetime(1999, 12, 31, 23, 59, 59), "datetime"),
    ("zoneinfo datetime", datetime(2024, 10, 27, 2, 30, tzinfo=PARIS, fold=1), "datetime"),
    ("historic LMT offset", datetime(1900, 1, 1, tzinfo=PARIS), "datetime"),
    ("microsecond offset",
     datetime(2000, 1, 1, tzinfo=timezone(timedelta(microseconds=1))), "datetime"),
    ("date", date(2024, 2, 29), "date"),
    ("naive time", time(8, 15, 0, 500), "time"),
    ("aware time", time(8, 15, tzinfo=timezone(timedelta(hours=-3))), "time"),
    ("fold time", time(1, 30, fold=1), "time"),
    ("microsecond offset time", time(tzinfo=timezone(-timedelta(microseconds=7))), "time"),
    ("timedelta", timedelta(days=-3, seconds=7, microseconds=11), "timedelta"),
    ("decimal", Decimal("19.990"), "decimal"),
    ("decimal exponent", Decimal("-1.5E+30"), "decimal"),
    ("decimal nan", Decimal("NaN"), "decimal"),
    ("decimal inf", Decimal("-Infinity"), "decimal"),
    ("uuid", UUID("12345678-1234-5678-1234-567812345678"), "uuid"),
    ("bytes", b"\x00\xffpayload", "bytes"),
    ("bytearray", bytearray(b"\x01\x02"), "bytearray"),
    ("inf", math.inf, "float"),
    ("-inf", -math.inf, "float"),
    ("tuple", (1, "a", (2.5, None)), "tuple"),
    ("empty tuple", (), "tuple"),
    ("set", {3, 1, 2}, "set"),
    ("frozenset", frozenset({"b", "a"}), "frozenset"),
    ("int keys", {1: "one", 2: "two"}, "dict"),
    ("mixed keys", {("a", 1): [1], None: 0, True: "t", date(2024, 1, 1): "d"}, "dict"),
    ("escaped", {"__t": "datetime", "v": "not a date"}, "esc"),
    ("enum", Color.BLUE, "tests.codec.Color"),
    ("int enum", Priority.HIGH, f"{__name__}.Priority"),
    ("model", Point(x=1, y=2, Label="p"), "tests.codec.Point"),
    ("dataclass", Money(Decimal("10.00"), "EUR"), "tests.codec.Money"),
    ("custom", Temperature(Decimal("21.5"), datetime(2024, 5, 1, tzinfo=UTC)),
     "tests.codec.Temperature"),
]


@pytest.mark.parametrize(("value", "tag"), [c[1:] for c in TAGGED_CASES],
                         ids=[c[0] for c in TAGGED_CASES])
def test_every_tagged_type_round_trips_with_its_tag(value: Any, tag: str) -> None:
    encoded = codec.encode(value)
    assert isinstance(encoded, dict)
    assert encoded["__t"] == tag
    # The encoded form is plain JSON (no NaN tokens, no Python objects).
    text = json.dumps(encoded, allow_nan=False)
    assert same(codec.decode(json.loads(text)), value)
    assert same(roundtrip(value), value)


def test_decimal_nan_round_trips_as_nan() -> None:
    decoded = roundtrip(Decimal("NaN"))
    assert isinstance(decoded, Decimal)
    assert decoded.is_nan()


def test_float_nan_round_trips() -> None:
    decoded = roundtrip(math.nan)
    assert isinstance(decoded, float)
    assert math.isnan(decoded)


def test_json_native_values_pass_through_unchanged() -> None:
    value = {"a": [1, -2.5, "x", None, True, False], "b": {"c": {}}, "é": "ü", "": 0}
    assert codec.encode(value) == value
    assert codec.decode(value) == value
    assert same(roundtrip(value), value)


def test_aware_datetime_keeps_offset_and_instant() -> None:
    value = datetime(2024, 6, 1, 12, 0, tzinfo=PLUS_0530)
    decoded = roundtrip(value)
    assert decoded.utcoffset() == timedelta(hours=5, minutes=30)
    assert decoded == value
    assert decoded.hour == 12


def test_zoneinfo_datetime_keeps_its_zone() -> None:
    winter = datetime(2024, 1, 15, 9, 0, tzinfo=PARIS)
    decoded = roundtrip(winter)
    assert decoded.tzinfo is PARIS
    assert (decoded + timedelta(days=180)).utcoffset() == timedelta(hours=2)


def test_naive_datetime_stays_naive() -> None:
    decoded = roundtrip(datetime(2024, 1, 1, 8, 0))
    assert decoded.tzinfo is None


def test_decimal_is_exact() -> None:
    value = Decimal("0.1000000000000000000000000001")
    assert codec.encode(value) == {"__t": "decimal", "v": "0.1000000000000000000000000001"}
    assert str(roundtrip(value)) == "0.1000000000000000000000000001"


def test_model_uses_aliases_and_nested_json_mode() -> None:
    line = Line(start=Point(x=0, y=0), stop=Point(x=3, y=4, Label="end"),
                at=datetime(2024, 1, 1, tzinfo=UTC))
    encoded = codec.encode(line)
    assert encoded == {
        "__t": "tests.codec.Line",
        "v": {
            "start": {"x": 0, "y": 0, "Label": ""},
            "stop": {"x": 3, "y": 4, "Label": "end"},
            "at": "2024-01-01T00:00:00Z",
        },
    }
    assert roundtrip(line) == line


def test_dataclass_skips_non_init_fields() -> None:
    box = Box(items=[Decimal("1"), (2, 3)])
    encoded = codec.encode(box)
    assert encoded == {
        "__t": "tests.codec.Box",
        "v": {"items": [{"__t": "decimal", "v": "1"}, {"__t": "tuple", "v": [2, 3]}]},
    }
    decoded = roundtrip(box)
    assert decoded == box
    assert decoded.total == 2


def test_custom_payload_is_encoded_recursively() -> None:
    value = Temperature(Decimal("-4.0"), datetime(2024, 1, 1, tzinfo=UTC))
    assert codec.encode(value) == {
        "__t": "tests.codec.Temperature",
        "v": {
            "celsius": {"__t": "decimal", "v": "-4.0"},
            "at": {"__t": "datetime", "v": "2024-01-01T00:00:00+00:00"},
        },
    }
    assert roundtrip(value) == value


# --------------------------------------------------------------------------- hypothesis

_offsets = st.builds(
    timezone,
    st.timedeltas(min_value=timedelta(hours=-23, minutes=-59),
                  max_value=timedelta(hours=23, minutes=59)),
)
_zones = st.none() | _offsets | st.just(UTC) | st.just(PARIS)

_hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.decimals(allow_nan=False)
    | st.datetimes(timezones=_zones)
    | st.dates()
    | st.times(timezones=st.none() | _offsets)
    | st.timedeltas()
    | st.uuids()
    | st.binary(max_size=8)
    | st.sampled_from(list(Color) + list(Priority))
)
_hashables = st.recursive(
    _hashable_scalars,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
_keys = st.text(max_size=5) | st.sampled_from(["__t", "v", "schema_version"])


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_keys, inner, max_size=4)
        | st.dictionaries(_hashables, inner, max_size=3)
        | st.sets(_hashables, max_size=4)
        | st.frozensets(_hashables, max_size=4)
        | st.builds(Money, st.decimals(allow_nan=False), st.text(max_size=3))
        | st.builds(Box, st.lists(inner, max_size=3))
    )


_values = st.recursive(
    _hashable_scalars | st.binary(max_size=4).map(bytearray) | st.builds(Point, x=st.integers(),
                                                               y=st.integers()),
    _containers,
    max_leaves=25,
)


@given(_values)
def test_nested_values_round_trip(value: Any) -> None:
    text = codec.dumps(value)
    json.loads(text)  # plain, strict JSON
    assert same(codec.loads(text), value)


@given(st.sets(_hashables, max_size=6))
def test_set_encoding_is_deterministic(value: set[Any]) -> None:
    reordered = set(reversed(list(value)))
    assert codec.dumps(value) == codec.dumps(reordered)
    assert codec.dumps(value) == codec.dumps(set(value))


@given(st.dictionaries(_keys, _values, max_size=4))
def test_documents_round_trip(doc: dict[str, Any]) -> None:
    doc.pop("schema_version", None)  # owned by the codec (see the refusal test below)
    text = codec.encode_document(doc)
    assert json.loads(text)["schema_version"] == codec.SCHEMA_VERSION
    assert same(codec.decode_document(text), doc)


# --------------------------------------------------------------------------- sets and escaping


def test_set_encoding_does_not_depend_on_the_hash_seed() -> None:
    program = (
        "from reactor.model import codec; "
        "print(codec.dumps({'pear', 'apple', 'fig', 'kiwi', ('x', 1), 3, 'plum'}))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert codec.loads(outputs.pop()) == {"pear", "apple", "fig", "kiwi", ("x", 1), 3, "plum"}


def test_sets_are_sorted_naturally_when_comparable() -> None:
    assert codec.encode({10, 2, 33}) == {"__t": "set", "v": [2, 10, 33]}
    assert codec.encode(frozenset({"b", "c", "a"})) == {"__t": "frozenset", "v": ["a", "b", "c"]}


def test_mixed_sets_are_sorted_by_canonical_text() -> None:
    encoded = codec.encode({"b", 1, (2, "x")})
    assert isinstance(encoded, dict)
    items = encoded["v"]
    assert isinstance(items, list)
    texts = [json.dumps(i, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
             for i in items]
    assert texts == sorted(texts)
    assert roundtrip({"b", 1, (2, "x")}) == {"b", 1, (2, "x")}


def test_user_dict_with_tag_key_is_escaped() -> None:
    value = {"__t": "tuple", "v": [1, 2]}
    encoded = codec.encode(value)
    assert encoded == {"__t": "esc", "v": {"__t": "tuple", "v": [1, 2]}}
    decoded = roundtrip(value)
    assert decoded == value
    assert isinstance(decoded["v"], list)


def test_escaping_nests() -> None:
    value = {"__t": {"__t": "x"}, "other": (1,)}
    assert codec.encode(value) == {
        "__t": "esc",
        "v": {"__t": {"__t": "esc", "v": {"__t": "x"}}, "other": {"__t": "tuple", "v": [1]}},
    }
    assert same(roundtrip(value), value)


def test_dict_and_list_subclasses_are_stored_as_their_base() -> None:
    assert same(roundtrip(OrderedDict(a=1)), {"a": 1})


# --------------------------------------------------------------------------- encode errors


def test_unencodable_value_names_type_and_path() -> None:
    doc = {"inputs": {"order": {"lines": [1, 2, {"price": object()}]}}}
    with pytest.raises(codec.EncodeError) as info:
        codec.encode_document(doc)
    assert info.value.path == "inputs.order.lines[2].price"
    assert info.value.type_name == "object"
    assert "inputs.order.lines[2].price" in str(info.value)
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, ReactorError)


def test_encode_error_path_for_root_and_odd_keys() -> None:
    with pytest.raises(codec.EncodeError) as info:
        codec.encode(object())
    assert info.value.path == "<root>"
    with pytest.raises(codec.EncodeError) as info:
        codec.encode({"a b": {3: [object()]}})
    assert info.value.path == "['a b'][3][0]"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (Unregistered.A, "register_enum"),
        (NotRegisteredModel(a=1), "register_model"),
        (LooseDataclass(1), "register_dataclass"),
        (namedtuple("Pair", "a b")(1, 2), "tuple subclass"),
        (lambda: None, "register"),
        (memoryview(b"x"), "register"),
    ],
    ids=["enum", "model", "dataclass", "namedtuple", "function", "memoryview"],
)
def test_unregistered_types_are_refused(value: Any, needle: str) -> None:
    with pytest.raises(codec.EncodeError, match=needle):
        codec.dumps({"x": [value]})


def test_reference_cycle_is_an_encode_error() -> None:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    with pytest.raises(codec.EncodeError, match="cycle") as info:
        codec.encode(loop)
    assert info.value.path == "[1].again"


def test_shared_but_acyclic_references_are_fine() -> None:
    shared = [1, 2]
    assert codec.encode({"a": shared, "b": shared}) == {"a": [1, 2], "b": [1, 2]}


def test_failing_registered_encoder_is_an_encode_error() -> None:
    class Fragile:
        pass

    def explode(_: Fragile) -> Any:
        raise RuntimeError("boom")

    codec.register(Fragile, explode, lambda d: Fragile(), tag="tests.codec.Fragile")
    try:
        with pytest.raises(codec.EncodeError, match="boom") as info:
            codec.encode({"f": Fragile()})
        assert info.value.path == "f"
    finally:
        codec.unregister(Fragile)


def test_encode_error_paths_through_tuples_sets_registered_and_non_string_keys() -> None:
    cases: list[tuple[Any, str]] = [
        ({"t": (1, [object()])}, "t[1][0]"),
        ({"s": frozenset({(1, object())})}, "s[0][1]"),
        ({"box": Box([1, {"deep": object()}])}, "box.items[1].deep"),
        ({"m": {"ok": 1, 2: object()}}, "m[2]"),
        ({"m": {"first": object(), 2: "x"}}, "m['first']"),  # non-string keys: [key] form
        ({"m": {(1, object()): "x"}}, "m[(1, <object>)]<key>[1]"),
        ({"odd key": {"__t": [object()]}}, "['odd key'].__t[0]"),
    ]
    for value, path in cases:
        with pytest.raises(codec.EncodeError) as info:
            codec.encode(value)
        got = info.value.path
        if "<object>" in path:  # the repr of an object() key holds its address
            assert got.startswith("m[(1, <object object at ") and got.endswith(">)]<key>[1]")
        else:
            assert got == path
        assert info.value.type_name == "object"


def test_encode_error_keeps_the_registered_encoders_exception_as_cause() -> None:
    class Fragile:
        pass

    def explode(_: Fragile) -> Any:
        raise RuntimeError("boom")

    codec.register(Fragile, explode, lambda d: Fragile(), tag="tests.codec.Fragile2")
    try:
        for call in (codec.encode, codec.dumps, codec.encode_document):
            with pytest.raises(codec.EncodeError) as info:
                call({"a": [Fragile()]})
            assert info.value.path == "a[0]"
            assert isinstance(info.value.__cause__, RuntimeError)
    finally:
        codec.unregister(Fragile)


def test_encode_returns_new_containers_never_the_inputs_own() -> None:
    inner = [1, 2]
    value = {"a": inner, "b": {"c": 1}}
    encoded = codec.encode(value)
    assert encoded == value
    assert isinstance(encoded, dict)
    assert encoded is not value and encoded["a"] is not inner and encoded["b"] is not value["b"]
    inner.append(3)
    assert encoded["a"] == [1, 2]


def test_document_error_path_of_a_non_identifier_top_level_key() -> None:
    with pytest.raises(codec.EncodeError) as info:
        codec.encode_document({"a b": {"c": object()}})
    assert info.value.path == "['a b'].c"
    with pytest.raises(codec.EncodeError) as info:
        codec.encode_document({"x": object()})
    assert info.value.path == "x"


def test_float_values_inside_containers_are_checked_for_finiteness() -> None:
    value = {"ok": 1.5, "bad": [2.5, math.inf], "neg": {"x": -math.inf}, "nan": math.nan}
    encoded = codec.encode(value)
    assert encoded == {
        "ok": 1.5,
        "bad": [2.5, {"__t": "float", "v": "inf"}],
        "neg": {"x": {"__t": "float", "v": "-inf"}},
        "nan": {"__t": "float", "v": "nan"},
    }
    assert "Infinity" not in codec.encode_document(value)


@given(_values)
def test_dumps_is_the_compact_json_of_encode(value: Any) -> None:
    # Copy-on-write encoding (containers kept when unchanged) gives the same text as the
    # fresh structure encode() returns.
    expected = json.dumps(codec.encode(value), separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    assert codec.dumps(value) == expected
    assert codec.encode_document({"v": value}) == '{"schema_version":"1","v":' + expected + "}"


# --------------------------------------------------------------------------- decode errors


@pytest.mark.parametrize(
    "value",
    [
        {"__t": "no.such.Tag", "v": 1},
        {"__t": "os.system", "v": "echo hi"},
        {"__t": "collections.OrderedDict", "v": []},
        {"__t": "builtins.eval", "v": "1+1"},
    ],
)
def test_unknown_tag_is_a_deserialization_error_and_imports_nothing(
    value: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    imported: list[str] = []
    real_import: Callable[..., Any] = builtins.__import__

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    with pytest.raises(DeserializationError, match="unknown codec tag"):
        codec.decode({"nested": [value]})
    monkeypatch.undo()
    assert imported == []


@pytest.mark.parametrize(
    "value",
    [
        {"__t": "datetime"},  # no payload
        {"__t": "datetime", "v": "2024-01-01", "extra": 1},
        {"__t": 3, "v": 1},
        {"__t": "datetime", "v": "yesterday"},
        {"__t": "datetime", "v": 5},
        {"__t": "datetime", "v": "2024-01-01T00:00:00", "tz": "Europe/Paris"},  # naive + zone
        {"__t": "datetime", "v": "2024-01-01T00:00:00+00:00", "tz": "../../etc/passwd"},
        {"__t": "datetime", "v": "2024-01-01T00:00:00+00:00", "tz": "No/Such_Zone"},
        {"__t": "date", "v": "2024-02-30"},
        {"__t": "time", "v": "25:00"},
        {"__t": "timedelta", "v": {"days": 1}},
        {"__t": "timedelta", "v": {"days": 1.5, "seconds": 0, "microseconds": 0}},
        {"__t": "decimal", "v": "1,5"},
        {"__t": "decimal", "v": 1.5},
        {"__t": "uuid", "v": "not-a-uuid"},
        {"__t": "bytes", "v": "***"},
        {"__t": "float", "v": "1.5"},
        {"__t": "tuple", "v": "abc"},
        {"__t": "set", "v": [[1, 2]]},  # unhashable element
        {"__t": "dict", "v": [[1, 2, 3]]},
        {"__t": "dict", "v": [[[1], 2]]},  # unhashable key
        {"__t": "esc", "v": [1]},
        {"__t": "tests.codec.Color", "v": "green"},
        {"__t": "tests.codec.Point", "v": {"x": "not an int", "y": 1}},
        {"__t": "tests.codec.Money", "v": {"amount": "1", "wrong": 2}},
        {"__t": "tests.codec.Temperature", "v": {"celsius": 1}},
    ],
)
def test_malformed_tagged_objects_are_deserialization_errors(value: dict[str, Any]) -> None:
    with pytest.raises(DeserializationError):
        codec.decode({"at": [value]})


def test_decode_error_names_the_path() -> None:
    with pytest.raises(DeserializationError, match=r"inputs\.lines\[1\]"):
        codec.decode({"inputs": {"lines": [1, {"__t": "nope", "v": 0}]}})


def test_loads_rejects_malformed_json_and_nan_tokens() -> None:
    for text in ("{", "[1,]", "NaN", '{"a": Infinity}', b"\xff\xfe"):
        with pytest.raises(DeserializationError):
            codec.loads(text)


# --------------------------------------------------------------------------- text form


def test_dumps_is_compact_and_keeps_unicode() -> None:
    text = codec.dumps({"name": "Zoë", "tags": ("a", "b")})
    assert text == '{"name":"Zoë","tags":{"__t":"tuple","v":["a","b"]}}'
    assert codec.loads(text.encode("utf-8")) == {"name": "Zoë", "tags": ("a", "b")}


def test_dumps_never_writes_nan_tokens() -> None:
    text = codec.dumps([math.nan, math.inf])
    assert "NaN" not in text
    assert "Infinity" not in text


# --------------------------------------------------------------------------- documents


def test_encode_document_puts_schema_version_first() -> None:
    text = codec.encode_document({"context_id": "c1", "created": date(2024, 1, 1)})
    assert text.startswith('{"schema_version":"1",')
    assert codec.decode_document(text) == {"context_id": "c1", "created": date(2024, 1, 1)}


def test_top_level_tag_key_needs_no_escape_in_documents() -> None:
    text = codec.encode_document({"__t": "tuple", "v": [1]})
    assert codec.decode_document(text) == {"__t": "tuple", "v": [1]}


def test_decoded_document_can_be_encoded_again() -> None:
    text = codec.encode_document({"a": Decimal("1.5")})
    decoded = codec.decode_document(text)
    decoded["schema_version"] = codec.SCHEMA_VERSION
    assert codec.encode_document(decoded) == text


def test_encode_document_refuses_other_schema_version_and_non_string_keys() -> None:
    with pytest.raises(ValueError, match="schema_version"):
        codec.encode_document({"schema_version": "0.9"})
    with pytest.raises(TypeError):
        codec.encode_document({1: "x"})  # type: ignore[dict-item]


def test_size_limit_is_checked_on_utf8_bytes() -> None:
    doc = {"name": "é" * 10}
    size = len(codec.encode_document(doc).encode("utf-8"))
    assert size > len(codec.encode_document(doc))  # multi-byte characters count as bytes
    assert codec.encode_document(doc, max_bytes=size)  # exactly at the limit: fine
    with pytest.raises(ContextTooLargeError) as info:
        codec.encode_document(doc, max_bytes=size - 1)
    assert info.value.size_bytes == size
    assert info.value.limit_bytes == size - 1


@pytest.mark.parametrize(
    "text",
    ["", "{", "[1, 2]", '"text"', "null", '{"a": 1}', b"\xff", '{"schema_version": NaN}'],
    ids=["empty", "truncated", "array", "string", "null", "no-version", "bad-utf8", "nan"],
)
def test_decode_document_rejects_malformed_documents(text: str | bytes) -> None:
    with pytest.raises(DeserializationError) as info:
        codec.decode_document(text)
    assert not isinstance(info.value, SchemaVersionError)


@pytest.mark.parametrize("version", ["2", "1.0", 1, None])
def test_decode_document_rejects_unknown_schema_version(version: Any) -> None:
    text = json.dumps({"schema_version": version, "a": 1})
    with pytest.raises(SchemaVersionError, match="schema_version"):
        codec.decode_document(text)
    assert issubclass(SchemaVersionError, DeserializationError)


def test_decode_document_decodes_nested_values() -> None:
    text = '{"schema_version":"1","when":{"__t":"date","v":"2024-01-02"},"n":[{"__t":"x","v":0}]}'
    with pytest.raises(DeserializationError, match="unknown codec tag"):
        codec.decode_document(text)
    assert codec.decode_document(text.replace(',"n":[{"__t":"x","v":0}]', "")) == {
        "when": date(2024, 1, 2)
    }


# --------------------------------------------------------------------------- registry


def test_default_tags_are_module_and_qualname() -> None:
    assert codec.registered_tag(Priority) == f"{__name__}.Priority"
    assert codec.registered_tag(Color) == "tests.codec.Color"
    assert codec.is_registered(Point)
    assert not codec.is_registered(NotRegisteredModel)


def test_registration_conflicts_are_refused() -> None:
    class Other(enum.Enum):
        X = 1

    with pytest.raises(ValueError, match="already used"):
        codec.register_enum(Other, tag="tests.codec.Color")
    with pytest.raises(ValueError, match="already registered"):
        codec.register_enum(Color, tag="tests.codec.Colour")
    with pytest.raises(ValueError, match="reserved"):
        codec.register_enum(Other, tag="datetime")
    with pytest.raises(ValueError, match="encoded by the codec itself"):
        codec.register(datetime, str, datetime.fromisoformat, tag="tests.codec.dt")
    with pytest.raises(TypeError):
        codec.register_model(Money, tag="tests.codec.bad")  # type: ignore[type-var]
    with pytest.raises(TypeError):
        codec.register_enum(Point)  # type: ignore[type-var]
    with pytest.raises(TypeError):
        codec.register_dataclass(Point)
    assert not codec.is_registered(Other)


def test_same_registration_twice_is_a_no_op() -> None:
    assert codec.register_enum(Color, tag="tests.codec.Color") is Color
    assert roundtrip(Color.RED) is Color.RED


def test_unregister_makes_the_tag_unknown() -> None:
    class Temporary(enum.Enum):
        ONLY = "only"

    codec.register_enum(Temporary, tag="tests.codec.Temporary")
    stored = codec.dumps(Temporary.ONLY)
    assert codec.loads(stored) is Temporary.ONLY
    codec.unregister(Temporary)
    assert not codec.is_registered(Temporary)
    with pytest.raises(DeserializationError, match="unknown codec tag"):
        codec.loads(stored)
    with pytest.raises(codec.EncodeError):
        codec.dumps(Temporary.ONLY)


# --------------------------------------------------------------------------- nesting bound
# docs/workers.md, "Hostile input": the JSON form nests at most MAX_DEPTH levels; deeper
# values are EncodeError / DeserializationError, never RecursionError, at any stack depth.


class Doc(BaseModel):
    """A registered model holding free-form JSON."""

    data: Any = None


codec.register_model(Doc, tag="tests.codec.Doc")

MAX = codec.MAX_DEPTH


def _layer(kind: str, inner: Any) -> Any:
    """One layer of ``kind`` around ``inner`` (``LEVELS[kind]`` JSON levels)."""
    if kind == "list":
        return [inner]
    if kind == "dict":
        return {"a": inner}
    if kind == "tuple":
        return (inner,)
    if kind == "escaped_dict":
        return {"__t": inner}
    if kind == "int_keyed_dict":
        return {1: inner}
    if kind == "dataclass":
        return Box([inner])  # {"__t": ..., "v": {"items": [inner]}}
    assert kind == "custom"
    return Temperature(inner, None)  # type: ignore[arg-type]


LEVELS = {
    "list": 1, "dict": 1, "tuple": 2, "escaped_dict": 2, "int_keyed_dict": 3, "dataclass": 3,
    "custom": 2,
}


def nested(kind: str, depth: int, leaf: Any = 0, leaf_levels: int = 0) -> Any:
    """A value whose JSON form nests exactly ``depth`` levels: ``leaf`` in layers of ``kind``,
    topped up with lists. ``kind == "model"`` is one :class:`Doc` around lists."""
    if kind == "model":  # {"__t": ..., "v": {"data": [...]}}
        return Doc(data=nested("list", depth - 2, leaf, leaf_levels))
    value, used = leaf, leaf_levels
    while used + LEVELS[kind] <= depth:
        value, used = _layer(kind, value), used + LEVELS[kind]
    while used < depth:
        value, used = [value], used + 1
    return value


def text_depth(text: str) -> int:
    """The nesting of JSON text whose strings hold no brackets."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def with_little_stack(fn: Callable[[], Any], headroom: int = 40) -> Any:
    """Call ``fn`` from deep inside a recursion: ``headroom`` frames below the limit."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]

    def down(n: int) -> Any:
        return fn() if n <= 0 else down(n - 1)

    return down(sys.getrecursionlimit() - depth - headroom)


def test_max_depth_is_200_json_levels() -> None:
    assert codec.MAX_DEPTH == 200
    assert text_depth(codec.dumps(nested("tuple", 4))) == 4  # two tuples, two levels each


@pytest.mark.parametrize("kind", [*sorted(LEVELS), "model"])
def test_values_up_to_max_depth_round_trip_and_deeper_ones_are_encode_errors(kind: str) -> None:
    at_limit = nested(kind, MAX)
    text = codec.dumps(at_limit)
    assert text_depth(text) == MAX
    assert codec.loads(text) == at_limit
    assert codec.decode(codec.encode(at_limit)) == at_limit
    document = codec.encode_document({"value": nested(kind, MAX - 1)})  # + the document object
    assert text_depth(document) == MAX
    assert codec.decode_document(document) == {"value": nested(kind, MAX - 1)}
    too_deep = nested(kind, MAX + 1)
    for encode in (codec.encode, codec.dumps):
        with pytest.raises(codec.EncodeError, match=r"MAX_DEPTH \(200\)"):
            encode(too_deep)
    with pytest.raises(codec.EncodeError, match=r"MAX_DEPTH \(200\)"):
        codec.encode_document({"value": nested(kind, MAX)})


@pytest.mark.parametrize(
    ("leaf", "levels"),
    [(datetime(2024, 1, 1), 1), (timedelta(days=1), 2), (math.nan, 1), (b"x", 1)],
    ids=["datetime", "timedelta", "nan", "bytes"],
)
def test_tagged_leaves_count_as_levels(leaf: Any, levels: int) -> None:
    at_limit = nested("list", MAX, leaf, levels)
    assert text_depth(codec.dumps(at_limit)) == MAX
    with pytest.raises(codec.EncodeError, match="MAX_DEPTH"):
        codec.dumps([at_limit])


def test_the_encode_error_names_where_the_value_got_too_deep() -> None:
    with pytest.raises(codec.EncodeError) as info:
        codec.encode_document({"intermediate_results": {"step": deep_list(MAX)}})
    # the document is level 1, the results level 2: the list at level MAX + 1 is refused
    assert info.value.path == "intermediate_results.step" + "[0]" * (MAX - 2)
    assert info.value.type_name == "list"


@pytest.mark.parametrize("depth", [MAX + 1, 5000, 100_000])
def test_deeper_json_is_a_deserialization_error_never_a_recursion_error(depth: int) -> None:
    text = deep_text(depth)
    for read in (codec.loads, codec.parse_json):
        with pytest.raises(DeserializationError, match="deeper than"):
            read(text)
        with pytest.raises(DeserializationError, match="deeper than"):
            read(text.encode())
    with pytest.raises(DeserializationError, match="deeper than"):
        codec.decode_document('{"schema_version":"1","value":' + deep_text(depth - 1) + "}")
    with pytest.raises(DeserializationError, match="deeper than"):
        codec.decode(deep_list(depth))
    model = {"__t": "tests.codec.Doc", "v": {"data": deep_list(depth - 2)}}
    with pytest.raises(DeserializationError, match="deeper than"):
        codec.decode(model)


def test_the_bound_holds_deep_inside_a_recursion(monkeypatch: pytest.MonkeyPatch) -> None:
    at_limit, too_deep = nested("tuple", MAX), nested("tuple", MAX + 1)
    fresh_stacks: list[str] = []
    real = codec._on_fresh_stack

    def spy(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        fresh_stacks.append(fn.__name__)
        return real(fn, args)

    monkeypatch.setattr(codec, "_on_fresh_stack", spy)

    def work() -> Any:
        text = codec.dumps(at_limit)
        document = codec.encode_document({"value": nested("dict", MAX - 1)})
        errors: list[Exception] = []
        for call, arg in ((codec.dumps, too_deep), (codec.encode, too_deep)):
            try:
                call(arg)
            except codec.EncodeError as exc:
                errors.append(exc)
        for read in (codec.loads, codec.parse_json, codec.decode_document):
            try:
                read(deep_text(5000))
            except DeserializationError as exc:
                errors.append(exc)
        return codec.loads(text), codec.decode_document(document), codec.decode(
            codec.encode(at_limit)
        ), errors

    decoded, document, again, errors = with_little_stack(work)
    assert decoded == at_limit and again == at_limit
    assert document == {"value": nested("dict", MAX - 1)}
    assert [type(e) for e in errors] == [codec.EncodeError] * 2 + [DeserializationError] * 3
    assert "_dumps" in fresh_stacks and "_loads" in fresh_stacks  # the caller had no room


def test_context_variables_reach_encoders_run_on_a_fresh_stack() -> None:
    import contextvars

    unit: contextvars.ContextVar[str] = contextvars.ContextVar("unit", default="none")

    class Reading:
        pass

    codec.register(Reading, lambda r: unit.get(), lambda v: Reading(), tag="tests.codec.Reading")
    try:
        unit.set("celsius")
        text = with_little_stack(lambda: codec.dumps(nested("list", MAX - 1, Reading(), 1)))
        assert '"v":"celsius"' in text
    finally:
        codec.unregister(Reading)


def test_a_registered_codec_that_recurses_forever_raises_the_typed_errors() -> None:
    class Loop:
        pass

    def forever(value: Any) -> Any:
        return forever(value)

    codec.register(Loop, forever, forever, tag="tests.codec.Loop")
    try:
        with pytest.raises(codec.EncodeError, match="ran out of stack"):
            codec.dumps({"a": Loop()})
        with pytest.raises(DeserializationError, match="deeper than"):
            codec.loads('{"__t": "tests.codec.Loop", "v": 1}')
    finally:
        codec.unregister(Loop)


def test_parse_json_reads_plain_json_within_a_bound() -> None:
    assert codec.parse_json('{"__t": "uuid", "v": "x"}') == {"__t": "uuid", "v": "x"}
    assert codec.parse_json(deep_text(MAX).encode()) == json.loads(deep_text(MAX))
    assert codec.parse_json("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(DeserializationError, match="deeper than 1 levels"):
        codec.parse_json("[[1]]", max_depth=1)
    for bad in (b'{"a": "caf\xe9"}', "NaN", '{"a": 1', None):
        with pytest.raises(DeserializationError):
            codec.parse_json(bad)  # type: ignore[arg-type]


def test_check_depth_counts_without_recursion() -> None:
    codec.check_depth(deep_list(MAX - 1))  # the innermost 0 is a scalar: MAX - 1 lists
    codec.check_depth([deep_list(MAX - 1)])
    with pytest.raises(codec.EncodeError, match="job envelope nests deeper than 200"):
        codec.check_depth(deep_list(100_000), what="job envelope")
    with pytest.raises(codec.EncodeError):
        codec.check_depth({"a": [{}]}, max_depth=2)
