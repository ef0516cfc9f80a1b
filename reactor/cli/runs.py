"""``reactor runs list`` and ``reactor runs show ID``: read stored runs, secrets masked;
``reactor runs retry ID``: run a failed run again (docs/run-control.md, "Retrying a failed run").

Both commands read the stored documents as they are and mask them with
:func:`reactor.model.masking.mask_document` (docs/security.md, "What each view shows"): no key
is needed and none is used. Data goes to stdout (``--json`` for machines; full run ids when
stdout is not a terminal), errors to stderr with exit code 1 for a run that does not exist and
2 for a bad option.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.highlighter import JSONHighlighter
from rich.table import Table
from rich.text import Text

from reactor.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ImportOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _import_modules,
    _runtime,
    app,
    console,
    err_console,
    fail,
)
from reactor.errors import (
    DeserializationError,
    ReactorError,
    RunNotFoundError,
    RunStateError,
    UnknownReactorError,
)
from reactor.facade import Reactor
from reactor.model import checkpoints
from reactor.model.masking import mask_document
from reactor.model.records import RunSummary
from reactor.model.status import RunStatus
from reactor.model.text import printable

__all__ = ["parse_since", "runs_app", "runs_list", "runs_retry", "runs_show"]

runs_app = typer.Typer(help="Inspect stored runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_since(text: str, now: float | None = None) -> float:
    """Turn a ``--since`` value into epoch seconds.

    Args:
        text: an age (``"90"``/``"90s"`` seconds, ``"10m"``, ``"2h"``, ``"3d"``, ``"1w"``) or
            an ISO 8601 date or date-time (``"2024-05-01"``, ``"2024-05-01T12:00:00+02:00"``;
            without an offset it is UTC).
        now: the current epoch seconds (default ``time.time()``).

    Returns:
        The epoch seconds from which runs are listed.

    Raises:
        ValueError: ``text`` is neither form.
    """
    match = _AGO.match(text)
    if match:
        current = time.time() if now is None else now
        return current - float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected an age like 10m, 2h, 3d or an ISO date/time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


def _row(summary: RunSummary) -> dict[str, Any]:
    return {
        "run_id": summary.context_id,
        "reactor": summary.reactor,
        "status": summary.status,
        "created_at": summary.created_at,
        "updated_at": summary.updated_at,
    }


def _statuses(values: list[str] | None) -> set[str] | None:
    if not values:
        return None
    wanted: set[str] = set()
    for value in values:
        for name in value.split(","):
            try:
                wanted.add(RunStatus.parse(name.strip()).value)
            except ValueError:
                known = ", ".join(s.value for s in RunStatus)
                fail(f"unknown --status {name!r} (one of: {known})", EXIT_USAGE)
    return wanted


@runs_app.command("list")
def runs_list(
    storage: StorageOpt = None,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help="Only runs in this status (repeatable, or a,b)."),
    ] = None,
    reactor: Annotated[
        str | None, typer.Option("--reactor", help="Only runs of this reactor name.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only runs created since: an age (10m, 2h, 3d) or an ISO date/time."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows to show.", min=1, max=500)] = 50,
    cursor: Annotated[str | None, typer.Option(help="Cursor of the next page.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {runs, next_cursor}.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """List stored top-level runs, newest first, one page at a time."""
    wanted = _statuses(status)
    try:
        cutoff = parse_since(since) if since is not None else None
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    runtime = _runtime(storage, None, setting)
    rows: list[RunSummary] = []
    next_cursor = cursor
    while True:
        # Never ask for more rows than are still wanted: the page's cursor then resumes
        # exactly after the last row examined, whatever the filters dropped.
        try:
            page = runtime.storage.contexts.page(cursor=next_cursor, limit=limit - len(rows))
        except ValueError as exc:
            fail(f"bad cursor: {exc}", EXIT_USAGE)
        next_cursor = page.next_cursor
        past_cutoff = False
        for row in page.runs:
            if cutoff is not None and row.created_at < cutoff:
                past_cutoff = True  # newest first: every later row is older still
                break
            if (wanted is None or row.status in wanted) and (
                reactor is None or row.reactor == reactor
            ):
                rows.append(row)
        if past_cutoff:
            next_cursor = None
        if next_cursor is None or len(rows) >= limit:
            break
    if as_json:
        typer.echo(json.dumps({"runs": [_row(r) for r in rows], "next_cursor": next_cursor}))
        return
    if console.is_terminal:
        table = Table("run id", "reactor", "status", "created", "updated")
        for column in table.columns:
            column.overflow = "fold"  # never truncate an id
        for row in rows:  # stored text is hostile: escaped, and never read as markup
            table.add_row(*(Text(printable(str(cell))) for cell in (
                row.context_id, row.reactor, row.status, _stamp(row.created_at),
                _stamp(row.updated_at),
            )))
        console.print(table)
    else:  # piped: plain tab-separated lines, full ids
        typer.echo("RUN_ID\tREACTOR\tSTATUS\tCREATED\tUPDATED")
        for row in rows:
            typer.echo(f"{printable(row.context_id)}\t{printable(row.reactor)}\t"
                       f"{printable(str(row.status))}\t"
                       f"{_stamp(row.created_at)}\t{_stamp(row.updated_at)}")
    if next_cursor:
        err_console.print(f"next page: --cursor {next_cursor}", soft_wrap=True, markup=False)


@runs_app.command("show")
def runs_show(
    run_id: str,
    storage: StorageOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print plain JSON (no colours, stable layout).")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Print one stored run's record and document, secrets shown as "[REDACTED]"."""
    runtime = _runtime(storage, None, setting)
    record = runtime.storage.contexts.load(run_id)
    if record is None:
        fail(f"no run {run_id!r}", EXIT_FAILURE)
    shown: dict[str, Any] = {
        "context_id": record.context_id,
        "reactor": record.reactor,
        "status": record.status,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "parent_context_id": record.parent_context_id,
        "root_context_id": record.root_context_id,
    }
    try:
        document = checkpoints.raw_document(record)
    except (DeserializationError, RecursionError) as exc:
        document = None
        shown["document_error"] = f"the stored document is not readable: {exc}"
    if isinstance(document, dict):
        shown["document"] = mask_document(document)
    else:
        shown["document"] = None
        shown.setdefault("document_error", "the stored document is not a JSON object")
    text = json.dumps(shown, ensure_ascii=False, indent=2)
    if as_json:
        typer.echo(text)
    else:  # escaped in JSON's own syntax (still valid JSON), highlighted, never markup
        console.print(JSONHighlighter()(Text(printable(text, as_json=True))), soft_wrap=True)


@runs_app.command("retry")
def runs_retry(
    run_id: str,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: {run_id, retried_from, status}."),
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Run a failed or cancelled run again as a new run with the same inputs.

    Prints the new run's id and status (tab-separated, or --json). Pass --import for the
    module that defines the run's reactor, and the secret keys the run was sealed with
    (REACTOR_SECRET_KEYS). Exit code 0 when the new run completed, halted or was handed to a
    worker; 1 when the run is missing or cannot be retried, the new run failed, or a backend
    failed; 2 for a usage or configuration error (including a reactor no --import registers).
    """

    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.retry(run_id, runtime=runtime)
    except UnknownReactorError as exc:
        fail(f"{exc}; pass --import MODULE for the module that defines it", EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    new_id = outcome.run_id or ""
    try:
        record = runtime.storage.contexts.load(new_id) if new_id else None
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    status = record.status if record is not None else "unknown"
    if as_json:
        typer.echo(json.dumps({"run_id": new_id, "retried_from": run_id, "status": status}))
    else:
        typer.echo(f"{printable(new_id)}\t{printable(status)}")
    if status in (RunStatus.FAILED.value, RunStatus.CANCELLED.value, RunStatus.ABORTED.value):
        raise typer.Exit(EXIT_FAILURE)
