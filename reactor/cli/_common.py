"""What every ``reactor`` command shares: the typer app, the consoles, the common options and
the helpers that build a runtime from them (docs/workers.md, "Running workers").

Storage and router URLs come from the command's options, then the environment
(``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``), then ``memory://`` / ``local://``.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from reactor import config
from reactor.model.errors import ReactorError

__all__ = [
    "ImportOpt",
    "RouterOpt",
    "SettingOpt",
    "StorageOpt",
    "app",
    "console",
    "err_console",
]

app = typer.Typer(
    help="reactor: a saga orchestrator with pluggable backends.", no_args_is_help=True
)
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
