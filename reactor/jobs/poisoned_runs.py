"""A run whose ``run`` job failed on every delivery is stored ``aborted`` with the reason
(docs/workers.md, "Dead letters").

A job whose handler keeps raising is dead-lettered after ``max_deliveries``. For a ``run`` job
that alone would leave the run ``running`` with no execution: the run sweeper re-dispatches it
one dispatch lease later, the same error meets it again, and whatever ran before the error (a
step body, typically) runs again on every delivery of every re-dispatch — a crash loop in slow
motion. So when the worker dead-letters a ``run`` job for an error of reactor's own (not a
backend's: a :class:`~reactor.errors.StorageError`, :class:`~reactor.errors.RouterError` or
:class:`~reactor.errors.LockLost` leaves the run to the sweeper, as an outage ends), it stores
the run ``aborted``, like a run an interruption stopped: its failure is a
:class:`~reactor.errors.PoisonedRunError` naming the error, the deliveries and the dead
letter; a leaf step whose attempt was recorded as started has its compensate pending; no
sweep re-dispatches it, and ``Reactor.undo`` rolls it back (docs/concepts.md, "Decisions").

Only a run nobody executes is touched: the run's liveness lock is taken first (a live
execution keeps it), and only a stored ``running`` run is aborted.
"""

from __future__ import annotations

from reactor import registry
from reactor.config import Runtime
from reactor.engine import executor, liveness
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import publish_completion
from reactor.engine.env import make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.run_control.cancel.in_flight import stored_in_flight
from reactor.engine.state import RunState
from reactor.errors import (
    DeserializationError,
    LockLost,
    PoisonedRunError,
    RouterError,
    StorageError,
    UnknownReactorError,
)
from reactor.model.results import Failure
from reactor.model.status import RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.payloads import RunPayload, parse_payload
from reactor.ports.router import Job

__all__ = ["BACKEND_ERRORS", "abort_poisoned_run"]

log = escaping_logger("reactor.worker")

#: Errors of a backend: a job dead-lettered for one of them leaves its run to the sweeper.
BACKEND_ERRORS: tuple[type[BaseException], ...] = (StorageError, RouterError, LockLost)


def abort_poisoned_run(runtime: Runtime, job: Job, error: BaseException, reason: str) -> bool:
    """Store the run of dead-lettered ``run`` job ``job`` ``aborted`` (see the module
    docstring). Never raises: a failure here is logged and the run is left as it was.

    Args:
        runtime: the worker's runtime.
        job: the job just dead-lettered (any kind: only a ``run`` job is acted on).
        error: the error of its last delivery.
        reason: the dead letter's reason.

    Returns:
        ``True`` when the run was marked ``aborted`` (its save is best effort, as for an
        interruption: a failed save leaves it ``running``, for the sweeper).
    """
    if job.kind != "run" or isinstance(error, BACKEND_ERRORS):
        return False
    try:
        payload = parse_payload(job)
        if not isinstance(payload, RunPayload):
            return False
        return _abort(runtime, payload, reason)
    except Exception:  # best effort: the dead letter is what matters
        log.exception("event=poisoned_run_abort_failed job_id=%s", job.id)
        return False


def _abort(runtime: Runtime, payload: RunPayload, reason: str) -> bool:
    run_id = payload.context_id
    try:
        definition = registry.get(payload.reactor).definition
    except UnknownReactorError:
        return False
    env = make_env(runtime)
    hold = liveness.take(env, run_id)
    if hold is None:  # an execution holds the run: it is not stuck
        log.info("event=poisoned_run_held run_id=%s (a live execution holds it)", run_id)
        return False
    try:
        try:
            ctx = load_context(env, run_id)
        except DeserializationError:
            return False  # the run job quarantines an unreadable run itself
        if ctx is None or ctx.status is not RunStatus.RUNNING:
            return False
        definition.register_codec_types()
        state = RunState(definition, ctx, env, FencedCheckpointer(env, ctx, hold))
        state.in_flight = stored_in_flight(state)
        failure = PoisonedRunError(
            f"run {run_id!r} stopped: its run job failed on every delivery and was "
            f"dead-lettered ({reason}); Reactor.undo rolls it back"
        )
        ctx.failure = Failure(failure, retryable=False, reactor_name=definition.name)
        executor.abort(state, failure)  # the save is best effort, as for an interruption
    finally:
        hold.release()
    publish_completion(env.storage, ctx)
    log.warning("event=poisoned_run_aborted run_id=%s reason=%s", run_id, reason)
    return True
