"""``reactor worker``: consume the configured router and run jobs (docs/workers.md, "Running
workers").

Exit codes: 0 after a clean drain, 1 when jobs were still running at ``--drain-timeout``, 2 for
a usage or configuration error (one line on stderr). The worker logs one line per run outcome
(``event=run_finished``, :mod:`reactor.jobs.handlers.run`); ``--log-format json`` makes every
record a JSON line with the run id, step and trace ids (docs/observability.md, "Structured
logs").
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactor import config
from reactor.cli._common import (
    EXIT_USAGE,
    ImportOpt,
    LogLevelOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _configure_logging,
    _import_modules,
    _refuse_router_without_storage,
    _runtime,
    app,
    fail,
)
from reactor.errors import ConfigurationError
from reactor.jobs.worker import Worker
from reactor.observability.logging import configure_json_logs

__all__ = ["worker"]


@app.command()
def worker(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    threads: Annotated[int, typer.Option(help="Handler threads.", min=1)] = 1,
    import_: ImportOpt = None,
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Also run the sweep chain (one tick per interval).")
    ] = False,
    schedules: Annotated[
        bool,
        typer.Option(
            "--schedules",
            help="Also run a scheduler: the schedules the --import modules register and the "
            "stored ones (docs/schedules.md, \"Running schedulers\").",
        ),
    ] = False,
    setting: SettingOpt = None,
    drain_timeout: Annotated[
        float, typer.Option(help="Seconds to finish in-flight jobs after SIGTERM.", min=0)
    ] = 30.0,
    max_deliveries: Annotated[
        int, typer.Option(help="Deliveries of a failing job before it is dead-lettered.", min=1)
    ] = 5,
    async_slots: Annotated[
        int,
        typer.Option(
            "--async-slots",
            help="Async units in flight at once, each suspended while its async def body "
            "awaits instead of holding a thread; 0 (default): one thread per job "
            "(docs/workers.md, \"Async slots\"). Needs the async-slots extra.",
            min=0,
        ),
    ] = 0,
    log_level: LogLevelOpt = "INFO",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            help="text (default: one line per record) or json (one JSON object per line, with "
            "the run id, step and trace ids; docs/observability.md).",
        ),
    ] = "text",
) -> None:
    """Consume the router and run jobs until SIGTERM/SIGINT, then finish in-flight jobs."""

    _refuse_router_without_storage(storage, router)
    if log_format == "json":
        try:
            configure_json_logs(log_level)
        except ConfigurationError as exc:
            fail(f"bad --log-level {log_level!r}: {exc}", EXIT_USAGE)
    elif log_format == "text":
        _configure_logging(log_level)
    else:
        fail(f"bad --log-format {log_format!r}: expected text or json", EXIT_USAGE)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        runner = Worker(
            runtime, threads=threads, import_modules=import_ or [], sweep=sweep,
            drain_timeout=drain_timeout, max_deliveries=max_deliveries,
            async_slots=async_slots, schedules=schedules,
        )
    except ConfigurationError as exc:
        config.reset()
        fail(str(exc), EXIT_USAGE)
    try:
        code = runner.serve()
    finally:
        config.reset()
    raise typer.Exit(code)
