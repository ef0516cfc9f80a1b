"""``reactor dashboard``: serve the operator dashboard (docs/dashboard.md, "Running it").

The storage and router come from ``--storage``/``--router``, then the environment, like every
command. Actions need a token (``--token`` or ``REACTOR_DASHBOARD_TOKEN``); without one, or
with ``--read-only``, the dashboard only shows. It binds 127.0.0.1 unless ``--host`` says
otherwise. ``--import`` the modules that define your reactors: the step graph, the
coordination view and the actions need them registered. Needs the ``dashboard`` extra; without
it the command says so and exits 2.
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactor.cli._common import (
    EXIT_USAGE,
    ImportOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _import_modules,
    _runtime,
    app,
    err_console,
    fail,
    warn,
)
from reactor.errors import ConfigurationError

__all__ = ["dashboard"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command("dashboard")
def dashboard(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (default: this host only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8800,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="REACTOR_DASHBOARD_TOKEN",
                     help="Token that enables actions (else read-only)."),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Disable every action, even with a token.")
    ] = False,
    import_: ImportOpt = None,
    setting: SettingOpt = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level (default warning).")
    ] = "warning",
) -> None:
    """Serve the operator dashboard (web UI and JSON API) until interrupted."""
    try:
        from reactor.dashboard.security import Guard  # deferred: optional dependency (extra)
        from reactor.dashboard.server import serve  # deferred: optional dependency (extra)
    except ImportError as exc:
        fail(f"reactor dashboard needs the dashboard extra "
             f"(pip install 'reactor-saga[dashboard]'): {exc}", EXIT_USAGE)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        Guard.of(token, True if read_only else None)
    except ConfigurationError as exc:
        fail(f"configuration error: {exc}", EXIT_USAGE)
    if host not in _LOOPBACK:
        warn(f"binding {host}: anyone who reaches it can read every run (reads need no "
             "token); put it behind your own authentication")
    mode = "read-only" if read_only or not token else "actions enabled (token required)"
    err_console.print(
        f"reactor dashboard on http://{host}:{port} ({mode}); storage "
        f"{type(runtime.storage).__name__}, router {type(runtime.router).__name__}",
        markup=False, soft_wrap=True,
    )
    serve(runtime, host=host, port=port, token=token, read_only=True if read_only else None,
          log_level=log_level)
