"""The ``run_deadline`` job: a run's deadline where nobody executes the run (docs/concepts.md,
"Run deadlines"; docs/architecture.md, "Job kinds").

Enqueued with a delay when a run with a deadline leaves its caller unfinished
(:func:`reactor.engine.run_control.deadline.schedule`). When it runs: a job delivered before
the deadline (judged on the runtime clock) is re-enqueued for the rest; a run that finished,
or is rolling back after a failure, is left alone; else the deadline's stop request is
claimed like a cancel's (first writer wins) and carried out as ``Reactor.cancel`` carries out
a cancel (:func:`reactor.engine.run_control.cancel_run.cancel`): here, under the run's
liveness lock, when nobody executes it (queued, paused at an interrupt, parked past its
stamp, its worker dead), or by the execution that holds it, at its next step boundary or
when its job comes back. The run ends ``failed`` with ``RunDeadlineExceeded``.

The rollback carried out here follows a worker's rule (docs/coordination.md, "Rollback"):
an undo or compensate whose lock or semaphore another run holds parks (the run is saved
with its rollback in progress and its ``run`` job enqueued after the park's delay, which
finishes the stop); it never blocks this thread up to ``rollback_wait`` and never skips
the undo. On the ``inline://`` router it runs as a synchronous caller's. A run whose
completed steps this process's definition does not all declare (with their undos) is left
as it is, logged ``event=run_deadline_needs_version``: its deadline stands, and stops it once
a process with its definition continues it (docs/deploys.md, "Compatibility rules").
"""

from __future__ import annotations

from reactor import registry
from reactor.engine.env import make_env
from reactor.engine.run_control import cancel_run
from reactor.errors import DefinitionMismatchError, RunNotFoundError, RunStateError
from reactor.jobs.job_context import JobContext
from reactor.model.text import escaping_logger
from reactor.ports.payloads import RunDeadlinePayload

__all__ = ["handle_run_deadline"]

log = escaping_logger("reactor.worker")


def handle_run_deadline(jc: JobContext, payload: RunDeadlinePayload) -> None:
    """Stop the run named by ``payload`` if its deadline passed and it has not finished.

    Raises:
        UnknownReactorError: the payload names no registered reactor (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    definition = registry.get(payload.reactor).definition  # unregistered: a poison job
    env = make_env(jc.runtime)
    left = payload.deadline - env.now()
    if left > 0:
        log.info("event=run_deadline_requeued run_id=%s delay=%.2f", payload.context_id, left)
        jc.requeue(payload, left)
        return
    try:
        outcome = cancel_run.cancel(
            definition, payload.context_id, runtime=jc.runtime, deadline_passed=True,
            in_worker=not jc.inline,
        )
    except DefinitionMismatchError as exc:
        # this process's definition lacks a completed step's undo: rolling back here would
        # skip it for good. The deadline stands: the run stops once a process that has its
        # definition continues it (docs/deploys.md, "Compatibility rules")
        log.warning("event=run_deadline_needs_version run_id=%s step=%s reason=%s",
                    payload.context_id, exc.step, exc)
        return
    except RunNotFoundError:  # expired or deleted: nothing to stop
        log.info("event=run_deadline_run_gone run_id=%s", payload.context_id)
        return
    except RunStateError as exc:  # finished, or rolling back after a failure
        log.info("event=run_deadline_run_settled run_id=%s status=%s", payload.context_id,
                 getattr(exc, "status", ""))
        return
    log.info("event=run_deadline_done run_id=%s outcome=%s", payload.context_id,
             type(outcome).__name__)
