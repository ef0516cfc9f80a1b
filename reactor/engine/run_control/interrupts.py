"""Reaching an interrupt step: pause the run, or act on how the interrupt was decided
(docs/run-control.md, "Interrupts").

The executor hands every ready ``interrupt`` step to :func:`reach`, which first reads the
interrupt's claim (``ClaimStore.interrupt_resumes(root run id, step path)``; see
:mod:`reactor.model.interrupt_claim`):

* claimed by a **resume** — the step succeeds with the claimed payload: the executor records
  it as the step's result (no undo entry: an interrupt has nothing to undo) and goes on;
* claimed by an **expiry** or an **exhaustion** — the step fails (not retried, not
  compensated: it has no body) with :class:`~reactor.errors.InterruptExpiredError` or
  :class:`~reactor.errors.InterruptPayloadError`, and the run rolls back as after any failure;
* not claimed — the run **pauses**: the correlation id is resolved and registered for the root
  run, and the step's outcome is a :class:`~reactor.model.results.Paused`.

On a ``Paused`` outcome the executor calls :func:`pause`. In a composed child it only marks the
child ``paused`` and returns, so the parent pauses in turn (the step path carries the compose
step's name). At the root it stores the run ``paused`` with the pending interrupt
(:class:`~reactor.model.engine_state.PendingInterrupt`) and then, for ``expiry="active"``,
enqueues the ``interrupt_timeout`` job with a delay (persist before enqueue). The caller's
liveness lock and reactor-level holds are released as the execution returns: a pause is not a
park, so the run sweeper, which only looks at ``running`` runs, leaves a paused run alone.

Deadlines are measured on the runtime clock (:attr:`reactor.config.Runtime.clock`), like every
wait of the engine (docs/testing.md, "The clock").
"""

from __future__ import annotations

import logging
from dataclasses import replace

from reactor.dsl.declarations import StepSpec
from reactor.dsl.templates import InputRef
from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import load_context
from reactor.engine.env import Env
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import (
    ArgumentResolutionError,
    DeserializationError,
    InterruptCorrelationError,
    InterruptExpiredError,
    InterruptPayloadError,
)
from reactor.model.engine_state import PendingInterrupt
from reactor.model.interrupt_claim import MAX_CORRELATION_ID_LENGTH, InterruptClaim
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import RunStatus
from reactor.ports.payloads import InterruptTimeoutPayload, current_stamp, job

__all__ = [
    "MAX_CORRELATION_ID_LENGTH", "claim_failure", "pause", "reach", "root_id", "schedule_expiry",
]

log = logging.getLogger("reactor.interrupts")



def root_id(state: RunState) -> str:
    """The id of the stored run that holds ``state.ctx`` (itself at the root; a composed
    child's root; an ``async_reactor`` child's own id, never its parent's): interrupts are
    claimed, and their correlation ids registered, for the run ``Reactor.resume`` names."""
    return state.checkpoint.context.context_id


def reach(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run interrupt step ``spec`` (see the module docstring).

    Args:
        state: the context whose step it is (a root run or a composed child).
        spec: the interrupt step.

    Returns:
        ``Success(payload)`` when a resume claimed it; a non-retryable ``Failure`` when it
        expired, ran out of attempts, or its correlation id cannot be used; else ``Paused``
        (nothing saved yet: :func:`pause` does that). ``body_started`` is always ``False``.

    Raises:
        StorageError: the claims store failed.
    """
    path = state.path_prefix + spec.name
    run_id = root_id(state)
    text = state.env.storage.claims.interrupt_resumes(run_id, [path]).get(path)
    if text is not None:
        try:
            claim = InterruptClaim.decode(text)
        except DeserializationError as exc:
            return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
        if claim.action == "resume":
            return StepOutcome(Success(claim.payload), {}, body_started=False)
        return StepOutcome(claim_failure(claim, run_id, path), {}, body_started=False)
    decl = spec.interrupt
    assert decl is not None  # an interrupt step always carries its options
    try:
        correlation_id = _correlation_id(state, spec, path, run_id)
    except (ArgumentResolutionError, InterruptCorrelationError) as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    now = state.env.clock.now()
    paused = Paused(
        step=path,
        correlation_id=correlation_id,
        timeout=decl.timeout,
        deadline=None if decl.timeout is None else now + decl.timeout,
        expiry=decl.expiry,
        max_attempts=decl.max_attempts,
    )
    return StepOutcome(paused, {}, body_started=False)


def claim_failure(claim: InterruptClaim, run_id: str, path: str) -> Failure:
    """The failure an expiry or exhaustion claim fails the interrupt step with.

    Args:
        claim: an ``"expire"`` or ``"exhaust"`` claim.
        run_id: the root run.
        path: the interrupt's step path.

    Returns:
        A non-retryable ``Failure`` of :class:`~reactor.errors.InterruptExpiredError` or
        :class:`~reactor.errors.InterruptPayloadError` (with ``validation_errors``).
    """
    if claim.action == "expire":
        expired = InterruptExpiredError(
            claim.message, run_id=run_id, step=path, deadline=claim.deadline
        )
        return Failure(expired, retryable=False)
    invalid = InterruptPayloadError(
        claim.message, claim.field_errors, run_id=run_id, step=path, exhausted=True
    )
    return Failure(invalid, retryable=False, validation_errors=invalid.field_errors)


def _correlation_id(state: RunState, spec: StepSpec, path: str, run_id: str) -> str | None:
    """Resolve and register the interrupt's correlation id for the root run.

    A mapping left by another run that is no longer paused with this id (it was resumed, or
    it failed before it stored its pause) is stale: it is released and claimed again, once.

    Raises:
        ArgumentResolutionError: the template cannot be resolved.
        InterruptCorrelationError: not a non-blank string of at most
            :data:`MAX_CORRELATION_ID_LENGTH` characters, or another paused run holds it.
    """
    if "correlation_id" not in spec.arguments:
        return None
    template = spec.arguments["correlation_id"]
    if isinstance(template, InputRef) and template.name in state.ctx.redacted:
        # a secret fed to a composed child: a correlation id is stored and shown in clear
        raise InterruptCorrelationError(
            f"interrupt {path!r}: correlation_id cannot be built from secret input "
            f"{template.name!r} (it is stored and shown in clear)", run_id=run_id, step=path,
        )
    value = resolve_arguments(spec, state.ctx)["correlation_id"]
    if not isinstance(value, str) or not value.strip():
        raise InterruptCorrelationError(
            f"interrupt {path!r}: correlation_id must be a non-blank string, got "
            f"{type(value).__name__}", run_id=run_id, step=path,
        )
    if len(value) > MAX_CORRELATION_ID_LENGTH:
        raise InterruptCorrelationError(
            f"interrupt {path!r}: correlation_id is {len(value)} characters, over "
            f"{MAX_CORRELATION_ID_LENGTH}", run_id=run_id, step=path,
        )
    claims = state.env.storage.claims
    holder = claims.claim_correlation_id(value, run_id)
    if holder is not None and not _pauses_with(state.env, holder, value):
        claims.release_correlation_id(value)
        holder = claims.claim_correlation_id(value, run_id)
    if holder is not None:
        raise InterruptCorrelationError(
            f"interrupt {path!r}: correlation_id {value!r} is held by paused run {holder!r}",
            run_id=run_id, step=path,
        )
    return value


def _pauses_with(env: Env, run_id: str, correlation_id: str) -> bool:
    """Whether stored run ``run_id`` is paused at an interrupt with ``correlation_id``."""
    try:
        ctx = load_context(env, run_id, open_secrets=False)
    except DeserializationError:
        return False
    pending = None if ctx is None else ctx.engine_state.interrupt
    return (
        ctx is not None and ctx.status is RunStatus.PAUSED and pending is not None
        and pending.correlation_id == correlation_id
    )


def pause(state: RunState, step: str, paused: Paused) -> Paused:
    """Stop the execution of ``state.ctx`` at a reached interrupt (see the module docstring).

    Args:
        state: the context that reached it (directly, or through its composed child ``step``).
        step: this context's step that paused (the interrupt, or the compose step).
        paused: the pause, its ``step`` the interrupt's full path.

    Returns:
        ``paused`` (without ``run_id``).

    Raises:
        EncodeError, ContextTooLargeError, StorageError, LockLost: the root's save failed.
    """
    ctx = state.ctx
    if not state.mark_paused(step, "paused", paused.step):  # the root pauses in turn
        return paused
    env = state.env
    pausing = current_stamp()  # the tracing middleware's span, if any: the resume links to it
    ctx.engine_state = replace(ctx.engine_state, interrupt=PendingInterrupt(
        step=paused.step,
        correlation_id=paused.correlation_id,
        paused_at=env.clock.now(),
        timeout=paused.timeout,
        deadline=paused.deadline,
        expiry=paused.expiry,
        max_attempts=paused.max_attempts,
        traceparent=None if pausing is None else pausing.traceparent,
        tracestate=None if pausing is None else (pausing.tracestate or None),
    ))
    state.checkpoint.save()
    if paused.expiry == "active" and paused.deadline is not None:
        schedule_expiry(env, ctx.context_id, ctx.reactor, paused.step, paused.deadline)
    return paused


def schedule_expiry(env: Env, run_id: str, reactor: str, path: str, deadline: float) -> None:
    """Enqueue the ``interrupt_timeout`` job of an active expiry, due at ``deadline``.

    Best effort: a router failure is logged, and the run then expires lazily (a resume after
    the deadline fails it; docs/run-control.md, "Interrupts").
    """
    delay = max(deadline - env.clock.now(), 0.001)
    payload = InterruptTimeoutPayload(
        context_id=run_id, reactor=reactor, step=path, deadline=deadline
    )
    try:
        env.runtime.router.enqueue(job(payload), delay)
    except Exception as exc:
        log.warning(
            "event=interrupt_timeout_not_scheduled run_id=%s step=%s error=%s (the interrupt "
            "expires lazily)", run_id, path, exc,
        )
