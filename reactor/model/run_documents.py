"""A stored run document's bookkeeping as typed run records, for the views that show what is
stored (the dashboard) and the sweepers that read one field of a stored run without loading it
whole (:func:`map_membership_of`): the raw JSON of a document
(:func:`reactor.model.checkpoints.raw_document`, usually masked with
:func:`reactor.model.masking.mask_document`) or the decoded one, read entry by entry into the
records of :mod:`reactor.model.run_records` (docs/protocol.md, "Contexts").

A view shows what it can: an entry that does not read (a malformed or foreign entry) is left
out instead of failing the page, and a missing or mistyped list reads as empty. The engine never
uses these readers: it loads a run whole with :meth:`reactor.model.context.Context.from_document`,
which refuses a malformed document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.errors import DeserializationError
from reactor.model.run_records import (
    MapMembership,
    MapRef,
    RetryCounters,
    RollbackState,
    TraceRecord,
    UndoEntry,
)

__all__ = [
    "embedded_children",
    "map_membership_of",
    "map_refs_of",
    "retry_counters_of",
    "rollback_of",
    "trace_of",
    "undo_stack_of",
]


def _entries(document: Mapping[str, Any], key: str) -> list[Any]:
    value = document.get(key)
    return value if isinstance(value, list) else []


def trace_of(document: Mapping[str, Any]) -> list[TraceRecord]:
    """The document's ``execution_trace``, oldest first (entries that do not read left out).

    Args:
        document: a run document as raw JSON (or decoded).

    Returns:
        The trace records.
    """
    found = []
    for raw in _entries(document, "execution_trace"):
        try:
            found.append(TraceRecord.from_stored(raw))
        except DeserializationError:
            continue
    return found


def undo_stack_of(document: Mapping[str, Any]) -> list[UndoEntry]:
    """The document's ``undo_stack``, oldest first (entries that do not read left out; an
    entry stored with ``"result_of_step"`` keeps the marker in its ``extra``)."""
    found = []
    for raw in _entries(document, "undo_stack"):
        try:
            found.append(UndoEntry.from_stored(raw))
        except DeserializationError:
            continue
    return found


def rollback_of(document: Mapping[str, Any]) -> RollbackState | None:
    """The document's ``rollback`` record (its failures read from their tagged raw form), or
    ``None`` when there is none or it does not read."""
    raw = document.get("rollback")
    if raw is None:
        return None
    try:
        return RollbackState.from_stored(raw, raw_failures=True)
    except DeserializationError:
        return None


def retry_counters_of(document: Mapping[str, Any]) -> RetryCounters:
    """The document's ``retry_context`` (empty counters when it does not read)."""
    try:
        return RetryCounters.from_stored(document.get("retry_context", {}))
    except DeserializationError:
        return RetryCounters()


def map_refs_of(document: Mapping[str, Any]) -> dict[str, MapRef]:
    """Map step name -> the :class:`~reactor.model.run_records.MapRef` of every map step the
    document started (references that do not read left out)."""
    composed = document.get("composed_contexts")
    found: dict[str, MapRef] = {}
    for name, raw in (composed.items() if isinstance(composed, Mapping) else ()):
        if MapRef.is_stored_ref(raw):
            try:
                found[str(name)] = MapRef.from_stored(raw)
            except DeserializationError:
                continue
    return found


def map_membership_of(document: Mapping[str, Any]) -> MapMembership | None:
    """The document's ``map_metadata``: the map a map element's run belongs to
    (docs/concepts.md, "Inline map"; docs/fan_out.md).

    Args:
        document: a run document as raw JSON (or decoded: ``map_metadata`` holds no tagged
            value either way).

    Returns:
        The :class:`~reactor.model.run_records.MapMembership`, or ``None`` when the run is no
        map element or its ``map_metadata`` does not read.
    """
    raw = document.get("map_metadata")
    if raw is None:
        return None
    try:
        return MapMembership.from_stored(raw)
    except DeserializationError:
        return None


def embedded_children(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Compose step name -> the document of the child embedded there
    (``{"type": "compose", "context": {...}}``)."""
    composed = document.get("composed_contexts")
    found: dict[str, Mapping[str, Any]] = {}
    for name, raw in (composed.items() if isinstance(composed, Mapping) else ()):
        if isinstance(raw, Mapping) and raw.get("type") == "compose":
            child = raw.get("context")
            if isinstance(child, Mapping):
                found[str(name)] = child
    return found
