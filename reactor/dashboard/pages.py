"""The HTML pages: server-rendered Jinja2 templates with htmx (docs/dashboard.md, "Pages").

* ``/runs``: the runs table with its filters; the rows refresh themselves (htmx polling of
  ``/runs/rows``), so statuses are live.
* ``/runs/{id}``: the run page: status (live while the run is unfinished), the step graph as
  inline SVG coloured by state, the timeline of the trace, the coordination panel (live),
  map summaries with their drill-down (``/runs/{id}/maps/{step}``), composed children, the
  failure and its rollback, and the action buttons.
* ``/schedules``: every schedule with its last and next ticks and its last run, with pause
  and resume (docs/dashboard.md, "Schedules").
* ``/queues``: the queue overview and the dead letters with requeue and purge.
* ``/login``: trades the token for a session cookie; every action form then carries the
  session's CSRF token (:mod:`reactor.dashboard.security`); ``/logout`` (a POST with that
  token) ends the session in the server.

The message bars show only fixed texts: ``?notice=<code>`` and ``?problem=<code>`` are looked
up in :data:`NOTICES` and :data:`PROBLEMS` (an unknown code shows nothing), and a refused
action renders its page with the server's own message — nothing a link carries is ever
printed (docs/dashboard.md, "Security").

Every value comes from the same builders as the JSON API, so a page never shows anything the
API would not (secrets masked, no traceback); Jinja2 escapes all of it, after
:func:`reactor.dashboard.app.shown` has escaped its control and bidi characters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from reactor.dashboard import actions
from reactor.dashboard.errors import BadRequest, DashboardError, NotFound
from reactor.dashboard.graph import STATES, layout
from reactor.dashboard.listing import DEFAULT_LIMIT, MAX_LIMIT, RunQuery, list_runs
from reactor.dashboard.maps import OUTCOMES, element_page, map_refs
from reactor.dashboard.queues import dead_letter_page, queue_overview
from reactor.dashboard.run_detail import run_detail
from reactor.dashboard.schedules import schedule_listing
from reactor.dashboard.security import CSRF_FIELD, SESSION_COOKIE
from reactor.dashboard.state import DashboardState, base_path, credentials, state
from reactor.dashboard.stored import StoredRun, check_id
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.model.text import printable

__all__ = [
    "MAX_FORM_BYTES",
    "NOTICES",
    "PROBLEMS",
    "Shown",
    "pages",
    "safe_next",
    "template_globals",
]

pages = APIRouter(include_in_schema=False)

#: The largest form body accepted (an interrupt payload included).
MAX_FORM_BYTES = 64 * 1024
#: Seconds between two refreshes of a live part of a page.
POLL_SECONDS = 2

#: The only texts ``?notice=<code>`` shows (docs/dashboard.md, "Security").
NOTICES: Mapping[str, str] = {
    "signed_in": "signed in",
    "signed_out": "signed out",
    "retried": "retry: new run started; the run it retried is linked under “retried from”",
    "undone": "undo: requested; the run's status is below",
    "cancelled": "cancel: requested; the run's status is below",
    "resumed": "resume: the run goes on; its status is below",
    "suspended": "suspend: requested; the run starts no further step (its status is below)",
    "unsuspended": "unsuspend: the run goes on; its status is below",
    "rewound": "rewind: the run goes on from the chosen step; its status is below",
    "requeued": "requeued: the job is back on the queue",
    "purged": "dead letters purged",
    "schedule_paused": "pause: the schedule decides no tick until it is resumed",
    "schedule_resumed": "resume: the schedule ticks again from now (none of the pause's ticks "
                        "run)",
}
#: The only texts ``?problem=<code>`` shows.
PROBLEMS: Mapping[str, str] = {
    "session_ended": "the session ended (signed out, expired, or the dashboard restarted): "
                     "sign in again",
}
_SCHEDULE_NOTICES = {"pause": "schedule_paused", "resume": "schedule_resumed"}
_ACTION_NOTICES = {"retry": "retried", "undo": "undone", "cancel": "cancelled",
                   "resume": "resumed", "suspend": "suspended", "unsuspend": "unsuspended",
                   "rewind": "rewound"}


class Shown(str):
    """Text already made safe to show (:func:`reactor.dashboard.app.shown` leaves it as it
    is); Jinja2 still HTML-escapes it."""

    __slots__ = ()


def _stamp(epoch: Any) -> str:
    if not isinstance(epoch, int | float):
        return ""
    whole = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))
    return f"{whole}.{int((epoch % 1) * 1000):03d}"


def _pretty(value: Any) -> Shown:
    """``value`` as indented JSON, each line escaped by the CLI's rule in JSON's syntax
    (a bidi override shows as ``\\u202e``; the indentation's line breaks stay)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    return Shown("\n".join(printable(line, as_json=True) for line in text.split("\n")))


def _terminal(status: Any) -> bool:
    return str(status) in {s.value for s in TERMINAL_STATUSES}


def template_globals() -> dict[str, Any]:
    """The helpers every template may call."""
    return {
        "stamp": _stamp,
        "pretty": _pretty,
        "terminal": _terminal,
        "node_states": STATES,
        "run_statuses": [s.value for s in RunStatus],
        "outcomes": OUTCOMES,
        "poll_seconds": POLL_SECONDS,
        "csrf_field": CSRF_FIELD,
    }


def _context(request: Request, dashboard: DashboardState, **values: Any) -> dict[str, Any]:
    session = request.cookies.get(SESSION_COOKIE)
    guard = dashboard.guard
    return {
        "base": base_path(request),
        "title": dashboard.title,
        "read_only": not guard.actions_enabled,
        "signed_in": guard.signed_in(session),
        "csrf": guard.csrf_token(session) or "",
        "notice": NOTICES.get(request.query_params.get("notice") or ""),
        "problem": PROBLEMS.get(request.query_params.get("problem") or ""),
        **values,
    }


def _render(request: Request, name: str, status_code: int = 200, **values: Any) -> Response:
    dashboard = state(request)
    return dashboard.templates.TemplateResponse(
        request, name, _context(request, dashboard, **values), status_code=status_code,
    )


def _redirect(request: Request, path: str, **params: str) -> RedirectResponse:
    query = urlencode({k: v for k, v in params.items() if v})
    return RedirectResponse(f"{base_path(request)}{path}{'?' + query if query else ''}",
                            status_code=303)


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the last value of each field).

    Raises:
        BadRequest: the body is too large or not a form.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise BadRequest("the form is too large", code="too_large")
    if body and kind != "application/x-www-form-urlencoded":
        raise BadRequest("expected a form", code="bad_request")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        raise BadRequest("the form is not UTF-8", code="bad_request") from None
    return {k: v[-1] for k, v in fields.items()}


async def _acting_form(request: Request) -> tuple[DashboardState, dict[str, str]]:
    """The form of an action: the request must bring an open session (or the bearer token)
    before its body is read, then the form must carry the session's CSRF token
    (docs/dashboard.md, "Security").

    Raises:
        Unauthorized, Forbidden: as :meth:`reactor.dashboard.security.Guard.check`.
        BadRequest: the body is too large or not a form.
    """
    dashboard = state(request)
    dashboard.guard.authenticate(credentials(request))  # before the body is read
    form = await _form(request)
    dashboard.guard.check(credentials(request, form.get(CSRF_FIELD, "")))
    return dashboard, form


def _query(request: Request) -> RunQuery:
    params = request.query_params
    try:
        limit = int(params.get("limit") or DEFAULT_LIMIT)
    except ValueError:
        raise BadRequest("limit must be a number", code="bad_filter") from None
    return RunQuery.parse(
        status=params.getlist("status") or None, reactor=params.get("reactor"),
        created_from=params.get("from"), created_to=params.get("to"),
        cursor=params.get("cursor"), limit=min(max(limit, 1), MAX_LIMIT),
    )


# ---- runs -------------------------------------------------------------------------------------


@pages.get("/")
def index(request: Request) -> Response:
    """The runs page."""
    return _redirect(request, "/runs")


@pages.get("/runs")
def runs_page(request: Request) -> Response:
    """The runs table with its filters."""
    params = request.query_params
    filters = {"status": params.get("status", ""), "reactor": params.get("reactor", ""),
               "from": params.get("from", ""), "to": params.get("to", "")}
    try:
        query = _query(request)
        listing = list_runs(state(request).runtime.storage, query)
    except DashboardError as exc:
        return _render(request, "runs.html", exc.status, filters=filters, listing=None,
                       rows_query="", error=exc.body())
    rows_query = urlencode({k: v for k, v in {**filters, "limit": str(query.limit),
                                              "cursor": query.cursor or ""}.items() if v})
    return _render(request, "runs.html", filters=filters, listing=listing,
                   rows_query=rows_query, error=None,
                   next_query=urlencode({**{k: v for k, v in filters.items() if v},
                                         "cursor": listing["next_cursor"]})
                   if listing["next_cursor"] else None)


@pages.get("/runs/rows")
def runs_rows(request: Request) -> Response:
    """The table body of ``/runs`` (polled by htmx for live statuses)."""
    query = _query(request)
    listing = list_runs(state(request).runtime.storage, query)
    return _render(request, "_runs_rows.html", listing=listing,
                   rows_query=request.url.query)


def _run_page_values(request: Request, run_id: str) -> dict[str, Any]:
    dashboard = state(request)
    stored = StoredRun.load(dashboard.runtime, run_id)
    detail = run_detail(stored)
    detail["actions"] = actions.available(stored, dashboard.guard)
    graph = detail.get("graph")
    drawings: list[dict[str, Any]] = []
    if graph is not None:
        drawings.append({"title": None, "layout": layout(graph)})
        for node in graph["nodes"]:
            children = node.get("children")
            if children:
                title = (f"{node['name']} (map of {children['reactor']}: each element is a run "
                         "of its own, see the map below)" if node["kind"] == "map"
                         else f"{node['name']} (compose: {children['reactor']})")
                drawings.append({"title": title, "layout": layout(children)})
    return {"run": detail, "drawings": drawings}


@pages.get("/runs/{run_id}")
def run_page(request: Request, run_id: Annotated[str, Path(max_length=200)]) -> Response:
    """One run: graph, timeline, coordination, maps, children, failure, actions."""
    return _render(request, "run.html", **_run_page_values(request, run_id))


@pages.get("/runs/{run_id}/live")
def run_live(request: Request, run_id: Annotated[str, Path(max_length=200)]) -> Response:
    """The live part of the run page (status, graph, timeline), polled while unfinished."""
    return _render(request, "_run_live.html", **_run_page_values(request, run_id))


@pages.get("/runs/{run_id}/coordination")
def run_coordination(
    request: Request, run_id: Annotated[str, Path(max_length=200)]
) -> Response:
    """The coordination panel of the run page (polled while the run is unfinished)."""
    detail = run_detail(StoredRun.load(state(request).runtime, run_id))
    return _render(request, "_coordination.html", run=detail)


@pages.get("/runs/{run_id}/maps/{step}")
def map_page(
    request: Request,
    run_id: Annotated[str, Path(max_length=200)],
    step: Annotated[str, Path(max_length=200)],
    outcome: Annotated[str | None, Query(max_length=20)] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    """A map step's elements, one outcome at a time."""
    if outcome is not None and outcome not in OUTCOMES:
        raise BadRequest(f"outcome must be one of {', '.join(OUTCOMES)}", code="bad_filter")
    stored = StoredRun.load(state(request).runtime, run_id)
    ref = map_refs(stored.document or {}).get(check_id(step, "step name"))
    if ref is None:
        raise NotFound(f"run {run_id!r} has no started map step {step!r}", code="map_not_found")
    page = element_page(state(request).runtime.storage, ref, outcome=outcome, offset=offset,
                        limit=DEFAULT_LIMIT)
    detail = run_detail(stored)
    summary = next((m for m in detail.get("maps", []) if m["step"] == step), None)
    return _render(request, "map.html", run=detail, step=step, summary=summary, page=page,
                   outcome=outcome, offset=offset)


# ---- actions ----------------------------------------------------------------------------------


def _act(dashboard: DashboardState, action: str, run_id: str,
         form: Mapping[str, str]) -> dict[str, Any]:
    runtime = dashboard.runtime
    if action == "retry":
        return actions.retry(runtime, run_id)
    if action == "undo":
        return actions.undo(runtime, run_id)
    if action == "cancel":
        return actions.cancel(runtime, run_id, form.get("reason") or None,
                              form.get("rollback", "on") not in ("", "off", "false", "0"))
    if action == "resume":
        payload = actions.parse_payload(form.get("payload") or "null")
        return actions.resume(runtime, run_id, payload, form.get("step") or None)
    if action == "suspend":
        return actions.suspend(runtime, run_id, form.get("reason") or None,
                               form.get("by") or None)
    if action == "unsuspend":
        return actions.unsuspend(runtime, run_id)
    if action == "rewind":
        return actions.rewind(runtime, run_id, form.get("from_step") or None,
                              form.get("reason") or None, form.get("by") or None)
    raise NotFound(f"no action {action!r}", code="not_found")


@pages.post("/runs/{run_id}/actions/{action}")
async def run_action(
    request: Request,
    run_id: Annotated[str, Path(max_length=200)],
    action: Annotated[str, Path(max_length=20)],
) -> Response:
    """A run page's action button: checks the session and CSRF token, acts, then shows the
    run it acted on (the new run, for a retry) with a notice, or the refusal."""
    dashboard, form = await _acting_form(request)
    check_id(run_id)
    if action not in _ACTION_NOTICES:
        raise NotFound(f"no action {printable(action)!r}", code="not_found")
    try:
        done = await run_in_threadpool(_act, dashboard, action, run_id, form)
    except DashboardError as exc:
        if isinstance(exc, NotFound) and exc.code == "not_found":
            raise
        values = await run_in_threadpool(_run_page_values, request, run_id)
        return _render(request, "run.html", exc.status, problem=f"{action}: {exc.message}",
                       **values)
    target = done.get("run_id") or run_id
    return _redirect(request, f"/runs/{target}", notice=_ACTION_NOTICES[action])


# ---- schedules --------------------------------------------------------------------------------


def _schedules_values(request: Request) -> dict[str, Any]:
    dashboard = state(request)
    return {"listing": schedule_listing(dashboard.runtime, dashboard.guard)}


@pages.get("/schedules")
def schedules_page(request: Request) -> Response:
    """Every schedule: spec, time zone, paused, last and next ticks, last run, policies."""
    return _render(request, "schedules.html", **_schedules_values(request))


def _schedule_act(dashboard: DashboardState, action: str, name: str) -> dict[str, Any]:
    if action == "pause":
        return actions.schedule_pause(dashboard.runtime, dashboard.guard, name)
    return actions.schedule_resume(dashboard.runtime, dashboard.guard, name)


@pages.post("/schedules/{name}/actions/{action}")
async def schedule_action(
    request: Request,
    name: Annotated[str, Path(max_length=200)],
    action: Annotated[str, Path(max_length=20)],
) -> Response:
    """A schedule's pause or resume button: checks the session and CSRF token exactly as the
    run actions do, acts, then shows the schedules with a notice, or the refusal (an unknown
    schedule: 404, nothing changed)."""
    dashboard, _ = await _acting_form(request)
    if action not in _SCHEDULE_NOTICES:
        raise NotFound(f"no action {printable(action)!r}", code="not_found")
    try:
        await run_in_threadpool(_schedule_act, dashboard, action, name)
    except DashboardError as exc:
        values = await run_in_threadpool(_schedules_values, request)
        return _render(request, "schedules.html", exc.status,
                       problem=f"{action}: {exc.message}", **values)
    return _redirect(request, "/schedules", notice=_SCHEDULE_NOTICES[action])


# ---- queues -----------------------------------------------------------------------------------


def _queues_values(request: Request, cursor: str | None) -> dict[str, Any]:
    router = state(request).runtime.router
    return {"overview": queue_overview(router),
            "letters": dead_letter_page(router, cursor, DEFAULT_LIMIT)}


async def _queues_problem(request: Request, status: int, problem: str) -> Response:
    values = await run_in_threadpool(_queues_values, request, None)
    return _render(request, "queues.html", status, problem=problem, **values)


@pages.get("/queues")
def queues_page(
    request: Request, cursor: Annotated[str | None, Query(max_length=200)] = None
) -> Response:
    """Queue counts and dead letters."""
    return _render(request, "queues.html", **_queues_values(request, cursor))


@pages.post("/dead-letters/{letter_id}/requeue")
async def requeue_form(
    request: Request, letter_id: Annotated[str, Path(max_length=200)]
) -> Response:
    """Requeue one dead letter (form)."""
    dashboard, _ = await _acting_form(request)
    try:
        await run_in_threadpool(actions.requeue, dashboard.runtime.router, letter_id)
    except DashboardError as exc:
        return await _queues_problem(request, exc.status, f"requeue: {exc.message}")
    return _redirect(request, "/queues", notice="requeued")


@pages.post("/dead-letters/purge")
async def purge_form(request: Request) -> Response:
    """Purge every dead letter (form)."""
    dashboard, _ = await _acting_form(request)
    try:
        await run_in_threadpool(actions.purge, dashboard.runtime.router, None)
    except DashboardError as exc:
        return await _queues_problem(request, exc.status, f"purge: {exc.message}")
    return _redirect(request, "/queues", notice="purged")


# ---- session ----------------------------------------------------------------------------------


@pages.get("/login")
def login_page(request: Request) -> Response:
    """The token form."""
    return _render(request, "login.html", next=safe_next(request.query_params.get("next")))


def safe_next(value: str | None) -> str:
    """``value`` if it is a local path to return to after signing in, else ``/runs`` (never
    another site)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/runs"
    return value


@pages.post("/login")
async def login(request: Request) -> Response:
    """Trade the token for a session cookie (HttpOnly, SameSite=Strict); failures are
    throttled per client address (429 with ``Retry-After``)."""
    dashboard = state(request)
    form = await _form(request)
    session = dashboard.guard.open_session(form.get("token", ""),
                                           credentials(request).client)
    if session is None:
        problem = ("the dashboard is read-only" if not dashboard.guard.actions_enabled
                   else "that is not the token")
        return _render(request, "login.html", 401, next=safe_next(form.get("next")),
                       login_problem=problem)
    response = _redirect(request, safe_next(form.get("next")), notice="signed_in")
    response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path=base_path(request) or "/",
                        max_age=int(dashboard.guard.sessions.policy.max_age_seconds))
    return response


@pages.post("/logout")
async def logout(request: Request) -> Response:
    """End the session in the server (its cookie is refused from then on) and drop the
    cookie; a signed-in session must send its CSRF token.

    Raises:
        Forbidden: a signed-in session without its CSRF token (``bad_csrf``).
    """
    dashboard = state(request)
    form = await _form(request)
    session = request.cookies.get(SESSION_COOKIE)
    if dashboard.guard.signed_in(session):
        dashboard.guard.check(credentials(request, form.get(CSRF_FIELD, "")))
        dashboard.guard.end_session(session)
    response = _redirect(request, "/runs", notice="signed_out")
    response.delete_cookie(SESSION_COOKIE, path=base_path(request) or "/")
    return response
