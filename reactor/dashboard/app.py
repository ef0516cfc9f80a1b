"""The dashboard's ASGI app factory (docs/dashboard.md, "Running it", "Embedding").

:func:`create_app` builds a FastAPI app with the JSON API (:mod:`reactor.dashboard.api`), the
HTML pages (:mod:`reactor.dashboard.pages`) and the package's static files (htmx is vendored:
nothing is loaded from a CDN, the dashboard works offline). Mount it in your own ASGI app::

    from reactor.dashboard import create_app
    app.mount("/reactor", create_app(runtime=runtime, token=os.environ["DASHBOARD_TOKEN"]))

Every error is answered as ``{"error": code, "message": ...}`` (an error page for browser
pages): typed dashboard errors with their status, request validation errors as 422 naming the
fields (never echoing their values), unknown routes as 404, a storage or router failure as 503
``backend_unavailable``, and anything unexpected as a bare 500 ``internal`` error — the
exception is logged, never sent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException

from reactor.config import Runtime
from reactor.dashboard.api import api
from reactor.dashboard.errors import DashboardError
from reactor.dashboard.pages import pages, template_globals
from reactor.dashboard.security import Guard
from reactor.dashboard.state import STATE_KEY, TEMPLATES_DIR, DashboardState, base_path
from reactor.errors import RouterError, StorageError
from reactor.model.text import printable

__all__ = ["STATIC_DIR", "create_app"]

log = logging.getLogger("reactor.dashboard")

#: The package's static files (``htmx.min.js``, ``dashboard.css``).
STATIC_DIR = Path(__file__).parent / "static"

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


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
    return _error_response(request, exc.status, exc.body())


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
    body = {"error": code, "message": str(exc.detail) if exc.status_code != 404
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


def create_app(
    runtime: Runtime | None = None,
    *,
    token: str | None = None,
    read_only: bool | None = None,
    title: str = "reactor",
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

    Returns:
        The app; ``/`` serves the runs page, ``/api`` the JSON API, ``/api/openapi.json``
        its schema.

    Raises:
        ConfigurationError: ``read_only=False`` without a token, or a token shorter than 8
            characters (docs/dashboard.md, "Security").
    """
    guard = Guard.of(token, read_only)
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    templates.env.globals.update(template_globals())
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
