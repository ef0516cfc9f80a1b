"""Declared inputs (``Input``), input contracts and the frozen ``Inputs`` object.

An :class:`Input` is declared as a class attribute of a ``Reactor`` (the run's inputs) or of a
``Step`` (the step's contract). Validation uses pydantic (one ``TypeAdapter`` per input) and
reports field-level errors as :class:`~reactor.errors.InputValidationError` —
docs/concepts.md, "Reactors and steps":

* presence means "key exists": ``False``, ``0``, ``""``, ``[]`` are kept;
* a default applies to an absent key or ``None``;
* an absent (or ``None``) required input fails;
* unknown names fail (a typo is never silently ignored).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import keyword
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Annotated, Any, get_args, get_type_hints

from pydantic import (
    BaseModel,
    Field,
    PydanticSchemaGenerationError,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
)
from pydantic import ConfigDict as _ConfigDict

from reactor.errors import DefinitionError, InputValidationError, UndeclaredInputError
from reactor.model import codec
from reactor.model.masking import mask_mapping

__all__ = ["MISSING", "Input", "InputContract", "Inputs"]


class _Missing:
    """Sentinel type for "no default"."""

    def __repr__(self) -> str:
        return "MISSING"


#: Sentinel: the input has no default (it is required).
MISSING: Any = _Missing()


class Input:
    """Declare an input of a reactor or a step.

    Args:
        type: the expected type (any type pydantic validates: ``int``, ``Decimal``,
            ``list[str]``, a pydantic model, ``str | None``; other classes are checked with
            ``isinstance``). ``Any`` (the default) accepts everything.
        default: the value used when the input is absent or ``None``; omit for a required
            input.
        redact: ``True`` makes the value a secret: it is encrypted before it is stored
            (run inputs, undo-stack and rollback arguments) and shown as ``"[REDACTED]"`` in
            ``Failure.inputs``, ``RunView.inputs``, ``reactor runs show`` and logs
            (docs/security.md, "What is encrypted").
        description: free text for documentation and the dashboard.
        **constraints: pydantic ``Field`` constraints (``gt``, ``ge``, ``lt``, ``le``,
            ``min_length``, ``max_length``, ``pattern``, ``multiple_of``, ...).

    Raises:
        DefinitionError: the constraints are not valid pydantic ``Field`` arguments for
            ``type`` (raised when the owning class is created).
    """

    def __init__(
        self,
        type: Any = Any,  # noqa: A002 - the public DSL spelling
        *,
        default: Any = MISSING,
        redact: bool = False,
        description: str | None = None,
        **constraints: Any,
    ) -> None:
        self.type = type
        self.default = default
        self.redact = redact
        self.description = description
        self.constraints = dict(constraints)
        self.name = ""
        self._adapter: TypeAdapter[Any] | None = None

    def __repr__(self) -> str:
        return f"Input({self.type!r}, name={self.name!r}, required={self.required})"

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.name:
            self.name = name

    @property
    def required(self) -> bool:
        """``True`` when the input has no default."""
        return self.default is MISSING

    def bound(self, name: str, owner: str | None = None) -> Input:
        """Return a copy of this declaration named ``name`` (its adapter is built eagerly).

        Args:
            name: the input name.
            owner: the declaring reactor or step class (named in errors).

        Raises:
            DefinitionError: invalid type or constraints (naming ``owner`` and the input).
        """
        clone = Input(
            self.type,
            default=self.default,
            redact=self.redact,
            description=self.description,
            **self.constraints,
        )
        clone.name = name
        clone._adapter = _build_adapter(name, self.type, self.constraints, owner)
        return clone

    def validate(self, value: Any) -> Any:
        """Validate one value against this declaration (no default handling).

        Raises:
            ValidationError: from pydantic.
        """
        adapter = self._adapter or _build_adapter(self.name, self.type, self.constraints)
        self._adapter = adapter
        return adapter.validate_python(value)


def codec_types(tp: Any, _seen: set[Any] | None = None) -> Iterator[type[Any]]:
    """Yield the pydantic models, enums and dataclasses named by ``tp`` (the types
    :func:`register_codec_types` registers), each once, walking the arguments of a generic
    alias (``list[Order]``, ``Order | None``) first.

    A dataclass is stored field by field, each field's value encoded on its own, so the types
    its fields name (an enum, another dataclass, a model, through containers) are walked too
    (a dataclass that refers to itself is walked once). A pydantic model is stored as its
    JSON dump, so its fields need nothing.
    """
    seen: set[Any] = set() if _seen is None else _seen
    try:
        if tp in seen:
            return
        seen.add(tp)
    except TypeError:  # an unhashable annotation (e.g. a Literal of a list) names no type
        return
    for arg in get_args(tp):
        yield from codec_types(arg, seen)
    if not isinstance(tp, type):
        return
    if dataclasses.is_dataclass(tp):
        for field_type in _field_types(tp):
            yield from codec_types(field_type, seen)
        yield tp
    elif issubclass(tp, BaseModel | Enum):
        yield tp


def _field_types(cls: type[Any]) -> list[Any]:
    """The annotated types of a dataclass's ``init`` fields (the ones the codec stores),
    string annotations resolved where they can be; an unresolvable one is skipped."""
    try:
        hints = get_type_hints(cls)
    except Exception:  # an annotation naming what is not importable here: use the raw ones
        hints = {}
    return [hints.get(f.name, f.type) for f in dataclasses.fields(cls) if f.init]


def register_codec_types(tp: Any) -> None:
    """Register with the codec the pydantic models, enums and dataclasses named by ``tp``.

    Validated inputs are stored in the run's context, so an ``Input(Order)`` whose ``Order`` is
    a pydantic model must round-trip through :mod:`reactor.model.codec`. Types already
    registered (or whose default tag is taken) are left alone. Called lazily, on a contract's
    first validation (or when a stored value needs the type: ``codec.register_on_demand``), so
    a user's own ``codec.register_model(Order, tag=...)`` made at import time wins
    (docs/concepts.md, "Decisions"). ``tp`` may be a generic alias (``list[Order]``,
    ``Order | None``): its arguments are walked too.
    """
    for found in codec_types(tp):
        if codec.is_registered(found):
            continue
        try:
            if issubclass(found, BaseModel):
                codec.register_model(found)
            elif issubclass(found, Enum):
                codec.register_enum(found)
            else:
                codec.register_dataclass(found)
        except (TypeError, ValueError):
            continue  # the user registers it under their own tag


#: ``Field`` keywords an ``Input`` accepts as constraints (``default``/``description`` are
#: ``Input`` parameters of their own).
_FIELD_KEYWORDS: frozenset[str] = frozenset(inspect.signature(Field).parameters) - {
    "default", "default_factory", "description", "extra",
}


def _build_adapter(
    name: str, tp: Any, constraints: Mapping[str, Any], owner: str | None = None
) -> TypeAdapter[Any]:
    """Build the validator of one input, completely (a type pydantic cannot resolve — e.g. a
    string ``Input("notatype")`` — is a :class:`DefinitionError` here, not at run time).

    Raises:
        DefinitionError: unknown constraints, or a type pydantic cannot build a validator for;
            the message names ``owner`` (the reactor or step class) and the input.
    """
    where = f"{owner}: input {name!r}" if owner else f"input {name!r}"
    unknown = sorted(set(constraints) - _FIELD_KEYWORDS)
    if unknown:
        raise DefinitionError(f"{where}: invalid type or constraints: unknown {unknown}")
    annotated: Any = Annotated[tp, Field(**constraints)] if constraints else tp
    try:
        try:
            adapter = TypeAdapter(annotated)
        except PydanticSchemaGenerationError:
            adapter = TypeAdapter(annotated, config=_ConfigDict(arbitrary_types_allowed=True))
        if not adapter.pydantic_complete:  # an unresolvable (string / forward) type
            adapter.rebuild(raise_errors=True)
    except (TypeError, ValueError, NameError, PydanticUserError) as exc:
        detail = str(exc).split("\n", 1)[0]
        raise DefinitionError(
            f"{where}: invalid type or constraints ({tp!r}): {detail}"
        ) from exc
    return adapter


#: Input names a ``Step`` may not declare (they clash with the inputs object or ``Step``).
STEP_RESERVED_INPUT_NAMES: frozenset[str] = frozenset(
    {
        "to_dict", "run", "undo", "compensate", "inputs", "context", "result", "error",
        "failure", "retries", "contract", "call", "call_undo", "call_compensate", "has_undo",
        "has_compensate", "coordination",
    }
)

#: Input names a ``Reactor`` may not declare (they clash with ``Reactor`` attributes).
REACTOR_RESERVED_INPUT_NAMES: frozenset[str] = frozenset(
    {
        "to_dict", "run", "execute", "find", "undo", "retry", "cancel", "idempotency_key",
        "definition", "reactor_name", "returns", "coordination", "deadline", "suspend",
        "unsuspend", "suspend_all", "unsuspend_all", "suspend_switch", "on_failure", "rewind",
        "fork",
    }
)


def check_input_name(name: str, owner: str, reserved: frozenset[str]) -> None:
    """Reject reserved, private or keyword input names.

    Args:
        name: the declared input name.
        owner: the owning class's name (for the message).
        reserved: the owner kind's reserved names.

    Raises:
        DefinitionError: ``name`` is reserved.
    """
    if name.startswith("_") or keyword.iskeyword(name) or name in reserved:
        raise DefinitionError(f"{owner}: input name {name!r} is reserved")


class InputContract:
    """An ordered set of named :class:`Input` declarations with validation.

    Args:
        owner: the owning class's name (for messages).
        inputs: the bound declarations, in declaration order.
    """

    def __init__(self, owner: str, inputs: Iterable[Input]) -> None:
        self.owner = owner
        self.inputs: dict[str, Input] = {i.name: i for i in inputs}
        self._codec_ready = False

    @property
    def names(self) -> frozenset[str]:
        """Declared input names."""
        return frozenset(self.inputs)

    @property
    def redacted(self) -> frozenset[str]:
        """Names declared ``redact=True``."""
        return frozenset(n for n, i in self.inputs.items() if i.redact)

    def validate(self, values: Mapping[str, Any], step_name: str | None = None) -> dict[str, Any]:
        """Validate ``values`` and apply defaults.

        Args:
            values: the raw values by name.
            step_name: the step being validated (``None`` for reactor inputs); set on the error.

        Returns:
            The validated values, in declaration order (pydantic models stay model instances).

        Raises:
            InputValidationError: with ``field_errors`` for every invalid, missing or unknown
                field (values are never included in messages).
        """
        self.register_codec_types()
        errors: dict[str, list[str]] = {}
        out: dict[str, Any] = {}
        for name in values:
            if name not in self.inputs:
                errors.setdefault(str(name), []).append("unexpected input (not declared)")
        for name, decl in self.inputs.items():
            raw = values.get(name)
            if raw is None and not decl.required:
                out[name] = copy.deepcopy(decl.default)
                continue
            if name not in values:
                errors.setdefault(name, []).append("field required")
                continue
            try:
                out[name] = decl.validate(raw)
            except ValidationError as exc:
                for err in exc.errors(include_url=False, include_input=False):
                    loc = ".".join(str(p) for p in (name, *err["loc"]))
                    errors.setdefault(loc, []).append(str(err["msg"]))
        if errors:
            where = f"step {step_name!r}" if step_name else self.owner
            fields = "; ".join(f"{k}: {', '.join(v)}" for k, v in errors.items())
            raise InputValidationError(
                f"invalid inputs for {where}: {fields}", field_errors=errors, step_name=step_name
            )
        return out

    def codec_types(self) -> Iterator[type[Any]]:
        """Yield the models, enums and dataclasses the declared input types name (see
        :func:`codec_types`)."""
        for decl in self.inputs.values():
            yield from codec_types(decl.type)

    def register_codec_types(self) -> None:
        """Register the declared input types with the codec (once; see
        :func:`register_codec_types`)."""
        if not self._codec_ready:
            for decl in self.inputs.values():
                register_codec_types(decl.type)
            self._codec_ready = True

    def with_defaults(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Apply defaults without validating (for ``undo``/``compensate``)."""
        out = dict(values)
        for name, decl in self.inputs.items():
            if out.get(name) is None and not decl.required:
                out[name] = copy.deepcopy(decl.default)
        return out

    def redact(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``values`` with redacted names replaced by ``"[REDACTED]"``
        (:func:`reactor.model.masking.mask_mapping`)."""
        return mask_mapping(values, self.redacted)


class Inputs:
    """The frozen inputs object a step body reads (``inputs.amount``).

    Reading a name that is not declared (or not wired, for a function step) raises
    :class:`~reactor.errors.UndeclaredInputError` (never retried). ``inputs["x"]`` and
    ``"x" in inputs`` work too; :meth:`to_dict` returns a plain dict copy.

    Args:
        values: the values by name.
        declared: the names that may be read (defaults to ``values``' keys); a declared name
            with no value reads as ``None``.
    """

    __slots__ = ("_declared", "_values")

    def __init__(self, values: Mapping[str, Any], declared: Iterable[str] | None = None) -> None:
        object.__setattr__(self, "_values", dict(values))
        names = frozenset(declared) if declared is not None else frozenset(values)
        object.__setattr__(self, "_declared", names | frozenset(values))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._declared:
            raise UndeclaredInputError(
                f"input {name!r} is not declared (declared: {sorted(self._declared)})"
            )
        return self._values.get(name)

    def __getitem__(self, name: str) -> Any:
        return self.__getattr__(name)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("step inputs are read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("step inputs are read-only")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Inputs):
            return bool(self._values == other._values)
        if isinstance(other, Mapping):
            return bool(self._values == dict(other))
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Inputs({self._values!r})"

    def to_dict(self) -> dict[str, Any]:
        """A plain (mutable) copy of the values."""
        return dict(self._values)
