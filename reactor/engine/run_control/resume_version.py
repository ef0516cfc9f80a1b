"""``Reactor.resume_version``: continue a ``needs_version`` run once the process holds a
definition that can safely continue it (docs/deploys.md, "Compatibility rules").

Under the run's liveness lock the run is read again and judged with this process's
definition (:mod:`reactor.engine.compatibility`); a run still incompatible is refused and
left as it is. A compatible one is stored with the status it had before it was held, without
its ``needs_version`` record (a fenced save), and the job that continues it is enqueued: a
run's ``run`` job (a worker continues it as any background run); for a map element, its
``map_element`` job; for a run held at an interrupt's active expiry (docs/deploys.md,
"Routing by version"), stored ``paused`` again, its ``interrupt_timeout`` job.
"""

from __future__ import annotations

from dataclasses import replace

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, compatibility, liveness
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.errors import LockAcquisitionError, RunStateError
from reactor.model.context import Context
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from reactor.ports.payloads import (
    InterruptTimeoutPayload,
    MapElementPayload,
    Payload,
    RunPayload,
    job,
)

__all__ = ["enqueue", "resume_version", "unhold"]


def resume_version(
    definition: ReactorDefinition | None, run_id: str, *, runtime: Runtime | None = None
) -> DispatchHandle:
    """Judge the ``needs_version`` run ``run_id`` again and hand it to a worker when this
    definition can continue it (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: its registered reactor.
        run_id: the held run.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The handle of the job that continues it (``wait()`` returns the run's outcome): its
        ``run`` job, a map element's ``map_element`` job, or a run paused at an interrupt
        its ``interrupt_timeout`` job (``job_id`` ``""`` when its interrupt has no active
        expiry: it waits for ``Reactor.resume``).

    Raises:
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the run is not ``needs_version`` (``exc.status``); nothing changed.
        DefinitionMismatchError: this definition cannot continue it either (``exc.step``;
            the message names the rule); nothing changed.
        LockAcquisitionError: an execution holds the run's liveness lock (try again).
        UnknownReactorError: ``definition`` is ``None`` and the run's reactor is not
            registered here.
    """
    env = make_env(runtime)
    api.load_run(definition, run_id, env, open_secrets=False)  # exists, and is this reactor's
    hold = liveness.take(env, run_id)
    if hold is None:
        raise LockAcquisitionError(
            f"run {run_id!r} is locked by another execution; try resume_version again",
            key=run_liveness_key(run_id),
        )
    try:
        ctx = api.load_run(definition, run_id, env, open_secrets=False)
        held = ctx.engine_state.needs_version
        if ctx.status is not RunStatus.NEEDS_VERSION or held is None:
            raise RunStateError(
                f"run {run_id!r} is {ctx.status.value}, not needs_version: nothing to resume",
                run_id=run_id, status=ctx.status.value,
            )
        if definition is None:
            definition = registry.get(ctx.reactor).definition
        compatibility.require(definition, ctx, forward=ctx.rollback is None)
        unhold(ctx)
        FencedCheckpointer(env, ctx, hold).save()
    finally:
        hold.release()
    return enqueue(env, ctx)


def unhold(ctx: Context) -> None:
    """Give a ``needs_version`` run back the status it had before it was held and drop its
    ``needs_version`` record (the caller saves it, under the run's liveness lock, then calls
    :func:`enqueue`; docs/deploys.md, "Compatibility rules"). A run that is not held is left
    as it is.

    Args:
        ctx: the run, loaded under its liveness lock.
    """
    held = ctx.engine_state.needs_version
    if ctx.status is not RunStatus.NEEDS_VERSION or held is None:
        return
    ctx.status = RunStatus.parse(held.status)
    ctx.engine_state = replace(ctx.engine_state, needs_version=None)


def enqueue(env: Env, ctx: Context) -> DispatchHandle:
    """Enqueue the job that continues a run :func:`unhold` stored back (after its save and
    the release of its lock: persist before enqueue), for a worker to continue it: its
    ``run`` job, a map element's ``map_element`` job, or, stored ``paused`` again, its
    interrupt's ``interrupt_timeout`` job when the interrupt expires actively.

    Args:
        env: the execution environment.
        ctx: the saved run.

    Returns:
        The handle of that job (``job_id`` ``""`` when none was enqueued).

    Raises:
        RouterError: the router failed (the run stays stored with its status; the run
            sweeper re-dispatches it).
    """
    payload, delay = _continuation(ctx, env.clock.now())
    job_id = "" if payload is None else env.runtime.router.enqueue(job(payload), delay)
    return DispatchHandle(
        run_id=ctx.context_id, job_id=job_id, reactor=ctx.reactor,
        results=dict(ctx.intermediate_results), runtime=env.runtime,
    )


def _continuation(ctx: Context, now: float) -> tuple[Payload | None, float]:
    """The job that continues the resumed run ``ctx`` and its delay in seconds (``now``:
    epoch seconds, runtime clock)."""
    member = ctx.map_metadata
    if member is not None:
        return MapElementPayload(map_id=member.map_id, index=member.index), 0.0
    pending = ctx.engine_state.interrupt
    if ctx.status is RunStatus.PAUSED:
        if pending is None or pending.deadline is None or pending.expiry != "active":
            return None, 0.0
        return InterruptTimeoutPayload(
            context_id=ctx.context_id, reactor=ctx.reactor, step=pending.step,
            deadline=pending.deadline,
        ), max(pending.deadline - now, 0.0)
    return RunPayload(context_id=ctx.context_id, reactor=ctx.reactor), 0.0
