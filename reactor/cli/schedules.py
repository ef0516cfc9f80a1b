"""``reactor schedules add|list|pause|resume|remove|run``: manage schedules and run a
scheduler on its own (docs/schedules.md, "Managing schedules", "Running schedulers").

The storage comes from ``--storage``, else ``REACTOR_STORAGE_URL``. ``add`` needs the
reactor registered (``--import MODULE``) to check the arguments against its inputs; ``list``
shows the stored schedules and those the ``--import`` modules declare in code.

Results go to stdout (``--json`` for one JSON object); errors to stderr, one line each. Exit
codes: 0 ok, 1 failure (no such schedule, a name taken, a backend error), 2 usage or
configuration (a bad value, naming the field: ``error: ScheduleValueError: cron '...' is not a
valid cron expression: ...``; a storage that keeps no schedules).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.table import Table
from rich.text import Text

from reactor import config
from reactor.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ImportOpt,
    LogLevelOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _configure_logging,
    _import_modules,
    _refuse_router_without_storage,
    _runtime,
    app,
    console,
    fail,
)
from reactor.errors import (
    ConfigurationError,
    ReactorError,
    ScheduleConflictError,
    ScheduleNotFoundError,
    ScheduleValueError,
)
from reactor.model.text import printable
from reactor.schedules import (
    Schedule,
    Scheduler,
    ScheduleView,
    add_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    tick_text,
)

__all__ = [
    "schedules_add",
    "schedules_app",
    "schedules_list",
    "schedules_pause",
    "schedules_remove",
    "schedules_resume",
    "schedules_run",
]

schedules_app = typer.Typer(
    help="Add, list, pause, resume and remove schedules; run a scheduler.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")

T = TypeVar("T")

_JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
_NameArg = Annotated[str, typer.Argument(help="The schedule's name.")]


def _call(action: Callable[[], T]) -> T:
    """Run ``action``, turning reactor's errors into one stderr line and the exit code."""
    try:
        return action()
    except ScheduleValueError as exc:
        _error(f"ScheduleValueError: field {exc.field!r}: {exc}", EXIT_USAGE)
    except ConfigurationError as exc:
        _error(f"configuration error: {exc}", EXIT_USAGE)
    except (ScheduleNotFoundError, ScheduleConflictError) as exc:
        _error(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    except ReactorError as exc:
        _error(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)


def _error(message: str, code: int) -> NoReturn:
    fail(printable(message), code)


def _stamp(epoch: float | None) -> str:
    return "-" if epoch is None else tick_text(epoch)


def _as_json(view: ScheduleView) -> dict[str, Any]:
    return {
        "name": view.name, "reactor": view.reactor, "spec": view.spec,
        "timezone": view.timezone, "source": view.source, "paused": view.paused,
        "catchup": view.catchup, "overlap": view.overlap, "jitter": view.jitter,
        "max_catchup": view.max_catchup,
        "last_tick": None if view.last_tick is None else tick_text(view.last_tick),
        "last_action": view.last_action, "last_reason": view.last_reason,
        "last_run_id": view.last_run_id,
        "last_run_status": None if view.last_run_status is None else view.last_run_status.value,
        "next_tick": None if view.next_tick is None else tick_text(view.next_tick),
        "next_due": view.next_due,
        "pending": None if view.pending is None else tick_text(view.pending),
    }


def _last(view: ScheduleView) -> str:
    if view.last_tick is None:
        return "-"
    if view.last_action == "skip":
        return f"{tick_text(view.last_tick)} skipped ({view.last_reason})"
    return tick_text(view.last_tick)


def _print_one(view: ScheduleView, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_as_json(view)))
    else:
        state = "paused" if view.paused else "active"
        typer.echo("\t".join(printable(cell) for cell in (
            view.name, state, view.spec or "-", f"next {_stamp(view.next_tick)}")))


def _setup(storage: str | None, import_: list[str] | None, setting: list[str] | None) -> Any:
    _import_modules(import_ or [])
    return _runtime(storage, None, setting)


@schedules_app.command("add")
def schedules_add(
    name: _NameArg,
    reactor: Annotated[str, typer.Option("--reactor", help="The reactor's registered name.")],
    cron: Annotated[
        str | None, typer.Option("--cron", help="A cron expression, e.g. '0 2 * * *'.")
    ] = None,
    every: Annotated[
        float | None, typer.Option("--every", help="A period in whole seconds, e.g. 3600.")
    ] = None,
    args: Annotated[
        str, typer.Option("--args", help="The run's inputs as a JSON object.")
    ] = "{}",
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", help="The IANA time zone of --cron (default UTC)."),
    ] = None,
    catchup: Annotated[
        str, typer.Option("--catchup", help="Missed ticks: skip, one (default) or all.")
    ] = "one",
    max_catchup: Annotated[
        int, typer.Option("--max-catchup", help="The most missed ticks --catchup all runs.")
    ] = 100,
    jitter: Annotated[
        float, typer.Option("--jitter", help="The most seconds a tick's run is delayed.")
    ] = 0.0,
    overlap: Annotated[
        str,
        typer.Option("--overlap", help="While the previous run runs: skip (default) or allow."),
    ] = "skip",
    tick_input: Annotated[
        str | None,
        typer.Option("--tick-input", help="An input that receives the tick (ISO 8601 UTC)."),
    ] = None,
    import_: ImportOpt = None,
    storage: StorageOpt = None,
    setting: SettingOpt = None,
    as_json: _JsonOpt = False,
) -> None:
    """Store a schedule: every scheduler runs it from its next tick on."""
    try:
        values = json.loads(args)
    except ValueError as exc:
        _error(f"ScheduleValueError: field 'args': --args is not JSON: {exc}", EXIT_USAGE)
    runtime = _setup(storage, import_, setting)
    schedule = _call(lambda: Schedule(
        reactor, name=name, cron=cron, every=every, args=values, timezone=timezone,
        catchup=catchup, max_catchup=max_catchup, jitter=jitter, overlap=overlap,
        tick_input=tick_input,
    ))
    _print_one(_call(lambda: add_schedule(schedule, runtime=runtime)), as_json)


@schedules_app.command("list")
def schedules_list(
    import_: ImportOpt = None,
    storage: StorageOpt = None,
    setting: SettingOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {schedules}.")
    ] = False,
) -> None:
    """List the schedules: stored ones and those the --import modules declare, with their last
    and next ticks."""
    runtime = _setup(storage, import_, setting)
    views = _call(lambda: list_schedules(runtime=runtime))
    if as_json:
        typer.echo(json.dumps({"schedules": [_as_json(v) for v in views]}))
        return
    columns = ("name", "reactor", "spec", "paused", "last tick", "last run", "next tick")
    rows = [
        (v.name, v.reactor or "-", v.spec or "(declared in code elsewhere)",
         "yes" if v.paused else "no", _last(v),
         "-" if v.last_run_id is None else
         f"{v.last_run_id} ({v.last_run_status.value if v.last_run_status else 'gone'})",
         _stamp(v.next_tick))
        for v in views
    ]
    if console.is_terminal:
        table = Table(*columns)
        for column in table.columns:
            column.overflow = "fold"
        for row in rows:  # stored text is hostile: escaped, and never read as markup
            table.add_row(*(Text(printable(cell)) for cell in row))
        console.print(table)
    else:
        typer.echo("\t".join(c.upper().replace(" ", "_") for c in columns))
        for row in rows:
            typer.echo("\t".join(printable(cell) for cell in row))


def _change(
    action: Callable[..., ScheduleView], name: str, import_: list[str] | None,
    storage: str | None, setting: list[str] | None, as_json: bool,
) -> None:
    runtime = _setup(storage, import_, setting)
    _print_one(_call(lambda: action(name, runtime=runtime)), as_json)


@schedules_app.command("pause")
def schedules_pause(
    name: _NameArg, import_: ImportOpt = None, storage: StorageOpt = None,
    setting: SettingOpt = None, as_json: _JsonOpt = False,
) -> None:
    """Pause a schedule: no tick is decided until it is resumed."""
    _change(pause_schedule, name, import_, storage, setting, as_json)


@schedules_app.command("resume")
def schedules_resume(
    name: _NameArg, import_: ImportOpt = None, storage: StorageOpt = None,
    setting: SettingOpt = None, as_json: _JsonOpt = False,
) -> None:
    """Resume a schedule from now (the ticks of the pause are not run)."""
    _change(resume_schedule, name, import_, storage, setting, as_json)


@schedules_app.command("remove")
def schedules_remove(
    name: _NameArg, storage: StorageOpt = None, setting: SettingOpt = None,
) -> None:
    """Delete a stored schedule (its runs stay)."""
    runtime = _runtime(storage, None, setting)
    _call(lambda: remove_schedule(name, runtime=runtime))
    typer.echo(f"{printable(name)}\tremoved")


@schedules_app.command("run")
def schedules_run(
    import_: ImportOpt = None,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    setting: SettingOpt = None,
    poll: Annotated[
        float,
        typer.Option("--poll", help="The longest wait between two passes, in seconds.", min=0.01),
    ] = 5.0,
    log_level: LogLevelOpt = "INFO",
) -> None:
    """Run a scheduler until SIGTERM/SIGINT: the stored schedules and those the --import
    modules declare; their runs go to the router's workers."""
    _refuse_router_without_storage(storage, router)
    _configure_logging(log_level)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        code = Scheduler(runtime, poll_seconds=poll).serve()
    finally:
        config.reset()
    raise typer.Exit(code)
