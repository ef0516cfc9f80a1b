"""Incremental checkpoints: the delta of a run since its last save, and the fold that rebuilds
the whole document from a stored base and its deltas (docs/protocol.md, "Incremental
checkpoints").

A run is stored as a *base* document (written whole by a full save) followed by *segments*,
one per incremental checkpoint. A segment is an encoded delta document::

    {"head": {...},                      # every key outside LOG_KEYS, rewritten each time
     "inputs": {...},                    # only when the inputs object changed
     "results": {step: value, ...},      # results recorded since the previous save
     "drop_results": [step, ...],        # results removed since (rare)
     "trace_keep": n, "trace": [...],    # keep the first n trace entries, then append these
     "undo_keep": n, "undo": [...]}      # the same for the undo stack

An undo entry whose ``"result"`` is the very object recorded as its step's result is written
without it and marked ``"result_of_step": true`` (in whole documents too:
:meth:`reactor.model.run_records.UndoEntry.to_stored`); the fold puts the step's result back, so a
step's value is encoded once, not twice, and a whole save and its segments measure the same.

What changed is found by identity against :class:`~reactor.model.context.Persisted` (the
objects last written), never by re-encoding or comparing values: a step's result is recorded
as it was when its checkpoint was written (mutating a recorded result in place later is not
persisted — replace it by deleting and re-inserting the name).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.context import RESULT_OF_STEP, Context, Persisted
from reactor.model.records import ContextRecord

__all__ = [
    "DeltaDocument",
    "fold",
    "mark_persisted",
    "raw_document",
    "stored_document",
]

_MISSING: Any = object()


def mark_persisted(ctx: Context, *, base: str, position: int, size: int) -> None:
    """Record that the stored record of ``ctx`` now holds exactly its current state.

    Args:
        ctx: the context just saved (or just loaded and opened).
        base: the stored base id.
        position: the segments following the base.
        size: the stored UTF-8 bytes (base and segments).
    """
    ctx.persisted = Persisted(
        base=base,
        position=position,
        size=size,
        inputs=ctx.inputs,
        redacted=tuple(ctx.redacted),
        results=dict(ctx.intermediate_results),
        trace=list(ctx.execution_trace),
        undo=list(ctx.undo_stack),
    )


def _kept(current: list[Any], written: list[Any]) -> int:
    """How many leading entries of ``current`` are the very objects of ``written`` (entries
    are pushed and popped at the end only, so this walks back from the shorter length)."""
    keep = min(len(current), len(written))
    while keep and current[keep - 1] is not written[keep - 1]:
        keep -= 1
    return keep


def _changed_results(
    results: dict[str, Any], written: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """``(names recorded or replaced since, names removed since)``.

    The fast path walks back from the newest result to the newest written one (results are
    recorded in order, a replacement is a removal then an insertion, which moves the name to
    the end); a removal falls back to a full identity comparison. An assignment to a name
    already recorded (``results[name] = other`` without removing it first) keeps its place
    and is not seen: the engine never does it.
    """
    if not written:
        return list(results), []
    last = next(reversed(written))
    if results.get(last, _MISSING) is written[last]:
        added: list[str] = []
        for name in reversed(results):
            if name == last:
                break
            added.append(name)
        if len(results) - len(added) == len(written):
            added.reverse()
            return added, []
    changed = [name for name, value in results.items() if written.get(name, _MISSING) is not value]
    removed = [name for name in written if name not in results]
    return changed, removed


class DeltaDocument:
    """The delta of ``ctx`` since ``ctx.persisted``, ready to encode.

    Args:
        ctx: a context whose :attr:`~reactor.model.context.Context.persisted` is set.
        seal: the secret sealer of a save (see :meth:`Context.to_document`), or ``None``.

    Attributes:
        document: the delta document (values left for the codec to tag).
    """

    def __init__(self, ctx: Context, seal: Callable[[Any], Any] | None) -> None:
        persisted = ctx.persisted
        assert persisted is not None
        self._ctx = ctx
        results = ctx.intermediate_results
        added, removed = _changed_results(results, persisted.results)
        trace_keep = _kept(ctx.execution_trace, persisted.trace)
        undo_keep = _kept(ctx.undo_stack, persisted.undo)
        self._added, self._removed = added, removed
        self._trace_keep, self._undo_keep = trace_keep, undo_keep
        document: dict[str, Any] = {"head": ctx.head_document(seal)}
        if ctx.inputs is not persisted.inputs or tuple(ctx.redacted) != persisted.redacted:
            document["inputs"] = ctx.inputs if seal is None else ctx.sealed_inputs(seal)
        if added:
            document["results"] = {name: results[name] for name in added}
        if removed:
            document["drop_results"] = removed
        document["trace_keep"] = trace_keep
        document["trace"] = [entry.to_stored() for entry in ctx.execution_trace[trace_keep:]]
        document["undo_keep"] = undo_keep
        document["undo"] = [entry.to_stored(results, seal) for entry in ctx.undo_stack[undo_keep:]]
        self.document = document

    def written(self, size: int) -> None:
        """Advance ``ctx.persisted`` after this delta was stored (``size``: its UTF-8 bytes)."""
        ctx = self._ctx
        persisted = ctx.persisted
        assert persisted is not None
        persisted.position += 1
        persisted.size += size
        persisted.inputs = ctx.inputs
        persisted.redacted = tuple(ctx.redacted)
        for name in self._removed:
            persisted.results.pop(name, None)
        for name in self._added:
            persisted.results.pop(name, None)  # a replaced name moves to the end, as in ctx
            persisted.results[name] = ctx.intermediate_results[name]
        del persisted.trace[self._trace_keep :]
        persisted.trace.extend(ctx.execution_trace[self._trace_keep :])
        del persisted.undo[self._undo_keep :]
        persisted.undo.extend(ctx.undo_stack[self._undo_keep :])


def _malformed(what: str) -> DeserializationError:
    return DeserializationError(f"context segment is malformed: {what}")


def _entries(delta: Mapping[str, Any], key: str) -> tuple[int, list[Any]]:
    keep, entries = delta.get(key + "_keep", 0), delta.get(key, [])
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise _malformed(f"'{key}_keep' is {keep!r}")
    if not isinstance(entries, list):
        raise _malformed(f"'{key}' is not a list")
    return keep, entries


def fold(base: Mapping[str, Any], deltas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply ``deltas`` (oldest first) to ``base``: the whole document of the run.

    Works on decoded documents and on raw parsed JSON alike (only the delta's own structure
    is read).

    Args:
        base: the base document.
        deltas: delta documents as :class:`DeltaDocument` builds them.

    Returns:
        A new document (``base`` is not changed).

    Raises:
        DeserializationError: a delta is malformed, or ``base`` lacks a list or object a
            delta extends.
    """
    doc = dict(base)
    results = doc.get("intermediate_results", {})
    trace = doc.get("execution_trace", [])
    undo = doc.get("undo_stack", [])
    if not isinstance(results, dict) or not isinstance(trace, list) or not isinstance(undo, list):
        raise _malformed("the base document has no results, trace or undo stack to extend")
    results, trace, undo = dict(results), list(trace), list(undo)
    for delta in deltas:
        if not isinstance(delta, Mapping) or not isinstance(delta.get("head"), Mapping):
            raise _malformed("no 'head' object")
        doc.update(delta["head"])
        if "inputs" in delta:
            doc["inputs"] = delta["inputs"]
        added = delta.get("results", {})
        dropped = delta.get("drop_results", [])
        if not isinstance(added, Mapping) or not isinstance(dropped, list):
            raise _malformed("'results' or 'drop_results' has the wrong type")
        for name in dropped:
            results.pop(name, None)
        for name, value in added.items():
            results.pop(name, None)
            results[name] = value
        keep, entries = _entries(delta, "trace")
        del trace[keep:]
        trace.extend(entries)
        keep, entries = _entries(delta, "undo")
        del undo[keep:]
        for entry in entries:
            if isinstance(entry, Mapping) and entry.get(RESULT_OF_STEP) is True:
                entry = {k: v for k, v in entry.items() if k != RESULT_OF_STEP}
                entry["result"] = results.get(str(entry.get("step")))
            undo.append(entry)
    doc["intermediate_results"] = results
    doc["execution_trace"] = trace
    doc["undo_stack"] = undo
    return doc


def stored_document(record: ContextRecord) -> dict[str, Any]:
    """The decoded whole document of a stored run: its base folded with its segments.

    Args:
        record: a record as ``ContextStore.load`` returns it.

    Returns:
        The document (``schema_version`` removed), ready for
        :meth:`~reactor.model.context.Context.from_document`.

    Raises:
        DeserializationError: the base or a segment is malformed (SchemaVersionError: an
            unknown ``schema_version``).
    """
    base = codec.decode_document(record.document)
    if not record.segments:
        return base
    return fold(base, [codec.decode_document(text) for text in record.segments])


def raw_document(record: ContextRecord) -> dict[str, Any]:
    """The whole document of a stored run as raw parsed JSON (values still in their tagged
    wire form), for tools that show what is stored.

    Raises:
        DeserializationError: the base or a segment is not a JSON object.
    """

    def parse(text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise DeserializationError(f"stored context is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise DeserializationError("stored context is not a JSON object")
        value.pop("schema_version", None)
        return value

    base = parse(record.document)
    return fold(base, [parse(text) for text in record.segments]) if record.segments else base

