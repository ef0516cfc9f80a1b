"""The dashboard's ASGI app factory (docs/dashboard.md, "Running it", "Embedding").

:func:`create_app` builds a FastAPI app with the JSON API (:mod:`reactor.dashboard.api`), the
HTML pages (:mod:`reactor.dashboard.pages`) and the package's static files (htmx is vendored:
nothing is loaded from a CDN, the dashboard works offline). Mount it in your own ASGI app::

    from reactor.dashboard import create_app
    app.mount("/reactor", create_app(runtime=runtime, token=os.environ["DASHBOARD_TOKEN"]))

In front of every route (:class:`_Gate`): a ``Host`` header the dashboard does not answer to
is refused (400 ``bad_host``: DNS rebinding); a body larger than ``max_body_bytes`` is refused
by its ``Content-Length`` (413 ``too_large``) and a streamed (chunked) one is cut off there,
never read whole; and a request that acts (any method but GET, HEAD and OPTIONS, except the
sign-in and sign-out forms) must bring the token or an open session before one byte of its
body is read (docs/dashboard.md, "Security").

Every error is answered as ``{"error": code, "message": ...}`` (an error page for browser
pages): typed dashboard errors with their status, request validation errors as 422 naming the
fields (never echoing their values), unknown routes as 404, a storage or router failure as 503
``backend_unavailable``, and anything unexpected as a bare 500 ``internal`` error — the
exception is logged, never sent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactor.config import Runtime
from reactor.dashboard.api import api
from reactor.dashboard.errors import BadRequest, DashboardError, PayloadTooLarge, Unauthorized
from reactor.dashboard.pages import Shown, pages, safe_next, template_globals
from reactor.dashboard.security import Clock, Guard, SessionPolicy
from reactor.dashboard.security import allowed_hosts as _allowed_hosts
from reactor.dashboard.state import (
    STATE_KEY,
    TEMPLATES_DIR,
    DashboardState,
    base_path,
    credentials,
)
from reactor.errors import RouterError, StorageError
from reactor.model.text import printable

__all__ = ["MAX_BODY_BYTES", "STATIC_DIR", "create_app", "shown"]

log = logging.getLogger("reactor.dashboard")

#: The package's static files (``htmx.min.js``, ``dashboard.css``).
STATIC_DIR = Path(__file__).parent / "static"

#: The largest request body read, in bytes (an action's JSON, a form).
MAX_BODY_BYTES: Final = 1024 * 1024
#: Methods that only read: every other one acts and must authenticate first.
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
#: Forms that take no credentials up front: sign-in carries the token in its body, sign-out
#: checks its session and CSRF token itself.
_OPEN_FORMS: Final = frozenset({"/login", "/logout"})
_HOST_OK: Final = "reactor_dashboard_host_ok"

_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
               413: "too_large"}


def shown(value: Any) -> Any:
    """Every ``{{ value }}`` of the templates goes through this before HTML escaping: text is
    passed through :func:`reactor.model.text.printable`, the CLI's one rule, so a control
    character or a bidi override (U+202E) in a run id, a reactor name, a message or a value
    is shown as an escape (``\\u202e``) and can neither reorder nor hide what the page says
    (docs/dashboard.md, "Security"). Markup (a macro's output) and :class:`Shown` text
    (already escaped) pass unchanged."""
    if isinstance(value, str) and not isinstance(value, Markup | Shown):
        return printable(value)
    return value


def _wants_html(request: Request) -> bool:
    path = request.url.path[len(base_path(request)):]
    return not path.startswith("/api") and "text/html" in request.headers.get("accept", "")


def _error_response(request: Request, status: int, body: dict[str, Any]) -> Response:
    if _wants_html(request):
        dashboard: DashboardState = getattr(request.app.state, STATE_KEY)
        return dashboard.templates.TemplateResponse(
            request, "error.html", {"status": status, "error": body}, status_code=status,
        )
    return JSONResponse(body, status_code=status)


async def _dashboard_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DashboardError)
    response = _error_response(request, exc.status, exc.body())
    response.headers.update(exc.headers)
    return response


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = sorted({
        ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query",
                                                                             "path"))
        for error in exc.errors()
    })
    body = {"error": "invalid_request",
            "message": "the request is invalid: " + (", ".join(printable(f) for f in fields)
                                                      or "malformed"),
            "fields": fields}
    return _error_response(request, 422, body)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    body = {"error": code, "message": printable(str(exc.detail)) if exc.status_code != 404
            else "no such page or endpoint"}
    response = _error_response(request, exc.status_code, body)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _backend_error(request: Request, exc: Exception) -> Response:
    log.warning("event=dashboard_backend_error path=%s error=%s", printable(request.url.path),
                printable(f"{type(exc).__name__}: {exc}"))
    return _error_response(request, 503, {"error": "backend_unavailable",
                                          "message": f"the backend failed: {type(exc).__name__}"})


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("event=dashboard_error path=%s", printable(request.url.path))
    return _error_response(request, 500, {"error": "internal", "message": "internal error"})


def _refusal(request: Request, exc: DashboardError) -> Response:
    """The gate's answer: a browser form whose session is gone is sent to sign in again (back
    to the page it came from), anything else gets the error."""
    if isinstance(exc, Unauthorized) and exc.code == "unauthorized" and _wants_html(request):
        base = base_path(request)
        came_from = urlsplit(request.headers.get("referer", "")).path
        back = came_from[len(base):] if came_from.startswith(base + "/") else None
        query = urlencode({"next": safe_next(back), "problem": "session_ended"})
        return RedirectResponse(f"{base}/login?{query}", status_code=303)
    response = _error_response(request, exc.status, exc.body())
    response.headers.update(exc.headers)
    return response


class _Gate:
    """The checks in front of every route (see the module docstring): ``Host``, body size,
    authentication before the body."""

    def __init__(self, app: ASGIApp, *, hosts: Sequence[str], max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

        async def passed(scope: Scope, receive: Receive, send: Send) -> None:
            scope[_HOST_OK] = True

        self._hosts = TrustedHostMiddleware(passed, allowed_hosts=list(hosts),
                                            www_redirect=False)

    async def _host_allowed(self, scope: Scope) -> bool:
        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        async def discard(message: Message) -> None:
            return None

        probe = dict(scope)
        await self._hosts(probe, nothing, discard)
        return bool(probe.get(_HOST_OK))

    def _check(self, request: Request) -> None:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or len(length) > 18):
            raise BadRequest("the Content-Length header is not a number", code="bad_request")
        if length is not None and int(length) > self.max_body_bytes:
            raise PayloadTooLarge(f"the body is larger than {self.max_body_bytes} bytes")
        path = request.url.path[len(base_path(request)):]
        if request.method not in _SAFE_METHODS and path not in _OPEN_FORMS and any(
            route.matches(request.scope)[0] is Match.FULL for route in request.app.routes
        ):  # an action route: no route (404) or no such method (405) reads no body either
            dashboard: DashboardState = getattr(request.app.state, STATE_KEY)
            dashboard.guard.authenticate(credentials(request))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            if not await self._host_allowed(scope):
                raise BadRequest("this dashboard does not answer to that Host header "
                                 "(see --allowed-host)", code="bad_host")
            self._check(request)
        except DashboardError as exc:
            response = _refusal(request, exc)
            await response(scope, receive, send)
            return
        limit = self.max_body_bytes
        received = 0

        async def capped() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"the body is larger than {limit} bytes")
            return message

        await self.app(scope, capped, send)


def create_app(
    runtime: Runtime | None = None,
    *,
    token: str | None = None,
    read_only: bool | None = None,
    title: str = "reactor",
    allowed_hosts: Sequence[str] | None = None,
    sessions: SessionPolicy | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    clock: Clock | None = None,
) -> FastAPI:
    """Build the dashboard's ASGI app.

    Args:
        runtime: the runtime to show and act on; ``None`` reads
            :func:`reactor.config.current` on every request (the process's configured runtime,
            e.g. the embedded default in development).
        token: the token actions require (``Authorization: Bearer <token>``, or the login
            form for browsers); ``None``: no actions.
        read_only: ``None`` (default): read-only exactly when there is no token; ``True``
            disables actions even with a token.
        title: shown in the page header.
        allowed_hosts: the ``Host`` names answered (host names, IP addresses,
            ``*.example.com`` patterns, no port); any other is refused with 400 ``bad_host``
            (DNS rebinding). ``None`` (default): this host's loopback names only (``127.0.0.1``,
            ``localhost``, ``[::1]``); mounted behind a proxy, name what its clients use;
            ``["*"]`` turns the check off (not recommended). :func:`serve` adds the bound
            address itself.
        sessions: how long browser sessions live (default :class:`SessionPolicy`: 30 minutes
            idle, 12 hours at most).
        max_body_bytes: the largest request body read, in bytes (default 1 MiB); a larger
            one is refused with 413 before it is read.
        clock: the monotonic clock, in seconds, of sessions and the sign-in throttle
            (tests inject one).

    Returns:
        The app; ``/`` serves the runs page, ``/api`` the JSON API, ``/api/openapi.json``
        its schema.

    Raises:
        ConfigurationError: ``read_only=False`` without a token, a token shorter than 8
            characters, a session lifetime that is not positive, or an allowed host that is
            not a host name (docs/dashboard.md, "Security").
    """
    guard = Guard.of(token, read_only, sessions=sessions, clock=clock)
    hosts = _allowed_hosts(None, tuple(allowed_hosts)) if allowed_hosts is not None \
        else _allowed_hosts(None)
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    templates.env.globals.update(template_globals())
    templates.env.finalize = shown
    app = FastAPI(
        title=f"{title} dashboard",
        description="The reactor operator dashboard's JSON API (docs/dashboard.md).",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    setattr(app.state, STATE_KEY,
            DashboardState(fixed_runtime=runtime, guard=guard, templates=templates, title=title))
    app.add_exception_handler(DashboardError, _dashboard_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(StorageError, _backend_error)
    app.add_exception_handler(RouterError, _backend_error)
    app.add_exception_handler(Exception, _unexpected)
    app.include_router(api)
    app.include_router(pages)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    app.add_middleware(_Gate, hosts=hosts, max_body_bytes=max_body_bytes)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("Cache-Control", "no-store")
        if response.headers.get("content-type", "").startswith("text/html"):
            response.headers.setdefault(
                "Content-Security-Policy",
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                "frame-ancestors 'none'",
            )
        return response

    return app
