"""The ``sleep_wake`` job: the timer of a run sleeping at a ``sleep`` step (docs/schedules.md,
"Durable sleep"; docs/architecture.md, "Job kinds").

Enqueued with a delay when a run parks at a sleep. When it runs: a run that no longer sleeps
at that step (woken, cancelled, stopped by its deadline, gone) is left alone; a job delivered
before the wake time (judged on the runtime clock) is re-enqueued for the rest; else the run
is stored ``running`` under its liveness lock and its ``run`` job enqueued
(:func:`reactor.engine.sleeps.wake_due`).
"""

from __future__ import annotations

from reactor import registry
from reactor.engine import sleeps
from reactor.engine.env import make_env
from reactor.jobs.job_context import JobContext
from reactor.model.text import escaping_logger
from reactor.ports.payloads import SleepWakePayload

__all__ = ["handle_sleep_wake"]

log = escaping_logger("reactor.worker")


def handle_sleep_wake(jc: JobContext, payload: SleepWakePayload) -> None:
    """Wake the run named by ``payload`` if it still sleeps at that step and its wake time
    passed; re-enqueue the job for the rest of the wait otherwise.

    Raises:
        UnknownReactorError: the payload names no registered reactor (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    registry.get(payload.reactor)  # an unregistered reactor is a poison job
    env = make_env(jc.runtime)
    again = sleeps.wake_due(
        env, payload.context_id, payload.step,
        lock_wait=0.0 if jc.inline else jc.liveness_wait,
    )
    if again is not None:
        log.info("event=sleep_wake_requeued run_id=%s step=%s delay=%.2f",
                 payload.context_id, payload.step, again)
        jc.requeue(payload, again)
