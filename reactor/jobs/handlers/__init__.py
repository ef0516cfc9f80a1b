"""Job handlers, one module per job kind, and the dispatch table workers use (docs/architecture.md,
"Job kinds").

A handler is ``handler(jc, payload)``: ``jc`` is the :class:`JobContext` (the runtime and the
job being run), ``payload`` the job's typed payload (:mod:`reactor.ports.payloads`). A handler
returns normally when the job is done (the worker acks it); re-enqueueing (parks, retries,
contention) is the handler's own business and also ends in a normal return. Poison jobs raise
:class:`~reactor.errors.DeserializationError` or
:class:`~reactor.errors.UnknownReactorError` (dead-lettered with the reason); anything
else raised is retried by the worker with a backoff.

:data:`HANDLERS` maps a job kind to its handler; modules for the other kinds (``step``,
``map_element``, ``map_collect``, ``map_element_rollback``) register themselves by adding an
entry. :func:`dispatch_job` parses and dispatches one job; :func:`bind_inline` makes an inline
router run jobs through the same handlers, synchronously, in the enqueuing thread
(docs/architecture.md, "Liveness locks and keys").
"""

from __future__ import annotations

from reactor.config import Runtime
from reactor.errors import DeserializationError, UnknownReactorError
from reactor.jobs import observe
from reactor.jobs.handlers.interrupt_timeout import handle_interrupt_timeout
from reactor.jobs.handlers.map_collect import handle_map_collect
from reactor.jobs.handlers.map_element import handle_map_element
from reactor.jobs.handlers.map_element_rollback import handle_map_element_rollback
from reactor.jobs.handlers.run import handle_run
from reactor.jobs.handlers.run_deadline import handle_run_deadline
from reactor.jobs.handlers.sleep_wake import handle_sleep_wake
from reactor.jobs.handlers.step import handle_step
from reactor.jobs.handlers.sweep import handle_sweep
from reactor.jobs.job_context import Handler, JobContext
from reactor.ports.capabilities import RunsJobsInline
from reactor.ports.payloads import parse_payload
from reactor.ports.router import Job

__all__ = ["HANDLERS", "Handler", "JobContext", "bind_inline", "dispatch_job"]


#: Job kind -> handler. Extend it (``HANDLERS["step"] = handle_step``) to serve a new kind.
HANDLERS: dict[str, Handler] = {
    "run": handle_run,
    "step": handle_step,
    "sweep": handle_sweep,
    "map_element": handle_map_element,
    "map_collect": handle_map_collect,
    "map_element_rollback": handle_map_element_rollback,
    "interrupt_timeout": handle_interrupt_timeout,
    "run_deadline": handle_run_deadline,
    "sleep_wake": handle_sleep_wake,
}


def dispatch_job(jc: JobContext) -> None:
    """Parse ``jc.job``'s payload and run the handler of its kind.

    Raises:
        DeserializationError: unknown kind, or a malformed payload (poison: dead-letter it).
        UnknownReactorError: the payload names an unregistered reactor (poison).
        Exception: whatever the handler raised (retry it).
    """
    handler = HANDLERS.get(jc.job.kind)
    if handler is None:
        raise DeserializationError(f"unknown job kind {jc.job.kind!r}")
    payload = parse_payload(jc.job)
    with observe.job(jc, payload):  # docs/observability.md, "Middleware"
        handler(jc, payload)


def bind_inline(runtime: Runtime) -> None:
    """Make ``runtime.router`` run every job through :data:`HANDLERS`, synchronously, in the
    enqueuing thread, when it is a :class:`~reactor.ports.capabilities.RunsJobsInline` router
    with no handler bound yet (any other router is left alone).

    An unregistered reactor is reported to the router as a :class:`DeserializationError` so it
    is dead-lettered like any poison job.
    """
    router = runtime.router
    if not isinstance(router, RunsJobsInline) or router.bound:
        return

    def handle(job: Job) -> None:
        try:
            dispatch_job(JobContext(runtime=runtime, job=job, inline=True, liveness_wait=0.0))
        except UnknownReactorError as exc:
            raise DeserializationError(str(exc)) from exc

    router.bind(handle)
