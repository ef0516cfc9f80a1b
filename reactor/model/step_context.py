"""``StepContext``: the read-only view of the run that a step body receives.

Function steps get it as their ``ctx`` argument; class steps read it as ``self.context``
(engine.md §1.2 "Steps": ``run`` receives ``(inputs, context)``). It exposes identities and the
results so far, never the engine's mutable state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["StepContext"]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class StepContext:
    """What a step body may know about its run.

    Attributes:
        run_id: the id of the run executing the step (a map element's or composed child's own
            id inside those).
        reactor: the registered name of the reactor the step belongs to.
        step: the step's name.
        attempt: the attempt number (1-based) of ``run``; ``0`` in ``undo``/``compensate``.
        root_run_id: the top-level run's id.
        parent_run_id: the parent run's id (map elements, composed children), else ``None``.
        map_metadata: for a map element: ``{"map_step", "map_id", "index", "parent_reactor"}``.
        results: the results of the steps completed so far (read-only).
        reactor_inputs: the run's validated inputs (read-only; includes redacted ones).
    """

    run_id: str
    reactor: str
    step: str
    attempt: int = 0
    root_run_id: str | None = None
    parent_run_id: str | None = None
    map_metadata: Mapping[str, Any] | None = None
    results: Mapping[str, Any] = field(default_factory=_empty)
    reactor_inputs: Mapping[str, Any] = field(default_factory=_empty)

    @property
    def element_index(self) -> int | None:
        """The map element's 0-based index, or ``None`` outside a map element."""
        if not self.map_metadata:
            return None
        index = self.map_metadata.get("index")
        return index if isinstance(index, int) else None
