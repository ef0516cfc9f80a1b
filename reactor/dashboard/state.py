"""What every route of one dashboard app shares: its runtime, its guard and its templates
(docs/dashboard.md, "Embedding").

One :class:`DashboardState` is stored on the app (``app.state.reactor_dashboard``) by
:func:`reactor.dashboard.create_app`; the routes find it through the request, so two
dashboards mounted in one process (on two runtimes) never share anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fastapi import Request
from fastapi.templating import Jinja2Templates

from reactor import config
from reactor.config import Runtime
from reactor.dashboard.security import CSRF_HEADER, SESSION_COOKIE, Credentials, Guard

__all__ = ["STATE_KEY", "TEMPLATES_DIR", "DashboardState", "base_path", "credentials", "state"]

#: The ``app.state`` attribute holding the :class:`DashboardState`.
STATE_KEY: Final = "reactor_dashboard"
#: The package's templates.
TEMPLATES_DIR: Final = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class DashboardState:
    """One dashboard's shared objects.

    Attributes:
        fixed_runtime: the runtime given to ``create_app``, or ``None`` to read
            :func:`reactor.config.current` on every request (follows a reconfiguration).
        guard: who may act (:class:`~reactor.dashboard.security.Guard`).
        templates: the Jinja2 environment of the HTML pages.
        title: the page title.
    """

    fixed_runtime: Runtime | None
    guard: Guard
    templates: Jinja2Templates
    title: str

    @property
    def runtime(self) -> Runtime:
        """The runtime to read and act on now."""
        return self.fixed_runtime if self.fixed_runtime is not None else config.current()


def state(request: Request) -> DashboardState:
    """The :class:`DashboardState` of the app serving ``request``."""
    found: Any = getattr(request.app.state, STATE_KEY)
    assert isinstance(found, DashboardState)
    return found


def base_path(request: Request) -> str:
    """The path the dashboard is mounted at (``""`` at the root), for links and cookies."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def credentials(request: Request, csrf: str | None = None) -> Credentials:
    """What ``request`` brings to act: bearer header, session cookie, CSRF token (the form's
    field ``csrf``, else the ``X-CSRF-Token`` header), and the client address failed attempts
    are counted against."""
    return Credentials(
        authorization=request.headers.get("authorization"),
        session=request.cookies.get(SESSION_COOKIE),
        csrf=csrf if csrf is not None else request.headers.get(CSRF_HEADER),
        client=request.client.host if request.client is not None else None,
    )
