"""``reactor dead-letters list|show|requeue|purge``: inspect and act on a router's dead letters
(docs/workers.md, "Dead letters")."""

from __future__ import annotations

import typer

from reactor.cli._common import app

__all__ = ["dead_letters_app"]

dead_letters_app = typer.Typer(
    help="Inspect, requeue and purge the router's dead letters.", no_args_is_help=True
)
app.add_typer(dead_letters_app, name="dead-letters")
