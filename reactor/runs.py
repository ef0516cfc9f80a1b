"""Stored runs as users see them (docs/concepts.md, "Stored runs"; docs/run-control.md).

The public home of the run views: what :meth:`reactor.Reactor.find` returns, the statuses a
run moves through, the handle a background run's caller gets, and a map step's element runs
(docs/fan_out.md, "Listing a map's elements")::

    from reactor.runs import RunStatus, RunView

    view: RunView = Payment.find(run_id)
    if view.status in TERMINAL_STATUSES: ...
    page = view.map_elements("charge_all", outcome="failed", limit=50)
    for element in page.elements:
        print(element.index, element.run_id, element.error)

Tools that read stored documents themselves (the dashboard) page with
:func:`map_element_page` over :func:`map_infos` of the document's ``composed_contexts``.
"""

from __future__ import annotations

from reactor.engine.dispatch import DispatchHandle
from reactor.engine.maps.elements import iter_map_elements, map_element_page
from reactor.errors import MapElementsArgumentError
from reactor.model.run_view import (
    MAP_OUTCOMES,
    MAX_ELEMENT_PAGE,
    MapElement,
    MapElementPage,
    MapInfo,
    MapOutcome,
    RunView,
    TraceEntry,
    map_infos,
)
from reactor.model.status import TERMINAL_STATUSES, RunStatus

__all__ = [
    "MAP_OUTCOMES",
    "MAX_ELEMENT_PAGE",
    "TERMINAL_STATUSES",
    "DispatchHandle",
    "MapElement",
    "MapElementPage",
    "MapElementsArgumentError",
    "MapInfo",
    "MapOutcome",
    "RunStatus",
    "RunView",
    "TraceEntry",
    "iter_map_elements",
    "map_element_page",
    "map_infos",
]
