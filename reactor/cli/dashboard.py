"""``reactor dashboard``: serve the operator dashboard (docs/dashboard.md, "Running it").

The storage and router come from ``--storage``/``--router``, then the environment, like every
command. Actions need a token: ``--token-file PATH`` or the ``REACTOR_DASHBOARD_TOKEN``
environment variable (``--token`` still works but puts the token where ``ps`` shows it: it is
warned about); without one, or with ``--read-only``, the dashboard only shows. It binds
127.0.0.1 unless ``--host`` says otherwise and answers only to that address's names plus each
``--allowed-host``. ``--import`` the modules that define your reactors: the step graph, the
coordination view and the actions need them registered. Needs the ``dashboard`` extra; without
it the command says so and exits 2.
"""

from __future__ import annotations

from pathlib import Path
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

__all__ = ["TOKEN_ENV", "dashboard", "read_token_file"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: The environment variable holding the action token.
TOKEN_ENV = "REACTOR_DASHBOARD_TOKEN"


def read_token_file(path: Path) -> str:
    """The token stored in ``path``: its text without the surrounding whitespace (a trailing
    newline is usual).

    Raises:
        ConfigurationError: the file cannot be read, is not UTF-8, or is empty (the message
            names the path, never the content).
    """
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"--token-file {path}: cannot read it ({type(exc).__name__})") from None
    if not token:
        raise ConfigurationError(f"--token-file {path}: the file is empty")
    return token


@app.command("dashboard")
def dashboard(
    ctx: typer.Context,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (default: this host only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8800,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File holding the token that enables actions "
                     f"(or set {TOKEN_ENV}); else read-only."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar=TOKEN_ENV,
                     help=f"The token itself (discouraged on the command line: ps shows it; "
                     f"use --token-file or {TOKEN_ENV})."),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Disable every action, even with a token.")
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option("--allowed-host", help="Another Host name clients use (repeatable); "
                     "others are refused with 400."),
    ] = None,
    session_idle: Annotated[
        float, typer.Option("--session-idle", min=1,
                            help="Seconds a browser session may stay unused (default 1800).")
    ] = 1800.0,
    session_max_age: Annotated[
        float, typer.Option("--session-max-age", min=1,
                            help="Seconds a browser session lasts at most (default 43200).")
    ] = 43200.0,
    import_: ImportOpt = None,
    setting: SettingOpt = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level (default warning).")
    ] = "warning",
) -> None:
    """Serve the operator dashboard (web UI and JSON API) until interrupted."""
    try:
        from reactor.dashboard import server as server_module  # deferred: optional extra
        from reactor.dashboard.security import (  # deferred: optional extra
            Guard,
            SessionPolicy,
            allowed_hosts,
        )
    except ImportError as exc:
        fail(f"reactor dashboard needs the dashboard extra "
             f"(pip install 'reactor-saga[dashboard]'): {exc}", EXIT_USAGE)
    source = ctx.get_parameter_source("token")
    from_argv = getattr(source, "name", None) == "COMMANDLINE"
    try:
        if token_file is not None:
            if from_argv:
                raise ConfigurationError("give --token-file or --token, not both")
            token = read_token_file(token_file)
        Guard.of(token, True if read_only else None)
        hosts = tuple(allowed_host or ())
        allowed_hosts(host, hosts)
        sessions = SessionPolicy(idle_seconds=session_idle, max_age_seconds=session_max_age)
    except ConfigurationError as exc:
        fail(f"configuration error: {exc}", EXIT_USAGE)
    if from_argv and token:
        warn(f"--token on the command line is visible to every user of this host (ps); use "
             f"--token-file PATH or {TOKEN_ENV} instead")
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    if host not in _LOOPBACK:
        warn(f"binding {host}: anyone who reaches it can read every run (reads need no "
             "token); put it behind your own authentication")
    if host in ("0.0.0.0", "::") and not hosts:
        warn(f"binding {host}: only requests for this host's loopback names are answered; "
             "add --allowed-host for each name or address clients use")
    mode = "read-only" if read_only or not token else "actions enabled (token required)"
    err_console.print(
        f"reactor dashboard on http://{host}:{port} ({mode}); storage "
        f"{type(runtime.storage).__name__}, router {type(runtime.router).__name__}",
        markup=False, soft_wrap=True,
    )
    server_module.serve(runtime, host=host, port=port, token=token,
                        read_only=True if read_only else None, log_level=log_level,
                        hosts=hosts, sessions=sessions)
