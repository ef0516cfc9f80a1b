"""``reactor sweep``: run the run, step and map sweepers once or every N seconds
(docs/workers.md, "Sweepers")."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from reactor.cli._common import (
    ImportOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
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
) -> None:
    """Run the run, step and map sweepers once and print their counts.

    With --every SECONDS, repeat until SIGTERM/SIGINT. Pass --import for the modules that
    register your reactors (as for the worker): resuming some lost units — a fan-out map whose
    next batch was never dispatched — runs reactor code in this process.
    """
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
             f"errors={runs.errors}" if runs else "runs: FAILED (see log)")
            + (f" | steps: inspected={steps.inspected} redispatched={steps.redispatched} "
               f"errors={steps.errors}" if steps else " | steps: FAILED (see log)")
            + (f" | maps: inspected={maps.inspected} redispatched={maps.redispatched} "
               f"recollected={maps.recollected} "
               f"rollback_redispatched={maps.rollback_redispatched} "
               f"rollback_batches={maps.rollback_batches} errors={maps.errors}"
               if maps else " | maps: FAILED (see log)")
        )
        if every is None or stop.wait(every):
            return
