"""The ``reactor`` command line: workers, sweeps, run listings and the contract suite.

``reactor worker`` consumes the configured router and runs jobs (:mod:`reactor.jobs.worker`),
``reactor sweep`` runs the three sweepers once (or every N seconds), ``reactor runs list`` and
``reactor runs show ID`` read stored runs, and ``reactor contract`` runs the shared contract
suite against an adapter chosen by URL. Storage and router URLs default to the environment
(``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``) and then to ``memory://`` / ``local://``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import threading
import time
from importlib.metadata import entry_points
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from reactor import config
from reactor.jobs.sweep_tick import run_sweeps
from reactor.model.errors import ReactorError

__all__ = ["app", "main"]

app = typer.Typer(
    help="reactor: a saga orchestrator with pluggable backends.", no_args_is_help=True
)
runs_app = typer.Typer(help="Inspect stored runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
console = Console()
err_console = Console(stderr=True)

StorageOpt = Annotated[
    str | None, typer.Option("--storage", help="Storage URL (default: REACTOR_STORAGE_URL).")
]
RouterOpt = Annotated[
    str | None, typer.Option("--router", help="Router URL (default: REACTOR_ROUTER_URL).")
]
SettingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--setting", "-s",
        help="An engine setting as KEY=VALUE (e.g. context_lock_ttl=2); repeatable.",
    ),
]


def _settings(pairs: list[str] | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            console.print(f"[red]bad --setting {pair!r}:[/red] expected KEY=VALUE")
            raise typer.Exit(2)
        values[key.strip()] = None if value.strip().lower() in ("none", "null") else value
    return values


def _warn_without_storage(storage: str | None) -> None:
    """Warn on stderr when neither ``--storage`` nor ``REACTOR_STORAGE_URL`` names a storage."""
    if storage is None and not os.environ.get("REACTOR_STORAGE_URL"):
        err_console.print(
            "[yellow]warning:[/yellow] no --storage and no REACTOR_STORAGE_URL: using a fresh, "
            "empty in-process memory:// store (pass --storage URL or set REACTOR_STORAGE_URL)",
            soft_wrap=True,
        )


def _refuse_router_without_storage(storage: str | None, router: str | None) -> None:
    """Exit 2 with one error line when a router is named (``--router`` or
    ``REACTOR_ROUTER_URL``) but no storage is (``--storage`` or ``REACTOR_STORAGE_URL``).

    A worker on a real queue with a fresh in-process store would receive jobs and find none of
    their runs: every job would be consumed and dropped (docs/workers.md, "Running workers").

    Raises:
        typer.Exit: code 2, when the router is named and the storage is not.
    """
    has_storage = bool(storage) or bool(os.environ.get("REACTOR_STORAGE_URL"))
    named_router = router or os.environ.get("REACTOR_ROUTER_URL")
    if named_router and not has_storage:
        err_console.print(
            f"[red]error:[/red] a router is configured ({named_router.partition(':')[0]}://...) "
            "but no storage: pass --storage URL or set REACTOR_STORAGE_URL (a worker on the "
            "in-process memory:// store would consume and drop every job)",
            soft_wrap=True,
        )
        raise typer.Exit(2)


def _runtime(
    storage: str | None, router: str | None, settings: list[str] | None = None
) -> config.Runtime:
    _warn_without_storage(storage)
    try:
        return config.configure(storage=storage, router=router, **_settings(settings))
    except ReactorError as exc:
        console.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc


#: ``--import MODULE`` (repeatable): modules to import so their reactors register.
ImportOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--import",
        help="A module to import so its reactors register (repeatable), e.g. myapp.reactors.",
    ),
]


def _import_modules(names: list[str]) -> None:
    """Import the ``--import`` modules with the current directory first on ``sys.path`` (like
    ``python -m``); a module that cannot be imported is one error line and exit code 2."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    for name in names:
        try:
            importlib.import_module(name)  # safe: operator-supplied on the command line
        except Exception as exc:  # ImportError or an error raised while importing it
            err_console.print(
                f"[red]error:[/red] cannot import --import {name!r}: "
                f"{type(exc).__name__}: {exc}",
                soft_wrap=True,
            )
            raise typer.Exit(2) from exc


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
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Consume the router and run jobs until SIGTERM/SIGINT, then finish in-flight jobs."""
    from reactor.jobs.worker import Worker

    _refuse_router_without_storage(storage, router)
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
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


@runs_app.command("list")
def runs_list(
    storage: StorageOpt = None,
    limit: Annotated[int, typer.Option(help="Rows to show.", min=1, max=500)] = 50,
    cursor: Annotated[str | None, typer.Option(help="Cursor of the next page.")] = None,
) -> None:
    """List stored top-level runs, one page at a time."""
    runtime = _runtime(storage, None)
    try:
        page = runtime.storage.contexts.page(cursor=cursor, limit=limit)
    except ValueError as exc:
        console.print(f"[red]bad cursor:[/red] {exc}")
        raise typer.Exit(2) from exc
    table = Table("run id", "reactor", "status", "updated")
    for row in page.runs:
        table.add_row(
            row.context_id,
            row.reactor,
            row.status,
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.updated_at)),
        )
    console.print(table)
    if page.next_cursor:
        console.print(f"next page: --cursor {page.next_cursor}")


@runs_app.command("show")
def runs_show(run_id: str, storage: StorageOpt = None) -> None:
    """Print one stored run's record and document as JSON."""
    runtime = _runtime(storage, None)
    record = runtime.storage.contexts.load(run_id)
    if record is None:
        console.print(f"[red]no run {run_id!r}[/red]")
        raise typer.Exit(1)
    console.print_json(
        json.dumps(
            {
                "context_id": record.context_id,
                "reactor": record.reactor,
                "status": record.status,
                "document": json.loads(record.document),
            }
        )
    )


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def contract(
    ctx: typer.Context,
    storage: Annotated[str, typer.Option("--storage", help="Storage URL under test.")],
    router: Annotated[
        str, typer.Option("--router", help="Router URL under test.")
    ] = "local://?visibility_timeout=1",
) -> None:
    """Run the shared contract suite against an adapter; extra arguments go to pytest."""
    try:
        from reactor_contract.cli import run
    except ImportError as exc:  # the contract package ships with reactor; be explicit anyway
        console.print(f"[red]the contract suite is not installed:[/red] {exc}")
        raise typer.Exit(2) from exc
    raise typer.Exit(run(storage, router, list(ctx.args)))


_MOUNTED: set[str] = set()


def mount_plugins(group: str = "reactor.cli") -> list[str]:
    """Mount the typer sub-apps adapters publish under the ``reactor.cli`` entry-point group.

    An adapter adds commands (e.g. ``reactor dynamodb create-table``) the way it adds storages:
    ``[project.entry-points."reactor.cli"] dynamodb = "reactor_dynamodb.cli:app"``. A plugin
    whose optional dependency is missing is skipped (its commands are simply absent).

    Returns:
        The names of the mounted sub-apps.
    """
    mounted = []
    for entry in entry_points(group=group):
        if entry.name in _MOUNTED:
            mounted.append(entry.name)
            continue
        try:
            sub_app = entry.load()
        except ImportError:
            continue
        if isinstance(sub_app, typer.Typer):
            app.add_typer(sub_app, name=entry.name)
            _MOUNTED.add(entry.name)
            mounted.append(entry.name)
    return mounted


def main() -> None:
    """Entry point of the ``reactor`` console script."""
    mount_plugins()
    try:
        app()
    except ReactorError as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)


if __name__ == "__main__":  # ``python -m reactor.cli worker ...``
    main()
