"""What every ``reactor`` command shares: the typer app, the consoles, the common options and
the helpers that build a runtime from them (docs/workers.md, "Running workers").

Storage and router URLs come from the command's options, then the environment
(``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``), then ``memory://`` / ``local://``; settings
from ``--setting``, then ``REACTOR_<SETTING>``, then the default (:mod:`reactor.config`).

Conventions every command follows: results on stdout; errors and warnings on stderr, one line
each (:func:`fail`, :func:`warn`); exit code 0 ok, 1 failure (:data:`EXIT_FAILURE`: a backend
failed or is unreachable, a record is missing), 2 usage or configuration (:data:`EXIT_USAGE`: a
bad option, URL or setting).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from reactor import config
from reactor.errors import ConfigurationError, ReactorError
from reactor.ports.urls import redact_url

__all__ = [
    "DISTRIBUTION",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "IMPORT_HINT",
    "ImportOpt",
    "LogLevelOpt",
    "QuietLogLevelOpt",
    "RouterOpt",
    "SettingOpt",
    "StorageOpt",
    "app",
    "console",
    "display_url",
    "err_console",
    "fail",
    "package_version",
    "warn",
]

#: The distribution (``pip install`` name) that ships reactor.
DISTRIBUTION = "reactor-saga"

#: Exit code of a command that did what it was asked.
EXIT_OK = 0
#: Exit code of a command that failed: a backend error or an unreachable backend, a missing run.
EXIT_FAILURE = 1
#: Exit code of a usage or configuration error: a bad option, URL or setting.
EXIT_USAGE = 2

app = typer.Typer(
    help="reactor: a saga orchestrator with pluggable backends.", no_args_is_help=True
)
console = Console()
err_console = Console(stderr=True)

StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage", help="Storage URL (wins over REACTOR_STORAGE_URL; default memory://)."
    ),
]
RouterOpt = Annotated[
    str | None,
    typer.Option("--router", help="Router URL (wins over REACTOR_ROUTER_URL; default local://)."),
]
SettingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--setting", "-s",
        help="An engine setting as KEY=VALUE (e.g. context_lock_ttl=2); repeatable.",
    ),
]


def package_version() -> str:
    """The installed version of the ``reactor-saga`` distribution (``reactor --version``).

    Returns:
        e.g. ``"0.1.0"``; ``"unknown"`` when the package runs without being installed.
    """
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print ``error: <message>`` as one line on stderr and end the command with ``code``.

    Args:
        message: plain text (never read as rich markup, so ``reactor-saga[redis]`` stays).
        code: :data:`EXIT_FAILURE` (default) or :data:`EXIT_USAGE`.

    Raises:
        typer.Exit: always, with ``code``.
    """
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: <message>`` as one line on stderr (plain text, never markup)."""
    err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", soft_wrap=True)


def display_url(url: str) -> str:
    """``url`` with its credentials hidden, for output and logs: the one redaction every
    adapter's URL error uses too, :func:`reactor.ports.urls.redact_url`.

    Args:
        url: a backend URL, e.g. ``redis://user:pw@host:6379/0``.

    Returns:
        e.g. ``redis://user:***@host:6379/0``.
    """
    return redact_url(url)


def _settings(pairs: list[str] | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"bad --setting {pair!r}: expected KEY=VALUE", EXIT_USAGE)
        values[key.strip()] = None if value.strip().lower() in ("none", "null") else value
    return values


def _adapter_settings(pairs: list[str] | None) -> dict[str, Any]:
    """The engine settings for a command that builds its backends one by one (``ping``,
    ``dead-letters``) instead of through :func:`_runtime`: ``--setting`` pairs, then
    ``REACTOR_<SETTING>``, validated as :func:`reactor.config.configure` validates them.

    Returns:
        Every setting, as the keyword arguments of :func:`reactor.config.storage_from_url` /
        :func:`reactor.config.router_from_url`.

    Raises:
        typer.Exit: 2 on a bad setting (from the flag or the environment); one stderr line.
    """
    try:
        parsed = config.resolve_settings(_settings(pairs))
    except ConfigurationError as exc:
        fail(f"configuration error: {exc}", EXIT_USAGE)
    return parsed.model_dump()


def _warn_without_storage(storage: str | None) -> None:
    """Warn on stderr when neither ``--storage`` nor ``REACTOR_STORAGE_URL`` names a storage."""
    if storage is None and not os.environ.get(config.STORAGE_URL_ENV):
        warn(
            "no --storage and no REACTOR_STORAGE_URL: using a fresh, "
            "empty in-process memory:// store (pass --storage URL or set REACTOR_STORAGE_URL)"
        )


def _refuse_router_without_storage(storage: str | None, router: str | None) -> None:
    """Exit 2 with one error line when a router is named (``--router`` or
    ``REACTOR_ROUTER_URL``) but no storage is (``--storage`` or ``REACTOR_STORAGE_URL``).

    A worker on a real queue with a fresh in-process store would receive jobs and find none of
    their runs: every job would be consumed and dropped (docs/workers.md, "Running workers").

    Raises:
        typer.Exit: code 2, when the router is named and the storage is not.
    """
    has_storage = bool(storage) or bool(os.environ.get(config.STORAGE_URL_ENV))
    named_router = router or os.environ.get(config.ROUTER_URL_ENV)
    if named_router and not has_storage:
        fail(
            f"a router is configured ({named_router.partition(':')[0]}://...) "
            "but no storage: pass --storage URL or set REACTOR_STORAGE_URL (a worker on the "
            "in-process memory:// store would consume and drop every job)",
            EXIT_USAGE,
        )


def _runtime(
    storage: str | None, router: str | None, settings: list[str] | None = None
) -> config.Runtime:
    """Configure the process runtime from a command's options (flags win over the
    environment, :func:`reactor.config.configure`).

    Raises:
        typer.Exit: 2 on a configuration error (bad URL, scheme or setting), 1 when building
            a backend failed otherwise (e.g. a queue that cannot be created); one stderr line.
    """
    _warn_without_storage(storage)
    try:
        return config.configure(storage=storage, router=router, **_settings(settings))
    except ConfigurationError as exc:
        fail(f"configuration error: {exc}", EXIT_USAGE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)


def _log_level_opt(default: str) -> Any:
    return Annotated[
        str,
        typer.Option(
            "--log-level",
            help=f"Logging level: DEBUG (with tracebacks), INFO, WARNING or ERROR "
            f"(default {default}).",
        ),
    ]


#: ``--log-level`` of a long-running command (``reactor worker``), default INFO.
LogLevelOpt = _log_level_opt("INFO")
#: ``--log-level`` of a one-shot command (``reactor sweep``), default WARNING.
QuietLogLevelOpt = _log_level_opt("WARNING")


def _configure_logging(log_level: str) -> None:
    """Send log records at ``log_level`` and above to stderr, one line each
    (``<time> <LEVEL> <logger> <message>``); exit 2 for an unknown level."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        fail(f"bad --log-level {log_level!r}: expected DEBUG, INFO, WARNING or ERROR", EXIT_USAGE)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")


#: What every command says after an :class:`~reactor.errors.UnknownReactorError` (a stored run
#: names a reactor no ``--import`` registered; exit code :data:`EXIT_USAGE`).
IMPORT_HINT = "pass --import MODULE for the module that defines it"

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
            fail(f"cannot import --import {name!r}: {type(exc).__name__}: {exc}", EXIT_USAGE)
