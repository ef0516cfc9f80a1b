"""The run Context: the persisted unit of a run (docs/concepts.md, "Stored runs").

A :class:`Context` holds everything needed to inspect, resume or roll back a run: inputs,
step results, the execution trace, the undo stack, the status and the failure. It is converted
to a plain document with :meth:`Context.to_document` (values left for the codec to tag) and
read back with :meth:`Context.from_document`, which raises
:class:`~reactor.errors.DeserializationError` on any malformed field — never a bare
``KeyError``/``TypeError``.

Composed children (``compose``) are embedded whole in ``composed_contexts``; map elements are
stored as their own contexts and referenced by id (a ``map_ref`` entry). The engine's own
bookkeeping is the typed :class:`~reactor.model.engine_state.EngineState` in
:attr:`Context.engine_state`, stored as the document's ``private_data`` object
(docs/protocol.md, "Contexts").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reactor.errors import DeserializationError
from reactor.model.engine_state import EngineState
from reactor.model.masking import REDACTED, mask_mapping
from reactor.model.results import Failure, RollbackFailure
from reactor.model.secrets import seal_names
from reactor.model.status import RunStatus

__all__ = [
    "LOG_KEYS",
    "REDACTED",
    "RESULT_OF_STEP",
    "Context",
    "Persisted",
    "new_context_id",
    "sealed_entry",
    "stored_undo_entry",
]

#: The document keys an incremental checkpoint appends to (or leaves alone) instead of
#: rewriting; every other key is the *head*, rewritten by each checkpoint (docs/protocol.md,
#: "Incremental checkpoints").
LOG_KEYS: tuple[str, ...] = ("inputs", "intermediate_results", "execution_trace", "undo_stack")

_T = TypeVar("_T")


@dataclass(slots=True)
class Persisted:
    """What of a context its stored record already holds: the journal of incremental
    checkpoints (docs/protocol.md, "Incremental checkpoints").

    The lists and dict hold the very objects that were written (compared by identity), so a
    checkpoint finds what changed since without re-encoding anything: results added since
    (dict insertion order), trace and undo entries pushed or popped since, new inputs.

    Attributes:
        base: the stored record's base id.
        position: how many segments follow the base.
        size: the stored UTF-8 bytes (base document and segments).
        inputs: the inputs object written.
        redacted: the secret input names when ``inputs`` was written.
        results: step name -> the result object written.
        trace: the trace entries written, oldest first.
        undo: the undo-stack entries written, oldest first.
    """

    base: str
    position: int
    size: int
    inputs: Any
    redacted: tuple[str, ...]
    results: dict[str, Any]
    trace: list[Any]
    undo: list[Any]


def new_context_id() -> str:
    """Return a fresh random run id (a UUID4 string)."""
    return str(uuid.uuid4())


@dataclass
class Context:
    """The mutable state of one run (one reactor execution, a composed child or a map element).

    Attributes:
        context_id: the run id.
        reactor: the registered name of the reactor.
        inputs: the validated reactor inputs (in memory in clear; the names in ``redacted``
            are sealed when the context is written, see :meth:`to_document`).
        status: the run status (:class:`~reactor.model.status.RunStatus`).
        intermediate_results: step name -> the step's value (``Skipped`` values included).
        engine_state: the engine's typed bookkeeping
            (:class:`~reactor.model.engine_state.EngineState`; immutable: assign a new value
            to change it). Stored as the document's ``private_data`` object.
        composed_contexts: compose step -> child :class:`Context`; map step -> a ``map_ref``
            dict ``{"type": "map_ref", "map_id": str, "elements": {index: context_id}}``.
        map_metadata: on a map element's context: ``{"map_step", "map_id", "index",
            "parent_reactor"}``; ``None`` otherwise.
        current_step: the step in flight (the resume cursor), or ``None``.
        retry_context: ``{"attempts": {step: attempts_used}}``.
        execution_trace: trace entries ``{"type", "step", "at", ...}`` — types ``run``,
            ``failed``, ``retry``, ``compensate``, ``compensate_failure``, ``undo``,
            ``undo_failure``, ``halt``, ``skipped``.
        undo_stack: completed steps, oldest first: ``{"step", "kind", "arguments", "result"}``
            (plus ``"elements"`` for a map, and ``"redacted"``: the secret argument names, when
            there are any).
        failure: the run's ``Failure`` once it failed.
        rollback: while rolling back (or aborted mid-rollback): ``{"step", "kind",
            "arguments", "compensate_pending", "failures"}`` (and ``"redacted"``, as in
            ``undo_stack``).
        redacted: names of the inputs that are secrets: declared ``redact=True``, or fed from
            a parent's secret (a composed child, a map element).
        parent_context_id: the parent run (map elements, composed children).
        root_context_id: the top-level run.
        created_at: epoch seconds (storage clock) when the run was created.
        updated_at: epoch seconds of the last save.
    """

    context_id: str
    reactor: str
    inputs: dict[str, Any] = field(default_factory=dict)
    status: RunStatus = RunStatus.PENDING
    intermediate_results: dict[str, Any] = field(default_factory=dict)
    engine_state: EngineState = field(default_factory=EngineState)
    composed_contexts: dict[str, Any] = field(default_factory=dict)
    map_metadata: dict[str, Any] | None = None
    current_step: str | None = None
    retry_context: dict[str, Any] = field(default_factory=dict)
    execution_trace: list[dict[str, Any]] = field(default_factory=list)
    undo_stack: list[dict[str, Any]] = field(default_factory=list)
    failure: Failure | None = None
    rollback: dict[str, Any] | None = None
    redacted: list[str] = field(default_factory=list)
    parent_context_id: str | None = None
    root_context_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    #: What the stored record already holds (set by a save or a load; ``None``: nothing
    #: known, the next save writes the whole document). Not part of the document, never
    #: copied: ``dataclasses.replace`` gives a context that saves whole (``init=False``).
    persisted: Persisted | None = field(default=None, init=False, compare=False, repr=False)

    # ------------------------------------------------------------------ helpers

    def redacted_inputs(self) -> dict[str, Any]:
        """The inputs with every redacted name (and any sealed value) shown as
        ``"[REDACTED]"`` (:func:`reactor.model.masking.mask_mapping`)."""
        return mask_mapping(self.inputs, self.redacted)

    def rollback_failures(self) -> list[RollbackFailure]:
        """The failures collected so far by the rollback in progress (empty if none)."""
        if not self.rollback:
            return []
        return list(self.rollback.get("failures") or [])

    def child(self, step: str) -> Context | None:
        """The embedded context of compose step ``step``, if any."""
        value = self.composed_contexts.get(step)
        return value if isinstance(value, Context) else None

    def returned_value(self, returns: str | None) -> Any:
        """The value this run returns once completed (docs/concepts.md, "A synchronous
        run"): the result of step ``returns`` (its reactor's ``returns``), or, when ``None``,
        every step's result as a new dict."""
        if returns is not None:
            return self.intermediate_results.get(returns)
        return dict(self.intermediate_results)

    # ------------------------------------------------------------------ documents

    def to_document(self, seal: Callable[[Any], Any] | None = None) -> dict[str, Any]:
        """Return this context as a plain dict for :func:`reactor.model.codec.encode_document`.

        Nested values (results, decimals, models...) are left for the codec to tag. Embedded
        child contexts become nested documents tagged ``{"type": "compose", "context": ...}``.

        Args:
            seal: ``value -> sealed value`` (:meth:`reactor.model.secrets.Keyring.seal`),
                applied to the inputs named in ``redacted`` and to the arguments named in the
                ``redacted`` list of each undo-stack entry and of the rollback record, in this
                context and its composed children (docs/security.md, "What is encrypted").
                ``None`` leaves them in clear. The context itself is not changed.
        """
        inputs = self.inputs if seal is None else self.sealed_inputs(seal)
        results = self.intermediate_results
        undo_stack = [stored_undo_entry(entry, results, seal) for entry in self.undo_stack]
        return {
            **self.head_document(seal),
            "inputs": inputs,
            "intermediate_results": self.intermediate_results,
            "execution_trace": self.execution_trace,
            "undo_stack": undo_stack,
        }

    def sealed_inputs(self, seal: Callable[[Any], Any]) -> dict[str, Any]:
        """The inputs as stored: the names in ``redacted`` sealed with ``seal``."""
        return seal_names(self.inputs, self.redacted, seal)

    def head_document(self, seal: Callable[[Any], Any] | None = None) -> dict[str, Any]:
        """The document keys outside :data:`LOG_KEYS` (see :meth:`to_document` for ``seal``):
        what every incremental checkpoint rewrites."""
        composed: dict[str, Any] = {}
        for name, value in self.composed_contexts.items():
            if isinstance(value, Context):
                composed[name] = {"type": "compose", "context": value.to_document(seal)}
            else:
                composed[name] = value
        rollback = self.rollback
        if seal is not None and rollback is not None:
            rollback = sealed_entry(rollback, seal)
        return {
            "context_id": self.context_id,
            "reactor": self.reactor,
            "status": self.status.value,
            "private_data": self.engine_state.to_json(),
            "composed_contexts": composed,
            "map_metadata": self.map_metadata,
            "current_step": self.current_step,
            "retry_context": self.retry_context,
            "failure": self.failure,
            "rollback": rollback,
            "redacted": self.redacted,
            "parent_context_id": self.parent_context_id,
            "root_context_id": self.root_context_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_document(cls, doc: Any) -> Context:
        """Rebuild a context from a decoded document.

        Args:
            doc: the dict produced by :meth:`to_document` after a codec round trip (a
                ``schema_version`` key, if present, is ignored).

        Returns:
            The context.

        Raises:
            DeserializationError: a field is missing, of the wrong type, or holds an unknown
                status; ``private_data`` holds a malformed value
                (:meth:`reactor.model.engine_state.EngineState.from_json`).
        """
        if not isinstance(doc, Mapping):
            raise DeserializationError(f"context document must be an object, got {type(doc)}")
        reader = _Reader(doc)
        status_text = reader.get("status", str)
        try:
            status = RunStatus.parse(status_text)
        except ValueError as exc:
            raise DeserializationError(f"context has unknown status {status_text!r}") from exc
        composed: dict[str, Any] = {}
        for name, value in reader.get("composed_contexts", dict).items():
            if isinstance(value, Mapping) and value.get("type") == "compose":
                composed[str(name)] = cls.from_document(value.get("context"))
            else:
                composed[str(name)] = value
        failure = reader.optional("failure", Failure)
        for entry in reader.get("execution_trace", list):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("step"), str | None):
                raise DeserializationError("context field 'execution_trace' is malformed")
        for entry in reader.get("undo_stack", list):
            if not _valid_undo_entry(entry):
                raise DeserializationError("context field 'undo_stack' holds a malformed entry")
        for value in composed.values():
            if isinstance(value, Mapping) and not _valid_map_ref(value):
                raise DeserializationError("context field 'composed_contexts' holds a bad map_ref")
        results = dict(reader.get("intermediate_results", dict))
        undo_stack = []
        for entry in reader.get("undo_stack", list):
            entry = dict(entry)
            if entry.pop(RESULT_OF_STEP, None) is True:
                entry["result"] = results.get(str(entry.get("step")))
            undo_stack.append(entry)
        rollback = reader.optional("rollback", dict)
        if rollback is not None and not _valid_rollback(rollback):
            raise DeserializationError("context field 'rollback' is malformed")
        return cls(
            context_id=reader.get("context_id", str),
            reactor=reader.get("reactor", str),
            inputs=dict(reader.get("inputs", dict)),
            status=status,
            intermediate_results=results,
            engine_state=EngineState.from_json(reader.get("private_data", dict)),
            composed_contexts=composed,
            map_metadata=reader.optional("map_metadata", dict),
            current_step=reader.optional("current_step", str),
            retry_context=dict(reader.get("retry_context", dict)),
            execution_trace=[dict(e) for e in reader.get("execution_trace", list)],
            undo_stack=undo_stack,
            failure=failure,
            rollback=dict(rollback) if rollback is not None else None,
            redacted=[str(x) for x in reader.get("redacted", list)],
            parent_context_id=reader.optional("parent_context_id", str),
            root_context_id=reader.optional("root_context_id", str),
            created_at=reader.number("created_at"),
            updated_at=reader.number("updated_at"),
        )


#: The key an undo entry is stored with instead of ``"result"`` when its result is the very
#: object recorded as its step's result (each value is stored once: docs/protocol.md,
#: "Incremental checkpoints").
RESULT_OF_STEP = "result_of_step"


def stored_undo_entry(
    entry: dict[str, Any], results: Mapping[str, Any], seal: Callable[[Any], Any] | None
) -> dict[str, Any]:
    """An undo-stack entry as stored: its secret arguments sealed (``seal`` given), and its
    ``"result"`` replaced by ``"result_of_step": true`` when it is the object recorded as the
    step's result (:meth:`Context.from_document` puts it back)."""
    stored = entry if seal is None else sealed_entry(entry, seal)
    step = entry.get("step")
    if (
        "result" in entry
        and isinstance(step, str)
        and step in results
        and results[step] is entry["result"]
    ):
        stored = {k: v for k, v in stored.items() if k != "result"}
        stored[RESULT_OF_STEP] = True
    return stored


def sealed_entry(entry: dict[str, Any], seal: Callable[[Any], Any]) -> dict[str, Any]:
    """An undo-stack entry or rollback record with its secret ``arguments`` (the names in its
    ``redacted`` list) sealed with ``seal``; ``entry`` itself when it has none."""
    names = entry.get("redacted")
    arguments = entry.get("arguments")
    if not names or not isinstance(arguments, Mapping):
        return entry
    return {**entry, "arguments": seal_names(arguments, names, seal)}


def _valid_undo_entry(entry: Any) -> bool:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("step"), str):
        return False
    if not isinstance(entry.get("arguments", {}), Mapping):
        return False
    elements = entry.get("elements", [])
    return isinstance(elements, list) and all(
        isinstance(pair, list | tuple) and len(pair) == 2
        and isinstance(pair[0], int) and isinstance(pair[1], str)
        for pair in elements
    )


def _valid_rollback(rollback: Mapping[str, Any]) -> bool:
    failures = rollback.get("failures", [])
    return (
        isinstance(rollback.get("step"), str | None)
        and isinstance(rollback.get("arguments", {}), Mapping)
        and isinstance(rollback.get("compensate_pending", False), bool)
        and isinstance(failures, list)
        and all(isinstance(f, RollbackFailure) for f in failures)
    )


def _valid_map_ref(ref: Mapping[str, Any]) -> bool:
    if ref.get("type") != "map_ref":
        return True  # other reference kinds are not read by this engine
    elements = ref.get("elements")
    return isinstance(ref.get("map_id"), str) and isinstance(elements, Mapping) and all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in elements.items()
    )


class _Reader:
    """Typed access to a document's fields, raising ``DeserializationError``."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._doc = doc

    def number(self, key: str) -> float:
        value = self._doc.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise DeserializationError(f"context field {key!r} must be a number")
        return float(value)

    def get(self, key: str, kind: type[_T]) -> _T:
        if key not in self._doc:
            raise DeserializationError(f"context document has no {key!r} field")
        return self._check(key, self._doc[key], kind)

    def optional(self, key: str, kind: type[_T]) -> _T | None:
        value = self._doc.get(key)
        if value is None:
            return None
        return self._check(key, value, kind)

    @staticmethod
    def _check(key: str, value: Any, kind: type[_T]) -> _T:
        if not isinstance(value, kind):
            raise DeserializationError(
                f"context field {key!r} must be {kind.__name__}, got {type(value).__name__}"
            )
        return value
