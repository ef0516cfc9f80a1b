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
from reactor.model.heartbeats import LastHeartbeat
from reactor.model.masking import REDACTED, mask_mapping
from reactor.model.results import Failure, RollbackFailure
from reactor.model.run_records import (
    RESULT_OF_STEP,
    ForeignRef,
    MapMembership,
    MapRef,
    Reference,
    RetryCounters,
    RollbackState,
    TraceRecord,
    UndoEntry,
)
from reactor.model.secrets import seal_names
from reactor.model.status import RunStatus

__all__ = [
    "LOG_KEYS",
    "REDACTED",
    "RESULT_OF_STEP",
    "Context",
    "Persisted",
    "new_context_id",
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
    trace: list[TraceRecord]
    undo: list[UndoEntry]


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
        composed_contexts: compose step -> child :class:`Context`; map step -> its
            :class:`~reactor.model.run_records.MapRef`; a reference of a kind this release
            does not read -> :class:`~reactor.model.run_records.ForeignRef` (kept as stored).
        map_metadata: on a map element's context, its
            :class:`~reactor.model.run_records.MapMembership` (the map step, map id, index
            and parent reactor; stored as ``{"map_step", "map_id", "index",
            "parent_reactor"}``); ``None`` otherwise.
        current_step: the step in flight (the resume cursor), or ``None``.
        retry_context: the attempts each step used
            (:class:`~reactor.model.run_records.RetryCounters`).
        execution_trace: the trace entries, oldest first
            (:class:`~reactor.model.run_records.TraceRecord`).
        undo_stack: completed steps, oldest first
            (:class:`~reactor.model.run_records.UndoEntry`).
        failure: the run's ``Failure`` once it failed.
        rollback: while rolling back (or aborted mid-rollback): the
            :class:`~reactor.model.run_records.RollbackState`.
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
    composed_contexts: dict[str, Context | Reference] = field(default_factory=dict)
    map_metadata: MapMembership | None = None
    current_step: str | None = None
    retry_context: RetryCounters = field(default_factory=RetryCounters)
    execution_trace: list[TraceRecord] = field(default_factory=list)
    undo_stack: list[UndoEntry] = field(default_factory=list)
    failure: Failure | None = None
    rollback: RollbackState | None = None
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
        return [] if self.rollback is None else list(self.rollback.failures)

    def child(self, step: str) -> Context | None:
        """The embedded context of compose step ``step``, if any."""
        value = self.composed_contexts.get(step)
        return value if isinstance(value, Context) else None

    def map_ref(self, step: str) -> MapRef | None:
        """The stored reference of map step ``step`` (docs/protocol.md, "Maps"), if any."""
        value = self.composed_contexts.get(step)
        return value if isinstance(value, MapRef) else None

    def attempts_of(self, step: str) -> int | None:
        """The attempts ``step`` used so far (``retry_context``), or ``None`` when none was
        counted."""
        return self.retry_context.attempts_of(step)

    def count_attempts(self, step: str, attempts: int | None) -> None:
        """Record that ``step`` used ``attempts`` (``None``: forget its count)."""
        self.retry_context = self.retry_context.counted(step, attempts)

    def time_spent(self, step: str) -> float:
        """The seconds of ``step``'s ``total`` time limit used before its retry was handed to
        the queue (``retry_context``; 0 when none were kept; docs/concepts.md, "Time
        limits")."""
        return self.retry_context.spent_of(step)

    def keep_time_spent(self, step: str, seconds: float | None) -> None:
        """Keep ``seconds`` as the time ``step`` used of its ``total`` limit (``None``:
        forget it)."""
        self.retry_context = self.retry_context.with_spent(step, seconds)

    def kept_heartbeat(self, step: str) -> LastHeartbeat | None:
        """``step``'s last heartbeat kept when its retry was handed to the queue
        (``retry_context``; docs/concepts.md, "Heartbeats"), or ``None``."""
        return self.retry_context.heartbeat_of(step)

    def keep_heartbeat(self, step: str, last: LastHeartbeat | None) -> None:
        """Keep ``last`` as ``step``'s last heartbeat (``None``: forget it)."""
        self.retry_context = self.retry_context.with_heartbeat(step, last)

    def last_trace(self, type_: str) -> TraceRecord | None:
        """The newest trace entry of type ``type_``, or ``None``."""
        return next((e for e in reversed(self.execution_trace) if e.type == type_), None)

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
        return {
            **self.head_document(seal),
            "inputs": inputs,
            "intermediate_results": self.intermediate_results,
            "execution_trace": [entry.to_stored() for entry in self.execution_trace],
            "undo_stack": [entry.to_stored(results, seal) for entry in self.undo_stack],
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
                composed[name] = value.to_stored()
        rollback = None if self.rollback is None else self.rollback.to_stored(seal)
        membership = None if self.map_metadata is None else self.map_metadata.to_stored()
        return {
            "context_id": self.context_id,
            "reactor": self.reactor,
            "status": self.status.value,
            "private_data": self.engine_state.to_json(),
            "composed_contexts": composed,
            "map_metadata": membership,
            "current_step": self.current_step,
            "retry_context": self.retry_context.to_stored(),
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
                (:meth:`reactor.model.engine_state.EngineState.from_json`); ``map_metadata`` is
                neither null nor a map membership
                (:meth:`reactor.model.run_records.MapMembership.from_stored`).
        """
        if not isinstance(doc, Mapping):
            raise DeserializationError(f"context document must be an object, got {type(doc)}")
        reader = _Reader(doc)
        status_text = reader.get("status", str)
        try:
            status = RunStatus.parse(status_text)
        except ValueError as exc:
            raise DeserializationError(f"context has unknown status {status_text!r}") from exc
        composed: dict[str, Context | Reference] = {}
        for name, value in reader.get("composed_contexts", dict).items():
            where = f"context field 'composed_contexts.{name}'"
            if isinstance(value, Mapping) and value.get("type") == "compose":
                composed[str(name)] = cls.from_document(value.get("context"))
            elif MapRef.is_stored_ref(value):
                composed[str(name)] = MapRef.from_stored(value, where)
            else:
                composed[str(name)] = ForeignRef(value)
        failure = reader.optional("failure", Failure)
        trace = [
            TraceRecord.from_stored(entry, f"context field 'execution_trace'[{i}]")
            for i, entry in enumerate(reader.get("execution_trace", list))
        ]
        results = dict(reader.get("intermediate_results", dict))
        undo_stack = [
            UndoEntry.from_stored(entry, results, f"context field 'undo_stack'[{i}]")
            for i, entry in enumerate(reader.get("undo_stack", list))
        ]
        rollback = reader.optional("rollback", dict)
        membership = doc.get("map_metadata")
        return cls(
            context_id=reader.get("context_id", str),
            reactor=reader.get("reactor", str),
            inputs=dict(reader.get("inputs", dict)),
            status=status,
            intermediate_results=results,
            engine_state=EngineState.from_json(reader.get("private_data", dict)),
            composed_contexts=composed,
            map_metadata=(
                None if membership is None
                else MapMembership.from_stored(membership, "context field 'map_metadata'")
            ),
            current_step=reader.optional("current_step", str),
            retry_context=RetryCounters.from_stored(reader.get("retry_context", dict)),
            execution_trace=trace,
            undo_stack=undo_stack,
            failure=failure,
            rollback=(
                None if rollback is None
                else RollbackState.from_stored(rollback, "context field 'rollback'")
            ),
            redacted=[str(x) for x in reader.get("redacted", list)],
            parent_context_id=reader.optional("parent_context_id", str),
            root_context_id=reader.optional("root_context_id", str),
            created_at=reader.number("created_at"),
            updated_at=reader.number("updated_at"),
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
