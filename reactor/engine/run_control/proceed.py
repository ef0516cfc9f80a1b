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
from reactor.ports.payloads import RunPayload, job

__all__ = ["proceed"]

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
        return _here(env, definition, ctx, hold, origin)
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


def _here(
    env: Env, definition: ReactorDefinition, ctx: Context, hold: Liveness, origin: RunOrigin
) -> Outcome:
    """Run the rest of the run in the caller, every save fenced with ``hold``."""
    state = RunState(definition, ctx, env, FencedCheckpointer(env, ctx, hold))
    with observe.run(env, ctx, origin):
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
