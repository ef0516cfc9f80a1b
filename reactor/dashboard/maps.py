"""Map summaries and element pages (docs/dashboard.md, "Maps"; docs/fan_out.md).

A map step's elements are runs of their own. A run's document keeps a ``map_ref`` per map step
(``composed_contexts[step]``). Reading the elements — each one's index, run id, outcome and
error — is :mod:`reactor.runs`' (:func:`reactor.runs.map_element_page`,
:func:`reactor.runs.iter_map_elements`; docs/fan_out.md, "Listing a map's elements"), which
``RunView.map_elements`` uses too. This module counts the outcomes (succeeded, failed, halted,
skipped, pending) and shapes the elements for the pages and the JSON API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reactor.dashboard.values import display
from reactor.model.run_documents import map_refs_of
from reactor.model.run_records import MapRef
from reactor.ports.storage import Storage
from reactor.runs import (
    MAP_OUTCOMES,
    MapElement,
    MapInfo,
    MapOutcome,
    iter_map_elements,
    map_element_page,
)

__all__ = [
    "COUNT_CAP",
    "OUTCOMES",
    "Outcome",
    "element_page",
    "map_refs",
    "map_summary",
]

Outcome = MapOutcome
#: Every element outcome, in display order (``undone``: an inline map's element rolled back
#: after it completed; a fan-out map's slots keep the outcome the element settled with).
OUTCOMES: tuple[Outcome, ...] = MAP_OUTCOMES
#: Elements read to count a map's outcomes; past it the counts say ``complete: false``.
COUNT_CAP = 20_000


def map_refs(document: Mapping[str, Any]) -> dict[str, MapRef]:
    """The ``map_ref`` of every map step a (masked) document started
    (:func:`reactor.model.run_documents.map_refs_of`)."""
    return map_refs_of(document)


def _shown(element: MapElement) -> dict[str, Any]:
    return {
        "index": element.index, "run_id": element.run_id, "outcome": element.outcome,
        "error": display(element.error) if element.error is not None else None,
    }


def _elements(storage: Storage, ref: MapRef) -> Iterator[dict[str, Any]]:
    for element in iter_map_elements(storage, MapInfo.of(ref)):
        yield _shown(element)


def map_summary(storage: Storage, step: str, ref: MapRef,
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
    return {
        "step": step,
        "map_id": ref.map_id,
        "fan_out": ref.is_fan_out,
        "count": ref.count if ref.count is not None else seen,
        "started": display(ref.started),
        "counts": counts,
        "complete": complete,
        "failures": failures,
        "successes": successes,
    }


def element_page(
    storage: Storage, ref: MapRef, *, outcome: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """One page of a map's elements, optionally of one outcome
    (:func:`reactor.runs.map_element_page`).

    Args:
        storage: where the elements are.
        ref: the map step's ``map_ref``.
        outcome: one of :data:`OUTCOMES`, or ``None`` for all.
        offset: elements of that outcome to skip.
        limit: elements to return (at most ``reactor.runs.MAX_ELEMENT_PAGE``).

    Returns:
        ``{"elements": [...], "next_offset": int | None}``.

    Raises:
        MapElementsArgumentError: an argument is unusable.
    """
    page = map_element_page(storage, MapInfo.of(ref), outcome=outcome,
                            offset=offset, limit=limit)
    return {"elements": [_shown(e) for e in page.elements], "next_offset": page.next_offset}
