"""Operator tools for safe deploys (docs/deploys.md, "Operator tools"):

``reactor runs versions``
    how many stored runs each definition of a reactor has, by status: reactor, version
    label, fingerprint, status -> count. It pages through the storage's run listing (every
    backend; one page of records in memory at a time) and reads each run's stored
    ``private_data.definition``.
``reactor runs migrate RUN_ID... | --all --reactor NAME``
    move stored runs onto the definition this process imports (``--import``), with
    ``--rename old=new`` for renamed steps (:func:`reactor.engine.run_control.migrate.migrate`).
``reactor runs resume-version RUN_ID``
    continue a ``needs_version`` run once the imported definition can
    (``Reactor.resume_version``).

Output follows the CLI conventions (reactor/cli/_common.py): data on stdout (``--json`` for
machines), errors on stderr, exit code 1 for a run that failed or was refused, 2 for a bad
option.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from reactor import registry
from reactor.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    IMPORT_HINT,
    ImportOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _import_modules,
    _runtime,
    console,
    err_console,
    fail,
)
from reactor.cli.runs import parse_statuses, runs_app
from reactor.config import Runtime
from reactor.dsl.fingerprint import definition_id
from reactor.engine.run_control.migrate import Migration
from reactor.errors import (
    DefinitionMismatchError,
    DeserializationError,
    LockAcquisitionError,
    MigrationArgumentError,
    ReactorError,
    RunNotFoundError,
    RunStateError,
    UnknownReactorError,
)
from reactor.facade import Reactor
from reactor.model import checkpoints
from reactor.model.records import ContextRecord
from reactor.model.status import RunStatus
from reactor.model.text import printable

__all__ = [
    "PAGE_SIZE", "parse_renames", "runs_migrate", "runs_resume_version", "runs_versions",
    "stamp_of",
]

#: Runs read per page of the storage's listing.
PAGE_SIZE = 200

#: The key of a run stored without a definition stamp (before fingerprints) or with an
#: unreadable document, in ``runs versions``.
NO_STAMP = "-"


def stamp_of(record: ContextRecord) -> tuple[str, str] | None:
    """The ``(fingerprint, version label)`` a stored run was started under, from its raw
    document (no key needed, nothing decoded but JSON).

    Args:
        record: a stored run's record.

    Returns:
        ``(fingerprint, label or "")``, or ``None`` for a run stored before fingerprints.

    Raises:
        DeserializationError: the stored document is not readable.
    """
    document = checkpoints.raw_document(record)
    private = document.get("private_data")
    stamp = private.get("definition") if isinstance(private, dict) else None
    if not isinstance(stamp, dict) or not isinstance(stamp.get("fingerprint"), str):
        return None
    version = stamp.get("version")
    return stamp["fingerprint"], version if isinstance(version, str) else ""


def _records(runtime: Runtime, reactor: str | None) -> Iterator[ContextRecord]:
    """Every top-level stored run (of ``reactor``), newest first, a page at a time."""
    cursor: str | None = None
    while True:
        page = runtime.storage.contexts.page(cursor=cursor, limit=PAGE_SIZE, reactor=reactor)
        for row in page.runs:
            record = runtime.storage.contexts.load(row.context_id)
            if record is not None:  # deleted or expired since it was listed
                yield record
        cursor = page.next_cursor
        if cursor is None:
            return


@runs_app.command("versions")
def runs_versions(
    reactor: Annotated[
        str | None, typer.Option("--reactor", help="Only runs of this reactor name.")
    ] = None,
    storage: StorageOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {versions, runs}.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Count stored top-level runs by reactor, definition (version label, fingerprint) and
    status (docs/deploys.md, "Operator tools").

    Pages through every stored run (one page in memory at a time). A run stored before
    fingerprints shows "-". With --import, the definition each imported reactor runs under
    here is marked "current". Prints a table (tab-separated when piped), or --json
    {"versions": [{reactor, version, fingerprint, status, count, current}], "runs": N}.
    Exit code 0; 1 when a backend failed; 2 for a usage error.
    """
    _import_modules(import_ or [])
    if reactor is not None and not reactor.strip():
        fail("--reactor must be a reactor name, got an empty string", EXIT_USAGE)
    runtime = _runtime(storage, None, setting)
    counts: Counter[tuple[str, str, str, str]] = Counter()
    try:
        for record in _records(runtime, reactor):
            try:
                found = stamp_of(record)
            except (DeserializationError, RecursionError):
                found = None
            fingerprint, version = found if found is not None else (NO_STAMP, "")
            counts[(record.reactor, version, fingerprint, record.status)] += 1
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    rows = [
        {"reactor": name, "version": version or None, "fingerprint": fingerprint,
         "status": status, "count": count, "current": _is_current(name, fingerprint)}
        for (name, version, fingerprint, status), count in sorted(counts.items())
    ]
    if as_json:
        typer.echo(json.dumps({"versions": rows, "runs": sum(counts.values())}))
        return
    cells = [
        [row["reactor"], row["version"] or "-", row["fingerprint"], row["status"],
         str(row["count"]), "current" if row["current"] else ""]
        for row in rows
    ]
    if console.is_terminal:
        table = Table("reactor", "version", "fingerprint", "status", "runs", "")
        for line in cells:  # stored text is hostile: escaped, never read as markup
            table.add_row(*(Text(printable(str(cell))) for cell in line))
        console.print(table)
    else:
        typer.echo("REACTOR\tVERSION\tFINGERPRINT\tSTATUS\tRUNS\tCURRENT")
        for line in cells:
            typer.echo("\t".join(printable(str(cell)) for cell in line))


def _is_current(name: str, fingerprint: str) -> bool:
    """Whether ``fingerprint`` is the one reactor ``name`` has in this process."""
    try:
        cls = registry.get(name)
    except UnknownReactorError:
        return False
    return bool(definition_id(cls.definition).fingerprint == fingerprint)


def parse_renames(values: list[str] | None) -> dict[str, str]:
    """Turn ``--rename old=new`` options into a mapping.

    Args:
        values: the option's values.

    Returns:
        old step name -> new step name.

    Raises:
        ValueError: a value is not ``old=new`` with two non-blank names, or an old name is
            given twice (the message names ``--rename``).
    """
    renames: dict[str, str] = {}
    for value in values or []:
        old, sep, new = value.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"--rename {value!r}: expected OLD=NEW (two step names)")
        if old.strip() in renames:
            raise ValueError(f"--rename: step {old.strip()!r} is renamed twice")
        renames[old.strip()] = new.strip()
    return renames


def _matches(found: tuple[str, str] | None, wanted: str | None) -> bool:
    """Whether a run's stamp matches ``--from`` (a version label, or a fingerprint or a
    prefix of one of at least 4 hex digits; ``-``: runs without a stamp)."""
    if wanted is None:
        return True
    if found is None:
        return wanted == NO_STAMP
    fingerprint, version = found
    if version == wanted:
        return True
    return len(wanted) >= 4 and fingerprint.startswith(wanted.lower())


def _targets(runtime: Runtime, reactor: str, source: str | None, current: str,
             statuses: set[str] | None) -> Iterator[str]:
    """The ids of ``reactor``'s runs to migrate with ``--all``: not on ``current`` yet,
    matching ``--from`` and ``--status``, not owned by an execution."""
    for record in _records(runtime, reactor):
        if statuses is not None and record.status not in statuses:
            continue
        if record.status in (RunStatus.RUNNING.value, RunStatus.ROLLING_BACK.value):
            continue
        try:
            found = stamp_of(record)
        except (DeserializationError, RecursionError):
            continue
        if found is not None and found[0] == current:
            continue
        if _matches(found, source):
            yield record.context_id


def _print(migration: Migration, as_json: bool) -> None:
    """One line per run: id, outcome, from -> to, status afterwards (or a JSON object)."""
    if as_json:
        typer.echo(json.dumps(migration.to_json()))
        return
    outcome = ("unchanged" if not migration.changed else
               "would migrate" if migration.dry_run else "migrated")
    source = NO_STAMP if migration.source is None else migration.source.fingerprint
    renamed = ",".join(f"{a}={b}" for a, b in migration.renamed.items())
    typer.echo("\t".join(printable(cell) for cell in (
        migration.run_id, outcome, f"{source}->{migration.target.fingerprint}",
        migration.new_status.value, renamed,
    )))


@runs_app.command("migrate")
def runs_migrate(
    run_ids: Annotated[
        list[str] | None, typer.Argument(help="The runs (or give --all --reactor NAME).")
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Every run of --reactor not on its current definition.")
    ] = False,
    reactor: Annotated[
        str | None, typer.Option("--reactor", help="With --all: the reactor's runs.")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option("--from", help="With --all: only runs of this version label or "
                     "fingerprint (a prefix of 4+ hex digits; '-': runs without one)."),
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help="With --all: only runs in this status (repeatable)."),
    ] = None,
    to_version: Annotated[
        str | None,
        typer.Option("--to", help="The version label the imported definition must carry."),
    ] = None,
    rename: Annotated[
        list[str] | None,
        typer.Option("--rename", help="A renamed step as OLD=NEW (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; write nothing.")
    ] = False,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per run.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Move stored runs onto the definition --import registers, renaming the records of
    renamed steps (--rename old=new), once the compatibility rules allow it
    (docs/deploys.md, "Operator tools"). A needs_version run goes back to its previous
    status and its run job is enqueued (--router). Running and rolling-back runs are
    refused (an execution owns them); --all skips them.

    Prints one line per run: id, "migrated" / "unchanged" / "would migrate" (--dry-run),
    old->new fingerprint, status afterwards, renames applied (or --json, one object per run).
    Exit code 0 when every run was migrated or unchanged; 1 when a run was refused (its
    error on stderr: a compatibility rule and step, its status, its lock) or a backend
    failed; 2 for a usage error (neither or both of RUN_ID and --all, --all without
    --reactor, a bad --rename, --status or --to, a reactor no --import registers).
    """
    try:
        renames = parse_renames(rename)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if bool(run_ids) == all_runs:
        fail("give RUN_ID... or --all --reactor NAME (exactly one)", EXIT_USAGE)
    if all_runs and (reactor is None or not reactor.strip()):
        fail("--all migrates a reactor's runs: give --reactor NAME", EXIT_USAGE)
    if not all_runs and (reactor is not None or source is not None or status):
        fail("--reactor, --from and --status select runs for --all", EXIT_USAGE)
    if to_version is not None and not to_version.strip():
        fail("--to must be a version label, got an empty string", EXIT_USAGE)
    wanted = parse_statuses(status)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    if all_runs:
        assert reactor is not None
        try:
            current = definition_id(registry.get(reactor).definition).fingerprint
        except UnknownReactorError as exc:
            fail(f"{exc}; {IMPORT_HINT}", EXIT_USAGE)
        ids: Iterator[str] = _targets(runtime, reactor, source, current, wanted)
    else:
        ids = iter(run_ids or [])
    refused = 0
    try:
        for run_id in ids:
            try:
                done = Reactor.migrate(run_id, renames=renames, to_version=to_version,
                                       dry_run=dry_run, runtime=runtime)
            except UnknownReactorError as exc:
                fail(f"{exc}; {IMPORT_HINT}", EXIT_USAGE)
            except MigrationArgumentError as exc:
                # a bad --to is wrong for every run; a rename one run cannot take stops only
                # a single-run command (usage), the others go on to the next run
                if exc.field == "to_version" or (not all_runs and len(run_ids or []) == 1):
                    fail(str(exc), EXIT_USAGE)
                refused += 1
                err_console.print(Text(printable(f"error: {run_id}: {exc}")), soft_wrap=True)
                continue
            except (DefinitionMismatchError, RunNotFoundError, RunStateError,
                    LockAcquisitionError) as exc:
                refused += 1
                step = f" (step {exc.step})" if isinstance(exc, DefinitionMismatchError) else ""
                err_console.print(Text(printable(f"error: {run_id}{step}: {exc}")),
                                  soft_wrap=True)
                continue
            _print(done, as_json)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    if refused:
        fail(f"{refused} run(s) not migrated (see above)", EXIT_FAILURE)


@runs_app.command("resume-version")
def runs_resume_version(
    run_id: str,
    storage: StorageOpt = None,
    router: RouterOpt = None,
    import_: ImportOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: {run_id, status, job_id}.")
    ] = False,
    setting: SettingOpt = None,
) -> None:
    """Continue a run held "needs_version" once the definition --import registers can: it
    is judged again and, when compatible, stored back with its previous status and handed
    to a worker (--router) (docs/deploys.md, "Compatibility rules").

    Prints the run's id, its status afterwards and the job's id (tab-separated, or --json).
    Exit code 0 when it was handed back; 1 when the run does not exist, is not
    needs_version, this definition cannot continue it either (the step and rule on stderr),
    it is locked, or a backend failed; 2 for a usage or configuration error (a reactor no
    --import registers).
    """
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    try:
        handle = Reactor.resume_version(run_id, runtime=runtime)
        view = Reactor.find(run_id, runtime=runtime)
    except UnknownReactorError as exc:
        fail(f"{exc}; {IMPORT_HINT}", EXIT_USAGE)
    except DefinitionMismatchError as exc:
        fail(f"step {exc.step}: {exc}", EXIT_FAILURE)
    except ReactorError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    shown: dict[str, Any] = {"run_id": run_id, "status": view.status.value,
                             "job_id": handle.job_id}
    if as_json:
        typer.echo(json.dumps(shown))
    else:
        typer.echo("\t".join(printable(str(v)) for v in shown.values()))
