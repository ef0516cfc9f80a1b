"""Reading a map step's elements from storage (docs/fan_out.md, "Listing a map's elements").

A map step's elements are runs of their own. An inline map's ``map_ref`` names its started
elements (index -> run id) and each element's outcome is its stored run's status; a fan-out
map's ref holds only its id and count: each element's outcome is its result slot
(docs/protocol.md, "Maps") — a slot-less element is ``pending`` — and its run id is derived
from the map id and the index. Slots and failed runs are read as raw JSON and masked with
:mod:`reactor.model.masking`, so no element value type has to be importable.

:meth:`reactor.RunView.map_elements` and the dashboard (docs/dashboard.md, "Maps") both read
through here; the public names are re-exported by :mod:`reactor.runs`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from reactor.engine.maps.dispatcher import element_context_id
from reactor.errors import DeserializationError
from reactor.model.checkpoints import raw_document
from reactor.model.codec import TAG_KEY
from reactor.model.masking import mask_document, mask_value
from reactor.model.records import ContextRecord
from reactor.model.run_view import (
    ElementReader,
    MapElement,
    MapElementPage,
    MapInfo,
    MapOutcome,
    check_element_query,
)
from reactor.ports.storage import Storage

__all__ = ["element_reader", "iter_map_elements", "map_element_page"]

#: Result slots read per storage call while walking a fan-out map.
_SLOT_PAGE = 500
_PAYLOAD = "v"
_STATUS_OUTCOME: Mapping[str, MapOutcome] = {
    "completed": "succeeded", "failed": "failed", "halted": "halted", "cancelled": "undone",
    "aborted": "failed",
}


def _failure_message(value: Any) -> str | None:
    """The message of a stored (masked) ``Failure``, tagged or not."""
    if isinstance(value, Mapping) and value.get(TAG_KEY) == "reactor.Failure":
        value = value.get(_PAYLOAD)
    if not isinstance(value, Mapping):
        return None
    error = value.get("error")
    return error if isinstance(error, str) else None


def _slot(text: str) -> tuple[MapOutcome, str | None]:
    """An element's outcome and its failure message from a raw result slot."""
    try:
        data = mask_value(json.loads(text))
    except (ValueError, RecursionError):
        return "failed", "[unreadable result slot]"
    if isinstance(data, Mapping) and data.get("skipped") is True:
        return "skipped", None
    result = data.get("result") if isinstance(data, Mapping) else None
    tag = result.get(TAG_KEY) if isinstance(result, Mapping) else None
    if tag == "reactor.Failure":
        return "failed", _failure_message(result)
    if tag == "reactor.Halt":
        return "halted", None
    return "succeeded", None


def _fan_out_element(map_id: str, index: int, text: str | None) -> MapElement:
    outcome, error = ("pending", None) if text is None else _slot(text)
    run_id = None if outcome == "skipped" else element_context_id(map_id, index)
    return MapElement(index=index, run_id=run_id, outcome=outcome, error=error)


def _fan_out_range(storage: Storage, info: MapInfo, start: int, stop: int
                   ) -> Iterator[MapElement]:
    """The elements ``start .. stop-1`` of a fan-out map, reading slots in pages."""
    offset = start
    while offset < stop:
        size = min(_SLOT_PAGE, stop - offset)
        slots = dict(storage.maps.results_page(info.map_id, offset=offset, limit=size))
        for index in range(offset, offset + size):
            yield _fan_out_element(info.map_id, index, slots.get(index))
        offset += size


def _stored_error(record: ContextRecord) -> str | None:
    """The failure message of a failed element's stored run (masked)."""
    try:
        data = mask_document(raw_document(record))
    except (DeserializationError, RecursionError):
        return None
    return _failure_message(data.get("failure"))


def _inline_element(storage: Storage, index: int, run_id: str) -> MapElement:
    record = storage.contexts.load(run_id)
    outcome: MapOutcome = "pending"
    error = None
    if record is not None:
        outcome = _STATUS_OUTCOME.get(record.status, "pending")
        if outcome == "failed":
            error = _stored_error(record)
    return MapElement(index=index, run_id=run_id, outcome=outcome, error=error)


def iter_map_elements(storage: Storage, info: MapInfo) -> Iterator[MapElement]:
    """Every element of a map, in index order (a fan-out map: all ``count``, the unsettled
    ones ``pending``; an inline map: the started ones).

    Args:
        storage: the run's storage.
        info: the map step's :class:`~reactor.model.run_view.MapInfo`.

    Raises:
        StorageError: the backend failed.
    """
    if info.fan_out:
        yield from _fan_out_range(storage, info, 0, info.count)
        return
    for index, run_id in info.elements.items():
        yield _inline_element(storage, index, run_id)


def map_element_page(
    storage: Storage, info: MapInfo, *, outcome: str | None = None, offset: int = 0,
    limit: int = 100,
) -> MapElementPage:
    """One page of a map's elements, optionally of one outcome (docs/fan_out.md, "Listing a
    map's elements").

    Without ``outcome`` only the page's own elements are read (``limit`` slots or runs);
    with it the elements are read in index order until the page is full.

    Args:
        storage: the run's storage.
        info: the map step's :class:`~reactor.model.run_view.MapInfo`.
        outcome: one of :data:`~reactor.model.run_view.MAP_OUTCOMES`, or ``None`` for all.
        offset: matching elements to skip (>= 0).
        limit: elements to return (1 .. :data:`~reactor.model.run_view.MAX_ELEMENT_PAGE`).

    Returns:
        The page and the next page's offset (``None``: no element after it).

    Raises:
        MapElementsArgumentError: an argument is unusable (``field`` names it).
        StorageError: the backend failed.
    """
    wanted = check_element_query(outcome, offset, limit)
    if wanted is None:
        stop = min(offset + limit, info.count)
        if info.fan_out:
            found = tuple(_fan_out_range(storage, info, offset, stop))
        else:
            chosen = list(info.elements.items())[offset:stop]
            found = tuple(_inline_element(storage, i, run_id) for i, run_id in chosen)
        return MapElementPage(found, stop if stop < info.count else None)
    page: list[MapElement] = []
    matched = 0
    for element in iter_map_elements(storage, info):
        if element.outcome != wanted:
            continue
        matched += 1
        if matched <= offset:
            continue
        if len(page) == limit:
            return MapElementPage(tuple(page), offset + limit)
        page.append(element)
    return MapElementPage(tuple(page), None)


def element_reader(storage: Storage) -> ElementReader:
    """The reader a :class:`~reactor.model.run_view.RunView` pages its maps with, over
    ``storage``."""

    def read(info: MapInfo, outcome: MapOutcome | None, offset: int, limit: int
             ) -> MapElementPage:
        return map_element_page(storage, info, outcome=outcome, offset=offset, limit=limit)

    return read
