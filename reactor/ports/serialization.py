"""The one JSON shape of every storage record, and the run-page keys and cursors.

Adapters that persist :mod:`reactor.model.records` values as JSON (the generic document stores,
Redis, MongoDB, DynamoDB, third-party adapters) convert them here, so a record has one stored
shape everywhere and a field added to a record is serialized by every backend at once.

* :func:`record_to_dict` turns a record into a JSON-native ``dict`` (field name -> value):
  mappings become plain ``dict`` s (integer keys as decimal strings, since JSON and BSON keys are
  strings), nested records become dicts, tuples of records become lists.
* :func:`record_from_dict` is its inverse: it coerces every field to its declared type
  (``str``, ``int``, ``float``, ``bool``, ``X | None``, a ``Literal``, a mapping, a nested record
  or a tuple of records) and fills a missing optional field with its declared default, so a
  document written before a field existed still loads.

Run pages (``ContextStore.page``, docs/protocol.md#contexts) are ordered by
:func:`page_key` -- ``<inverted created_at in µs, 17 digits>:<context id>`` -- whose ascending
order is newest first; the opaque cursor handed to callers is :func:`encode_page_cursor` of the
last key of a page. Both are backend-neutral: the generic context store keeps them as document
keys, Redis as members of a lexicographic sorted set.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union, cast

from reactor.model import records

__all__ = [
    "RECORD_TYPES",
    "decode_page_cursor",
    "decode_scan_cursor",
    "encode_page_cursor",
    "encode_scan_cursor",
    "page_key",
    "page_key_bound",
    "record_from_dict",
    "record_from_json",
    "record_to_dict",
    "record_to_json",
]

#: Every record type :func:`record_to_dict` and :func:`record_from_dict` accept.
RECORD_TYPES: tuple[type[Any], ...] = (
    records.ContextRecord,
    records.RunSummary,
    records.RunPage,
    records.StepResultRecord,
    records.MapMetadata,
    records.MapRollbackMetadata,
    records.RollbackOutcome,
    records.RollbackSummary,
    records.LockInfo,
    records.SemaphoreState,
    records.RateWindow,
    records.RateDecision,
    records.PeriodMarker,
    records.OrderedTicket,
    records.OrderedGate,
    records.OrderedLockState,
)

R = TypeVar("R")

_Convert = Callable[[Any], Any]

#: The largest page-key time, in microseconds (17 decimal digits).
_MAX_MICROS = 10**17 - 1
_PAGE_KEY = re.compile(r"\A\d{17}:.+\Z", re.DOTALL)


# ---- records ---------------------------------------------------------------------------------


def _identity(value: Any) -> Any:
    return value


def _decoder(hint: Any) -> _Convert:
    """A function coercing a JSON value to the declared type ``hint``."""
    if hint is Any:
        return _identity
    if hint in (str, int, float, bool):
        return cast(_Convert, hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported record field type {hint!r}")
        convert = _decoder(inner[0])
        return lambda v: None if v is None else convert(v)
    if origin is Literal:
        allowed = frozenset(args)

        def literal(v: Any) -> Any:
            if v not in allowed:
                raise ValueError(f"{v!r} is not one of {sorted(map(str, allowed))}")
            return v

        return literal
    if origin is Mapping or origin is dict:
        key, value = (_decoder(a) for a in args) if args else (_identity, _identity)
        return lambda v: {key(k): value(x) for k, x in (v or {}).items()}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])
        return lambda v: tuple(item(x) for x in (v or ()))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        record_type = hint
        return lambda v: record_from_dict(record_type, v)
    raise TypeError(f"unsupported record field type {hint!r}")


def _encode_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record_to_dict(value)
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): _encode_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_encode_value(v) for v in value]
    return value


_MISSING = object()


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


_SCHEMAS: dict[type[Any], tuple[tuple[str, _Convert, Callable[[], Any] | None], ...]] = {}


def _schema(cls: type[Any]) -> tuple[tuple[str, _Convert, Callable[[], Any] | None], ...]:
    """``(field name, decoder, default factory or None)`` for each field of a record type."""
    found = _SCHEMAS.get(cls)
    if found is not None:
        return found
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise TypeError(f"{cls!r} is not a record type")
    hints = typing.get_type_hints(cls, vars(records))
    out: list[tuple[str, _Convert, Callable[[], Any] | None]] = []
    for f in dataclasses.fields(cls):
        factory: Callable[[], Any] | None = None
        if f.default is not dataclasses.MISSING:
            factory = _constant(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            factory = f.default_factory
        out.append((f.name, _decoder(hints[f.name]), factory))
    schema = _SCHEMAS[cls] = tuple(out)
    return schema


def record_to_dict(record: Any) -> dict[str, Any]:
    """The JSON-native dict of a record (field name -> value).

    Args:
        record: an instance of one of :data:`RECORD_TYPES` (or any dataclass built of the same
            field types).

    Returns:
        A new dict of JSON-native values (``str``, ``int``, ``float``, ``bool``, ``None``,
        ``dict`` with string keys, ``list``); ``json.dumps`` and BSON accept it as is.

    Raises:
        TypeError: ``record`` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"{record!r} is not a record")
    return {f.name: _encode_value(getattr(record, f.name)) for f in dataclasses.fields(record)}


def record_from_dict(cls: type[R], value: Mapping[str, Any]) -> R:
    """Rebuild a record of type ``cls`` from what :func:`record_to_dict` produced.

    Every field is coerced to its declared type; a missing field with a declared default takes
    that default (so documents written before the field existed still load); unknown keys are
    ignored.

    Args:
        cls: one of :data:`RECORD_TYPES`.
        value: the stored dict (as parsed from JSON or a backend document).

    Returns:
        The record.

    Raises:
        KeyError: a field without a default is missing.
        ValueError: a value does not fit its field (a ``Literal`` outside its choices, a
            non-numeric number, or the record's own validation).
        TypeError: ``cls`` is not a record type.
    """
    kwargs: dict[str, Any] = {}
    for name, convert, factory in _schema(cls):
        raw = value.get(name, _MISSING)
        if raw is _MISSING:
            if factory is None:
                raise KeyError(f"{cls.__name__} field {name!r} is missing")
            kwargs[name] = factory()
        else:
            kwargs[name] = convert(raw)
    return cls(**kwargs)


def record_to_json(record: Any) -> str:
    """:func:`record_to_dict` as compact JSON text (for backends that store strings).

    Raises:
        TypeError: ``record`` is not a dataclass instance.
        ValueError: a float field is NaN or infinite (not JSON).
    """
    return json.dumps(record_to_dict(record), separators=(",", ":"), allow_nan=False)


def record_from_json(cls: type[R], text: str | bytes) -> R:
    """Parse what :func:`record_to_json` produced into a record of type ``cls``.

    Raises:
        ValueError: the text is not JSON (``json.JSONDecodeError``) or a value does not fit.
        KeyError: a field without a default is missing.
    """
    value: Any = json.loads(text)
    return record_from_dict(cls, value)


# ---- run pages -------------------------------------------------------------------------------


def page_key(created_at: float, context_id: str) -> str:
    """The newest-first ordering key of a top-level run in run pages.

    Args:
        created_at: the run's creation time, epoch seconds (clamped to ``0 .. 10**17 - 1`` µs).
        context_id: the run id (breaks ties; keys stay unique).

    Returns:
        ``"<10**17 - 1 - created_at µs, 17 digits>:<context id>"``; ascending string order of
        these keys is newest-first creation order.
    """
    micros = min(max(round(created_at * 1_000_000), 0), _MAX_MICROS)
    return f"{_MAX_MICROS - micros:017d}:{context_id}"


def page_key_bound(created_at: float) -> str:
    """The string just above every page key (:func:`page_key`) of a run created at
    ``created_at``, for range-bounded run pages (docs/protocol.md#contexts).

    Keys of runs created later sort below it, keys of runs created earlier above it, and
    keys of runs created in the same microsecond below it (``":"`` sorts before ``";"``).

    Args:
        created_at: epoch seconds (rounded and clamped like :func:`page_key`).

    Returns:
        ``"<10**17 - 1 - created_at µs, 17 digits>;"``.
    """
    micros = min(max(round(created_at * 1_000_000), 0), _MAX_MICROS)
    return f"{_MAX_MICROS - micros:017d};"


def encode_page_cursor(key: str) -> str:
    """A page key (:func:`page_key`) as an opaque cursor: unpadded base64url of its UTF-8."""
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_page_cursor(cursor: str) -> str:
    """The page key inside a cursor made by :func:`encode_page_cursor`.

    Args:
        cursor: the caller's cursor (a ``RunPage.next_cursor``).

    Returns:
        The page key.

    Raises:
        ValueError: the cursor is not canonical base64url or does not hold a page key.
    """
    try:
        raw = cursor.encode("ascii")
        key = base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)).decode("utf-8")
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise ValueError(f"malformed run page cursor {cursor!r}") from exc
    if not _PAGE_KEY.match(key) or encode_page_cursor(key) != cursor:
        raise ValueError(f"malformed run page cursor {cursor!r}")
    return key


# ---- sweeper scan cursors ------------------------------------------------------------------


def encode_scan_cursor(*parts: str) -> str:
    """A sweeper scan position as an opaque cursor (``ScanPage.next_cursor``).

    The cursor is the unpadded base64url of the JSON array of ``parts``; what the parts are is
    the store's business (an index name, the last key examined, a score...). Defined in
    docs/workers.md, "Sweep cursors and dispatch leases".

    Args:
        parts: the position, as strings.

    Returns:
        The cursor text (ASCII).
    """
    text = json.dumps(list(parts), separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def decode_scan_cursor(cursor: str, arity: int) -> tuple[str, ...]:
    """The parts inside a cursor made by :func:`encode_scan_cursor`.

    Args:
        cursor: a ``ScanPage.next_cursor`` of the same store.
        arity: how many parts the store put in its cursors.

    Returns:
        The ``arity`` parts, in order.

    Raises:
        ValueError: the cursor is not canonical base64url of a JSON array of ``arity`` strings.
    """
    try:
        raw = cursor.encode("ascii")
        value: Any = json.loads(base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)))
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise ValueError(f"malformed sweeper scan cursor {cursor!r}") from exc
    if (
        not isinstance(value, list)
        or len(value) != arity
        or not all(isinstance(part, str) for part in value)
        or encode_scan_cursor(*value) != cursor
    ):
        raise ValueError(f"malformed sweeper scan cursor {cursor!r}")
    return tuple(value)
