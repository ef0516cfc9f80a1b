"""``reactor runs list`` and ``reactor runs show ID``: read stored runs."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.table import Table

from reactor.cli._common import StorageOpt, _runtime, app, console

__all__ = ["runs_app", "runs_list", "runs_show"]

runs_app = typer.Typer(help="Inspect stored runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


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
