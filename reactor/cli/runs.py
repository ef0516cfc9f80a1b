"""``reactor runs list`` and ``reactor runs show ID``: read stored runs, secrets masked;
``reactor runs retry ID``: run a failed run again (docs/run-control.md, "Retrying a failed run");
``reactor runs resume ID --payload JSON``: resume a run paused at an interrupt
(docs/run-control.md, "Interrupts"); ``reactor runs cancel ID``: stop a run and roll it back
(docs/run-control.md, "Cancel"); ``reactor runs undo ID``: roll back a finished or aborted run
(docs/run-control.md, "Undoing a run"); ``reactor runs restore ID``: put a quarantined run back
once it decodes (docs/run-control.md, "Restoring a quarantined run"); ``reactor runs suspend
ID`` and ``reactor runs unsuspend ID``: hold a run for an operator and let it go
(docs/operations.md, "Suspend and unsuspend"); ``reactor runs rewind ID`` and ``reactor runs
fork ID --from STEP``: recover a failed run (docs/operations.md, "Pause, rewind, fork").

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

from reactor import registry
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
from reactor.config import Runtime
from reactor.engine import quarantine as quarantining
from reactor.engine.env import make_env
from reactor.errors import (
    CancelArgumentError,
    DeserializationError,
    ForkArgumentError,
    InputValidationError,
    InterruptAlreadyResumedError,
    InterruptArgumentError,
    InterruptError,
    InterruptPayloadError,
    QuarantineRestoreError,
    ReactorError,
    RewindArgumentError,
    RunNotFoundError,
    RunStateError,
    SuspendArgumentError,
    UnknownReactorError,
)
from reactor.facade import Reactor
from reactor.model import checkpoints, codec
from reactor.model.masking import mask_document
from reactor.model.records import RunSummary
from reactor.model.results import Failure
from reactor.model.run_documents import retry_counters_of
from reactor.model.status import RunStatus
from reactor.model.text import printable

__all__ = [
    "parse_since", "parse_statuses", "runs_app", "runs_cancel", "runs_list", "runs_restore",
    "runs_resume", "runs_retry", "runs_show", "runs_undo", "terminal_json",
]

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


def parse_statuses(values: list[str] | None) -> set[str] | None:
    """``--status`` options (each one status or a comma-separated list, any case) as stored
    status strings; ``None`` when none is given. An unknown one exits 2 naming it and the
    known ones (docs/workers.md, "Run listings after a crash")."""
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
    wanted = parse_statuses(status)
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
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print plain JSON (no colours, stable layout).")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Print one stored run's record and document, secrets shown as "[REDACTED]".

    --import is accepted as on the other runs commands (a module whose reactors register,
    e.g. a retained old definition: docs/deploys.md, "Operator tools"); nothing is decoded
    with it.
    """
    _import_modules(import_ or [])
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
        private = shown["document"].get("private_data")
        pending = private.get("interrupt") if isinstance(private, dict) else None
        if isinstance(pending, dict):  # a paused run: what it waits for (docs/run-control.md)
            shown["interrupt"] = pending
        asleep = private.get("sleep") if isinstance(private, dict) else None
        if isinstance(asleep, dict) and document.get("status") == "paused":
            shown["sleep"] = asleep  # sleeping until wake_at (docs/schedules.md)
        stamp = private.get("definition") if isinstance(private, dict) else None
        if isinstance(stamp, dict):  # the definition it runs under (docs/deploys.md)
            shown["definition"] = stamp
        beats = retry_counters_of(shown["document"]).heartbeats
        if beats:  # each step's last heartbeat, stored masked (docs/concepts.md, "Heartbeats")
            shown["heartbeats"] = {step: last.to_stored() for step, last in beats.items()}
    else:
        shown["document"] = None
        shown.setdefault("document_error", "the stored document is not a JSON object")
    text = json.dumps(shown, ensure_ascii=False, indent=2)
    if as_json:
        typer.echo(text)
    else:  # escaped in JSON's own syntax (still valid JSON), highlighted, never markup
        console.print(JSONHighlighter()(Text(terminal_json(text))), soft_wrap=True)


def terminal_json(text: str) -> str:
    """Indented JSON text made safe for a terminal, its layout kept.

    ``json.dumps`` escapes the C0 controls inside strings (a ``\\n`` in a value is written
    ``\\n``), so every raw line feed in ``text`` is the indentation's; what it leaves raw in a
    value (DEL, C1 controls, bidi overrides and other format characters, line and paragraph
    separators, lone surrogates) is escaped in JSON's own syntax, line by line, with
    :func:`reactor.model.text.printable` (docs/workers.md, "Dead letters"). The result still
    parses as the same JSON.

    Args:
        text: the output of ``json.dumps(..., ensure_ascii=False, indent=...)``.

    Returns:
        ``text`` with its line feeds kept and every other unsafe character escaped.
    """
    return "\n".join(printable(line, as_json=True) for line in text.split("\n"))


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


@runs_app.command("resume")
def runs_resume(
    payload: Annotated[
        str, typer.Option("--payload", help="The interrupt's payload, as JSON text (required).")
    ],
    run_id: Annotated[
        str | None, typer.Argument(help="The paused run (or give --correlation-id).")
    ] = None,
    step: Annotated[
        str | None,
        typer.Option("--step", help="The interrupt's step path the run must be paused at."),
    ] = None,
    correlation_id: Annotated[
        str | None,
        typer.Option("--correlation-id", help="Name the run by its interrupt's correlation id."),
    ] = None,
    background: Annotated[
        bool, typer.Option("--background", help="Continue the run in a worker (a run job).")
    ] = False,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {run_id, status, step}.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Resume a run paused at an interrupt with a JSON payload.

    Prints the run's id and its status after the resume (tab-separated, or --json). Pass
    --import for the module that defines the run's reactor, --router when the run continues in
    a worker (--background), and the secret keys the run was sealed with
    (REACTOR_SECRET_KEYS). Exit code 0 when the run completed, halted, paused again or was
    handed to a worker; 1 when it failed, the payload is invalid (the fields are named), the
    interrupt expired or was already resumed, the run or correlation id is unknown, or a
    backend failed; 2 for a usage or configuration error (a --payload that is not JSON, neither
    or both of RUN_ID and --correlation-id, a reactor no --import registers).
    """
    try:
        value = codec.parse_json(payload)
    except DeserializationError as exc:
        fail(f"--payload is not JSON: {exc}", EXIT_USAGE)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.resume(
            run_id, correlation_id=correlation_id, payload=value, step=step,
            resume="background" if background else "inline", runtime=runtime,
        )
    except UnknownReactorError as exc:
        fail(f"{exc}; pass --import MODULE for the module that defines it", EXIT_USAGE)
    except InterruptArgumentError as exc:
        fail(str(exc), EXIT_USAGE)
    except (InterruptError, InterruptPayloadError, RunNotFoundError) as exc:
        kind = "already resumed" if isinstance(exc, InterruptAlreadyResumedError) else (
            type(exc).__name__)
        fail(f"{kind}: {exc}", EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    resumed_id = outcome.run_id or ""
    try:
        record = runtime.storage.contexts.load(resumed_id) if resumed_id else None
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    status = record.status if record is not None else "unknown"
    paused_at = getattr(outcome, "step", None) if status == RunStatus.PAUSED.value else None
    if as_json:
        typer.echo(json.dumps({"run_id": resumed_id, "status": status, "step": paused_at}))
    else:
        typer.echo(f"{printable(resumed_id)}\t{printable(status)}")
    if status in (RunStatus.FAILED.value, RunStatus.CANCELLED.value, RunStatus.ABORTED.value):
        raise typer.Exit(EXIT_FAILURE)


@runs_app.command("cancel")
def runs_cancel(
    run_id: str,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (stored and shown with the run).")
    ] = None,
    rollback: Annotated[
        bool,
        typer.Option("--rollback/--no-rollback",
                     help="Roll the run back (default), or keep its completed work."),
    ] = True,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json",
                     help="Print one JSON object: {run_id, status, reason, rollback, pending}."),
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Cancel a run that has not finished: stop it at its next step boundary and roll it back.

    Prints the run's id and status, tab-separated (or --json); the status is "cancelled", or
    the run's current one with "pending" when the execution that owns the run carries the
    cancel out at its next step boundary. Pass --import for the module that defines the
    run's reactor (its undos run here when nothing else executes the run) and the secret keys
    the run was sealed with (REACTOR_SECRET_KEYS). Exit code 0 when the run is cancelled or the
    cancel is pending; 1 when the run does not exist, already finished, is a map element, some
    undo or compensate failed (counted on stderr), or a backend failed; 2 for a usage or
    configuration error (a --reason over 1,000 characters, a reactor no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.cancel(run_id, reason=reason, rollback=rollback, runtime=runtime)
    except UnknownReactorError as exc:
        fail(f"{exc}; pass --import MODULE for the module that defines it", EXIT_USAGE)
    except CancelArgumentError as exc:
        fail(str(exc), EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    pending = not isinstance(outcome, Failure)
    failures = list(outcome.rollback_failures) if isinstance(outcome, Failure) else []
    try:
        view = Reactor.find(run_id, runtime=runtime)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    status = view.status.value
    if view.cancel is not None:  # the request that stands (a second cancel keeps the first)
        reason, rollback = view.cancel.reason, view.cancel.rollback
    if as_json:
        typer.echo(json.dumps({"run_id": run_id, "status": status, "reason": reason,
                               "rollback": rollback, "pending": pending}))
    else:
        typer.echo(f"{printable(run_id)}\t{printable(status)}" + ("\tpending" if pending else ""))
    if failures:
        fail(f"the run is cancelled, but {len(failures)} undo/compensate call(s) did not "
             "complete: see 'reactor runs show'", EXIT_FAILURE)


@runs_app.command("suspend")
def runs_suspend(
    run_id: Annotated[str | None, typer.Argument(help="The run (or use --reactor).")] = None,
    reactor_name: Annotated[
        str | None,
        typer.Option("--reactor", help="Suspend every unfinished run of this reactor now."),
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (stored and shown with the run).")
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who asked (stored and shown with the run).")
    ] = None,
    hold_new: Annotated[
        bool,
        typer.Option("--hold-new", help="With --reactor: also hold the runs started or "
                     "continued later, until 'reactor runs unsuspend --reactor'."),
    ] = False,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Suspend a run for an operator: it starts no further step until 'reactor runs unsuspend'
    (docs/operations.md, "Suspend and unsuspend"). With --reactor NAME (and --import for its
    module): every unfinished run of that reactor now; with --hold-new too, the reactor's
    suspend switch is set first, so its runs started or continued later stop before their next
    step as well.

    Prints the run's id and "suspended", or "requested" when the execution that owns the run
    suspends it before its next step (tab-separated, or --json {run_id, outcome}); with
    --reactor the counts (--json {reactor, suspended, requested, skipped}, and hold_new: 1 with
    --hold-new). Exit code 0 then; 1 when the run does not exist, finished, is a map element
    or is rolling back, or a backend failed; 2 for a usage or configuration error (neither or
    both of RUN_ID and --reactor, --hold-new without --reactor, a --reason or --by over 1,000
    characters, a reactor no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    _one_target(run_id, reactor_name)
    if hold_new and reactor_name is None:
        fail("--hold-new holds a reactor's new runs: give --reactor NAME", EXIT_USAGE)
    try:
        if reactor_name is not None:
            counts = registry.get(reactor_name).suspend_all(
                reason=reason, by=by, hold_new=hold_new, runtime=runtime
            )
            _print_counts(reactor_name, {**counts, "hold_new": 1} if hold_new else counts,
                          as_json)
            return
        assert run_id is not None
        outcome = Reactor.suspend(run_id, reason=reason, by=by, runtime=runtime)
    except (SuspendArgumentError, UnknownReactorError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    if as_json:
        typer.echo(json.dumps({"run_id": run_id, "outcome": outcome}))
    else:
        typer.echo(f"{printable(run_id)}\t{outcome}")


@runs_app.command("unsuspend")
def runs_unsuspend(
    run_id: Annotated[str | None, typer.Argument(help="The run (or use --reactor).")] = None,
    reactor_name: Annotated[
        str | None,
        typer.Option("--reactor", help="Unsuspend every suspended run of this reactor."),
    ] = None,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Let a suspended run go on: stored back "running" (its job is enqueued for a worker) or
    "paused" (it waits at its interrupt again) (docs/operations.md, "Suspend and unsuspend").
    With --reactor NAME (and --import for its module): the reactor's suspend switch is cleared
    and every suspended run of that reactor goes on.

    Prints the run's id and its status (tab-separated, or --json {run_id, status}); with
    --reactor the counts (--json {reactor, running, paused, skipped}). Exit code 0 then; 1
    when the run does not exist, is not suspended, its reactor's switch is on, or a backend
    failed; 2 for a usage error.
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    _one_target(run_id, reactor_name)
    try:
        if reactor_name is not None:
            counts = registry.get(reactor_name).unsuspend_all(runtime=runtime)
            _print_counts(reactor_name, counts, as_json)
            return
        assert run_id is not None
        status = Reactor.unsuspend(run_id, runtime=runtime)
    except (SuspendArgumentError, UnknownReactorError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    if as_json:
        typer.echo(json.dumps({"run_id": run_id, "status": status.value}))
    else:
        typer.echo(f"{printable(run_id)}\t{status.value}")


def _one_target(run_id: str | None, reactor_name: str | None) -> None:
    """Exit 2 unless exactly one of RUN_ID and --reactor is given."""
    if (run_id is None) == (reactor_name is None):
        fail("give a RUN_ID or --reactor NAME (exactly one)", EXIT_USAGE)


def _print_counts(reactor_name: str, counts: dict[str, int], as_json: bool) -> None:
    """Print a reactor-wide suspend or unsuspend's counts."""
    if as_json:
        typer.echo(json.dumps({"reactor": reactor_name, **counts}))
    else:
        typer.echo("\t".join([printable(reactor_name)]
                              + [f"{k}={v}" for k, v in counts.items()]))


def _failure_rows(outcome: Failure) -> list[dict[str, Any]]:
    """The rollback failures of an incomplete undo, as JSON objects."""
    return [{"step": rf.step, "kind": rf.kind, "reason": rf.reason, "message": rf.message}
            for rf in outcome.rollback_failures]


@runs_app.command("undo")
def runs_undo(
    run_id: str,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: {run_id, status, rollback_failures}."),
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Roll back a finished or aborted run: undo its completed steps, newest first.

    A completed or halted run is undone and ends cancelled; an aborted run's rollback is
    finished (it keeps its undo stack for this); a failed or cancelled run with nothing left to
    roll back is left as it is. Prints the run's id and its status afterwards (tab-separated,
    or --json). Pass --import for the module that defines the run's reactor, --router for a
    run with a fan-out map, and the secret keys the run was sealed with (REACTOR_SECRET_KEYS).
    Exit code 0 when everything was rolled back (or nothing was left to roll back); 1 when the
    run does not exist, cannot be undone (pending, running, paused, rolling back), an undo or
    compensate failed (each named on stderr), or a backend failed; 2 for a usage or
    configuration error (a reactor no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.undo(run_id, runtime=runtime)
    except UnknownReactorError as exc:
        fail(f"{exc}; pass --import MODULE for the module that defines it", EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    try:
        record = runtime.storage.contexts.load(run_id)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    status = record.status if record is not None else "unknown"
    failures = _failure_rows(outcome) if isinstance(outcome, Failure) else []
    if as_json:
        typer.echo(json.dumps({"run_id": run_id, "status": status,
                               "rollback_failures": failures}))
    else:
        typer.echo(f"{printable(run_id)}\t{printable(status)}")
    if isinstance(outcome, Failure):
        for row in failures:
            err_console.print(
                Text(printable(f"  {row['step']} {row['kind']} ({row['reason']}): "
                               f"{row['message']}")), soft_wrap=True)
        fail(f"{outcome.message}: the run is {status}; see 'reactor runs show'", EXIT_FAILURE)


@runs_app.command("restore")
def runs_restore(
    run_id: str,
    storage: StorageOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json",
                     help="Print one JSON object: {run_id, reactor, status, segments, reason}."),
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Put a quarantined run's original record back, once it decodes again.

    For a run a worker quarantined (stored failed because its document did not decode: an
    unregistered codec type, a secret key not configured) after the cause was fixed. The
    original base and segments are stored again with their original status, only when they
    now decode here: pass --import for the module that defines the run's reactor (it registers
    its types) and the secret keys it was sealed with (REACTOR_SECRET_KEYS). A restored running
    run is continued by the next run sweep. Prints the run's id and restored status
    (tab-separated, or --json). Exit code 0 when restored; 1 when the run does not exist, is not
    quarantined, is a map element, still does not decode (the reason on stderr; nothing is
    written), is locked, or a backend failed; 2 for a usage or configuration error (a reactor
    no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, None, setting)
    try:
        restored = quarantining.restore(make_env(runtime), run_id)
    except UnknownReactorError as exc:
        fail(f"{exc}; pass --import MODULE for the module that defines it", EXIT_USAGE)
    except (RunNotFoundError, RunStateError, QuarantineRestoreError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    if as_json:
        typer.echo(json.dumps({"run_id": restored.run_id, "reactor": restored.reactor,
                               "status": restored.status.value,
                               "segments": restored.segments, "reason": restored.reason}))
    else:
        typer.echo(f"{printable(restored.run_id)}\t{printable(restored.status.value)}")


def _print_outcome(run_id: str, outcome: object, runtime: Runtime, as_json: bool,
                   extra: dict[str, object]) -> None:
    """Print a rewound or forked run's id and status (--json: with ``extra``); exit 1 when
    it failed or is held again."""
    try:
        view = Reactor.find(run_id, runtime=runtime)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    status = view.status.value
    if as_json:
        typer.echo(json.dumps({"run_id": run_id, "status": status, **extra}))
    else:
        typer.echo(f"{printable(run_id)}\t{printable(status)}")
    if isinstance(outcome, Failure):
        fail(f"the run failed again at step {printable(outcome.step_name or '')}: "
             f"{printable(outcome.message)}", EXIT_FAILURE)


@runs_app.command("rewind")
def runs_rewind(
    run_id: str,
    from_step: Annotated[
        str | None,
        typer.Option("--from", help="A step the run completed (default: its failed step)."),
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept on the run's trace).")
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who asked.")] = None,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {run_id, status, from}.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Continue a run held "failed_paused" (on_failure="pause") from its failed step, or
    --from a step it completed: the steps run again are undone first (docs/operations.md,
    "Pause, rewind, fork").

    Prints the run's id and its status afterwards, tab-separated (or --json). Pass --import
    for the module that defines the run's reactor (its steps and undos run here, or in a
    worker for a background reactor). Exit code 0 when the run completed, or continues in a
    worker; 1 when it failed again, does not exist, is not held, no longer matches its
    definition, or a backend failed; 2 for a usage error (an unknown --from step, a reactor
    no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.rewind(run_id, from_step=from_step, reason=reason, by=by,
                                 runtime=runtime)
    except (RewindArgumentError, UnknownReactorError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    _print_outcome(run_id, outcome, runtime, as_json, {"from": from_step})


@runs_app.command("fork")
def runs_fork(
    run_id: str,
    from_step: Annotated[
        str, typer.Option("--from", help="The step the new run starts from.")
    ],
    input_patch: Annotated[
        str | None,
        typer.Option("--input-patch",
                     help="A JSON merge patch over the inputs, e.g. '{\"iban\": \"DE02\"}'."),
    ] = None,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: {run_id, status, forked_from}."),
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Start a new run from step --from of a run, copying the results of the steps before it,
    with an optional JSON merge patch on the inputs; the original is left as it is
    (docs/operations.md, "Pause, rewind, fork").

    Prints the new run's id and status, tab-separated (or --json). Exit code 0 when it
    completed or continues in a worker; 1 when it failed, the run does not exist or cannot be
    forked, or a backend failed; 2 for a usage error (an unknown --from step, a bad or unknown
    --input-patch, invalid patched inputs, a reactor no --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        outcome = Reactor.fork(run_id, from_step=from_step, input_patch=input_patch,
                               runtime=runtime)
    except (ForkArgumentError, InputValidationError, UnknownReactorError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (RunNotFoundError, RunStateError) as exc:
        fail(str(exc), EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    _print_outcome(outcome.run_id or "", outcome, runtime, as_json, {"forked_from": run_id})
