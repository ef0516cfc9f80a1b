"""The JSON API under ``/api`` (docs/dashboard.md, "API"); the schema is served at
``/api/openapi.json``.

Reads need nothing; every ``POST`` is an action and needs the token (bearer header, or a
signed-in session plus its CSRF token: :mod:`reactor.dashboard.security`). Handlers are plain
functions: FastAPI runs them in its thread pool, since the storage, the router and the engine
are synchronous.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request

from reactor.dashboard import actions
from reactor.dashboard.errors import BadRequest, NotFound
from reactor.dashboard.listing import DEFAULT_LIMIT, MAX_LIMIT, RunQuery, list_runs
from reactor.dashboard.maps import OUTCOMES, element_page, map_refs
from reactor.dashboard.queues import dead_letter_page, get_dead_letter, queue_overview
from reactor.dashboard.run_detail import run_detail
from reactor.dashboard.schedules import schedule_listing
from reactor.dashboard.schemas import (
    ActionResult,
    CancelRequest,
    Capabilities,
    Coordination,
    DeadLetterPage,
    ErrorBody,
    MapElements,
    PurgeRequest,
    PurgeResult,
    QueueOverview,
    RequeueResult,
    ResumeRequest,
    RewindRequest,
    RunDetail,
    RunsPage,
    ScheduleRow,
    SchedulesPage,
    SuspendRequest,
)
from reactor.dashboard.state import DashboardState, credentials, state
from reactor.dashboard.stored import StoredRun, check_id
from reactor.ports.inspection import QueueInspector
from reactor.ports.router import DeadLetterAdmin

__all__ = ["ERROR_RESPONSES", "api"]

#: The error bodies every route may answer with, for the schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "malformed id, cursor, filter or body, or a Host header not answered"),
        (401, "an action without a valid token or session"),
        (403, "read-only dashboard, or a missing CSRF token"),
        (404, "no such run, map step, dead letter or schedule"),
        (409, "the action does not apply to the run as it is"),
        (413, "the body is larger than the dashboard reads"),
        (422, "the request or the interrupt payload is invalid"),
        (429, "too many failed tokens from this address (Retry-After)"),
        (503, "the storage or the router failed"),
    )
}

api = APIRouter(prefix="/api", responses=ERROR_RESPONSES)

RunId = Annotated[str, Path(description="a run id", min_length=1, max_length=200)]
_State = Annotated[DashboardState, Depends(state)]


def _authorized(request: Request) -> DashboardState:
    """The dashboard state, once the request proved it may act."""
    found = state(request)
    found.guard.check(credentials(request))
    return found


_Actor = Annotated[DashboardState, Depends(_authorized)]


@api.get("/capabilities", response_model=Capabilities, summary="What this dashboard may do")
def get_capabilities(dashboard: _State) -> dict[str, Any]:
    """Read-only or not, the actions offered, and what the backends can tell."""
    runtime = dashboard.runtime
    enabled = dashboard.guard.actions_enabled
    return {
        "read_only": not enabled,
        "actions": [a for a in actions.ACTIONS if a != "cancel" or actions.cancel_supported()]
        if enabled else [],
        "cancel": actions.cancel_supported(),
        "storage": type(runtime.storage).__name__,
        "router": type(runtime.router).__name__,
        "dead_letter_admin": isinstance(runtime.router, DeadLetterAdmin),
        "queue_inspector": isinstance(runtime.router, QueueInspector),
    }


@api.get("/runs", response_model=RunsPage, summary="List runs, newest first")
def get_runs(
    dashboard: _State,
    status: Annotated[list[str] | None, Query(
        description="only these statuses (repeat, or a,b)", max_length=20)] = None,
    reactor: Annotated[str | None, Query(max_length=300,
                                         description="only this reactor name")] = None,
    created_from: Annotated[str | None, Query(
        alias="from", max_length=64,
        description="created at or after: epoch seconds, ISO 8601, or an age like 2h")] = None,
    created_to: Annotated[str | None, Query(
        alias="to", max_length=64, description="created before (same forms as from)")] = None,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """One page of top-level runs; filters work on every backend (docs/protocol.md,
    "Filtered pages")."""
    query = RunQuery.parse(status=status, reactor=reactor, created_from=created_from,
                           created_to=created_to, cursor=cursor, limit=limit)
    return list_runs(dashboard.runtime.storage, query)


@api.get("/runs/{run_id}", response_model=RunDetail, summary="One run in full")
def get_run(run_id: RunId, dashboard: _State) -> dict[str, Any]:
    """Status, masked inputs and results, map summaries, the step graph, the trace (async
    steps merged), attempts, undo stack, children, failure, interrupt, coordination and the
    actions that apply."""
    stored = StoredRun.load(dashboard.runtime, run_id)
    detail = run_detail(stored)
    detail["actions"] = actions.available(stored, dashboard.guard)
    return detail


@api.get("/runs/{run_id}/coordination", response_model=Coordination,
         summary="The coordination view of a run")
def get_coordination(run_id: RunId, dashboard: _State) -> Any:
    """One row per coordinating step per primitive, with live state (docs/dashboard.md,
    "Coordination view")."""
    detail = run_detail(StoredRun.load(dashboard.runtime, run_id))
    return detail.get("coordination") or {
        "available": False, "error": detail.get("document_error"), "reactor": [],
        "steps": [], "waiting": [],
    }


@api.get("/runs/{run_id}/maps/{step}", response_model=MapElements,
         summary="A page of a map step's elements")
def get_map_elements(
    run_id: RunId,
    step: Annotated[str, Path(min_length=1, max_length=200)],
    dashboard: _State,
    outcome: Annotated[str | None, Query(description=f"one of {', '.join(OUTCOMES)}",
                                         max_length=20)] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Each element's index, run id and outcome (and error), in index order."""
    if outcome is not None and outcome not in OUTCOMES:
        raise BadRequest(f"outcome must be one of {', '.join(OUTCOMES)}", code="bad_filter")
    stored = StoredRun.load(dashboard.runtime, run_id)
    ref = map_refs(stored.document or {}).get(check_id(step, "step name"))
    if ref is None:
        raise NotFound(f"run {run_id!r} has no started map step {step!r}", code="map_not_found")
    page = element_page(dashboard.runtime.storage, ref, outcome=outcome, offset=offset,
                        limit=limit)
    return {"step": step, "map_id": ref.map_id, **page}


@api.post("/runs/{run_id}/retry", response_model=ActionResult, summary="Retry a failed run")
def post_retry(run_id: RunId, dashboard: _Actor) -> dict[str, Any]:
    """``Reactor.retry``: a new run with the same inputs; its id is ``run_id`` in the answer."""
    return actions.retry(dashboard.runtime, run_id)


@api.post("/runs/{run_id}/undo", response_model=ActionResult, summary="Undo a run")
def post_undo(run_id: RunId, dashboard: _Actor) -> dict[str, Any]:
    """``Reactor.undo``: finish an aborted run's rollback, or undo a completed one."""
    return actions.undo(dashboard.runtime, run_id)


@api.post("/runs/{run_id}/cancel", response_model=ActionResult, summary="Cancel a run")
def post_cancel(
    run_id: RunId, dashboard: _Actor, body: Annotated[CancelRequest | None, Body()] = None
) -> dict[str, Any]:
    """``Reactor.cancel`` (when this version of reactor has it)."""
    request = body or CancelRequest()
    return actions.cancel(dashboard.runtime, run_id, request.reason, request.rollback)


@api.post("/runs/{run_id}/resume", response_model=ActionResult,
          summary="Resume a paused run with a JSON payload")
def post_resume(run_id: RunId, body: ResumeRequest, dashboard: _Actor) -> dict[str, Any]:
    """``Reactor.resume``, inline: the payload is checked against the interrupt's schema."""
    return actions.resume(dashboard.runtime, run_id, body.payload, body.step)


@api.post("/runs/{run_id}/suspend", response_model=ActionResult, summary="Suspend a run")
def post_suspend(
    run_id: RunId, dashboard: _Actor, body: Annotated[SuspendRequest | None, Body()] = None
) -> dict[str, Any]:
    """``Reactor.suspend``: ``outcome`` is ``suspended``, or ``requested`` when the execution
    that owns the run suspends it before its next step."""
    request = body or SuspendRequest()
    return actions.suspend(dashboard.runtime, run_id, request.reason, request.by)


@api.post("/runs/{run_id}/unsuspend", response_model=ActionResult,
          summary="Let a suspended run go on")
def post_unsuspend(run_id: RunId, dashboard: _Actor) -> dict[str, Any]:
    """``Reactor.unsuspend``: the run is ``running`` again (a worker continues it) or
    ``paused`` at its interrupt."""
    return actions.unsuspend(dashboard.runtime, run_id)


@api.post("/runs/{run_id}/rewind", response_model=ActionResult,
          summary="Rewind a run held failed_paused")
def post_rewind(
    run_id: RunId, dashboard: _Actor, body: Annotated[RewindRequest | None, Body()] = None
) -> dict[str, Any]:
    """``Reactor.rewind``: continue the held run from its failed step, or from ``from_step``,
    a step it completed (what runs again is undone first)."""
    request = body or RewindRequest()
    return actions.rewind(dashboard.runtime, run_id, request.from_step, request.reason,
                          request.by)


ScheduleName = Annotated[str, Path(description="a schedule name", min_length=1,
                                   max_length=200)]


@api.get("/schedules", response_model=SchedulesPage, summary="List schedules")
def get_schedules(dashboard: _State) -> dict[str, Any]:
    """Every schedule, by name, with its last and next ticks and its last run
    (docs/dashboard.md, "Schedules")."""
    return schedule_listing(dashboard.runtime, dashboard.guard)


@api.post("/schedules/{name}/pause", response_model=ScheduleRow, summary="Pause a schedule")
def post_schedule_pause(name: ScheduleName, dashboard: _Actor) -> dict[str, Any]:
    """``reactor.schedules.pause_schedule``: no tick is decided until it is resumed."""
    return actions.schedule_pause(dashboard.runtime, dashboard.guard, name)


@api.post("/schedules/{name}/resume", response_model=ScheduleRow, summary="Resume a schedule")
def post_schedule_resume(name: ScheduleName, dashboard: _Actor) -> dict[str, Any]:
    """``reactor.schedules.resume_schedule``: ticks go on from now (none of the pause's)."""
    return actions.schedule_resume(dashboard.runtime, dashboard.guard, name)


@api.get("/queues", response_model=QueueOverview, summary="Queue depth and dead letters")
def get_queues(dashboard: _State) -> dict[str, Any]:
    """Ready, delayed, in-flight and dead-letter counts, where the router can tell."""
    return queue_overview(dashboard.runtime.router)


@api.get("/dead-letters", response_model=DeadLetterPage, summary="List dead letters")
def get_dead_letters(
    dashboard: _State,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Oldest first, bodies masked; paged where the router has dead-letter administration."""
    return dead_letter_page(dashboard.runtime.router, cursor, limit)


@api.post("/dead-letters/purge", response_model=PurgeResult, summary="Purge dead letters")
def post_purge(body: PurgeRequest, dashboard: _Actor) -> dict[str, Any]:
    """Delete the listed letters, or every one with ``all: true``."""
    if body.all == (body.ids is not None):
        raise BadRequest("give either ids or all: true", code="bad_request")
    return actions.purge(dashboard.runtime.router, None if body.all else body.ids)


@api.get("/dead-letters/{letter_id}", summary="One dead letter")
def get_dead_letter_route(
    letter_id: Annotated[str, Path(min_length=1, max_length=200)], dashboard: _State
) -> dict[str, Any]:
    """The letter, its body masked."""
    return get_dead_letter(dashboard.runtime.router, letter_id)


@api.post("/dead-letters/{letter_id}/requeue", response_model=RequeueResult,
          summary="Requeue a dead letter")
def post_requeue(
    letter_id: Annotated[str, Path(min_length=1, max_length=200)], dashboard: _Actor
) -> dict[str, Any]:
    """Put the job back on the queue, due now."""
    return actions.requeue(dashboard.runtime.router, letter_id)
