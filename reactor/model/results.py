"""Result values returned by steps and runs: ``Success``, ``Failure``, ``Halt``, ``Skipped``.

Semantics (docs/concepts.md, "Results and signals"):

* ``Success(value)`` — the step (or run) completed with ``value``.
* ``Failure(error, ...)`` — the step (or run) failed; carries diagnostics and the rollback report.
* ``Halt(reason)`` — stop the run cleanly, keep partial progress, no rollback (status ``halted``).
* ``Skipped(value)`` — this one step had nothing to do; ``value`` flows to dependants like a
  ``Success`` value, and the step is never undone.
* ``Paused(step, ...)`` — the run reached an interrupt and waits for ``Reactor.resume``
  (status ``paused``; docs/run-control.md, "Interrupts"). Neither a success nor a failure.

``Halt`` and ``Skipped`` are subclasses of ``Success`` (``.success`` is ``True`` for both), so
when pattern matching, test ``Halt``/``Skipped`` before ``Success``. ``Paused`` is its own
branch (``.success`` and ``.failed`` are both ``False``, ``.paused`` is ``True``).

All result types are immutable and are registered with :mod:`reactor.model.codec` so they
round-trip through stored contexts. A stored ``Failure`` keeps its error as the message string
(the exception class name is kept in ``exception_class``): exceptions are never pickled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, overload

from reactor.errors import canonical_exception_name
from reactor.model import codec
from reactor.model.masking import mask_value

__all__ = [
    "Failure",
    "Halt",
    "MapResults",
    "Paused",
    "Result",
    "RollbackFailure",
    "Skipped",
    "Success",
    "exception_class_name",
]

_R = TypeVar("_R", bound="Result")

RollbackKind = Literal["undo", "compensate"]


def exception_class_name(error: BaseException) -> str:
    """Return ``module.QualName`` of an exception's class (``builtins`` omitted).

    Args:
        error: any exception instance.

    Returns:
        e.g. ``"ValueError"`` or ``"reactor.errors.CompensationError"``.
    """
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class Result:
    """Common base of every result value.

    Attributes:
        run_id: the id of the run that produced this result (set on results returned by
            ``Reactor.run``/``Reactor.undo``; ``None`` on results returned by a single step).
    """

    __slots__ = ()

    run_id: str | None

    @property
    def success(self) -> bool:
        """``True`` for ``Success``, ``Halt`` and ``Skipped``; ``False`` for ``Failure`` and
        ``Paused``."""
        return isinstance(self, Success)

    @property
    def failed(self) -> bool:
        """``True`` only for ``Failure``."""
        return isinstance(self, Failure)

    @property
    def halted(self) -> bool:
        """``True`` only for ``Halt``."""
        return isinstance(self, Halt)

    @property
    def skipped(self) -> bool:
        """``True`` only for ``Skipped``."""
        return isinstance(self, Skipped)

    @property
    def paused(self) -> bool:
        """``True`` only for ``Paused`` (the run waits at an interrupt)."""
        return isinstance(self, Paused)

    def with_run_id(self: _R, run_id: str | None) -> _R:
        """Return a copy of this result carrying ``run_id``."""
        return replace(self, run_id=run_id)  # type: ignore[type-var]


@dataclass(frozen=True)
class Success(Result):
    """A completed step or run.

    Attributes:
        value: the step's return value, or the run's ``returns`` value (the dict of all step
            results when the reactor declares no ``returns``).
        run_id: see :class:`Result`.
    """

    value: Any = None
    run_id: str | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True, init=False)
class Halt(Success):
    """A clean stop: remaining steps do not run and nothing is rolled back.

    Attributes:
        reason: why the run stopped (any codec-serialisable value, usually a string).
        step_name: the step that halted (set by the engine).
        value: unused by the engine; kept for symmetry with ``Success``.
    """

    reason: Any = None
    step_name: str | None = None

    def __init__(
        self,
        reason: Any = None,
        *,
        step_name: str | None = None,
        value: Any = None,
        run_id: str | None = None,
    ) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "run_id", run_id)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "step_name", step_name)


@dataclass(frozen=True, init=False)
class Skipped(Success):
    """"This step had nothing to do".

    The value is stored and flows to dependants like a ``Success`` value; the step is never
    undone; the run status is unaffected.
    """

    def __init__(self, value: Any = None, *, run_id: str | None = None) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "run_id", run_id)


@dataclass(frozen=True)
class Paused(Result):
    """A run stopped at an interrupt, waiting for outside input (docs/run-control.md,
    "Interrupts").

    Returned by ``Reactor.run`` (and ``Reactor.resume``, ``DispatchHandle.wait``) when the run
    reached an ``interrupt`` step: the run is stored ``paused`` and continues only through
    ``Reactor.resume`` (by ``run_id`` or ``correlation_id``). Not a success and not a failure:
    ``.success`` and ``.failed`` are ``False``, ``.paused`` is ``True``.

    Attributes:
        step: the interrupt's step path (``"approval"``; inside a composed child the compose
            step's name first, ``"review.approval"``).
        correlation_id: the id a resume may name instead of the run id, or ``None``.
        timeout: seconds the interrupt waits before it expires, or ``None`` (no timeout).
        deadline: when it expires, in epoch seconds on the runtime clock (docs/testing.md,
            "The clock"), or ``None``.
        expiry: ``"lazy"`` (a resume after the deadline fails the run) or ``"active"`` (a
            delayed job also fails it at the deadline); ``None`` without a timeout.
        max_attempts: invalid payloads accepted before the run fails.
        attempts: invalid payloads counted so far.
        sleeping_until: set when the run reached a ``sleep`` step instead (docs/schedules.md,
            "Durable sleep"): its wake time, epoch seconds on the runtime clock. The engine
            parks the run and hands it to a worker; ``Reactor.run`` returns a
            ``DispatchHandle`` for it, never this ``Paused``.
        run_id: see :class:`Result`.
    """

    step: str
    correlation_id: str | None = None
    timeout: float | None = None
    deadline: float | None = None
    expiry: Literal["lazy", "active"] | None = None
    max_attempts: int = 1
    attempts: int = 0
    sleeping_until: float | None = field(default=None, kw_only=True)
    run_id: str | None = field(default=None, kw_only=True, compare=False)

    @property
    def status(self) -> str:
        """``"paused"``: the stored run's status (``reactor.RunStatus.PAUSED``)."""
        return "paused"


@dataclass(frozen=True)
class RollbackFailure:
    """One ``undo`` or ``compensate`` that did not complete during a rollback.

    Attributes:
        step: the step whose undo/compensate failed. Steps of a composed child are prefixed
            with the compose step's name (``"payment.capture"``).
        kind: ``"undo"`` or ``"compensate"``.
        reason: ``"returned_failure"`` (it returned a ``Failure`` or called ``fail()``),
            ``"raised"`` (it raised), ``"context_unavailable"`` (a map element's stored context
            is gone), ``"coordination_unavailable"`` (reserved for step-level coordination).
        message: a human-readable description.
        map_step: for a map element's step, the map step's name.
        element_index: for a map element's step, the element's 0-based index.
    """

    step: str
    kind: RollbackKind
    reason: str
    message: str
    map_step: str | None = None
    element_index: int | None = None

    def nested(self, prefix: str) -> RollbackFailure:
        """Return a copy whose ``step`` is prefixed with ``prefix.`` (compose flattening)."""
        return replace(self, step=f"{prefix}.{self.step}")

    def in_map(self, map_step: str, element_index: int) -> RollbackFailure:
        """Return a copy attributed to element ``element_index`` of map ``map_step``.

        An already-attributed failure (a map nested in an element) keeps its own attribution.
        """
        if self.map_step is not None:
            return self
        return replace(self, map_step=map_step, element_index=element_index)


@dataclass(frozen=True)
class Failure(Result):
    """A failed step or run.

    Attributes:
        error: the error: an exception raised by user code or by reactor, or any value given to
            ``fail()``/``Failure(...)`` (usually a message string). A failure read back from
            storage carries the message string.
        retryable: ``False`` stops a step's retries at once. An ``error`` whose ``retryable``
            attribute is ``False`` is treated the same (see :attr:`is_retryable`).
        step_name: the step that failed (``None`` for invalid reactor inputs).
        reactor_name: the registered name of the reactor the step belongs to.
        inputs: the failing step's arguments (or the reactor inputs for an input validation
            failure), with every ``redact=True`` input replaced by ``"[REDACTED]"``.
        exception_class: ``module.QualName`` of the exception, when ``error`` is one.
        traceback: the formatted traceback, with reactor's own frames trimmed.
        validation_errors: ``{"field": ["message", ...]}`` for input validation failures.
        rollback_failures: every undo/compensate that did not complete while rolling back.
        run_id: see :class:`Result`.
    """

    error: Any = None
    retryable: bool = True
    step_name: str | None = None
    reactor_name: str | None = None
    inputs: Mapping[str, Any] | None = None
    exception_class: str | None = None
    traceback: str | None = None
    validation_errors: Mapping[str, list[str]] = field(default_factory=dict)
    rollback_failures: list[RollbackFailure] = field(default_factory=list)
    run_id: str | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        if self.exception_class is None and isinstance(self.error, BaseException):
            object.__setattr__(self, "exception_class", exception_class_name(self.error))

    @property
    def message(self) -> str:
        """The error as text (``str(error)``)."""
        return str(self.error)

    def masked(self) -> Failure:
        """This failure with its ``inputs`` masked (:func:`reactor.model.masking.mask_value`:
        sealed secrets read ``"[REDACTED]"``; names are already redacted when the engine
        builds a failure). docs/security.md, "What each view shows".

        Returns:
            ``self`` when it has no inputs, else a copy with masked inputs.
        """
        if self.inputs is None:
            return self
        return replace(self, inputs=mask_value(dict(self.inputs)))

    def __repr__(self) -> str:
        inputs = None if self.inputs is None else mask_value(dict(self.inputs))
        return (
            f"Failure(error={self.error!r}, retryable={self.retryable!r}, "
            f"step_name={self.step_name!r}, reactor_name={self.reactor_name!r}, "
            f"inputs={inputs!r}, exception_class={self.exception_class!r}, "
            f"validation_errors={dict(self.validation_errors)!r}, "
            f"rollback_failures={self.rollback_failures!r}, run_id={self.run_id!r})"
        )

    @property
    def is_retryable(self) -> bool:
        """``False`` when ``retryable=False`` or the error has ``retryable = False``."""
        return self.retryable and getattr(self.error, "retryable", True) is not False


class MapResults(Sequence[Success | Failure]):
    """The value of a map step declared with ``atomic=False``: one result per element, in order.

    Behaves as an immutable sequence of ``Success``/``Failure`` (docs/concepts.md, "Inline map",
    ``atomic=False``), with helpers to split them.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[Success | Failure] = ()) -> None:
        self._items: tuple[Success | Failure, ...] = tuple(items)

    @overload
    def __getitem__(self, index: int) -> Success | Failure: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Success | Failure]: ...

    def __getitem__(self, index: int | slice) -> Success | Failure | Sequence[Success | Failure]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Success | Failure]:
        return iter(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MapResults):
            return self._items == other._items
        if isinstance(other, list | tuple):
            return list(self._items) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"MapResults({list(self._items)!r})"

    def successes(self) -> list[Success]:
        """The successful elements' results, in element order."""
        return [r for r in self._items if isinstance(r, Success)]

    def failures(self) -> list[Failure]:
        """The failed elements' results, in element order."""
        return [r for r in self._items if isinstance(r, Failure)]

    def values(self) -> list[Any]:
        """The successful elements' values, in element order."""
        return [r.value for r in self.successes()]

    def failed_indexes(self) -> list[int]:
        """The 0-based indexes of the failed elements."""
        return [i for i, r in enumerate(self._items) if isinstance(r, Failure)]


# --- codec registration ---------------------------------------------------------------------


def _stored_error(error: Any) -> Any:
    return str(error) if isinstance(error, BaseException) else error


def _encode_success(r: Success) -> dict[str, Any]:
    return {"value": r.value}


def _encode_halt(r: Halt) -> dict[str, Any]:
    return {"reason": r.reason, "step_name": r.step_name, "value": r.value}


def _encode_failure(r: Failure) -> dict[str, Any]:
    return {
        "error": _stored_error(r.error),
        "retryable": r.is_retryable,
        "step_name": r.step_name,
        "reactor_name": r.reactor_name,
        "inputs": dict(r.inputs) if r.inputs is not None else None,
        "exception_class": r.exception_class,
        "traceback": r.traceback,
        "validation_errors": {k: list(v) for k, v in r.validation_errors.items()},
        "rollback_failures": [_encode_rollback_failure(f) for f in r.rollback_failures],
    }


def _encode_rollback_failure(f: RollbackFailure) -> dict[str, Any]:
    return {
        "step": f.step,
        "kind": f.kind,
        "reason": f.reason,
        "message": f.message,
        "map_step": f.map_step,
        "element_index": f.element_index,
    }


def _decode_rollback_failure(d: Any) -> RollbackFailure:
    kind = d["kind"]
    if kind not in ("undo", "compensate"):
        raise ValueError(f"unknown rollback kind {kind!r}")
    return RollbackFailure(
        step=str(d["step"]),
        kind=kind,
        reason=str(d["reason"]),
        message=str(d["message"]),
        map_step=d.get("map_step"),
        element_index=d.get("element_index"),
    )


def _exception_name(name: Any) -> Any:
    """A stored ``exception_class`` under its current name (docs/protocol.md, "Stored
    failures"); anything that is not a string is left for :class:`Failure` to refuse."""
    return canonical_exception_name(name) if isinstance(name, str) else name


def _decode_failure(d: Any) -> Failure:
    return Failure(
        d["error"],
        retryable=bool(d["retryable"]),
        step_name=d.get("step_name"),
        reactor_name=d.get("reactor_name"),
        inputs=d.get("inputs"),
        exception_class=_exception_name(d.get("exception_class")),
        traceback=d.get("traceback"),
        validation_errors={k: list(v) for k, v in (d.get("validation_errors") or {}).items()},
        rollback_failures=[_decode_rollback_failure(x) for x in d.get("rollback_failures") or []],
    )


def _decode_map_results(d: Any) -> MapResults:
    items = list(d["items"])
    for item in items:
        if not isinstance(item, Success | Failure):
            raise ValueError("MapResults items must be results")
    return MapResults(items)


codec.register(Success, _encode_success, lambda d: Success(d["value"]), tag="reactor.Success")
codec.register(
    Halt,
    _encode_halt,
    lambda d: Halt(d["reason"], step_name=d.get("step_name"), value=d.get("value")),
    tag="reactor.Halt",
)
codec.register(Skipped, _encode_success, lambda d: Skipped(d["value"]), tag="reactor.Skipped")
codec.register(Failure, _encode_failure, _decode_failure, tag="reactor.Failure")
codec.register(
    RollbackFailure, _encode_rollback_failure, _decode_rollback_failure,
    tag="reactor.RollbackFailure",
)
codec.register(
    MapResults, lambda m: {"items": list(m)}, _decode_map_results, tag="reactor.MapResults"
)
