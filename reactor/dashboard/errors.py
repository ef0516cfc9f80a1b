"""The dashboard's typed HTTP errors (docs/dashboard.md, "Errors").

Every error the dashboard answers with is one of these: an HTTP status, a stable machine code
and a one-line message. They become ``{"error": code, "message": ...}`` JSON bodies (and an
error page in the browser); nothing else about the server — no traceback, no exception class
of an unexpected failure — is ever sent. They are HTTP answers, never stored, so they are not
:class:`reactor.errors.ReactorError` subclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ActionFailed",
    "ActionRefused",
    "BackendUnavailable",
    "BadRequest",
    "DashboardError",
    "Forbidden",
    "NotFound",
    "PayloadTooLarge",
    "TooManyAttempts",
    "Unauthorized",
]


class DashboardError(Exception):
    """An error answered to a dashboard client (docs/dashboard.md, "Errors").

    Attributes:
        status: the HTTP status code.
        code: a stable machine-readable code (``"not_found"``, ``"bad_cursor"``...).
        message: one line for people; never a traceback.
        details: extra JSON-native fields for the body (e.g. a payload's field errors).
    """

    status = 500
    default_code = "internal"

    def __init__(
        self, message: str, *, code: str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details = dict(details or {})

    @property
    def headers(self) -> dict[str, str]:
        """Extra response headers (e.g. ``Retry-After``); none by default."""
        return {}

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": code, "message": message, **details}``."""
        return {"error": self.code, "message": self.message, **self.details}


class BadRequest(DashboardError):
    """400: a malformed id, cursor, filter or body, or a ``Host`` header this dashboard does
    not answer to (``bad_host``: docs/dashboard.md, "Security")."""

    status = 400
    default_code = "bad_request"


class Unauthorized(DashboardError):
    """401: an action without a valid bearer token or session (docs/dashboard.md,
    "Security")."""

    status = 401
    default_code = "unauthorized"


class Forbidden(DashboardError):
    """403: the dashboard is read-only, or a browser form came without its CSRF token."""

    status = 403
    default_code = "forbidden"


class NotFound(DashboardError):
    """404: no such run, step, map or dead letter."""

    status = 404
    default_code = "not_found"


class PayloadTooLarge(DashboardError):
    """413: a request body larger than the dashboard reads (refused by its
    ``Content-Length`` before it is read; a streamed one is cut off at the limit)."""

    status = 413
    default_code = "too_large"


class ActionRefused(DashboardError):
    """409: the action does not apply to the run as it is (e.g. retrying a completed run),
    or the dashboard process cannot perform it (the reactor is not imported)."""

    status = 409
    default_code = "action_refused"


class ActionFailed(DashboardError):
    """422: the action was tried and was refused by the engine for its input (an interrupt
    payload that does not match its schema)."""

    status = 422
    default_code = "action_failed"


class BackendUnavailable(DashboardError):
    """503: the storage or the router failed while answering."""

    status = 503
    default_code = "backend_unavailable"


class TooManyAttempts(DashboardError):
    """429: this client address failed to sign in (or sent a wrong bearer token) too often
    recently (docs/dashboard.md, "Security").

    Attributes:
        retry_after: whole seconds until the address may try again (the ``Retry-After``
            header and the body's ``retry_after``).
    """

    status = 429
    default_code = "too_many_attempts"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        """``Retry-After``: the seconds to wait."""
        return {"Retry-After": str(self.retry_after)}
