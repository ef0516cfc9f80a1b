"""Map summaries and element pages (docs/dashboard.md, "Maps"; docs/fan_out.md).

A map step's elements are runs of their own. A run's document keeps a ``map_ref`` per map step
(``composed_contexts[step]``): an inline map names its started elements (``{index: run id}``),
a fan-out map only its id and count — its elements' outcomes are the map's result slots
(docs/protocol.md#maps) and their run ids are derived from the map id and the index. This
module counts the outcomes (succeeded, failed, halted, skipped, pending) and pages through the
elements of one outcome, each with its index and run id; slots are read as raw JSON, so no
element value type has to be importable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from reactor.dashboard.values import display, failure_view
from reactor.engine.fan_out import element_context_id
from reactor.errors import DeserializationError
from reactor.model.checkpoints import raw_document
from reactor.model.masking import mask_document, mask_value
from reactor.model.records import ContextRecord
from reactor.ports.storage import Storage

__all__ = [
    "COUNT_CAP",
    "OUTCOMES",
    "Outcome",
    "element_page",
    "map_refs",
    "map_summary",
]

Outcome = Literal["succeeded", "failed", "halted", "undone", "skipped", "pending"]
#: Every element outcome, in display order (``undone``: an inline map's element rolled back
#: after it completed; a fan-out map's slots keep the outcome the element settled with).
OUTCOMES: tuple[Outcome, ...] = (
    "succeeded", "failed", "halted", "undone", "skipped", "pending",
)
#: Elements read to count a map's outcomes; past it the counts say ``complete: false``.
COUNT_CAP = 20_000
_SLOT_PAGE = 500
_STATUS_OUTCOME: Mapping[str, Outcome] = {
    "completed": "succeeded", "failed": "failed", "halted": "halted", "cancelled": "undone",
    "aborted": "failed",
}


def map_refs(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The ``map_ref`` of every map step a (masked) document started."""
    composed = document.get("composed_contexts")
    if not isinstance(composed, Mapping):
        return {}
    return {
        str(name): ref for name, ref in composed.items()
        if isinstance(ref, Mapping) and ref.get("type") == "map_ref"
        and isinstance(ref.get("map_id"), str)
    }


def _slot(text: str) -> tuple[Outcome, Any]:
    """An element's outcome and its error (failures) from a raw result slot."""
    try:
        data = mask_value(json.loads(text))
    except (ValueError, RecursionError):
        return "failed", "[unreadable result slot]"
    if isinstance(data, Mapping) and data.get("skipped") is True:
        return "skipped", None
    result = data.get("result") if isinstance(data, Mapping) else None
    tag = result.get("__t") if isinstance(result, Mapping) else None
    if tag == "reactor.Failure":
        view = failure_view(result)
        return "failed", view.get("error") if view else None
    if tag == "reactor.Halt":
        return "halted", None
    return "succeeded", None


def _fan_out_elements(storage: Storage, map_id: str, count: int) -> Iterator[dict[str, Any]]:
    """Every element of a fan-out map in index order (slot-less ones are pending)."""
    offset = 0
    while offset < count:
        size = min(_SLOT_PAGE, count - offset)
        slots = dict(storage.maps.results_page(map_id, offset=offset, limit=size))
        for index in range(offset, offset + size):
            text = slots.get(index)
            outcome, error = ("pending", None) if text is None else _slot(text)
            started = outcome not in ("skipped",)
            yield {
                "index": index,
                "run_id": element_context_id(map_id, index) if started else None,
                "outcome": outcome,
                "error": error,
            }
        offset += size


def _inline_elements(storage: Storage, ref: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every started element of an inline map, in index order, with its run's status."""
    elements = ref.get("elements")
    if not isinstance(elements, Mapping):
        return
    for index in sorted(int(k) for k in elements if str(k).isdigit()):
        run_id = str(elements.get(str(index), elements.get(index, "")))
        record = storage.contexts.load(run_id) if run_id else None
        outcome: Outcome = "pending"
        error = None
        if record is not None:
            outcome = _STATUS_OUTCOME.get(record.status, "pending")
            if outcome == "failed":
                error = _stored_error(record)
        yield {"index": index, "run_id": run_id or None, "outcome": outcome, "error": error}


def _stored_error(record: ContextRecord) -> Any:
    """The error of a failed element's stored run (its base and segments, masked)."""
    try:
        data = mask_document(raw_document(record))
    except (DeserializationError, RecursionError):
        return None
    failure = failure_view(data.get("failure"))
    return failure.get("error") if failure else None


def _elements(storage: Storage, ref: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if ref.get("fan_out"):
        count = ref.get("count")
        return _fan_out_elements(storage, str(ref["map_id"]), count if isinstance(count, int)
                                 else 0)
    return _inline_elements(storage, ref)


def map_summary(storage: Storage, step: str, ref: Mapping[str, Any],
                sample: int = 10) -> dict[str, Any]:
    """A map step's summary: counts per outcome and the first elements of each.

    Args:
        storage: where the elements are.
        step: the map step's name.
        ref: its ``map_ref``.
        sample: elements listed per outcome (the rest: :func:`element_page`).

    Returns:
        ``{"step", "map_id", "fan_out", "count", "counts": {outcome: n}, "complete",
        "failures": [...], "successes": [...]}``; an element is ``{"index", "run_id",
        "outcome", "error"}``.
    """
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    failures: list[dict[str, Any]] = []
    successes: list[dict[str, Any]] = []
    complete = True
    seen = 0
    for element in _elements(storage, ref):
        if seen >= COUNT_CAP:
            complete = False
            break
        seen += 1
        counts[element["outcome"]] += 1
        if element["outcome"] == "failed" and len(failures) < sample:
            failures.append(element)
        elif element["outcome"] == "succeeded" and len(successes) < sample:
            successes.append(element)
    count = ref.get("count") if isinstance(ref.get("count"), int) else seen
    return {
        "step": step,
        "map_id": ref.get("map_id"),
        "fan_out": bool(ref.get("fan_out")),
        "count": count,
        "started": display(ref.get("started")),
        "counts": counts,
        "complete": complete,
        "failures": failures,
        "successes": successes,
    }


def element_page(
    storage: Storage, ref: Mapping[str, Any], *, outcome: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """One page of a map's elements, optionally of one outcome.

    Args:
        storage: where the elements are.
        ref: the map step's ``map_ref``.
        outcome: one of :data:`OUTCOMES`, or ``None`` for all.
        offset: elements of that outcome to skip.
        limit: elements to return.

    Returns:
        ``{"elements": [...], "next_offset": int | None}``.
    """
    found: list[dict[str, Any]] = []
    matched = 0
    for element in _elements(storage, ref):
        if outcome is not None and element["outcome"] != outcome:
            continue
        matched += 1
        if matched <= offset:
            continue
        if len(found) == limit:
            return {"elements": found, "next_offset": offset + limit}
        found.append(element)
    return {"elements": found, "next_offset": None}
