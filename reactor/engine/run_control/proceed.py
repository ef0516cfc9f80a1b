"""Continuing a stored ``running`` run after an operator's rewind or fork (docs/operations.md,
"Pause, rewind, fork"): in a worker for a reactor that declares ``background`` (its ``run``
job is enqueued, persist before enqueue), else in the caller, under the liveness lock the
caller took.
"""

from __future__ import annotations

from reactor.dsl.definition import ReactorDefinition
from reactor.engine import executor, observe
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle, publish_completion, stored_result
from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import Env
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.engine.maps import fan_out
from reactor.engine.state import RunState
from reactor.middleware import RunOrigin
from reactor.model.context import Context
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.capabilities import RunsJobsInline
from reactor.ports.payloads import RunPayload, TraceContext, job

__all__ = ["continue_here", "proceed"]

Outcome = Success | Failure | Paused | DispatchHandle


def proceed(
    env: Env, definition: ReactorDefinition, ctx: Context, hold: Liveness, *,
    origin: RunOrigin,
) -> Outcome:
    """Continue run ``ctx`` (stored ``running``) where its results stop.

    Args:
        env: the execution environment (secrets opened when the run continues here).
        definition: the run's reactor.
        ctx: the run as just saved by the caller.
        hold: the caller's hold on the run's liveness lock: released here (after the final
            save when the run continues in this process).
        origin: the middleware origin of the execution segment (docs/observability.md).

    Returns:
        The run's result (with ``run_id``), or a ``DispatchHandle`` when a worker continues
        it, or it was suspended, or handed to a fan-out map.

    Raises:
        StorageError, RouterError: a backend failed (the run stays stored ``running``: the
            run sweeper hands it to a worker).
        KeyboardInterrupt, SystemExit, ...: after the executor stored the run ``aborted``.
    """
    if definition.background is not None:
        hold.release()
        return _to_worker(env, ctx)
    try:
        return continue_here(env, definition, ctx, hold, origin)
    finally:
        hold.release()


def _handle(env: Env, ctx: Context, job_id: str = "") -> DispatchHandle:
    return DispatchHandle(run_id=ctx.context_id, job_id=job_id, reactor=ctx.reactor,
                          results=dict(ctx.intermediate_results), runtime=env.runtime)


def _to_worker(env: Env, ctx: Context) -> Outcome:
    """Enqueue the run's ``run`` job (the run is stored ``running``)."""
    router = env.runtime.router
    if not isinstance(router, RunsJobsInline):
        mark_enqueued(env.runtime, run_unit(ctx.context_id))
    job_id = router.enqueue(job(RunPayload(context_id=ctx.context_id, reactor=ctx.reactor)))
    if isinstance(router, RunsJobsInline):  # the job ran inside enqueue
        stored = load_context(env, ctx.context_id, open_secrets=False)
        if stored is not None and (result := stored_result(stored)) is not None:
            return result
    return _handle(env, ctx, job_id)


def continue_here(
    env: Env, definition: ReactorDefinition, ctx: Context, hold: Liveness, origin: RunOrigin,
    *, resumed_from: TraceContext | None = None,
) -> Outcome:
    """Run the rest of run ``ctx`` in the caller, every save fenced with ``hold`` (which the
    caller releases): an operator's rewind or fork, an interrupt's inline resume.

    Args:
        env: the execution environment (secrets opened).
        definition: the run's reactor.
        ctx: the run, stored ``running``.
        hold: the caller's hold on the run's liveness lock.
        origin: the middleware origin of the segment (docs/observability.md).
        resumed_from: the trace context of the execution that paused the run, linked from
            this segment's span (docs/observability.md, "Resumed runs"), or ``None``.

    Returns:
        The run's result (with ``run_id``), or a ``DispatchHandle`` when it was suspended or
        handed to a fan-out map.

    Raises:
        KeyboardInterrupt, SystemExit, ...: after the executor stored the run ``aborted``
            (the exception carries ``reactor_run_id``).
    """
    state = RunState(definition, ctx, env, FencedCheckpointer(env, ctx, hold))
    with observe.run(env, ctx, origin, resumed_from=resumed_from):
        try:
            result = executor.execute(state)
        except fan_out.MapDispatched as dispatched:  # saved before dispatch
            return fan_out.caller_result(env, dispatched)
        except INTERRUPTIONS as exc:  # stored aborted by the executor
            if getattr(exc, "reactor_run_id", None) is None:
                setattr(exc, "reactor_run_id", ctx.context_id)  # noqa: B010 - any exception type
            raise
    if ctx.status in TERMINAL_STATUSES:
        publish_completion(env.storage, ctx)
    if ctx.status is RunStatus.SUSPENDED:  # an operator holds it (docs/operations.md)
        return _handle(env, ctx)
    return result.with_run_id(ctx.context_id)
