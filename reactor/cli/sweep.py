"""``reactor sweep``: run the run, step and map sweepers once or every N seconds
(docs/workers.md, "Running workers").

Counts go to stdout. A one-shot sweep in which a sweeper failed exits 1 with one stderr line
per failed sweeper (``event=sweeper_failed``: the exception's type and message; the traceback
only with ``--log-level DEBUG``); with ``--every`` the loop goes on (the failure is logged each
tick). A stored run whose reactor this process does not know (no ``--import`` registers it) is
one ``error:`` line naming the reactor with the ``--import`` hint, no traceback, and exit code 2
(a configuration error); with ``--every`` the line is printed each tick and the loop goes on.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.markup import escape

from reactor.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    IMPORT_HINT,
    ImportOpt,
    QuietLogLevelOpt,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _configure_logging,
    _import_modules,
    _runtime,
    app,
    console,
    err_console,
    fail,
)
from reactor.config import Runtime
from reactor.errors import UnknownReactorError
from reactor.jobs.sweep_tick import run_sweeps
from reactor.model.text import printable

__all__ = ["SWEEPER_LOGGER", "UnknownReactors", "report", "sweep", "unknown_reactors"]

#: The logger the sweepers report a record they could not handle on (reactor.jobs.sweepers).
SWEEPER_LOGGER = "reactor.sweeper"


class UnknownReactors(logging.Filter):
    """Collects the reactors a sweep could not find in this process.

    A sweeper logs a record it could not handle with its traceback and goes on; when the
    exception is an :class:`~reactor.errors.UnknownReactorError` (a stored run names a reactor
    no ``--import`` registered), the traceback says nothing the operator can act on. This
    filter drops those records (kept at ``--log-level DEBUG``) and keeps their messages for
    one ``error:`` line (:func:`report`).

    Attributes:
        messages: each distinct ``UnknownReactorError`` message (it names the reactor), in the
            order first met.
    """

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, None] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but an unknown reactor's (kept too when the logger is at DEBUG).

        Returns:
            ``False`` to drop the record.
        """
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, UnknownReactorError):
            return True
        self.messages.setdefault(str(exc), None)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    def take(self) -> list[str]:
        """The messages collected since the last call, and forget them."""
        taken, self.messages = list(self.messages), {}
        return taken


@contextmanager
def unknown_reactors() -> Iterator[UnknownReactors]:
    """Attach an :class:`UnknownReactors` filter to the sweepers' logger for the block."""
    found = UnknownReactors()
    logger = logging.getLogger(SWEEPER_LOGGER)
    logger.addFilter(found)
    try:
        yield found
    finally:
        logger.removeFilter(found)


def report(messages: list[str]) -> str:
    """The one ``error:`` line for the unknown reactors of a sweep.

    Args:
        messages: the ``UnknownReactorError`` messages (each names a reactor, a name read
            from storage: escaped with :func:`reactor.model.text.printable`).

    Returns:
        e.g. ``"no reactor is registered under 'shop.order': its stored runs were not all
        swept; pass --import MODULE for the module that defines it"``.
    """
    named = "; ".join(printable(message) for message in messages)
    return f"{named}: its stored runs were not all swept; {IMPORT_HINT}"


@app.command()
def sweep(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    every: Annotated[
        float | None, typer.Option(help="Repeat every SECONDS until interrupted.", min=0.1)
    ] = None,
    limit: Annotated[int, typer.Option(help="Records inspected per sweeper.", min=1)] = 1000,
    setting: SettingOpt = None,
    import_: ImportOpt = None,
    log_level: QuietLogLevelOpt = "WARNING",
) -> None:
    """Run the run, step and map sweepers once and print their counts.

    With --every SECONDS, repeat until SIGTERM/SIGINT. Pass --import for the modules that
    register your reactors (as for the worker): resuming some lost units — a fan-out map whose
    next batch was never dispatched — runs reactor code in this process.
    """
    _configure_logging(log_level)
    _import_modules(import_ or [])
    runtime = _runtime(storage, router, setting)
    stop = threading.Event()
    previous = {}
    if every is not None and threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with unknown_reactors() as unknown:
            _loop(runtime, every, limit, stop, unknown)
    finally:  # the process's own handlers again once the loop is done
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _loop(
    runtime: Runtime, every: float | None, limit: int, stop: threading.Event,
    unknown: UnknownReactors,
) -> None:
    """Sweep once, or every ``every`` seconds until ``stop`` is set, printing the counts."""
    while True:
        counts = run_sweeps(runtime, limit=limit)
        runs, steps, maps = counts.runs, counts.steps, counts.maps
        console.print(
            (f"runs: inspected={runs.inspected} redispatched={runs.redispatched} "
             f"waiting={runs.waiting} errors={runs.errors}" if runs else "runs: FAILED (see log)")
            + (f" | steps: inspected={steps.inspected} redispatched={steps.redispatched} "
               f"errors={steps.errors}" if steps else " | steps: FAILED (see log)")
            + (f" | maps: inspected={maps.inspected} redispatched={maps.redispatched} "
               f"recollected={maps.recollected} "
               f"rollback_redispatched={maps.rollback_redispatched} "
               f"rollback_batches={maps.rollback_batches} errors={maps.errors}"
               if maps else " | maps: FAILED (see log)")
        )
        missing = unknown.take()
        if every is None:
            failed = [name for name, c in (("runs", runs), ("steps", steps), ("maps", maps))
                      if c is None]
            if missing:
                fail(report(missing), EXIT_USAGE)
            if failed:  # each failed sweeper already logged its one line
                raise typer.Exit(EXIT_FAILURE)
            return
        if missing:
            err_console.print(f"[red]error:[/red] {escape(report(missing))}", soft_wrap=True)
        if stop.wait(every):
            return
