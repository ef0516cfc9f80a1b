"""The cancel request of a root run: read, claimed first-writer-wins, and the ``Failure`` a
cancel stores (docs/run-control.md, "Cancel").
"""

import logging

from reactor.engine.env import Env
from reactor.engine.run_control.deadline import deadline_failure
from reactor.engine.state import RunState
from reactor.errors import (
    DeserializationError,
    RunCancelledError,
)
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.keys import CANCEL_CLAIM_PATH
from reactor.model.results import Failure, RollbackFailure

log = logging.getLogger("reactor.cancel")




def requested(env: Env, run_id: str) -> CancelRequest | None:
    """The cancel request recorded for root run ``run_id``, if any (one claims-store read).

    Args:
        env: the execution environment.
        run_id: the root run.

    Returns:
        The request; ``None`` when nobody asked to cancel the run. An unreadable claim (a
        newer version's) counts as a request with the defaults (rolled back, no reason):
        someone asked to stop the run.

    Raises:
        StorageError: the claims store failed.
    """
    text = env.storage.claims.interrupt_resumes(run_id, [CANCEL_CLAIM_PATH]).get(
        CANCEL_CLAIM_PATH
    )
    return decoded_request(run_id, text)


def decoded_request(run_id: str, text: str | None) -> CancelRequest | None:
    """The cancel claim's payload ``text`` decoded (:func:`requested`'s rule): ``None`` when
    absent, the defaults when unreadable."""
    if text is None:
        return None
    try:
        return CancelRequest.decode(text)
    except DeserializationError as exc:
        log.warning("event=cancel_claim_unreadable run_id=%s error=%s", run_id, exc)
        return CancelRequest()


def claim(env: Env, run_id: str, request: CancelRequest) -> CancelRequest:
    """Record ``request`` for root run ``run_id``, first writer wins.

    Args:
        env: the execution environment.
        run_id: the root run.
        request: this caller's request.

    Returns:
        The request that stands: ``request`` when this call recorded it, else the earlier
        one (a second cancel changes nothing).

    Raises:
        StorageError: the claims store failed.
    """
    if env.storage.claims.claim_interrupt_resume(run_id, CANCEL_CLAIM_PATH, request.encode()):
        return request
    return requested(env, run_id) or request


def is_root(state: RunState) -> bool:
    """Whether ``state`` executes a run of its own (its own stored record: a top-level run or
    an ``async_reactor`` child, neither a composed child nor a map element): only such a run
    notices a cancel request (a child's own, or the one its parent's cancel passed on)."""
    ctx = state.ctx
    return state.checkpoint.context is ctx and ctx.map_metadata is None


def cancelled_failure(
    ctx: Context, request: CancelRequest, failures: list[RollbackFailure],
    *, deadline: float | None = None,
) -> Failure:
    """The ``Failure`` a cancelled run ends with (without ``run_id``).

    Args:
        ctx: the run.
        request: the cancel carried out.
        failures: the rollback failures (undos and compensates that did not complete).
        deadline: the deadline that governs ``ctx`` (a composed child stores none of its
            own: docs/concepts.md, "Run deadlines"); ``None``: ``ctx``'s own.

    Returns:
        A non-retryable ``Failure`` of :class:`~reactor.errors.RunCancelledError`; of
        :class:`~reactor.errors.RunDeadlineExceeded` when the run's deadline stopped it
        (``request.cause == "deadline"``, docs/concepts.md, "Run deadlines").
    """
    if request.cause == "deadline":
        return deadline_failure(ctx, request, failures, deadline=deadline)
    because = f": {request.reason}" if request.reason else ""
    kept = "" if request.rollback else " (its completed work was kept: rollback=False)"
    error = RunCancelledError(
        f"run {ctx.context_id!r} was cancelled{because}{kept}", ctx.context_id,
        reason=request.reason, rolled_back=request.rollback,
    )
    return Failure(error, retryable=False, reactor_name=ctx.reactor,
                   rollback_failures=list(failures))


