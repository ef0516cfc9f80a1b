"""``reactor worker``: consume the configured router and run jobs (docs/workers.md, "Running
workers").

Exit codes: 0 after a clean drain, 1 when jobs were still running at ``--drain-timeout``, 2 for
a usage or configuration error (one line on stderr). The worker logs one line per run outcome
(``event=run_finished``, :mod:`reactor.jobs.handlers.run`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactor import config
from reactor.cli._common import (
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
)
from reactor.jobs.worker import Worker

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
    setting: SettingOpt = None,
    drain_timeout: Annotated[
        float, typer.Option(help="Seconds to finish in-flight jobs after SIGTERM.", min=0)
    ] = 30.0,
    max_deliveries: Annotated[
        int, typer.Option(help="Deliveries of a failing job before it is dead-lettered.", min=1)
    ] = 5,
    log_level: LogLevelOpt = "INFO",
) -> None:
    """Consume the router and run jobs until SIGTERM/SIGINT, then finish in-flight jobs."""

    _refuse_router_without_storage(storage, router)
    _configure_logging(log_level)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    runner = Worker(
        runtime, threads=threads, import_modules=import_ or [], sweep=sweep,
        drain_timeout=drain_timeout, max_deliveries=max_deliveries,
    )
    try:
        code = runner.serve()
    finally:
        config.reset()
    raise typer.Exit(code)
