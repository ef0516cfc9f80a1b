"""Optional storage operations in the contract suite (docs/protocol.md, "Capabilities";
docs/contract-suite.md, "Verdicts").

A storage operation the engine never calls (a map's counter read, a rollback's summary, the
operators' semaphore reset) or can do without (incremental checkpoints) is an optional
capability, a runtime-checkable protocol of :mod:`reactor.ports.capabilities`. The suite
checks such an operation only on a store that declares it: a test of the operation itself
skips as not applicable (not a gap) on a store that does not, and a test that only *observes*
state through it reads the same state with required operations instead.
"""

from __future__ import annotations

from typing import cast

import pytest

from reactor.ports.capabilities import (
    AppendsContexts,
    InspectsMapRollbacks,
    InspectsMaps,
    ResetsSemaphores,
    declares,
)
from reactor.ports.storage import MapStore, Storage
from reactor_contract.plugin import (
    NO_APPEND,
    NO_MAP_INSPECTION,
    NO_ROLLBACK_INSPECTION,
    NO_SEMAPHORE_RESET,
)

__all__ = [
    "NO_APPEND",
    "NO_MAP_INSPECTION",
    "NO_ROLLBACK_INSPECTION",
    "NO_SEMAPHORE_RESET",
    "appender",
    "element_ids_of",
    "map_inspector",
    "read_counter",
    "rollback_inspector",
    "semaphore_resetter",
]

def appender(storage: Storage) -> AppendsContexts:
    """``storage.contexts`` as an :class:`AppendsContexts`; skips (not applicable) without it.

    Raises:
        pytest.skip.Exception: the context store does not declare the capability.
    """
    if not declares(storage.contexts, AppendsContexts):
        pytest.skip(NO_APPEND)
    return cast(AppendsContexts, storage.contexts)


def map_inspector(storage: Storage) -> InspectsMaps:
    """``storage.maps`` as an :class:`InspectsMaps`; skips (not applicable) without it.

    Raises:
        pytest.skip.Exception: the map store does not declare the capability.
    """
    if not declares(storage.maps, InspectsMaps):
        pytest.skip(NO_MAP_INSPECTION)
    return cast(InspectsMaps, storage.maps)


def rollback_inspector(storage: Storage) -> InspectsMapRollbacks:
    """``storage.map_rollbacks`` as an :class:`InspectsMapRollbacks`; skips (not applicable)
    without it.

    Raises:
        pytest.skip.Exception: the map-rollback store does not declare the capability.
    """
    if not declares(storage.map_rollbacks, InspectsMapRollbacks):
        pytest.skip(NO_ROLLBACK_INSPECTION)
    return cast(InspectsMapRollbacks, storage.map_rollbacks)


def semaphore_resetter(storage: Storage) -> ResetsSemaphores:
    """``storage.semaphores`` as a :class:`ResetsSemaphores`; skips (not applicable) without it.

    Raises:
        pytest.skip.Exception: the semaphore store does not declare the capability.
    """
    if not declares(storage.semaphores, ResetsSemaphores):
        pytest.skip(NO_SEMAPHORE_RESET)
    return cast(ResetsSemaphores, storage.semaphores)


def read_counter(maps: MapStore, map_id: str) -> int | None:
    """A map's counter: ``counter`` on a store that declares :class:`InspectsMaps`, else
    ``add_to_counter(map_id, 0)`` (a write of nothing) on a map ``metadata`` knows.

    Returns:
        The counter, ``None`` for an unknown (or expired) map.
    """
    if declares(maps, InspectsMaps):
        return cast(InspectsMaps, maps).counter(map_id)
    if maps.metadata(map_id) is None:
        return None
    return maps.add_to_counter(map_id, 0)


def element_ids_of(maps: MapStore, map_id: str) -> list[str]:
    """Every id of a map's element index in append order: ``element_ids`` on a store that
    declares :class:`InspectsMaps`, else ``element_ids_from_tail`` over ``count_elements``
    entries, reversed.
    """
    if declares(maps, InspectsMaps):
        return cast(InspectsMaps, maps).element_ids(map_id)
    total = maps.count_elements(map_id)
    return list(reversed(maps.element_ids_from_tail(map_id, position=0, count=total,
                                                    total=total)))
