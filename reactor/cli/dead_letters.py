"""``reactor dead-letters list|show|requeue|purge``: inspect and act on a router's dead letters
(docs/workers.md, "Dead letters").

The router comes from ``--router``, else ``REACTOR_ROUTER_URL``, else ``local://`` (a fresh
in-process router, which has no dead letters: a warning says so). ``list`` works on any router;
``show``, ``requeue``, ``purge`` and ``list --cursor`` need the
:class:`reactor.ports.router.DeadLetterAdmin` capability (every built-in router has it).

Results go to stdout; errors to stderr, one line each. Exit codes: 0 ok, 1 failure (no such
dead letter, a refused requeue, a backend error), 2 usage or configuration (a bad URL or
cursor, ``purge --all`` without ``--yes``, a router without the capability).

Every body shown goes through :func:`_display_body`, which masks secrets in job bodies
(docs/security.md). Bodies, reasons and ids are hostile input: text output passes them through
:func:`reactor.model.text.printable` (every control character, ``\n`` and ``\t`` included, and
every Unicode format character such as a bidi override is escaped: a body can neither drive the
terminal nor forge or reorder a line); JSON output is plain :func:`json.dumps`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from reactor import config
from reactor.cli._common import RouterOpt, SettingOpt, _adapter_settings, app, err_console
from reactor.errors import ConfigurationError, DeserializationError, ReactorError
from reactor.model.masking import mask_job_body
from reactor.model.text import printable
from reactor.ports.router import DeadLetter, DeadLetterAdmin, Router

__all__ = [
    "dead_letters_app",
    "dead_letters_list",
    "dead_letters_purge",
    "dead_letters_requeue",
    "dead_letters_show",
]

dead_letters_app = typer.Typer(
    help="Inspect, requeue and purge the router's dead letters.", no_args_is_help=True
)
app.add_typer(dead_letters_app, name="dead-letters")

#: Exit code of a failure: no such dead letter, a refused requeue, a backend error.
_EXIT_FAILURE = 1
#: Exit code of a usage or configuration error.
_EXIT_USAGE = 2
#: Characters of a body shown by ``list`` (``show`` prints it whole).
_PREVIEW = 100

_JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _fail(message: str, code: int = _EXIT_FAILURE) -> NoReturn:
    """One ``error:`` line on stderr (plain text, never markup), then exit with ``code``."""
    _error(message)
    raise typer.Exit(code)


def _error(message: str) -> None:
    err_console.print(f"[red]error:[/red] {escape(printable(message))}", soft_wrap=True)


def _display_body(letter: DeadLetter) -> tuple[str, str]:
    """The body of ``letter`` as every view shows it, and its encoding (``"text"`` or
    ``"base64"``).

    The single call site for masking: a text body goes through
    :func:`reactor.model.masking.mask_job_body`, so a sealed secret reads ``"[REDACTED]"``
    (docs/security.md, "What each view shows"); a base64 body (not UTF-8) is shown as stored.
    """
    if letter.body_encoding == "text":
        return mask_job_body(letter.body), "text"
    return letter.body, letter.body_encoding


def _as_json(letter: DeadLetter) -> dict[str, Any]:
    body, encoding = _display_body(letter)
    return {
        "id": letter.id,
        "at": letter.at,
        "reason": letter.reason,
        "body": body,
        "body_encoding": encoding,
    }


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


@contextmanager
def _router(url: str | None, setting: list[str] | None = None) -> Iterator[Router]:
    """The router named by ``--router``, else ``REACTOR_ROUTER_URL``, else ``local://``, built
    with the engine settings (``-s/--setting``, then ``REACTOR_<SETTING>``); closed on exit. A
    bad URL or setting exits 2, a backend that cannot be reached exits 1."""
    settings = _adapter_settings(setting)
    chosen = url or os.environ.get("REACTOR_ROUTER_URL") or None
    if chosen is None:
        err_console.print(
            "[yellow]warning:[/yellow] no --router and no REACTOR_ROUTER_URL: using a fresh "
            f"in-process {config.DEFAULT_ROUTER_URL} router, which has no dead letters (pass "
            "--router URL or set REACTOR_ROUTER_URL)",
            soft_wrap=True,
        )
        chosen = config.DEFAULT_ROUTER_URL
    try:
        router = config.router_from_url(chosen, **settings)
    except ConfigurationError as exc:
        _fail(f"configuration error: {exc}", _EXIT_USAGE)
    except ReactorError as exc:
        _fail(f"{type(exc).__name__}: {exc}")
    try:
        yield router
    except ReactorError as exc:  # RouterError: the backend failed mid-command
        _fail(f"{type(exc).__name__}: {exc}")
    finally:
        try:
            router.close()
        except Exception:  # closing is best effort; the command's outcome stands
            pass


def _admin(router: Router, command: str) -> DeadLetterAdmin:
    """``router`` as a :class:`DeadLetterAdmin`, else exit 2 naming the missing capability."""
    if not isinstance(router, DeadLetterAdmin):
        _fail(
            f"`dead-letters {command}` needs a router with the DeadLetterAdmin capability "
            f"(reactor.ports.router.DeadLetterAdmin); {type(router).__name__} does not have it",
            _EXIT_USAGE,
        )
    return router


@dead_letters_app.command("list")
def dead_letters_list(
    router: RouterOpt = None,
    limit: Annotated[int, typer.Option(help="Dead letters to show.", min=1, max=1000)] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="The id of the last dead letter of the previous page.")
    ] = None,
    json_: _JsonOpt = False,
    setting: SettingOpt = None,
) -> None:
    """List dead letters, oldest first: id, time, reason and the start of the body.

    With --json, one object: {"dead_letters": [...], "next_cursor": ID or null}.
    """
    with _router(router, setting) as built:
        if cursor is not None:
            try:
                letters = _admin(built, "list --cursor").dead_letters(limit, cursor)
            except ValueError as exc:
                _fail(str(exc), _EXIT_USAGE)
        else:
            letters = built.dead_letters(limit)
    next_cursor = letters[-1].id if len(letters) == limit and letters[-1].id else None
    if json_:
        typer.echo(json.dumps({
            "dead_letters": [_as_json(letter) for letter in letters],
            "next_cursor": next_cursor,
        }))
        return
    if not letters:
        typer.echo("no dead letters")
        return
    for letter in letters:
        body, encoding = _display_body(letter)
        preview = body if len(body) <= _PREVIEW else body[:_PREVIEW] + "..."
        typer.echo(f"{printable(letter.id or '-')}  {_when(letter.at)}  {printable(letter.reason)}")
        typer.echo(f"    {encoding}: {printable(preview)}")
    if next_cursor:
        typer.echo(f"next page: --cursor {printable(next_cursor)}")


@dead_letters_app.command("show")
def dead_letters_show(
    letter_id: Annotated[str, typer.Argument(metavar="ID", help="The dead letter's id.")],
    router: RouterOpt = None,
    json_: _JsonOpt = False,
    setting: SettingOpt = None,
) -> None:
    """Show one dead letter: its reason, time and whole body (text, or base64 when the body is
    not UTF-8)."""
    with _router(router, setting) as built:
        letter = _admin(built, "show").get_dead_letter(letter_id)
    if letter is None:
        _fail(f"no dead letter {letter_id!r}")
    if json_:
        typer.echo(json.dumps(_as_json(letter)))
        return
    body, encoding = _display_body(letter)
    typer.echo(f"id:       {printable(letter.id)}")
    typer.echo(f"at:       {_when(letter.at)} ({letter.at:.3f})")
    typer.echo(f"reason:   {printable(letter.reason)}")
    typer.echo(f"encoding: {encoding}")
    typer.echo("body:")
    typer.echo(printable(body))


@dead_letters_app.command("requeue")
def dead_letters_requeue(
    letter_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="The dead letters to requeue.")
    ],
    router: RouterOpt = None,
    setting: SettingOpt = None,
) -> None:
    """Put dead letters back on the queue (each job due now, with a fresh delivery count).

    A dead letter whose body is not a job envelope is refused and kept. Exit 1 when any id
    could not be requeued.
    """
    failed = 0
    with _router(router, setting) as built:
        admin = _admin(built, "requeue")
        for letter_id in letter_ids:
            try:
                job_id = admin.requeue_dead_letter(letter_id)
            except DeserializationError as exc:
                _error(f"refused: {exc}")
                failed += 1
                continue
            if job_id is None:
                _error(f"no dead letter {letter_id!r} (or another requeue holds it)")
                failed += 1
                continue
            typer.echo(f"requeued {printable(letter_id)} as job {printable(job_id)}")
    if failed:
        raise typer.Exit(_EXIT_FAILURE)


@dead_letters_app.command("purge")
def dead_letters_purge(
    letter_ids: Annotated[
        list[str] | None, typer.Argument(metavar="[ID...]", help="The dead letters to delete.")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Delete every dead letter.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --all.")] = False,
    router: RouterOpt = None,
    setting: SettingOpt = None,
) -> None:
    """Delete dead letters for good: the ids given, or every one with --all --yes.

    Exit 1 when some ids named no dead letter.
    """
    ids = list(letter_ids or [])
    if all_ and ids:
        _fail("give either --all or dead-letter ids, not both", _EXIT_USAGE)
    if not all_ and not ids:
        _fail("give the dead-letter ids to purge, or --all --yes", _EXIT_USAGE)
    if all_ and not yes:
        _fail("purge --all deletes every dead letter for good: add --yes to confirm",
              _EXIT_USAGE)
    with _router(router, setting) as built:
        deleted = _admin(built, "purge").purge_dead_letters(None if all_ else ids)
    typer.echo(f"purged {deleted} dead letter{'' if deleted == 1 else 's'}")
    missing = len(set(ids)) - deleted
    if missing > 0:
        _fail(f"{missing} of the ids named no dead letter")
