"""The ``reactor`` command line: workers, sweeps, run listings and the contract suite.

One module per command group: :mod:`.worker` (``reactor worker``), :mod:`.sweep`
(``reactor sweep``), :mod:`.runs` (``reactor runs list|show``), :mod:`.contract`
(``reactor contract``); :mod:`._common` holds the app, consoles and shared options. Adapters
add command groups through the ``reactor.cli`` entry-point group (:func:`mount_plugins`).
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import typer

from reactor.cli import contract, dead_letters, runs, sweep, worker
from reactor.cli._common import app, console
from reactor.model.errors import ReactorError

__all__ = ["app", "contract", "dead_letters", "main", "mount_plugins", "runs", "sweep", "worker"]



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
