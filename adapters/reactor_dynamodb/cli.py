"""``reactor dynamodb ...``: a typer sub-app the ``reactor`` command mounts.

``reactor.cli.mount_plugins`` mounts it through the ``reactor.cli`` entry-point group (the
import is guarded because boto3 is the optional
``dynamodb`` extra)::

    app.add_typer(reactor_dynamodb.cli.app, name="dynamodb")

Commands:

* ``reactor dynamodb create-table URL [--no-wait]`` -- :func:`reactor_dynamodb.admin.create_table`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactor.errors import ConfigurationError, ReactorError
from reactor_dynamodb.admin import create_table

__all__ = ["app"]

app = typer.Typer(help="DynamoDB storage administration.", no_args_is_help=True)


@app.callback()
def dynamodb() -> None:
    """DynamoDB storage administration (keeps ``create-table`` a named subcommand)."""


@app.command("create-table")
def create_table_command(
    url: Annotated[
        str, typer.Argument(help="Storage URL: dynamodb://TABLE?region=...&endpoint_url=...")
    ],
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Block until the table is ACTIVE.")
    ] = True,
) -> None:
    """Create the table, its sparse GSI and the TTL setting (idempotent).

    Exits 0 when the table was created or already existed, 1 when a request failed, 2 for a
    malformed URL.
    """
    try:
        created = create_table(url, wait=wait)
    except ConfigurationError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except ReactorError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo("created" if created else "exists")
