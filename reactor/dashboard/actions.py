"""The dashboard's actions: retry, undo, cancel, resume, suspend, unsuspend, rewind, requeue
and purge, and pause and resume of a schedule (docs/dashboard.md, "Actions", "Schedules";
docs/run-control.md; docs/operations.md; docs/schedules.md, "Managing schedules").

Each action calls the same public API as the command line (``Reactor.retry``,
``Reactor.undo``, ``Reactor.cancel``, ``Reactor.resume``, ``Reactor.suspend``,
``Reactor.unsuspend``, ``Reactor.rewind``, the router's
:class:`~reactor.ports.router.DeadLetterAdmin`) in the dashboard's process, on the
dashboard's runtime. So a retried or resumed synchronous run executes here: the dashboard
needs the reactor's module imported (``--import``) and the secret keys its runs were sealed
with (``REACTOR_SECRET_KEYS``), like ``reactor runs retry``. A background reactor's new run is
handed to the workers as usual.

:func:`available` says which actions apply to a run as it is stored (and why not), so the
page can show its buttons disabled with the reason; the engine still decides, and its
refusals come back as typed errors (:mod:`reactor.dashboard.errors`), never a 500.

A schedule's pause and resume call :func:`reactor.schedules.pause_schedule` and
:func:`reactor.schedules.resume_schedule`, as ``reactor schedules pause|resume`` do, and log
``event=schedule_paused|schedule_resumed schedule=S by=dashboard`` (logger
``reactor.dashboard``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from reactor.config import Runtime
from reactor.dashboard.errors import (
    ActionFailed,
    ActionRefused,
    BackendUnavailable,
    BadRequest,
    NotFound,
)
from reactor.dashboard.queues import get_dead_letter
from reactor.dashboard.schedules import schedule_row
from reactor.dashboard.security import Guard
from reactor.dashboard.stored import StoredRun, check_id
from reactor.dashboard.values import failure_view
from reactor.errors import (
    ConfigurationError,
    InterruptAlreadyResumedError,
    InterruptError,
    InterruptPayloadError,
    ReactorError,
    RouterError,
    RunNotFoundError,
    RunStateError,
    ScheduleConflictError,
    ScheduleNotFoundError,
    ScheduleValueError,
    StorageError,
    UnknownReactorError,
)
from reactor.facade import Reactor
from reactor.model import codec
from reactor.model.results import Failure
from reactor.model.text import escaping_logger
from reactor.ports.router import DeadLetterAdmin, Router
from reactor.schedules import ScheduleView, pause_schedule, resume_schedule
from reactor.schedules.records import keeps_schedules

__all__ = [
    "ACTIONS",
    "available",
    "cancel",
    "cancel_supported",
    "parse_payload",
    "purge",
    "requeue",
    "resume",
    "retry",
    "rewind",
    "schedule_pause",
    "schedule_resume",
    "suspend",
    "undo",
    "unsuspend",
]

#: The run actions, in the order the run page shows them.
ACTIONS: tuple[str, ...] = (
    "retry", "undo", "cancel", "resume", "suspend", "unsuspend", "rewind",
)

_RETRYABLE = frozenset({"failed", "cancelled"})
_UNDOABLE = frozenset({"aborted", "completed", "halted"})
_CANCELLABLE = frozenset(
    {"pending", "running", "paused", "suspended", "failed_paused", "needs_version"}
)
_SUSPENDABLE = frozenset({"pending", "running", "paused"})

log = escaping_logger("reactor.dashboard")

#: Who the engine records as having suspended or rewound a run from the dashboard when the
#: form names nobody.
DASHBOARD_ACTOR = "dashboard"


def _cancel_function() -> Callable[..., Any] | None:
    found = getattr(Reactor, "cancel", None)
    return found if callable(found) else None


def cancel_supported() -> bool:
    """Whether this version of reactor has ``Reactor.cancel`` (docs/run-control.md)."""
    return _cancel_function() is not None


def available(stored: StoredRun, guard: Guard) -> dict[str, dict[str, Any]]:
    """Which actions apply to ``stored`` now, each ``{"enabled": bool, "reason": str|None}``."""
    status = stored.record.status
    element = stored.record.parent_context_id is not None
    refusal = None if guard.actions_enabled else (
        "the dashboard is read-only (start it with a token to enable actions)"
    )

    def decide(ok: bool, why: str) -> dict[str, Any]:
        if refusal is not None:
            return {"enabled": False, "reason": refusal}
        return {"enabled": ok, "reason": None if ok else why}

    if not cancel_supported():
        cancel_state = {"enabled": False, "reason": "cancel is not available in this version "
                        "of reactor (Reactor.cancel)"}
    else:
        cancel_state = decide(status in _CANCELLABLE and not element,
                              f"only a pending, running, paused, suspended, failed_paused or "
                              f"needs_version top-level run can be cancelled; this one is "
                              f"{status}")
    return {
        "retry": decide(status in _RETRYABLE and not element,
                        f"only a failed or cancelled top-level run can be retried; this one is "
                        f"{status}"),
        "undo": decide(status in _UNDOABLE and not element,
                       f"only an aborted, completed or halted top-level run can be undone; this "
                       f"one is {status}"),
        "cancel": cancel_state,
        "resume": decide(status == "paused", f"only a paused run can be resumed; this one is "
                                             f"{status}"),
        "suspend": decide(status in _SUSPENDABLE and not element,
                          f"only a pending, running or paused top-level run can be suspended; "
                          f"this one is {status}"),
        "unsuspend": decide(status == "suspended" and not element,
                            f"only a suspended run can be unsuspended; this one is {status}"),
        "rewind": decide(status == "failed_paused" and not element,
                         f"only a failed_paused run (held by on_failure='pause') can be "
                         f"rewound; this one is {status}"),
    }


@contextmanager
def _engine_errors(run_id: str) -> Iterator[None]:
    """Map the engine's refusals to typed dashboard errors."""
    try:
        yield
    except UnknownReactorError as exc:
        raise ActionRefused(
            f"{exc}; start the dashboard with --import for the module that defines it",
            code="reactor_not_imported",
        ) from exc
    except RunNotFoundError as exc:
        raise NotFound(str(exc) or f"no run {run_id!r}", code="run_not_found") from exc
    except InterruptPayloadError as exc:
        raise ActionFailed(
            str(exc), code="invalid_payload",
            details={"field_errors": {k: list(v) for k, v in exc.field_errors.items()},
                     "attempts": exc.attempts, "exhausted": exc.exhausted},
        ) from exc
    except InterruptAlreadyResumedError as exc:
        raise ActionRefused(str(exc), code="already_resumed") from exc
    except (InterruptError, RunStateError) as exc:
        raise ActionRefused(str(exc), code="not_applicable") from exc
    except (StorageError, RouterError) as exc:
        raise BackendUnavailable(f"{type(exc).__name__}: {exc}") from exc
    except ValueError as exc:  # the engine's argument errors (they are ValueErrors)
        raise BadRequest(str(exc), code="bad_argument") from exc
    except ReactorError as exc:
        raise ActionRefused(f"{type(exc).__name__}: {exc}", code="action_refused") from exc


def _status(runtime: Runtime, run_id: str | None) -> str:
    if not run_id:
        return "unknown"
    try:
        record = runtime.storage.contexts.load(run_id)
    except StorageError:
        return "unknown"
    return record.status if record is not None else "unknown"


def _outcome(runtime: Runtime, outcome: Any, run_id: str | None) -> dict[str, Any]:
    shown: dict[str, Any] = {"run_id": run_id, "status": _status(runtime, run_id)}
    if isinstance(outcome, Failure):
        shown["failure"] = failure_view(codec.encode(outcome.masked()))
    return shown


def retry(runtime: Runtime, run_id: str) -> dict[str, Any]:
    """``Reactor.retry``: the new run's ``{"run_id", "retried_from", "status"}``."""
    check_id(run_id)
    with _engine_errors(run_id):
        outcome = Reactor.retry(run_id, runtime=runtime)
    return {**_outcome(runtime, outcome, outcome.run_id), "retried_from": run_id}


def undo(runtime: Runtime, run_id: str) -> dict[str, Any]:
    """``Reactor.undo``: ``{"run_id", "status", "rollback_failures"}``."""
    check_id(run_id)
    with _engine_errors(run_id):
        outcome = Reactor.undo(run_id, runtime=runtime)
    shown = _outcome(runtime, outcome, run_id)
    failure = shown.get("failure")
    shown["rollback_failures"] = failure.get("rollback_failures", []) if failure else []
    return shown


def cancel(runtime: Runtime, run_id: str, reason: str | None, rollback: bool) -> dict[str, Any]:
    """``Reactor.cancel``: ``{"run_id", "status", "handed_off"}``.

    Raises:
        ActionRefused: this version of reactor has no ``Reactor.cancel``.
    """
    check_id(run_id)
    function = _cancel_function()
    if function is None:
        raise ActionRefused("cancel is not available in this version of reactor",
                            code="unsupported")
    kwargs: dict[str, Any] = {"reason": reason, "rollback": rollback}
    if "runtime" in inspect.signature(function).parameters:
        kwargs["runtime"] = runtime
    with _engine_errors(run_id):
        outcome = function(run_id, **kwargs)
    shown = _outcome(runtime, outcome, run_id)
    shown["handed_off"] = not isinstance(outcome, Failure) and not hasattr(outcome, "success")
    return shown


def resume(
    runtime: Runtime, run_id: str, payload: Any, step: str | None
) -> dict[str, Any]:
    """``Reactor.resume`` inline: ``{"run_id", "status", "step"}`` (``step``: the next
    interrupt when the run paused again)."""
    check_id(run_id)
    with _engine_errors(run_id):
        outcome = Reactor.resume(run_id, payload=payload, step=step or None, runtime=runtime)
    shown = _outcome(runtime, outcome, run_id)
    shown["step"] = getattr(outcome, "step", None) if shown["status"] == "paused" else None
    return shown


def suspend(
    runtime: Runtime, run_id: str, reason: str | None, by: str | None
) -> dict[str, Any]:
    """``Reactor.suspend`` (docs/operations.md, "Suspend and unsuspend"):
    ``{"run_id", "status", "outcome"}`` (``outcome``: ``"suspended"``, or ``"requested"``
    when the execution that owns the run suspends it before its next step).

    Args:
        runtime: the dashboard's runtime.
        run_id: the top-level run.
        reason: why, at most 1,000 characters, or ``None``.
        by: who asked, at most 1,000 characters; ``None``: :data:`DASHBOARD_ACTOR`.

    Raises:
        BadRequest: an unusable argument (``bad_argument``); nothing changed.
        NotFound: no such run.
        ActionRefused: the run finished, is rolling back, is a map element or is held
            ``failed_paused``; nothing changed.
        BackendUnavailable: a backend failed.
    """
    check_id(run_id)
    with _engine_errors(run_id):
        outcome = Reactor.suspend(run_id, reason=reason, by=by or DASHBOARD_ACTOR,
                                  runtime=runtime)
    return {**_outcome(runtime, None, run_id), "outcome": outcome}


def unsuspend(runtime: Runtime, run_id: str) -> dict[str, Any]:
    """``Reactor.unsuspend`` (docs/operations.md, "Suspend and unsuspend"):
    ``{"run_id", "status"}`` (``running``: a worker continues it; ``paused``: it waits at
    its interrupt again).

    Raises:
        NotFound: no such run.
        ActionRefused: the run is not suspended, its reactor's suspend switch is on, or
            another call holds it (try again); nothing changed.
        BackendUnavailable: a backend failed.
    """
    check_id(run_id)
    with _engine_errors(run_id):
        Reactor.unsuspend(run_id, runtime=runtime)
    return _outcome(runtime, None, run_id)


def rewind(
    runtime: Runtime, run_id: str, from_step: str | None, reason: str | None,
    by: str | None,
) -> dict[str, Any]:
    """``Reactor.rewind`` of a run held ``failed_paused`` (docs/operations.md, "Pause, rewind,
    fork"): ``{"run_id", "status"}`` and the ``failure`` when it failed (and was held) again.
    A synchronous reactor's run continues here, in the dashboard's process; a background one
    goes to the workers.

    Args:
        runtime: the dashboard's runtime.
        run_id: the held run.
        from_step: a step the run completed, or its failed step; ``None``: the failed step.
        reason: why, at most 1,000 characters, or ``None``.
        by: who asked; ``None``: :data:`DASHBOARD_ACTOR`.

    Raises:
        BadRequest: an unusable argument, an unknown step or one the run did not complete
            (``bad_argument``); nothing changed.
        NotFound: no such run.
        ActionRefused: the run is not ``failed_paused``, no longer matches its definition, a
            step cannot run again, or another call holds it; nothing changed.
        BackendUnavailable: a backend failed.
    """
    check_id(run_id)
    if from_step is not None:
        check_id(from_step, "step name")
    with _engine_errors(run_id):
        outcome = Reactor.rewind(run_id, from_step=from_step, reason=reason,
                                 by=by or DASHBOARD_ACTOR, runtime=runtime)
    return _outcome(runtime, outcome, run_id)


def _admin(router: Router) -> DeadLetterAdmin:
    if not isinstance(router, DeadLetterAdmin):
        raise ActionRefused("this router has no dead-letter administration "
                            "(reactor.ports.router.DeadLetterAdmin)", code="unsupported")
    return router


def requeue(router: Router, letter_id: str) -> dict[str, Any]:
    """Requeue one dead letter: ``{"id", "job_id"}``.

    Raises:
        NotFound: no such letter.
        ActionRefused: the router cannot, or another caller is requeuing it.
    """
    admin = _admin(router)
    get_dead_letter(router, letter_id)
    try:
        job_id = admin.requeue_dead_letter(letter_id)
    except ReactorError as exc:
        raise ActionRefused(f"{type(exc).__name__}: {exc}", code="requeue_refused") from exc
    if job_id is None:
        raise ActionRefused(f"dead letter {letter_id!r} was not requeued (gone, or another "
                            "requeue holds it)", code="requeue_refused")
    return {"id": letter_id, "job_id": job_id}


def purge(router: Router, ids: list[str] | None) -> dict[str, Any]:
    """Purge the listed dead letters (``None``: all of them): ``{"purged": n}``."""
    admin = _admin(router)
    for letter_id in ids or []:
        check_id(letter_id, "dead-letter id")
    try:
        purged = admin.purge_dead_letters(ids)
    except ReactorError as exc:
        raise BackendUnavailable(f"the router failed: {exc}") from exc
    return {"purged": purged}


def parse_payload(text: str | None, value: Any = None) -> Any:
    """An interrupt payload: JSON text (a form field) or an already parsed value.

    Raises:
        BadRequest: the text is not JSON.
    """
    if text is None:
        return value
    try:
        return codec.parse_json(text)
    except ReactorError as exc:
        raise BadRequest(f"the payload is not JSON: {exc}", code="bad_payload") from None


@contextmanager
def _schedule_errors(name: str) -> Iterator[None]:
    """Map the schedule API's refusals to typed dashboard errors."""
    try:
        yield
    except ScheduleNotFoundError as exc:
        raise NotFound(str(exc), code="schedule_not_found") from exc
    except ScheduleValueError as exc:
        raise BadRequest(f"malformed schedule name: {exc}", code="bad_id") from exc
    except ConfigurationError as exc:
        raise ActionRefused(str(exc), code="unsupported") from exc
    except ScheduleConflictError as exc:
        raise ActionRefused(str(exc), code="not_applicable") from exc
    except (StorageError, RouterError) as exc:
        raise BackendUnavailable(f"{type(exc).__name__}: {exc}") from exc


def _schedule_done(runtime: Runtime, guard: Guard, view: ScheduleView) -> dict[str, Any]:
    return schedule_row(view, guard, stores=keeps_schedules(runtime.storage))


def schedule_pause(runtime: Runtime, guard: Guard, name: str) -> dict[str, Any]:
    """Pause schedule ``name`` (:func:`reactor.schedules.pause_schedule`; docs/dashboard.md,
    "Schedules"): no tick is decided until it is resumed. Already paused: unchanged.

    Returns:
        The schedule's row (:func:`reactor.dashboard.schedules.schedule_row`).

    Raises:
        NotFound: no such schedule (``schedule_not_found``); nothing changed.
        BadRequest: ``name`` is not a schedule name (``bad_id``); nothing changed.
        ActionRefused: the storage keeps no schedules (``unsupported``), or the schedule kept
            changing under the change.
        BackendUnavailable: the storage failed.
    """
    with _schedule_errors(name):
        view = pause_schedule(name, runtime=runtime)
    log.info("event=schedule_paused schedule=%s by=%s", name, DASHBOARD_ACTOR)
    return _schedule_done(runtime, guard, view)


def schedule_resume(runtime: Runtime, guard: Guard, name: str) -> dict[str, Any]:
    """Resume schedule ``name`` from now (:func:`reactor.schedules.resume_schedule`;
    docs/dashboard.md, "Schedules"): the ticks that fell while it was paused are not run.

    Returns:
        The schedule's row.

    Raises:
        NotFound, BadRequest, ActionRefused, BackendUnavailable: as :func:`schedule_pause`.
    """
    with _schedule_errors(name):
        view = resume_schedule(name, runtime=runtime)
    log.info("event=schedule_resumed schedule=%s by=%s", name, DASHBOARD_ACTOR)
    return _schedule_done(runtime, guard, view)
