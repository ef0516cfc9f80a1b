"""The ``reactor`` command line: workers, sweeps, run listings and the contract suite.

One module per command group: :mod:`.worker` (``reactor worker``), :mod:`.sweep`
(``reactor sweep``), :mod:`.runs` (``reactor runs list|show``), :mod:`.contract`
(``reactor contract``), :mod:`.info` (``reactor info``), :mod:`.ping` (``reactor ping``),
:mod:`.migrate` (``reactor migrate``), :mod:`.deploys` (``reactor runs versions|migrate|
resume-version``, docs/deploys.md),
:mod:`.dashboard` (``reactor dashboard``, docs/dashboard.md), :mod:`.schedules`
(``reactor schedules``, docs/schedules.md);
:mod:`._common` holds the app, consoles, shared options and the output conventions (errors on
stderr; exit 0 ok, 1 failure, 2 usage or configuration). ``reactor --version`` prints the
installed ``reactor-saga`` version. Adapters add command groups through the ``reactor.cli``
entry-point group (:func:`mount_plugins`). See docs/workers.md, "Running workers".
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from typing import Annotated, NoReturn

import typer

from reactor.cli import (
    contract,
    dashboard,
    dead_letters,
    deploys,
    info,
    migrate,
    ping,
    runs,
    schedules,
    sweep,
    worker,
)
from reactor.cli._common import (
    DISTRIBUTION,
    EXIT_FAILURE,
    EXIT_USAGE,
    app,
    err_console,
    package_version,
)
from reactor.errors import ConfigurationError, ReactorError

try:  # typer >= 0.2x runs on its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer, on click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

__all__ = [
    "DISTRIBUTION",
    "app",
    "contract",
    "dashboard",
    "dead_letters",
    "deploys",
    "info",
    "main",
    "migrate",
    "mount_plugins",
    "package_version",
    "ping",
    "runs",
    "schedules",
    "sweep",
    "worker",
]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"reactor {package_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True,
            help="Print the installed reactor-saga version and exit.",
        ),
    ] = False,
) -> None:
    """reactor: a saga orchestrator with pluggable backends."""


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


def _usage_error(exc: click_exceptions.ClickException) -> NoReturn:
    """Print a click/typer usage error as one ``error:`` line on stderr and exit with its code
    (2 for a usage error), instead of click's usage block and typer's framed box
    (docs/workers.md, "Running workers": one line per error). Running a command group with no
    arguments still prints its help."""
    if isinstance(exc, click_exceptions.NoArgsIsHelpError):
        exc.show()
        sys.exit(exc.exit_code)
    message = " ".join(exc.format_message().split())
    ctx = exc.ctx if isinstance(exc, click_exceptions.UsageError) else None
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    err_console.print(f"error: {message}{hint}", markup=False, soft_wrap=True)
    sys.exit(exc.exit_code)


def main() -> None:
    """Entry point of the ``reactor`` console script.

    A usage error (an unknown command or option, a bad option value) is one line on stderr,
    exit 2. A :class:`~reactor.errors.ReactorError` no command handled is one line on
    stderr: exit 2 for a :class:`~reactor.errors.ConfigurationError`, else 1.
    """
    mount_plugins()
    try:
        code = app(standalone_mode=False)
    except click_exceptions.ClickException as exc:
        _usage_error(exc)
    except typer.Abort:
        err_console.print("error: aborted", markup=False)
        sys.exit(EXIT_FAILURE)
    except ReactorError as exc:
        err_console.print(f"error: {type(exc).__name__}: {exc}", markup=False, soft_wrap=True)
        sys.exit(EXIT_USAGE if isinstance(exc, ConfigurationError) else EXIT_FAILURE)
    sys.exit(code if isinstance(code, int) else 0)
