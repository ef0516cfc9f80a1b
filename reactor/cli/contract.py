"""``reactor contract``: run the shared contract suite against an adapter chosen by URL
(docs/contract-suite.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from reactor.cli._common import app, console

__all__ = ["contract"]


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
