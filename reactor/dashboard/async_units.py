"""``async_step`` units as the run page shows them (docs/dashboard.md, "Run page").

A unit never writes its parent's context (docs/architecture.md, "Execution invariants"): the
parent holds only the link written at dispatch (``EngineState.async_steps``) and every fact
about the unit — when it started, its attempts, its park state and what it waits on, its
outcome — lives on its own Step Result Record (docs/protocol.md#step-results). This module
reads those records for the links of one context and rebuilds what a same-process step would
have written into the parent: a ``run`` trace entry placed by its start time, and its attempt
count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reactor.dashboard.values import display
from reactor.model.engine_state import EngineState
from reactor.model.masking import mask_value
from reactor.model.records import StepResultRecord
from reactor.model.run_records import TraceRecord
from reactor.ports.storage import Storage

__all__ = ["PARK_GRACE", "merge_runs", "unit_attempts", "unit_views"]

#: Seconds a parked unit's ``parked_until`` adds to its park delay (the step handler's grace,
#: ``reactor.engine.async_step.PARK_SWEEP_GRACE``): its next attempt is due that much earlier.
PARK_GRACE = 5.0


def _outcome(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return display(mask_value(json.loads(text)))
    except (ValueError, RecursionError):
        return "[unreadable outcome]"


def _view(record: StepResultRecord) -> dict[str, Any]:
    data = record.data
    waiting = data.get("waiting") if isinstance(data.get("waiting"), Mapping) else None
    parked = record.status == "dispatched" and record.parked_until is not None
    started = data.get("started_at")
    return {
        "step": record.step_name,
        "context_id": record.context_id,
        "status": "parked" if parked else record.status,
        "dispatched_at": record.dispatched_at,
        "updated_at": record.updated_at,
        "started_at": started if isinstance(started, int | float) else None,
        # a unit that ran without retrying records no count: it ran once
        "attempts": data.get("attempts") if isinstance(data.get("attempts"), int)
        else (1 if isinstance(started, int | float) else None),
        "parked_until": record.parked_until,
        "next_attempt_at": record.parked_until - PARK_GRACE if parked and record.parked_until
        else None,
        "waiting": record.waiting,
        "waiting_primitive": str(waiting.get("primitive")) if waiting else None,
        "contention_attempts": record.contention_attempts,
        "compensation": display(data.get("compensation")),
        "ticket": data.get("ordered_lock") if isinstance(data.get("ordered_lock"), Mapping)
        else None,
        "outcome": _outcome(record.outcome),
    }


def unit_views(
    storage: Storage, context_id: str, engine_state: EngineState
) -> dict[str, dict[str, Any]]:
    """The Step Result Record of every unit context ``context_id`` dispatched, as shown.

    Returns:
        step name -> ``{"status": "dispatched"|"parked"|"completed", "started_at",
        "attempts", "waiting", "waiting_primitive", "next_attempt_at", "outcome", ...}``;
        a unit whose record is gone (expired) is left out.
    """
    views: dict[str, dict[str, Any]] = {}
    for step in engine_state.async_steps:
        record = storage.step_results.get(context_id, step)
        if record is not None:
            views[step] = _view(record)
    return views


def merge_runs(
    trace: Sequence[TraceRecord], units: Mapping[str, Mapping[str, Any]]
) -> list[TraceRecord]:
    """The trace with each started unit's ``run`` entry placed by its start time.

    A unit that already has a ``run`` entry in the trace is left as it is.

    Args:
        trace: the context's trace entries, oldest first.
        units: :func:`unit_views` of the same context.

    Returns:
        A new list; inserted entries are :attr:`~reactor.model.run_records.TraceRecord.background`.
    """
    merged = list(trace)
    for step, unit in units.items():
        started = unit.get("started_at")
        if not isinstance(started, int | float):
            continue
        if any(e.type == "run" and e.step == step for e in merged):
            continue
        entry = TraceRecord("run", step, float(started),
                            {"background": True, "attempt": unit.get("attempts")})
        later = next((i for i, e in enumerate(merged) if e.at > started), None)
        merged.insert(len(merged) if later is None else later, entry)
    return merged


def unit_attempts(
    attempts: Mapping[str, Any], units: Mapping[str, Mapping[str, Any]]
) -> dict[str, int]:
    """The run's attempt counts (``retry_context``) with each unit's own count added."""
    merged = {str(k): int(v) for k, v in attempts.items() if isinstance(v, int)}
    for step, unit in units.items():
        count = unit.get("attempts")
        if isinstance(count, int):
            merged[step] = count
    return merged
