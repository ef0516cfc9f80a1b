"""The operator dashboard: a web UI and a JSON API over any reactor backend
(docs/dashboard.md).

Needs the ``dashboard`` extra (``pip install 'reactor-saga[dashboard]'``: FastAPI, uvicorn,
Jinja2). One concept per module:

* :mod:`.app` — :func:`create_app`, the ASGI app (mount it in your own app);
* :mod:`.server` — :func:`serve` (``reactor dashboard``) and :func:`start_dashboard` (a
  background thread of this process, for the embedded default);
* :mod:`.api` — the JSON routes under ``/api``; :mod:`.schemas` their shapes;
* :mod:`.pages` and ``templates/`` — the HTML pages (htmx vendored in ``static/``);
* :mod:`.listing`, :mod:`.run_detail`, :mod:`.graph`, :mod:`.async_units`, :mod:`.maps`,
  :mod:`.coordination_view`, :mod:`.queues` — what is shown, from the masked stored runs
  (:mod:`.stored`, :mod:`.values`); :mod:`.schedules` — the schedules, from
  :func:`reactor.schedules.list_schedules`;
* :mod:`.actions` — retry, undo, cancel, resume, requeue, purge, a schedule's pause and
  resume;
* :mod:`.security` — the token, the sessions and their CSRF tokens, the throttle on failed
  tokens, the ``Host`` names answered; :mod:`.errors` — the typed HTTP errors.
"""

from __future__ import annotations

from reactor.dashboard.app import create_app
from reactor.dashboard.errors import DashboardError
from reactor.dashboard.server import DashboardServer, serve, start_dashboard

__all__ = ["DashboardError", "DashboardServer", "create_app", "serve", "start_dashboard"]
