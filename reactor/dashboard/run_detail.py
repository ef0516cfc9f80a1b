"""The run detail: everything the run page and ``GET /api/runs/{id}`` show about one run
(docs/dashboard.md, "Run page").

Built from the masked stored document (:class:`~reactor.dashboard.stored.StoredRun`) plus the
records the run points at:

* status, ids, times, run-control links, masked inputs and results (a map step's result is
  replaced by its summary: counts, the first successes and failures, each with its index and
  run id);
* the step graph with dependencies and nested structure (:mod:`reactor.dashboard.graph`);
* the execution trace, with the runs of ``async_step`` units merged in by their start time,
  and the attempts per step, units included (:mod:`reactor.dashboard.async_units`);
* the undo stack (masked arguments), the failure with its rollback failures (no traceback),
  the compensation still pending for an aborted or interrupted rollback, the pending interrupt
  of a paused run, the operator's suspension of a suspended run, the hold of a run held
  ``failed_paused`` with the steps a rewind may start from, the background hand-off point of
  the reactor;
* composed children hydrated one level down (their own trace with their units merged, their
  undo stack, results and failure; their children by reference only);
* the coordination view (:mod:`reactor.dashboard.coordination_view`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactor.dashboard.async_units import merge_runs, unit_attempts, unit_views
from reactor.dashboard.coordination_view import build_coordination
from reactor.dashboard.graph import step_graph
from reactor.dashboard.maps import map_refs, map_summary
from reactor.dashboard.stored import StoredRun, engine_state_of
from reactor.dashboard.values import display, failure_view
from reactor.errors import StorageError
from reactor.model.engine_state import EngineState
from reactor.model.results import RollbackFailure
from reactor.model.run_documents import (
    embedded_children,
    map_membership_of,
    retry_counters_of,
    rollback_of,
    trace_of,
    undo_stack_of,
)
from reactor.model.run_records import TraceRecord
from reactor.ports.storage import Storage

__all__ = ["child_view", "document_view", "run_detail", "trace_view"]


def _map(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    return value if isinstance(value, Mapping) else {}


def trace_view(entries: Sequence[TraceRecord]) -> list[dict[str, Any]]:
    """Trace entries as shown (bounded values; ``background`` marks a merged unit run)."""
    shown = []
    for entry in entries:
        item: dict[str, Any] = {
            "type": display(entry.type),
            "step": display(entry.step),
            "at": float(entry.at),
            "attempt": entry.attempt,
            "detail": display(entry.detail),
        }
        if entry.background:
            item["background"] = True
        if entry.primitive is not None:
            item["primitive"] = display(entry.primitive)
        if entry.key is not None:
            item["key"] = display(entry.key)
        shown.append(item)
    return shown


def _undo_stack(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "step": display(entry.step),
            "kind": display(entry.kind),
            "arguments": display(dict(entry.arguments)),
            "elements": None if entry.elements is None else len(entry.elements),
        }
        for entry in undo_stack_of(document)
    ]


def _failure_shown(failure: RollbackFailure) -> dict[str, Any]:
    return {
        "step": display(failure.step), "kind": display(failure.kind),
        "reason": display(failure.reason), "message": display(failure.message),
        "map_step": display(failure.map_step), "element_index": display(failure.element_index),
    }


def _pending_compensation(document: Mapping[str, Any]) -> dict[str, Any] | None:
    rollback = rollback_of(document)
    if rollback is None:
        return None
    return {
        "step": display(rollback.step),
        "kind": display(rollback.kind),
        "compensate_pending": rollback.compensate_pending,
        "arguments": display(dict(rollback.arguments)),
        "failures": [_failure_shown(f) for f in rollback.failures],
    }


def _results(document: Mapping[str, Any], maps: Mapping[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for name, value in _map(document, "intermediate_results").items():
        shown[str(name)] = {"map": maps[name]} if name in maps else display(value)
    return shown


def _interrupt(engine_state: EngineState) -> dict[str, Any] | None:
    pending = engine_state.interrupt
    return None if pending is None else pending.to_json()


def _sleep(engine_state: EngineState, status: Any) -> dict[str, Any] | None:
    """The sleep a ``paused`` run sleeps at, ``{"step", "wake_at", "since"}`` (epoch seconds),
    else ``None`` (docs/schedules.md, "Durable sleep")."""
    pending = engine_state.sleep
    return None if pending is None or status != "paused" else pending.to_json()


def _cancel(engine_state: EngineState) -> dict[str, Any] | None:
    """The cancel request kept on a run once its cancel started (docs/run-control.md)."""
    request: Any = getattr(engine_state, "cancel", None)
    to_json = getattr(request, "to_json", None)
    return display(to_json()) if callable(to_json) else None


def _links(engine_state: EngineState) -> dict[str, Any]:
    links = engine_state.links
    return {
        "idempotency_key": links.idempotency_key,
        "retried_from": links.retried_from,
        "retries": list(links.retries),
    }


def document_view(
    storage: Storage, document: Mapping[str, Any], context_id: str, *, sample: int = 10
) -> dict[str, Any]:
    """The parts of a run's detail read from its document (shared by a run and its composed
    children).

    Returns:
        ``{"status", "inputs", "results", "maps", "trace", "attempts", "async_steps",
        "undo_stack", "failure", "pending_compensation", "current_step", "interrupt", "sleep",
        "cancel", "quarantine", "map_element", "handed_off", "links", "deadline",
        "suspension", "failure_hold", "heartbeats"}`` (``heartbeats``: step -> the last
        heartbeat kept for a queued retry, docs/concepts.md, "Heartbeats"; ``failure_hold``:
        :func:`_failure_hold`).
    """
    engine_state = engine_state_of(dict(document))
    try:
        units = unit_views(storage, context_id, engine_state)
    except StorageError:
        units = {}
    maps = {name: map_summary(storage, name, ref, sample)
            for name, ref in map_refs(document).items()}
    attempts = retry_counters_of(document).attempts or {}
    quarantine = engine_state.quarantine
    membership = map_membership_of(document)
    return {
        "status": display(document.get("status")),
        "inputs": display(_map(document, "inputs")),
        "results": _results(document, maps),
        "maps": list(maps.values()),
        "trace": trace_view(merge_runs(trace_of(document), units)),
        "attempts": unit_attempts(attempts, units),
        "async_steps": units,
        "undo_stack": _undo_stack(document),
        "failure": failure_view(document.get("failure")),
        "pending_compensation": _pending_compensation(document),
        "current_step": display(document.get("current_step")),
        "interrupt": _interrupt(engine_state),
        "sleep": _sleep(engine_state, document.get("status")),
        "cancel": _cancel(engine_state),
        "quarantine": None if quarantine is None else {
            "reason": quarantine.reason, "original_status": quarantine.original_status,
        },
        "map_element": None if membership is None else display(membership.to_stored()),
        "handed_off": engine_state.handed_off,
        "links": _links(engine_state),
        "deadline": getattr(engine_state, "deadline", None),
        "suspension": _suspension(engine_state),
        "failure_hold": _failure_hold(engine_state),
        "heartbeats": {
            step: display(last.to_stored())
            for step, last in (retry_counters_of(document).heartbeats or {}).items()
        },
    }


def _suspension(engine_state: EngineState) -> dict[str, Any] | None:
    """Who suspended the run, why and when, while it is suspended (docs/operations.md,
    "Suspend and unsuspend")."""
    held: Any = getattr(engine_state, "suspension", None)
    to_json = getattr(held, "to_json", None)
    return display(to_json()) if callable(to_json) else None


def _failure_hold(engine_state: EngineState) -> dict[str, Any] | None:
    """A run held ``failed_paused`` (``on_failure="pause"``; docs/operations.md, "Pause,
    rewind, fork"): ``{"step", "kind", "compensate_pending", "attempt", "at",
    "rewinding"}`` (the error is the run's ``failure``), else ``None``."""
    held: Any = getattr(engine_state, "failure_hold", None)
    to_json = getattr(held, "to_json", None)
    return display(to_json()) if callable(to_json) else None


def _rewind_steps(
    definition: Any, document: Mapping[str, Any], hold: Mapping[str, Any] | None
) -> list[str]:
    """The steps a rewind of a held run may start from, as the run page offers them: its
    failed step first, then the steps it completed in declaration order (the engine refuses
    one it cannot run again)."""
    if hold is None:
        return []
    failed = str(hold.get("step") or "")
    completed = set(_map(document, "intermediate_results"))
    declared = list(definition.steps) if definition is not None else sorted(completed)
    return ([failed] if failed else []) + [
        name for name in declared if name in completed and name != failed
    ]


def child_view(storage: Storage, step: str, child: Mapping[str, Any]) -> dict[str, Any]:
    """A composed child embedded in its parent's document, hydrated one level: its own view,
    and its own children by reference only."""
    context_id = str(child.get("context_id", ""))
    view = document_view(storage, child, context_id, sample=5)
    nested = {
        name: {"run_id": display(inner.get("context_id")),
               "reactor": display(inner.get("reactor")),
               "status": display(inner.get("status"))}
        for name, inner in embedded_children(child).items()
    }
    return {
        "step": step,
        "run_id": context_id,
        "reactor": display(child.get("reactor")),
        **view,
        "children": nested,
    }


def run_detail(stored: StoredRun) -> dict[str, Any]:
    """Everything shown about one run (see the module docstring); no secret, no traceback."""
    record = stored.record
    storage = stored.runtime.storage
    detail: dict[str, Any] = {
        "run_id": record.context_id,
        "reactor": record.reactor,
        "status": record.status,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "parent_run_id": record.parent_context_id,
        "root_run_id": record.root_context_id,
        "document_error": stored.document_error,
        "definition_error": stored.definition_error,
    }
    document = stored.document
    if document is None:
        detail.update({"graph": None, "coordination": None, "children": {}, "trace": [],
                       "maps": [], "async_steps": {}, "undo_stack": [], "rewind_steps": []})
        return detail
    view = document_view(storage, document, record.context_id)
    detail.update(view)
    detail["status"] = record.status  # the record's status is the listing's (and current)
    detail["children"] = {
        name: child_view(storage, name, inner)
        for name, inner in embedded_children(document).items()
    }
    definition = stored.definition
    background = definition.background if definition is not None else None
    detail["background_handoff"] = None if background is None else {
        "mode": background.mode, "step": background.step,
    }
    detail["rewind_steps"] = _rewind_steps(definition, document, view["failure_hold"])
    detail["graph"] = None if definition is None else step_graph(
        definition, document, stored.engine_state, view["async_steps"]
    )
    detail["coordination"] = build_coordination(stored, view["async_steps"])
    return detail
