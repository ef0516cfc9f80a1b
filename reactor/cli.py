"""The ``reactor`` command line: sweeps, run listings and the contract suite.

``reactor sweep`` runs the three sweepers once (or every N seconds), ``reactor runs list`` and
``reactor runs show ID`` read stored runs, and ``reactor contract`` runs the shared contract
suite against an adapter chosen by URL. Storage and router URLs default to the environment
(``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``) and then to ``memory://`` / ``local://``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from reactor import config
from reactor.jobs.sweepers import sweep_maps, sweep_runs, sweep_steps
from reactor.model.errors import ReactorError

__all__ = ["app", "main"]

app = typer.Typer(
    help="reactor: a saga orchestrator with pluggable backends.", no_args_is_help=True
)
runs_app = typer.Typer(help="Inspect stored runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
console = Console()

StorageOpt = Annotated[
    str | None, typer.Option("--storage", help="Storage URL (default: REACTOR_STORAGE_URL).")
]
RouterOpt = Annotated[
    str | None, typer.Option("--router", help="Router URL (default: REACTOR_ROUTER_URL).")
]


def _runtime(storage: str | None, router: str | None) -> config.Runtime:
    try:
        return config.configure(storage=storage, router=router)
    except ReactorError as exc:
        console.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command()
def sweep(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    every: Annotated[
        float | None, typer.Option(help="Repeat every SECONDS until interrupted.", min=0.1)
    ] = None,
    limit: Annotated[int, typer.Option(help="Records inspected per sweeper.", min=1)] = 1000,
) -> None:
    """Run the run, step and map sweepers once (or every SECONDS) and print their counts."""
    runtime = _runtime(storage, router)
    while True:
        runs = sweep_runs(runtime.storage, runtime.router, limit=limit)
        steps = sweep_steps(runtime.storage, runtime.router, limit=limit)
        maps = sweep_maps(runtime.storage, runtime.router, limit=limit)
        console.print(
            f"runs: inspected={runs.inspected} redispatched={runs.redispatched} "
            f"errors={runs.errors} | steps: inspected={steps.inspected} "
            f"redispatched={steps.redispatched} errors={steps.errors} | maps: "
            f"inspected={maps.inspected} redispatched={maps.redispatched} "
            f"recollected={maps.recollected} rollback_redispatched={maps.rollback_redispatched} "
            f"rollback_batches={maps.rollback_batches} errors={maps.errors}"
        )
        if every is None:
            return
        time.sleep(every)


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


def main() -> None:
    """Entry point of the ``reactor`` console script."""
    try:
        app()
    except ReactorError as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)
