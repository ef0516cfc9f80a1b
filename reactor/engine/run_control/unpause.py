"""Applying a decided interrupt claim: unpause the run and continue it (docs/run-control.md,
"Interrupts").

The caller whose claim won (:mod:`reactor.engine.run_control.resume`) takes the run's liveness
lock, checks the run is still paused at that interrupt, stores it ``running`` without its
pending interrupt (a fenced save), frees its correlation id, and continues it: in the caller
(``resume="inline"``) or in a worker (``resume="background"``: a ``run`` job). The executor
meets the interrupt step again and acts on the claim
(:mod:`reactor.engine.run_control.interrupts`). A claim whose claimer stopped before applying it
is applied by the next caller that loses to it (:func:`recover_claim`).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import replace

from reactor.dsl.definition import ReactorDefinition
from reactor.engine import liveness, observe
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle, stored_result
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.engine.run_control import proceed
from reactor.errors import InterruptAlreadyResumedError, LockAcquisitionError
from reactor.model.context import Context
from reactor.model.engine_state import PendingInterrupt
from reactor.model.interrupt_claim import InterruptClaim
from reactor.model.keys import run_liveness_key
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import RunStatus
from reactor.ports.capabilities import RunsJobsInline
from reactor.ports.payloads import RunPayload, TraceContext, current_stamp, job, stamping

__all__ = ["apply_claim", "recover_claim"]

log = logging.getLogger("reactor.interrupts")


def apply_claim(
    env: Env, definition: ReactorDefinition, run_id: str, path: str, mode: str, *,
    lock_wait: float,
) -> Success | Failure | Paused | DispatchHandle:
    """Continue the run past its claimed interrupt, under its liveness lock.

    Raises:
        LockAcquisitionError: the run stayed locked for ``lock_wait`` seconds.
        InterruptAlreadyResumedError: the run is no longer paused there (another caller
            applied the claim).
    """
    hold = liveness.take(env, run_id, wait=lock_wait)
    if hold is None:
        raise LockAcquisitionError(
            f"run {run_id!r} stayed locked for {lock_wait:g}s; its interrupt {path!r} is "
            "decided and the next resume or expiry applies it", key=run_liveness_key(run_id),
        )
    try:
        ctx, pending = _unpause(env, run_id, path, hold, open_secrets=mode == "inline")
        observe.resumed(env, ctx, path, mode)
        paused = _pausing_trace(env, pending)
        if mode == "background":
            hold.release()
            return _hand_to_worker(env, ctx, paused)
        # its span links to the one that paused it (docs/observability.md, "Resumed runs")
        return proceed.continue_here(env, definition, ctx, hold, "resume", resumed_from=paused)
    finally:
        hold.release()


def _pausing_trace(env: Env, pending: PendingInterrupt) -> TraceContext | None:
    """The trace context of the span that paused the run, as a resume carries it: the
    resumed run's spans link to it (docs/observability.md, "Resumed runs"); ``None`` when the
    pause was not traced or its stored context is not a W3C one (then nothing is linked)."""
    if pending.traceparent is None:
        return None
    try:
        return TraceContext(
            traceparent=pending.traceparent, tracestate=pending.tracestate or "", link=True,
            enqueued_at=max(env.clock.now(), 0.0), resumed_from=pending.traceparent,
        )
    except ValueError as exc:  # pydantic's ValidationError: a stored value was altered
        log.warning("event=interrupt_trace_ignored step=%s error=%s", pending.step,
                    str(exc).splitlines()[0])
        return None


def _resume_stamping(paused: TraceContext | None) -> stamping | nullcontext[None]:
    """Stamp the resumed run's job so its span links to the pausing span: it continues the
    caller's trace when a span is current here, else starts one of its own."""
    if paused is None:
        return nullcontext()
    caller = current_stamp()
    carried = paused if caller is None else caller.model_copy(
        update={"resumed_from": paused.traceparent}
    )
    return stamping(lambda: carried)


def _unpause(
    env: Env, run_id: str, path: str, hold: Liveness, *, open_secrets: bool
) -> tuple[Context, PendingInterrupt]:
    """Store the run ``running`` without its pending interrupt and free its correlation id.

    Returns:
        The run as stored now, and the interrupt it was paused at.

    Raises:
        InterruptAlreadyResumedError: the run is not paused at ``path`` any more.
    """
    ctx = load_context(env, run_id, open_secrets=open_secrets)
    pending = None if ctx is None else ctx.engine_state.interrupt
    if ctx is None or ctx.status is not RunStatus.PAUSED or pending is None or (
        pending.step != path
    ):
        raise InterruptAlreadyResumedError(
            f"interrupt {path!r} of run {run_id!r} was already applied by another caller",
            run_id=run_id, step=path,
        )
    ctx.status = RunStatus.RUNNING
    ctx.engine_state = replace(ctx.engine_state, interrupt=None)
    FencedCheckpointer(env, ctx, hold).save()
    if pending.correlation_id is not None:
        try:
            env.storage.claims.release_correlation_id(pending.correlation_id)
        except Exception as exc:  # a stale mapping is detected and replaced when reused
            log.warning("event=correlation_not_released run_id=%s error=%s", run_id, exc)
    return ctx, pending


def _hand_to_worker(
    env: Env, ctx: Context, paused: TraceContext | None = None
) -> Success | Failure | Paused | DispatchHandle:
    """Enqueue the ``run`` job of a run stored ``running`` (persist before enqueue); with
    ``paused``, its span links to the span that paused the run."""
    router = env.runtime.router
    with _resume_stamping(paused):
        job_id = router.enqueue(job(RunPayload(context_id=ctx.context_id,
                                               reactor=ctx.reactor)))
    if isinstance(router, RunsJobsInline):  # the job ran inside enqueue
        stored = load_context(env, ctx.context_id, open_secrets=False)
        if stored is not None and (result := stored_result(stored)) is not None:
            return result
    return DispatchHandle(
        run_id=ctx.context_id, job_id=job_id, reactor=ctx.reactor,
        results=dict(ctx.intermediate_results), runtime=env.runtime,
    )


def recover_claim(env: Env, run_id: str, path: str) -> None:
    """Apply the claim of a claimer that stopped before applying it (see the module
    docstring): when the run is still paused at ``path`` and the claim is older than
    ``context_lock_ttl`` seconds, store the run ``running`` and enqueue its ``run`` job.
    Best effort: never raises."""
    try:
        text = env.storage.claims.interrupt_resumes(run_id, [path]).get(path)
        if text is None:
            return
        claim = InterruptClaim.decode(text)
        if env.clock.now() - claim.claimed_at < env.settings.context_lock_ttl:
            return  # its claimer may still be applying it
        hold = liveness.take(env, run_id)
        if hold is None:
            return
        try:
            ctx, pending = _unpause(env, run_id, path, hold, open_secrets=False)
        except InterruptAlreadyResumedError:
            return
        finally:
            hold.release()
        _hand_to_worker(env, ctx, _pausing_trace(env, pending))
        log.warning("event=interrupt_claim_recovered run_id=%s step=%s action=%s",
                    run_id, path, claim.action)
    except Exception as exc:
        log.warning("event=interrupt_recovery_failed run_id=%s step=%s error=%s",
                    run_id, path, exc)

