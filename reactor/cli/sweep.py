"""``reactor sweep``: run the run, step and map sweepers once or every N seconds
(docs/workers.md, "Running workers").

Counts go to stdout. A one-shot sweep in which a sweeper failed exits 1 with one stderr line
per failed sweeper (``event=sweeper_failed``: the exception's type and message; the traceback
only with ``--log-level DEBUG``); with ``--every`` the loop goes on (the failure is logged each
tick).
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from reactor.cli._common import (
    EXIT_FAILURE,
    ImportOpt,
    QuietLogLevelOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _configure_logging,
    _import_modules,
    _runtime,
    app,
    console,
)
from reactor.jobs.sweep_tick import run_sweeps

__all__ = ["sweep"]


@app.command()
def sweep(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    every: Annotated[
        float | None, typer.Option(help="Repeat every SECONDS until interrupted.", min=0.1)
    ] = None,
    limit: Annotated[int, typer.Option(help="Records inspected per sweeper.", min=1)] = 1000,
    setting: SettingOpt = None,
    import_: ImportOpt = None,
    log_level: QuietLogLevelOpt = "WARNING",
) -> None:
    """Run the run, step and map sweepers once and print their counts.

    With --every SECONDS, repeat until SIGTERM/SIGINT. Pass --import for the modules that
    register your reactors (as for the worker): resuming some lost units — a fan-out map whose
    next batch was never dispatched — runs reactor code in this process.
    """
    _configure_logging(log_level)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    stop = threading.Event()
    if every is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    while True:
        counts = run_sweeps(runtime, limit=limit)
        runs, steps, maps = counts.runs, counts.steps, counts.maps
        console.print(
            (f"runs: inspected={runs.inspected} redispatched={runs.redispatched} "
             f"waiting={runs.waiting} errors={runs.errors}" if runs else "runs: FAILED (see log)")
            + (f" | steps: inspected={steps.inspected} redispatched={steps.redispatched} "
               f"errors={steps.errors}" if steps else " | steps: FAILED (see log)")
            + (f" | maps: inspected={maps.inspected} redispatched={maps.redispatched} "
               f"recollected={maps.recollected} "
               f"rollback_redispatched={maps.rollback_redispatched} "
               f"rollback_batches={maps.rollback_batches} errors={maps.errors}"
               if maps else " | maps: FAILED (see log)")
        )
        if every is None:
            failed = [name for name, c in (("runs", runs), ("steps", steps), ("maps", maps))
                      if c is None]
            if failed:  # each failed sweeper already logged its one line
                raise typer.Exit(EXIT_FAILURE)
            return
        if stop.wait(every):
            return
