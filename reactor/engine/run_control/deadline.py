"""Run deadlines where a run executes and where nobody does (docs/concepts.md, "Run
deadlines").

A run with a deadline stores it once, at its start (``EngineState.deadline``, epoch seconds
on the runtime clock). When it passes, the run is stopped by the cancel machinery
(:mod:`reactor.engine.run_control.cancel`) with a request whose ``cause`` is
``"deadline"``: no further step starts, the step in flight is compensated when its body
started, every completed step is undone once, newest first, and the run is stored ``failed``
with :class:`~reactor.errors.RunDeadlineExceeded` (not ``cancelled``). The request is
claimed first-writer-wins like a cancel's, so a deadline and a ``Reactor.cancel`` of one run
never both act: whichever was recorded first is carried out.

Three places notice a passed deadline:

* **the execution that holds the run** checks its own stored deadline against the runtime
  clock before each step and at each step boundary
  (:func:`reactor.engine.run_control.cancel.notice.overdue`, called by
  ``cancel.before_step``; no request to any store until it passed), and when it continues a
  stored run (``cancel.at_start``). A retry whose wait would end after the deadline is not
  waited for: the step's attempt ends with ``RunDeadlineExceeded`` at once
  (:func:`retry_cut`). A worker's park or retry delay is cut to end at the deadline
  (:func:`capped_delay`), so the run comes back and stops itself;
* **a timer job** (``run_deadline``, :func:`schedule`), enqueued with a delay when a run with
  a deadline leaves its caller unfinished (handed to a worker, paused at an interrupt, waiting
  for a fan-out map), stops a run that nobody executes at the deadline: queued, parked past
  its stamp, paused at an interrupt, or whose worker died (``reactor.jobs.handlers
  .run_deadline``);
* a step in flight is not interrupted by the deadline (bound it with ``Timeouts``): the run
  stops at the boundary after it.

**Every run under the root.** The root's deadline governs the runs it contains
(:func:`governing`): a composed child reads it from the record it is embedded in, and a map
element (inline or fan-out) carries a copy of it from its creation. A child or an element
checks it before each of its steps as its root does, and stops itself (rolled back, stored
``failed`` with ``RunDeadlineExceeded``); the root then stops at the boundary after the
compose or map step. A caller's coordination wait (a lock's or a semaphore's ``wait=``) ends
at the deadline (:func:`wait_left`, :func:`cut_failure`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from reactor.engine.env import Env
from reactor.engine.state import RunState
from reactor.errors import RunDeadlineExceeded
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.results import Failure, RollbackFailure
from reactor.ports.payloads import RunDeadlinePayload, job

__all__ = [
    "EXCEEDED_CLASS",
    "capped_delay",
    "cut_failure",
    "deadline_failure",
    "deadline_request",
    "governing",
    "passed",
    "retry_cut",
    "schedule",
    "shown",
    "wait_left",
]

#: ``Failure.exception_class`` of a run or a step the deadline stopped.
EXCEEDED_CLASS = f"{RunDeadlineExceeded.__module__}.{RunDeadlineExceeded.__qualname__}"

log = logging.getLogger("reactor.deadline")


def shown(deadline: float) -> str:
    """``deadline`` (epoch seconds) as an ISO 8601 UTC time, for messages."""
    return datetime.fromtimestamp(deadline, tz=UTC).isoformat(timespec="milliseconds")


def deadline_request(deadline: float, now: float) -> CancelRequest:
    """The stop request of a run whose ``deadline`` passed (at ``now``, epoch seconds):
    carried out by the cancel machinery, rolled back, ending the run ``failed``."""
    return CancelRequest(
        reason=f"its deadline {shown(deadline)} passed", rollback=True, requested_at=now,
        cause="deadline",
    )


def governing(state: RunState) -> float | None:
    """The deadline that governs the execution ``state`` (epoch seconds on the runtime clock;
    docs/concepts.md, "Run deadlines"), or ``None``.

    The stored record's: a root run's own; for a composed child, the record it is embedded
    in (its root's, or the map element's holding it); for a map element, the copy of its
    root's deadline it was created with (an element stored by an earlier release has none).
    """
    return state.checkpoint.context.engine_state.deadline


def passed(state: RunState) -> float | None:
    """The governing deadline of ``state`` (:func:`governing`) when it has passed on the
    runtime clock (no store request), else ``None``."""
    deadline = governing(state)
    if deadline is None or state.env.now() < deadline:
        return None
    return deadline


def wait_left(deadline: float | None, now: float, wait: float) -> float:
    """A caller's coordination ``wait`` (seconds) cut to end at ``deadline`` (epoch seconds,
    ``None``: no deadline) at ``now`` (epoch seconds): never below 0 (one try)."""
    if deadline is None:
        return wait
    return max(min(wait, deadline - now), 0.0)


def cut_failure(run_id: str, deadline: float, what: str) -> Failure:
    """The non-retryable ``Failure`` of :class:`~reactor.errors.RunDeadlineExceeded` of work
    the deadline cut: ``what`` (e.g. ``"its wait for lock 'k'"``) of run ``run_id`` would
    have gone on after ``deadline`` (epoch seconds)."""
    error = RunDeadlineExceeded(
        f"run {run_id!r}: {what} reached the run's deadline ({shown(deadline)})",
        run_id, deadline=deadline,
    )
    return Failure(error, retryable=False)


def deadline_failure(
    ctx: Context, request: CancelRequest, failures: list[RollbackFailure],
    *, deadline: float | None = None,
) -> Failure:
    """The ``Failure`` a run stopped by its deadline ends with (without ``run_id``).

    Args:
        ctx: the run (or the composed child or map element the deadline stopped).
        request: the deadline's request (``cause == "deadline"``).
        failures: the rollback failures (undos and compensates that did not complete).
        deadline: the deadline that governs ``ctx`` (:func:`governing`; a composed child
            stores none of its own); ``None``: ``ctx``'s own.

    Returns:
        A non-retryable ``Failure`` of :class:`~reactor.errors.RunDeadlineExceeded`.
    """
    deadline = deadline or ctx.engine_state.deadline or request.requested_at
    error = RunDeadlineExceeded(
        f"run {ctx.context_id!r} passed its deadline ({shown(deadline)}) and was rolled back",
        ctx.context_id, deadline=deadline,
    )
    return Failure(error, retryable=False, reactor_name=ctx.reactor,
                   rollback_failures=list(failures))


def retry_cut(root: Context, now: float, delay: float, step: str,
              failure: Failure) -> Failure | None:
    """The step's final result when its retry would start after the run's deadline.

    Args:
        root: the run's own stored context (it holds the deadline).
        now: epoch seconds on the runtime clock.
        delay: seconds until the retry.
        step: the step.
        failure: its attempt's failure.

    Returns:
        A non-retryable ``Failure`` of :class:`~reactor.errors.RunDeadlineExceeded` naming
        the attempt's failure, or ``None`` (no deadline, or the retry starts before it).
    """
    deadline = root.engine_state.deadline
    if deadline is None or now + delay < deadline:
        return None
    error = RunDeadlineExceeded(
        f"run {root.context_id!r}: step {step!r} would retry in {delay:g}s, after the run's "
        f"deadline ({shown(deadline)}); its last attempt failed: {failure.message}",
        root.context_id, deadline=deadline,
    )
    return Failure(error, retryable=False)


def capped_delay(ctx: Context, delay: float, now: float) -> float:
    """A worker's park or retry ``delay`` cut so the run comes back at its deadline (and
    stops itself there); ``delay`` when the run has no deadline, or when the deadline passed
    and the run is rolling back (its rollback parks on a hold another run has: it waits at
    the park's own pace, never re-enqueued at once over and over)."""
    deadline = ctx.engine_state.deadline
    if deadline is None:
        return delay
    left = deadline - now
    if left > 0:
        return min(delay, left)
    # passed: a run rolling back (after the deadline's stop, a cancel's or a failure's, such
    # as a retry the deadline cut) parks at the usual pace; one that has not noticed yet
    # comes back now and stops itself
    stopping = ctx.rollback is not None or ctx.engine_state.cancel is not None
    return delay if stopping else 0.0


def schedule(env: Env, run_id: str, reactor: str, deadline: float) -> None:
    """Enqueue the ``run_deadline`` timer job of root run ``run_id`` (of ``reactor``), which
    leaves its caller unfinished, due at ``deadline`` (epoch seconds).

    Best effort: a router failure is logged; the run's own executions still stop it at their
    next step (or when it is resumed or swept).
    """
    payload = RunDeadlinePayload(context_id=run_id, reactor=reactor, deadline=deadline)
    try:
        env.runtime.router.enqueue(job(payload), max(deadline - env.now(), 0.001))
    except Exception as exc:
        log.warning("event=deadline_not_scheduled run_id=%s error=%s (its executions still "
                    "stop it)", run_id, exc)
