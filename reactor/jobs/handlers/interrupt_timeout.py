"""The ``interrupt_timeout`` job: the active expiry of an interrupt (docs/run-control.md,
"Interrupts"; docs/architecture.md, "Job kinds").

Enqueued with a delay when a run pauses at an interrupt declared ``expiry="active"``. When it
runs: a run that is no longer paused at that step (resumed, expired, gone) is left alone; a job
delivered before the deadline (judged on the runtime clock) is re-enqueued for the rest; else the
job claims the interrupt's expiry (first writer wins against any resume), stores the run
``running`` under its liveness lock and enqueues the run's ``run`` job, which fails the
interrupt step and rolls the run back (:func:`reactor.engine.run_control.resume.expire_due`).
A run this process's definition cannot continue is not expired here: the job is handed to a
worker announcing the run's definition, else the run is held ``needs_version``
(docs/deploys.md, "Routing by version").
"""

from __future__ import annotations

from reactor import registry
from reactor.engine.compatibility import Incompatibility
from reactor.engine.run_control import resume
from reactor.jobs import version_routing
from reactor.jobs.job_context import JobContext
from reactor.model.engine_state import DefinitionStamp
from reactor.model.text import escaping_logger
from reactor.ports.payloads import InterruptTimeoutPayload

__all__ = ["handle_interrupt_timeout"]

log = escaping_logger("reactor.worker")


def handle_interrupt_timeout(jc: JobContext, payload: InterruptTimeoutPayload) -> None:
    """Expire the interrupt named by ``payload`` if its run still waits there.

    Raises:
        UnknownReactorError: the payload names no registered reactor (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    registry.get(payload.reactor)  # an unregistered reactor is a poison job
    env = jc.env()

    def refused(found: Incompatibility, stored: DefinitionStamp | None) -> bool:
        return version_routing.hand_back(jc, payload, payload.reactor, stored, found)

    again = resume.expire_due(
        env, run_id=payload.context_id, step=payload.step, deadline=payload.deadline,
        lock_wait=0.0 if jc.inline else jc.liveness_wait, refused=refused,
    )
    if again is not None:
        log.info("event=interrupt_timeout_requeued run_id=%s step=%s delay=%.2f",
                 payload.context_id, payload.step, again)
        jc.requeue(payload, again)
