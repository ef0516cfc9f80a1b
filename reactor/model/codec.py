"""The JSON codec: how every value reactor persists or enqueues becomes JSON, and back.

Everything stored (run contexts, step results, map slots) or enqueued (job payloads) goes through
this module (no pickle, no eval, no import from a payload: docs/architecture.md, "Execution
invariants"). It maps
Python values to JSON values and back, losslessly for every supported type:

* JSON-native values pass through unchanged: ``None``, ``bool``, ``int``, finite ``float``,
  ``str``, ``list`` and ``dict`` with string keys. (Subclasses of ``str``/``int``/``float``/
  ``list``/``dict`` that are not enums are stored as their base type, as :mod:`json` does.)
* Every other supported value becomes a *tagged* object ``{"__t": "<tag>", "v": <payload>}``:

  ==============================  =============  ==============================================
  Python type                     tag            payload ``v``
  ==============================  =============  ==============================================
  ``datetime`` (naive or aware)   ``datetime``   ISO 8601 text, offset kept (and beside ``v``:
                                                 ``"tz"``, the key of a ``ZoneInfo`` zone;
                                                 ``"fold": 1`` for the second of two equal
                                                 wall times)
  ``date``                        ``date``       ISO 8601 text
  ``time`` (naive or aware)       ``time``       ISO 8601 text, offset kept (``"fold"`` too)
  ``timedelta``                   ``timedelta``  ``{"days", "seconds", "microseconds"}``
  ``Decimal``                     ``decimal``    ``str(value)``: exact, NaN/Infinity included
  ``UUID``                        ``uuid``       canonical text
  ``bytes`` / ``bytearray``       ``bytes`` /    standard base64 text
                                  ``bytearray``
  non-finite ``float``            ``float``      ``"nan"``, ``"inf"`` or ``"-inf"``
  ``tuple``                       ``tuple``      list of encoded items
  ``set`` / ``frozenset``         ``set`` /      list of encoded items, sorted (natural order
                                  ``frozenset``  when the items are comparable, else by their
                                                 canonical JSON text) so output is deterministic
  ``dict`` with non-string keys   ``dict``       list of ``[key, value]`` pairs, both encoded
  ``dict`` holding a ``"__t"``    ``esc``        the dict itself, values encoded (escaping keeps
  key                                            a user dict from being read as a tag)
  registered ``Enum``             its tag        the member's encoded ``value``
  registered pydantic model       its tag        ``model_dump(mode="json", by_alias=True,
                                                 round_trip=True)``, read back with
                                                 ``model_validate``
  registered dataclass            its tag        ``{field: encoded value}`` of its init fields
  type registered by `register`   its tag        the user encoder's result, itself encoded
  ==============================  =============  ==============================================

Decoding resolves tags **only** through the built-in tags and the registry: a tag is never a
module path to import, so a payload cannot make a worker load code. An unknown tag raises
:class:`~reactor.errors.DeserializationError`. Encoding an unsupported value raises
:class:`EncodeError` naming the type and where it sits (``inputs.order.lines[2].price``).

**Nesting is bounded** (docs/workers.md, "Hostile input"): the JSON form of a value (or of a
whole document) may nest at most :data:`MAX_DEPTH` arrays and objects, the codec's own tagged
wrappers included (a tuple is two levels: the tagged object and its list). Encoding anything
deeper raises :class:`EncodeError`; decoding it raises
:class:`~reactor.errors.DeserializationError` -- never a bare ``RecursionError``, and
whatever the caller's own stack depth: when the calling thread has too little stack left, the
work is redone on a short-lived helper thread with a fresh stack (the caller's
:mod:`contextvars` are copied to it). What encodes within the bound always decodes.

On top of values, *documents* (one run context, one record) are JSON objects stamped with
``schema_version`` (:data:`SCHEMA_VERSION`): :func:`encode_document` also enforces a size limit
before anything is written; :func:`decode_document` refuses unknown versions
(:class:`~reactor.errors.SchemaVersionError`). This is the Python counterpart of
ruby_reactor's ``ContextSerializer``.
"""

from __future__ import annotations

import base64
import contextvars
import dataclasses
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any, Final, NoReturn, TypeAlias, TypeVar
from uuid import UUID
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    EncodeError,
    SchemaVersionError,
)

__all__ = [
    "MAX_DEPTH",
    "SCHEMA_VERSION",
    "TAG_KEY",
    "VALUE_KEY",
    "EncodeError",
    "JSONValue",
    "check_depth",
    "decode",
    "decode_document",
    "default_tag",
    "dumps",
    "encode",
    "encode_document",
    "is_registered",
    "loads",
    "parse_json",
    "register",
    "register_dataclass",
    "register_enum",
    "register_model",
    "register_on_demand",
    "registered_tag",
    "unregister",
]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""A value the standard :mod:`json` module reads and writes without help."""

SCHEMA_VERSION: Final = "1"
"""The ``schema_version`` stamped on every document this release writes (and the only one it
reads)."""

TAG_KEY: Final = "__t"
"""The key that marks a tagged object."""

VALUE_KEY: Final = "v"
"""The key holding a tagged object's payload."""

MAX_DEPTH: Final = 200
"""The deepest nesting of JSON arrays and objects the codec writes or reads (docs/workers.md,
"Hostile input").

Counted on the JSON form: ``[]`` and ``{}`` are depth 1, ``[[1]]`` depth 2; the codec's tagged
wrappers count (``(1,)`` is ``{"__t": "tuple", "v": [1]}``, depth 2), and so does the document
object of :func:`encode_document`. Deeper values raise :class:`EncodeError` on encode and
:class:`~reactor.errors.DeserializationError` on decode. Job envelopes obey the same
bound (:meth:`reactor.ports.router.Job.from_json`)."""

_TZ_KEY: Final = "tz"
_FOLD_KEY: Final = "fold"
# Optional keys a tagged object may carry besides the tag and the payload.
_EXTRA_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "datetime": frozenset({_TZ_KEY, _FOLD_KEY}),
    "time": frozenset({_FOLD_KEY}),
}

T = TypeVar("T")
E = TypeVar("E", bound=Enum)
M = TypeVar("M", bound=BaseModel)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _Entry:
    """How one registered class is encoded: its tag and the two conversion functions."""

    cls: type[Any]
    tag: str
    kind: str  # "custom", "enum", "model" or "dataclass"
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]


_BUILTIN_TAGS: Final = frozenset(
    {
        "datetime", "date", "time", "timedelta", "decimal", "uuid", "bytes", "bytearray",
        "float", "tuple", "set", "frozenset", "dict", "esc",
    }
)

# Types the codec handles itself: registering them would make two encodings for one type.
_NATIVE_TYPES: Final[tuple[type[Any], ...]] = (
    type(None), bool, int, float, str, list, dict, tuple, set, frozenset,
    datetime, date, time, timedelta, Decimal, UUID, bytes, bytearray,
)

_lock = threading.Lock()
_by_class: dict[type[Any], _Entry] = {}
_by_tag: dict[str, _Entry] = {}
# tag -> the callbacks that register the type stored under it (register_on_demand); the
# re-entrant lock is held while they run (they take _lock themselves)
_on_demand_lock = threading.RLock()
_on_demand: dict[str, list[Callable[[], object]]] = {}


def default_tag(cls: type[Any]) -> str:
    """The tag ``register_enum``/``register_model``/``register_dataclass`` use when given none:
    ``f"{cls.__module__}.{cls.__qualname__}"``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def register_on_demand(tag: str, registrar: Callable[[], object]) -> None:
    """Declares how to register the type stored under ``tag`` when a decode first meets it.

    Reactor definitions register the types they can store lazily, at their first run, so a
    registration of the user's own made before that wins (docs/concepts.md, "Decisions"). A
    process that only *reads* runs (``Reactor.find``, ``undo``, ``retry``, the CLI, the
    dashboard) never runs the reactor first; the definition therefore announces here, when
    its class is created, the default tag of every type it can store. Decoding an unknown
    ``tag`` calls its registrars once and looks the tag up again.
    Nothing is imported: the registrars belong to code this process already imported
    (docs/architecture.md, "Execution invariants").

    Args:
        tag: the tag a stored value of the type carries (usually :func:`default_tag`).
        registrar: called with no arguments; registers the type (or leaves it to a
            registration of the user's own). What it returns is ignored.
    """
    with _on_demand_lock:
        _on_demand.setdefault(tag, []).append(registrar)


def _register_on_demand(tag: str) -> _Entry | None:
    """Run the on-demand registrars of ``tag`` (an unknown tag met by a decode), then return
    its entry, or ``None`` when it is still unknown. A decode of the same tag in another
    thread waits for the registration instead of finding the tag unknown meanwhile."""
    with _on_demand_lock:
        for registrar in _on_demand.pop(tag, []):
            registrar()
        return _by_tag.get(tag)


def _add(entry: _Entry) -> None:
    if not entry.tag or not isinstance(entry.tag, str):
        raise ValueError(f"codec tag must be a non-empty string, got {entry.tag!r}")
    if entry.tag in _BUILTIN_TAGS:
        raise ValueError(f"codec tag {entry.tag!r} is reserved for a built-in type")
    if entry.cls in _NATIVE_TYPES:
        raise ValueError(f"{entry.cls.__qualname__} is encoded by the codec itself")
    with _lock:
        known = _by_class.get(entry.cls)
        if known is not None:
            if known.tag == entry.tag and known.kind == entry.kind:
                # Re-registration (a module imported twice, a reload): the latest functions win.
                _by_class[entry.cls] = _by_tag[entry.tag] = entry
                return
            raise ValueError(
                f"{entry.cls.__qualname__} is already registered with tag {known.tag!r}"
            )
        owner = _by_tag.get(entry.tag)
        if owner is not None:
            raise ValueError(
                f"codec tag {entry.tag!r} is already used by {owner.cls.__module__}."
                f"{owner.cls.__qualname__}"
            )
        _by_class[entry.cls] = _by_tag[entry.tag] = entry


def register(
    cls: type[T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    *,
    tag: str,
) -> type[T]:
    """Registers a user type with the codec.

    Instances of exactly ``cls`` (not subclasses) are stored as ``{"__t": tag, "v": payload}``
    where ``payload`` is ``encode(instance)`` — which may itself hold any encodable value
    (datetimes, other registered types...): it is encoded recursively. On decode the payload is
    decoded first, then passed to ``decode``.

    Example::

        codec.register(Money, lambda m: {"amount": m.amount, "currency": m.currency},
                       lambda d: Money(d["amount"], d["currency"]), tag="shop.Money")

    Args:
        cls: the class to register.
        encode: turns an instance into an encodable value (usually a dict).
        decode: rebuilds an instance from the decoded payload; a ``KeyError``, ``TypeError``
            or ``ValueError`` it raises becomes a ``DeserializationError``.
        tag: the stable name stored in the JSON; never change it once data is stored. Must not
            be a built-in tag (``datetime``, ``decimal``, ...).

    Returns:
        ``cls`` (so ``register`` can be used inline).

    Raises:
        ValueError: the tag is empty, reserved, or used by another class; ``cls`` is already
            registered under another tag; or ``cls`` is a type the codec encodes itself.
    """
    _add(_Entry(cls, tag, "custom", encode, decode))
    return cls


def register_enum(enum_cls: type[E], tag: str | None = None) -> type[E]:
    """Registers an ``Enum`` class: members are stored as ``{"__t": tag, "v": member.value}``.

    Usable as a decorator. Unregistered enums (including ``StrEnum``/``IntEnum``) are refused at
    encode time rather than silently stored as their bare value.

    Args:
        enum_cls: the enum class.
        tag: the stored name; default ``f"{module}.{qualname}"``.

    Returns:
        ``enum_cls``.

    Raises:
        ValueError: see :func:`register`. TypeError: ``enum_cls`` is not an ``Enum``.
    """
    if not (isinstance(enum_cls, type) and issubclass(enum_cls, Enum)):
        raise TypeError(f"register_enum needs an Enum class, got {enum_cls!r}")
    _add(_Entry(enum_cls, tag or default_tag(enum_cls), "enum", lambda m: m.value, enum_cls))
    return enum_cls


def register_model(model_cls: type[M], tag: str | None = None) -> type[M]:
    """Registers a pydantic ``BaseModel`` class.

    Instances are stored as ``model_dump(mode="json", by_alias=True, round_trip=True)`` (so
    aliases and ``Json`` fields read back) and rebuilt with ``model_validate``, which re-runs the
    model's validation. Usable as a decorator.

    Args:
        model_cls: the model class (instances of subclasses need their own registration).
        tag: the stored name; default ``f"{module}.{qualname}"``.

    Returns:
        ``model_cls``.

    Raises:
        ValueError: see :func:`register`. TypeError: ``model_cls`` is not a ``BaseModel``.
    """
    if not (isinstance(model_cls, type) and issubclass(model_cls, BaseModel)):
        raise TypeError(f"register_model needs a pydantic BaseModel class, got {model_cls!r}")
    _add(
        _Entry(
            model_cls,
            tag or default_tag(model_cls),
            "model",
            lambda m: m.model_dump(mode="json", by_alias=True, round_trip=True),
            model_cls.model_validate,
        )
    )
    return model_cls


def register_dataclass(dataclass_cls: type[T], tag: str | None = None) -> type[T]:
    """Registers a dataclass: stored as ``{field: value}`` of its ``init`` fields.

    Field values are encoded recursively; decoding calls ``dataclass_cls(**fields)``. Fields
    declared with ``init=False`` are not stored (they are recomputed by ``__post_init__``).
    Usable as a decorator.

    Args:
        dataclass_cls: the dataclass (not an instance).
        tag: the stored name; default ``f"{module}.{qualname}"``.

    Returns:
        ``dataclass_cls``.

    Raises:
        ValueError: see :func:`register`. TypeError: not a dataclass type.
    """
    if not (isinstance(dataclass_cls, type) and dataclasses.is_dataclass(dataclass_cls)):
        raise TypeError(f"register_dataclass needs a dataclass type, got {dataclass_cls!r}")
    names = [f.name for f in dataclasses.fields(dataclass_cls) if f.init]

    def to_json(obj: Any) -> dict[str, Any]:
        return {name: getattr(obj, name) for name in names}

    def from_json(data: Any) -> T:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object of fields, got {type(data).__name__}")
        return dataclass_cls(**data)

    _add(_Entry(dataclass_cls, tag or default_tag(dataclass_cls), "dataclass", to_json, from_json))
    return dataclass_cls


def unregister(cls: type[Any]) -> None:
    """Removes ``cls`` from the registry (tests and plugin unloading); a no-op if absent."""
    with _lock:
        entry = _by_class.pop(cls, None)
        if entry is not None:
            _by_tag.pop(entry.tag, None)


def is_registered(cls: type[Any]) -> bool:
    """Tells whether exactly ``cls`` is registered with the codec."""
    return cls in _by_class


def registered_tag(cls: type[Any]) -> str | None:
    """Returns the tag ``cls`` is registered under, or ``None``."""
    entry = _by_class.get(cls)
    return entry.tag if entry is not None else None


# --------------------------------------------------------------------------- encoding
#
# The encoder is on the engine's hot path: every checkpoint encodes the whole run context
# (reactor/engine/checkpoint.py). Its happy path is therefore kept cheap:
#
# * exact JSON scalars (``str``, ``int``, ``bool``, ``None``) are passed through without a
#   call; exact ``dict`` and ``list`` are walked in a plain loop;
# * encoding is copy-on-write: a container none of whose items changed is returned as is, so a
#   context made of plain JSON values is not copied before ``json`` serialises it (the public
#   :func:`encode` still returns fresh containers, see :func:`_fresh`);
# * paths are built only when something fails: the innermost frame raises :class:`_Failed`, each
#   container on the way out appends its own path segment, and the entry point turns the
#   collected segments into the :class:`EncodeError` naming the full path.


def _join_key(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _key_segment(key: str) -> str:
    """The path segment of a string key (``.name``; ``['odd key']`` when not an identifier)."""
    return f".{key}" if key.isidentifier() else f"[{key!r}]"


def _show(path: str) -> str:
    return path or "<root>"


def _type_name(obj: Any) -> str:
    cls = type(obj)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _tagged(tag: str, payload: JSONValue) -> dict[str, JSONValue]:
    return {TAG_KEY: tag, VALUE_KEY: payload}


def _canonical(value: JSONValue) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# The compact, NaN-refusing serializer of dumps() and encode_document(), built once
# (json.dumps with non-default options builds a new JSONEncoder per call). Stateless per call,
# so shared across threads.
_JSON: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Failed(Exception):
    """Internal: an encoding failure unwinding the recursion and collecting its path.

    Never escapes this module: the entry points (:func:`encode`, :func:`dumps`,
    :func:`encode_document`) turn it into an :class:`EncodeError` (keeping its ``__cause__``).

    Args:
        message: what went wrong.
        obj: the offending value (only its type name is kept).
    """

    def __init__(self, message: str, obj: Any) -> None:
        super().__init__(message)
        self.message = message
        self.type_name = _type_name(obj)
        self.segments: list[str] = []  # innermost first, appended while unwinding

    def error(self) -> EncodeError:
        """The public error, with the path joined from the collected segments."""
        path = "".join(reversed(self.segments))
        if path.startswith("."):  # a top-level identifier key has no leading dot
            path = path[1:]
        return EncodeError(self.message, type_name=self.type_name, path=_show(path))


def encode(obj: Any) -> JSONValue:
    """Turns ``obj`` into a JSON value (see the module docstring for the mapping).

    Args:
        obj: any supported value, its JSON form nested at most :data:`MAX_DEPTH` levels.

    Returns:
        A structure of ``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` that
        :func:`json.dumps` accepts with ``allow_nan=False`` and :func:`decode` turns back into an
        equal value of the same types. Its containers are new objects (never ``obj``'s own).

    Raises:
        EncodeError: a value (at the path given in the message) cannot be encoded, or the JSON
            form nests deeper than :data:`MAX_DEPTH` (whatever the caller's stack depth).
    """
    return _guarded(_encode_value, (obj,), True)


def _encode_value(obj: Any) -> JSONValue:
    try:
        return _fresh(_enc(obj, set(), 0))  # type: ignore[no-any-return]
    except _Failed as failed:
        raise failed.error() from failed.__cause__


def _fresh(value: Any) -> Any:
    """Copies the containers of an encoded value (copy-on-write may have kept the input's)."""
    cls = type(value)
    if cls is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if cls is list:
        return [_fresh(v) for v in value]
    return value


# ``active`` below is the set of ids of the containers on the current path (the cycle check);
# ``depth`` is how many JSON containers enclose the value's encoded form (0 at the root). A
# value whose encoded form opens ``n`` containers needs ``depth + n <= MAX_DEPTH``; every
# recursion goes one container deeper, so the Python recursion is bounded by MAX_DEPTH too.


def _too_deep(obj: Any) -> NoReturn:
    raise _Failed(f"nested deeper than MAX_DEPTH ({MAX_DEPTH}) JSON levels", obj)


def _enc(obj: Any, active: set[int], depth: int) -> Any:
    """Encodes ``obj``; returns ``obj`` itself when it is JSON already (copy-on-write).

    Raises:
        _Failed: ``obj`` (or a value inside it) cannot be encoded or nests too deeply.
    """
    cls = type(obj)
    # Exact JSON scalars first: the overwhelmingly common case.
    if cls is str or cls is int or cls is bool or obj is None:
        return obj
    if cls is dict:
        return _enc_dict(obj, active, depth)
    if cls is list:
        return _enc_list(obj, active, depth)
    if cls is float:
        if _isfinite(obj):
            return obj
        if depth >= MAX_DEPTH:
            _too_deep(obj)
        return _tagged("float", _float_text(obj))
    return _enc_other(obj, active, depth)


_isfinite: Final = math.isfinite


def _enc_dict(obj: dict[Any, Any], active: set[int], depth: int) -> Any:
    """A ``dict`` (or subclass): string keys stay an object (escaped when holding ``"__t"``),
    any other key makes a tagged list of pairs. The result is a plain ``dict``."""
    oid = id(obj)
    if oid in active:
        raise _Failed("reference cycle", obj)
    # The values sit in this object, or in the inner object of {"__t": "esc", "v": {...}}.
    inner = depth + 2 if TAG_KEY in obj else depth + 1
    if inner > MAX_DEPTH:
        _too_deep(obj)
    active.add(oid)
    try:
        out: dict[str, Any] | None = None
        for key, value in obj.items():
            if type(key) is not str:
                return _enc_pairs(obj, active, depth)
            vcls = type(value)
            # JSON already (``x - x == 0.0`` is a call-free finiteness test of a float).
            if vcls is str or vcls is int or vcls is bool or value is None or (
                vcls is float and value - value == 0.0
            ):
                if out is not None:
                    out[key] = value
                continue
            try:
                encoded = _enc(value, active, inner)
            except _Failed as failed:
                failed.segments.append(_dict_segment(obj, key))
                raise
            if out is not None:
                out[key] = encoded
            elif encoded is not value:
                out = _items_before(obj, key)
                out[key] = encoded
        result = obj if out is None else out
        if type(result) is not dict:
            result = dict(result.items())
        return _tagged("esc", result) if TAG_KEY in result else result
    finally:
        active.discard(oid)


def _dict_segment(obj: dict[Any, Any], key: str) -> str:
    """The path segment of ``obj[key]``: string-keyed dicts use ``.key``, others ``[key]``."""
    if all(type(k) is str for k in obj):
        return _key_segment(key)
    return f"[{key!r}]"


def _items_before(obj: dict[str, Any], stop: str) -> dict[str, Any]:
    """A copy of ``obj``'s items that come before key ``stop`` (unchanged by encoding)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key is stop:
            break
        out[key] = value
    return out


def _enc_pairs(obj: dict[Any, Any], active: set[int], depth: int) -> JSONValue:
    """A dict with a non-string key: ``{"__t": "dict", "v": [[key, value], ...]}``."""
    inner = depth + 3  # the tagged object, its list, each [key, value] pair
    if inner > MAX_DEPTH:
        _too_deep(obj)
    pairs: list[JSONValue] = []
    for key, value in obj.items():
        try:
            encoded_key = _enc(key, active, inner)
        except _Failed as failed:
            failed.segments.append(f"[{key!r}]<key>")
            raise
        try:
            encoded_value = _enc(value, active, inner)
        except _Failed as failed:
            failed.segments.append(f"[{key!r}]")
            raise
        pairs.append([encoded_key, encoded_value])
    return _tagged("dict", pairs)


def _enc_list(obj: list[Any], active: set[int], depth: int) -> Any:
    """An exact ``list``: returned as is unless an item changed."""
    oid = id(obj)
    if oid in active:
        raise _Failed("reference cycle", obj)
    inner = depth + 1
    if inner > MAX_DEPTH:
        _too_deep(obj)
    active.add(oid)
    try:
        out: list[Any] | None = None
        for index, item in enumerate(obj):
            icls = type(item)
            if icls is str or icls is int or icls is bool or item is None or (
                icls is float and item - item == 0.0
            ):
                if out is not None:
                    out.append(item)
                continue
            try:
                encoded = _enc(item, active, inner)
            except _Failed as failed:
                failed.segments.append(f"[{index}]")
                raise
            if out is not None:
                out.append(encoded)
            elif encoded is not item:
                out = obj[:index]
                out.append(encoded)
        return obj if out is None else out
    finally:
        active.discard(oid)


def _enc_items(items: Iterable[Any], active: set[int], depth: int) -> list[Any]:
    """Encodes each item into a new list (tuples, sets, list subclasses); ``depth`` counts the
    containers around the items, that list included."""
    out: list[Any] = []
    for index, item in enumerate(items):
        try:
            out.append(_enc(item, active, depth))
        except _Failed as failed:
            failed.segments.append(f"[{index}]")
            raise
    return out


def _enc_other(obj: Any, active: set[int], depth: int) -> JSONValue:
    """Everything but exact JSON scalars, ``dict`` and ``list``: tagged types, subclasses."""
    entry = _by_class.get(type(obj))
    if entry is not None:
        return _registered(entry, obj, active, depth)
    if isinstance(obj, Enum):
        raise _Failed("unregistered enum: call reactor.model.codec.register_enum", obj)
    if isinstance(obj, BaseModel):
        raise _Failed("unregistered pydantic model: call register_model", obj)
    if depth >= MAX_DEPTH and isinstance(obj, _TAGGED_SCALARS):  # its tagged object: 1 level
        _too_deep(obj)
    if isinstance(obj, datetime):
        payload: dict[str, JSONValue] = {TAG_KEY: "datetime", VALUE_KEY: obj.isoformat()}
        if isinstance(obj.tzinfo, ZoneInfo) and obj.tzinfo.key:
            payload[_TZ_KEY] = obj.tzinfo.key
        if obj.fold:
            payload[_FOLD_KEY] = 1
        return payload
    if isinstance(obj, date):
        return _tagged("date", obj.isoformat())
    if isinstance(obj, time):
        if obj.fold:
            return {TAG_KEY: "time", VALUE_KEY: obj.isoformat(), _FOLD_KEY: 1}
        return _tagged("time", obj.isoformat())
    if isinstance(obj, timedelta):
        if depth + 2 > MAX_DEPTH:  # the tagged object and its {"days", ...} payload
            _too_deep(obj)
        return _tagged(
            "timedelta",
            {"days": obj.days, "seconds": obj.seconds, "microseconds": obj.microseconds},
        )
    if isinstance(obj, Decimal):
        return _tagged("decimal", str(obj))
    if isinstance(obj, UUID):
        return _tagged("uuid", str(obj))
    if isinstance(obj, bytes | bytearray):
        tag = "bytearray" if isinstance(obj, bytearray) else "bytes"
        return _tagged(tag, base64.b64encode(obj).decode("ascii"))
    if isinstance(obj, dict):
        return _enc_dict(obj, active, depth)  # type: ignore[no-any-return]
    if isinstance(obj, list | tuple | set | frozenset):
        return _container(obj, active, depth)
    # Subclasses of the JSON scalars (not enums, handled above) are stored as their base.
    if isinstance(obj, str):
        return str.__str__(obj)
    if isinstance(obj, int):
        return int.__int__(obj)
    if isinstance(obj, float):
        return _enc(float.__float__(obj), active, depth)  # type: ignore[no-any-return]
    if dataclasses.is_dataclass(obj):
        raise _Failed("unregistered dataclass: call register_dataclass", obj)
    raise _Failed("cannot encode value: register its type with codec.register", obj)


# The built-in types encoded as one tagged object around a string (timedelta: around an object).
_TAGGED_SCALARS: Final = (datetime, date, time, timedelta, Decimal, UUID, bytes, bytearray)


def _registered(entry: _Entry, obj: Any, active: set[int], depth: int) -> JSONValue:
    if depth >= MAX_DEPTH:  # the tagged object itself
        _too_deep(obj)
    try:
        raw = entry.to_json(obj)
    except RecursionError:
        raise  # the stack, not the value: retried on a fresh stack (_guarded)
    except Exception as exc:
        raise _Failed(
            f"encoder for tag {entry.tag!r} raised {type(exc).__name__}: {exc}", obj
        ) from exc
    if entry.kind == "model":
        # model_dump(mode="json") is JSON already and is read back by model_validate as is.
        if _nesting(raw, MAX_DEPTH - depth - 1) > MAX_DEPTH - depth - 1:
            _too_deep(obj)
        return _tagged(entry.tag, raw)
    oid = id(obj)
    if oid in active:
        raise _Failed("reference cycle", obj)
    active.add(oid)
    try:
        return _tagged(entry.tag, _enc(raw, active, depth + 1))
    finally:
        active.discard(oid)


def _container(obj: list[Any] | tuple[Any, ...] | set[Any] | frozenset[Any],
               active: set[int], depth: int) -> JSONValue:
    """A list subclass, tuple, set or frozenset: always a new list."""
    oid = id(obj)
    if oid in active:
        raise _Failed("reference cycle", obj)
    # A list subclass is a plain list; the others a tagged object around a list.
    inner = depth + 1 if isinstance(obj, list) else depth + 2
    if inner > MAX_DEPTH:
        _too_deep(obj)
    active.add(oid)
    try:
        if isinstance(obj, list):
            return _enc_items(obj, active, inner)
        if isinstance(obj, tuple):
            if type(obj) is not tuple:
                raise _Failed("unregistered tuple subclass (named tuple?): register it", obj)
            return _tagged("tuple", _enc_items(obj, active, inner))
        tag = "frozenset" if isinstance(obj, frozenset) else "set"
        return _tagged(tag, _set_items(obj, active, inner))
    finally:
        active.discard(oid)


def _set_items(items: Iterable[Any], active: set[int], depth: int) -> list[JSONValue]:
    values = list(items)
    if len(values) > 1 and _naturally_sortable(values):
        values.sort()
        return _enc_items(values, active, depth)
    encoded = _enc_items(values, active, depth)
    encoded.sort(key=_canonical)
    return encoded


def _nesting(value: Any, limit: int) -> int:
    """How deep a structure of plain JSON containers nests (``[]`` is 1, a scalar 0), counted
    without recursion; the count stops as soon as it passes ``limit``."""
    if not isinstance(value, dict | list):
        return 0
    deepest = 1
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
    return deepest


def check_depth(value: Any, *, max_depth: int = MAX_DEPTH, what: str = "value") -> None:
    """Refuses a plain JSON structure (``dict``/``list``/scalars, as :func:`json.loads` returns)
    nested deeper than ``max_depth`` arrays and objects (docs/workers.md, "Hostile input").

    Counted iteratively: safe on any depth and from any stack depth.

    Args:
        value: the structure to check.
        max_depth: the deepest nesting allowed (default :data:`MAX_DEPTH`).
        what: how the message names the value (e.g. ``"job envelope"``).

    Raises:
        EncodeError: ``value`` nests deeper than ``max_depth`` (``path`` is ``"<root>"``).
    """
    depth = _nesting(value, max_depth)
    if depth > max_depth:
        raise EncodeError(
            f"{what} nests deeper than {max_depth} JSON levels",
            type_name=_type_name(value), path="<root>",
        )


# Types whose values are totally ordered among themselves: a set of only one of these (numbers
# counting as one) is stored in natural order; any other set in the order of its items'
# canonical JSON text. Either way the output does not depend on set iteration order.
_NUMBERS: Final = (int, float)
_ORDERED: Final[tuple[type[Any], ...]] = (
    str, Decimal, datetime, date, time, timedelta, UUID, bytes,
)


def _naturally_sortable(values: list[Any]) -> bool:
    if all(isinstance(v, _NUMBERS) and not isinstance(v, Enum) for v in values):
        return not any(isinstance(v, float) and math.isnan(v) for v in values)
    first = type(values[0])
    if first not in _ORDERED or any(type(v) is not first for v in values):
        return False
    if first is Decimal:
        return not any(v.is_nan() for v in values)
    if first in (datetime, time):  # naive and aware values do not compare
        return len({v.utcoffset() is None for v in values}) == 1
    return True


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


# --------------------------------------------------------------------------- decoding


def decode(value: Any) -> Any:
    """Turns a JSON value produced by :func:`encode` back into Python values.

    Args:
        value: a structure of JSON values (as :func:`json.loads` returns), nested at most
            :data:`MAX_DEPTH` levels.

    Returns:
        The decoded value: tagged objects become their types, other values pass through.

    Raises:
        DeserializationError: a tagged object is malformed, names an unknown tag (tags are only
            looked up in the registry, never imported), or its registered decoder rejected it;
            or ``value`` nests deeper than :data:`MAX_DEPTH` (whatever the caller's stack
            depth).
    """
    return _guarded(_decode, (value, "", 0), False)


def _bad(message: str, path: str) -> NoReturn:
    shown = _show(path) if len(path) <= 160 else f"{path[:100]}...{path[-50:]}"
    raise DeserializationError(f"{message} at {shown}")


def _too_deep_to_read(path: str) -> NoReturn:
    _bad(f"nested deeper than MAX_DEPTH ({MAX_DEPTH}) JSON levels", path)


# ``depth`` below is how many JSON containers enclose ``value`` (0 at the root), exactly as
# the encoder counts: a container of ``value`` itself is at level ``depth + 1 <= MAX_DEPTH``.


def _decode(value: Any, path: str, depth: int) -> Any:
    if isinstance(value, list):
        level = depth + 1
        if level > MAX_DEPTH:
            _too_deep_to_read(path)
        return [_decode(item, f"{path}[{i}]", level) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        if value is None or isinstance(value, str | int | float):
            return value
        _bad(f"not a JSON value: {type(value).__name__}", path)
    level = depth + 1
    if level > MAX_DEPTH:
        _too_deep_to_read(path)
    if TAG_KEY not in value:
        return {k: _decode(v, _join_key(path, k), level) for k, v in value.items()}
    tag = value[TAG_KEY]
    if not isinstance(tag, str):
        _bad(f"tag must be a string, got {tag!r}", path)
    extra = set(value) - {TAG_KEY, VALUE_KEY} - _EXTRA_KEYS.get(tag, frozenset())
    if VALUE_KEY not in value or extra:
        _bad(f"malformed tagged object for tag {tag!r} (keys {sorted(value)})", path)
    payload = value[VALUE_KEY]
    try:
        if tag in _BUILTIN_TAGS:
            return _decode_builtin(tag, payload, value, path, level)
        entry = _by_tag.get(tag) or _register_on_demand(tag)
        if entry is None:
            _bad(f"unknown codec tag {tag!r} (is its type registered in this process?)", path)
        if entry.kind == "model":
            if _nesting(payload, MAX_DEPTH - level) > MAX_DEPTH - level:
                _too_deep_to_read(path)
            return entry.from_json(payload)
        return entry.from_json(_decode(payload, path, level))
    except (DeserializationError, RecursionError):
        raise  # RecursionError: the stack, not the value (retried on a fresh stack)
    except Exception as exc:  # a bad payload, or a registered decoder that rejected it
        raise DeserializationError(
            f"cannot decode tag {tag!r} at {_show(path)}: {type(exc).__name__}: {exc}"
        ) from exc


# A UTC offset with microseconds, which Python 3.11's fromisoformat may misread.
_FINE_OFFSET = re.compile(r"([+-])(\d\d):(\d\d):(\d\d)\.(\d{6})$")

DT = TypeVar("DT", datetime, time)


def _exact_offset(value: DT, text: str) -> DT:
    match = _FINE_OFFSET.search(text)
    if match is None:
        return value
    hours, minutes, seconds, micros = (int(g) for g in match.groups()[1:])
    offset = timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
    return value.replace(tzinfo=timezone(-offset if match[1] == "-" else offset))


def _need(kind: type[Any] | tuple[type[Any], ...], payload: Any, tag: str, path: str) -> None:
    if not isinstance(payload, kind) or isinstance(payload, bool):
        _bad(f"bad payload for tag {tag!r}: {payload!r}", path)


def _decode_builtin(
    tag: str, payload: Any, tagged: dict[str, Any], path: str, level: int
) -> Any:
    """A built-in tag; ``level`` is the tagged object's own level (its payload is one deeper)."""
    if tag in ("tuple", "set", "frozenset", "dict"):
        _need(list, payload, tag, path)
        if level + 1 > MAX_DEPTH:
            _too_deep_to_read(path)
        items = [_decode(x, f"{path}[{i}]", level + 1) for i, x in enumerate(payload)]
        if tag == "tuple":
            return tuple(items)
        if tag == "set":
            return set(items)
        if tag == "frozenset":
            return frozenset(items)
        result: dict[Any, Any] = {}
        for pair in items:
            if not isinstance(pair, list) or len(pair) != 2:
                _bad("dict pairs must be [key, value] lists", path)
            result[pair[0]] = pair[1]  # TypeError (unhashable key) -> DeserializationError
        return result
    if tag == "esc":
        _need(dict, payload, tag, path)
        if level + 1 > MAX_DEPTH:
            _too_deep_to_read(path)
        return {k: _decode(v, _join_key(path, k), level + 1) for k, v in payload.items()}
    if tag == "timedelta":
        _need(dict, payload, tag, path)
        if level + 1 > MAX_DEPTH:
            _too_deep_to_read(path)
        if set(payload) != {"days", "seconds", "microseconds"} or not all(
            type(x) is int for x in payload.values()
        ):
            _bad(f"bad payload for tag 'timedelta': {payload!r}", path)
        return timedelta(**payload)
    _need(str, payload, tag, path)
    text: str = payload
    fold = tagged.get(_FOLD_KEY, 0)
    if fold not in (0, 1) or isinstance(fold, bool):
        _bad(f"bad fold {fold!r}", path)
    if tag == "datetime":
        parsed = _exact_offset(datetime.fromisoformat(text), text).replace(fold=fold)
        zone_key = tagged.get(_TZ_KEY)
        if zone_key is None:
            return parsed
        if not isinstance(zone_key, str) or parsed.tzinfo is None:
            _bad(f"bad time zone {zone_key!r}", path)
        zone = ZoneInfo(zone_key)
        local = parsed.replace(tzinfo=zone)
        # Same wall time and fold as written, unless the zone's rules changed since: then the
        # stored offset (the instant) wins.
        return local if local.utcoffset() == parsed.utcoffset() else parsed.astimezone(zone)
    if tag == "date":
        return date.fromisoformat(text)
    if tag == "time":
        return _exact_offset(time.fromisoformat(text), text).replace(fold=fold)
    if tag == "decimal":
        try:
            return Decimal(text)
        except InvalidOperation:
            _bad(f"bad decimal {text!r}", path)
    if tag == "uuid":
        return UUID(text)
    if tag in ("bytes", "bytearray"):
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        return bytearray(raw) if tag == "bytearray" else raw
    # tag == "float"
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    if text not in special:
        _bad(f"bad float {text!r}", path)
    return special[text]


# --------------------------------------------------------------------------- stack depth
#
# The codec recurses once or twice per JSON level (MAX_DEPTH bounds that), and so do the C
# ``json`` parser and serializer, which count against the same Python recursion limit. A caller
# already deep in its own recursion may not have that much stack left. Each public entry point
# therefore runs its work through :func:`_guarded`: a ``RecursionError`` (never caused by the
# value itself, whose depth is checked explicitly) makes it redo the work once on a helper
# thread with a fresh stack; if even that runs out (or no thread can start), the typed error of
# the entry point is raised.


def _guarded(fn: Callable[..., T], args: tuple[Any, ...], encoding: bool) -> T:
    """``fn(*args)``, redone on a fresh stack when the calling thread's stack runs out.

    Args:
        fn: the work (raises the entry point's own errors, or ``RecursionError``).
        args: its arguments (``args[0]`` is the value, for the error message).
        encoding: raise :class:`EncodeError` (else ``DeserializationError``) when the stack
            runs out on the fresh thread too.
    """
    try:
        return fn(*args)
    except RecursionError:
        pass  # handled below, outside the except block (no chained traceback)
    try:
        return _on_fresh_stack(fn, args)
    except RecursionError as exc:
        if encoding:
            raise EncodeError(
                f"ran out of stack while encoding ({exc}); the JSON form may nest at most "
                f"MAX_DEPTH ({MAX_DEPTH}) levels",
                type_name=_type_name(args[0]), path="<root>",
            ) from exc
        raise DeserializationError(
            f"nested deeper than MAX_DEPTH ({MAX_DEPTH}) JSON levels (the reader ran out of "
            f"stack: {exc})"
        ) from exc


def _on_fresh_stack(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    """Run ``fn(*args)`` on a new thread (the caller's context variables copied) and wait.

    Raises:
        whatever ``fn`` raised; RecursionError: no thread could be started.
    """
    outcome: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.append((True, context.run(fn, *args)))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="reactor-codec-fresh-stack", daemon=True)
    try:
        thread.start()
    except RuntimeError as exc:  # e.g. at interpreter shutdown
        raise RecursionError(f"no thread for a fresh stack: {exc}") from exc
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def dumps(obj: Any) -> str:
    """Encodes ``obj`` (see :func:`encode`) to compact JSON text.

    Args:
        obj: any encodable value, its JSON form nested at most :data:`MAX_DEPTH` levels.

    Returns:
        JSON text with no insignificant whitespace and non-ASCII characters kept as is
        (``ensure_ascii=False``); never ``NaN``/``Infinity`` tokens.

    Raises:
        EncodeError: ``obj`` holds a value that cannot be encoded, or nests deeper than
            :data:`MAX_DEPTH` (whatever the caller's stack depth).
    """
    return _guarded(_dumps, (obj,), True)


def _dumps(obj: Any) -> str:
    try:
        encoded = _enc(obj, set(), 0)
    except _Failed as failed:
        raise failed.error() from failed.__cause__
    try:
        return _JSON.encode(encoded)
    except ValueError as exc:  # e.g. an int longer than sys.get_int_max_str_digits()
        raise EncodeError(str(exc), type_name=_type_name(obj), path="<root>") from exc


def loads(text: str | bytes) -> Any:
    """Decodes JSON text produced by :func:`dumps`.

    Args:
        text: JSON text (``bytes`` are read as UTF-8).

    Returns:
        The decoded value.

    Raises:
        DeserializationError: the text is not UTF-8 or not JSON (``NaN``/``Infinity`` tokens
            included), nests deeper than :data:`MAX_DEPTH`, or holds a malformed or unknown
            tagged object (whatever the caller's stack depth).
    """
    return _guarded(_loads, (text,), False)


def _loads(text: str | bytes) -> Any:
    return _decode(_parse(text), "", 0)


def parse_json(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parses plain JSON text (no codec tags are decoded) with the codec's bounds.

    Used for job envelopes (:meth:`reactor.ports.router.Job.from_json`): the one place that
    reads untrusted text without :func:`loads` (docs/workers.md, "Hostile input").

    Args:
        text: JSON text; ``bytes`` must be UTF-8.
        max_depth: the deepest nesting of arrays and objects accepted (default
            :data:`MAX_DEPTH`).

    Returns:
        The parsed value (``dict``/``list``/``str``/``int``/``float``/``bool``/``None``).

    Raises:
        DeserializationError: the bytes are not UTF-8, the text is not JSON (``NaN`` and
            ``Infinity`` tokens included), or it nests deeper than ``max_depth`` (whatever the
            caller's stack depth). Never ``RecursionError``.
    """
    return _guarded(_parse_json, (text, max_depth), False)


def _parse_json(text: str | bytes, max_depth: int) -> Any:
    value = _parse(text)
    if _nesting(value, max_depth) > max_depth:
        raise DeserializationError(f"JSON nests deeper than {max_depth} levels")
    return value


def _parse(text: str | bytes) -> Any:
    """``json.loads`` with typed errors (a ``RecursionError`` is left to :func:`_guarded`)."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DeserializationError(f"not UTF-8 text: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise DeserializationError(f"malformed JSON: {exc}") from exc


# --------------------------------------------------------------------------- documents


def encode_document(doc: Mapping[str, Any], *, max_bytes: int | None = None) -> str:
    """Encodes a document (a run context, a record) to JSON text stamped with ``schema_version``.

    The document is a JSON object whose top-level keys are kept as they are (a top-level
    ``"__t"`` key needs no escaping here) and whose values are encoded with :func:`encode`.
    ``"schema_version"`` comes first in the output.

    Args:
        doc: a mapping with string keys. It may already hold ``"schema_version"`` (a decoded
            document being re-encoded) only if it equals :data:`SCHEMA_VERSION`.
        max_bytes: the size limit of the UTF-8 text in bytes, or ``None`` for no limit.

    Returns:
        Compact JSON text (see :func:`dumps`).

    Raises:
        EncodeError: a value cannot be encoded (the path starts at the document key), or the
            document nests deeper than :data:`MAX_DEPTH` (the document object is level 1),
            whatever the caller's stack depth.
        TypeError: a top-level key is not a string.
        ValueError: ``doc`` holds a different ``schema_version``.
        ContextTooLargeError: the text is larger than ``max_bytes``; raised before anything is
            written, with ``size_bytes`` and ``limit_bytes`` set.
    """
    return _guarded(_encode_document, (doc, max_bytes), True)


def _encode_document(doc: Mapping[str, Any], max_bytes: int | None) -> str:
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"document holds schema_version {version!r}; this codec writes {SCHEMA_VERSION!r}"
        )
    active: set[int] = set()
    body: dict[str, JSONValue] = {"schema_version": SCHEMA_VERSION}
    for key, value in doc.items():
        if type(key) is not str:
            raise TypeError(f"document keys must be strings, got {key!r}")
        if key != "schema_version":
            try:
                body[key] = _enc(value, active, 1)  # inside the document object
            except _Failed as failed:
                failed.segments.append(_key_segment(key))
                raise failed.error() from failed.__cause__
    try:
        text = _JSON.encode(body)
    except ValueError as exc:
        raise EncodeError(str(exc), type_name=_type_name(doc), path="<root>") from exc
    if max_bytes is not None:
        # An ASCII text's UTF-8 size is its length (str.isascii is O(1) in CPython).
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        if size > max_bytes:
            raise ContextTooLargeError(
                f"encoded document is {size} bytes, over the limit of {max_bytes} bytes",
                size_bytes=size,
                limit_bytes=max_bytes,
            )
    return text


def decode_document(text: str | bytes) -> dict[str, Any]:
    """Decodes a document written by :func:`encode_document`.

    Args:
        text: the JSON text (``bytes`` are read as UTF-8).

    Returns:
        The document with its values decoded. ``"schema_version"`` is removed: the caller gets
        back what it gave to :func:`encode_document`.

    Raises:
        DeserializationError: not UTF-8, malformed JSON, not a JSON object, no
            ``schema_version``, nested deeper than :data:`MAX_DEPTH` (whatever the caller's
            stack depth), or a value that does not decode.
        SchemaVersionError: ``schema_version`` is not one this release reads.
    """
    return _guarded(_decode_document, (text,), False)


def _decode_document(text: str | bytes) -> dict[str, Any]:
    raw = _parse(text)
    if not isinstance(raw, dict):
        raise DeserializationError(f"document must be a JSON object, got {type(raw).__name__}")
    if "schema_version" not in raw:
        raise DeserializationError("document has no schema_version")
    version = raw.pop("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"unsupported document schema_version {version!r} (this release reads "
            f"{SCHEMA_VERSION!r})"
        )
    return {key: _decode(value, _join_key("", key), 1) for key, value in raw.items()}
