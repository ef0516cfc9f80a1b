"""``Reactor.resume``: continue a run paused at an interrupt, and expire one that waited too
long (docs/run-control.md, "Interrupts").

**Deciding.** Every decision on a paused interrupt is one first-writer-wins claim in the claims
store (``ClaimStore.claim_interrupt_resume``, keyed by the root run and the interrupt's step
path; :mod:`reactor.model.interrupt_claim`): a valid payload claims a *resume*, the payload
that uses the last of ``max_attempts`` claims an *exhaustion*, and a resume after the deadline,
or the active-expiry job at the deadline, claims an *expiry*. Exactly one claim wins; every
other caller gets :class:`~reactor.errors.InterruptAlreadyResumedError` and its payload is not
applied. An invalid payload below the limit claims nothing: it counts one attempt
(``ClaimStore.increment_interrupt_attempts``) and raises
:class:`~reactor.errors.InterruptPayloadError` naming the fields.

**Applying.** The winner takes the run's liveness lock ``async:<id>`` (waiting up to
``context_lock_ttl`` seconds), checks the run is still paused at that interrupt, stores it
``running`` without its pending interrupt (a fenced save), releases the correlation id, and
continues the run: in the caller (``resume="inline"``, the default) or in a worker
(``resume="background"``: a ``run`` job, as a background hand-off). Either way the executor
meets the interrupt step again and acts on the claim
(:mod:`reactor.engine.run_control.interrupts`): the
payload becomes the step's result, or the step fails and the run rolls back.

**A claimer that stopped.** A claim is made before the run is saved, so a caller that dies in
between leaves a claimed interrupt on a paused run. The next caller that loses the claim to it
(a resume, or the expiry job) applies it once the claim is older than ``context_lock_ttl``
seconds, continuing the run in a worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, compatibility, liveness
from reactor.engine.checkpoint import load_context, size_limit
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.run_control.unpause import apply_claim, recover_claim
from reactor.errors import (
    DeserializationError,
    InterruptAlreadyResumedError,
    InterruptArgumentError,
    InterruptExpiredError,
    InterruptNotFoundError,
    InterruptPayloadError,
    LockAcquisitionError,
    RunNotFoundError,
)
from reactor.model.context import Context
from reactor.model.engine_state import DefinitionStamp, PendingInterrupt
from reactor.model.interrupt_claim import MAX_CORRELATION_ID_LENGTH, InterruptClaim
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import RunStatus

__all__ = ["RESUME_MODES", "ResumeMode", "expire_due", "resume"]

log = logging.getLogger("reactor.interrupts")

#: Where a resumed run continues: in the caller, or in a worker.
ResumeMode = Literal["inline", "background"]
#: The accepted values of ``resume=``.
RESUME_MODES: frozenset[str] = frozenset({"inline", "background"})


def resume(
    definition: ReactorDefinition | None,
    *,
    run_id: str | None = None,
    correlation_id: str | None = None,
    payload: Any = None,
    step: str | None = None,
    mode: str = "inline",
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Success | Failure | Paused | DispatchHandle:
    """Resume the interrupt a run is paused at (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the paused run (exactly one of ``run_id`` and ``correlation_id``).
        correlation_id: the correlation id its interrupt registered.
        payload: the interrupt step's result-to-be, checked against its ``schema``.
        step: the interrupt's step path the caller expects (``None``: whichever it is).
        mode: ``"inline"`` (continue in the caller) or ``"background"`` (in a worker).
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the continued run's retry wait (as for :func:`reactor.engine.api.run`).

    Returns:
        The continued run's result with ``run_id``: ``Success``, ``Halt``, ``Failure``, a
        ``Paused`` at its next interrupt, or a ``DispatchHandle`` (``mode="background"``,
        or a fan-out map handed to workers).

    Raises:
        InterruptArgumentError: bad arguments (``exc.field`` names which); nothing counted.
        DefinitionMismatchError: this definition cannot safely continue the run
            (docs/deploys.md, "Compatibility rules"); nothing claimed or changed.
        InterruptNotFoundError: unknown correlation id, the run is not paused, or it is paused
            at another step than ``step``.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        InterruptAlreadyResumedError: another resume, an expiry or an exhaustion decided the
            interrupt first.
        InterruptPayloadError: the payload is invalid (one attempt counted); with
            ``exhausted=True`` it used the last attempt and the run was failed and rolled back
            (``exc.failure``; in a worker with ``mode="background"``).
        InterruptExpiredError: the deadline had passed: the run was failed and rolled back
            (``exc.failure``; in a worker with ``mode="background"``).
        LockAcquisitionError: the claim was won but the run stayed locked for
            ``context_lock_ttl`` seconds (the claim is applied by a later caller).
        StorageError, RouterError: a backend failed.
    """
    _check_arguments(run_id, correlation_id, step, mode)
    env = make_env(runtime, sleep)
    ctx = _load(definition, env, run_id, correlation_id)
    if definition is None:
        definition = registry.get(ctx.reactor).definition
    definition.register_codec_types()
    compatibility.require(definition, ctx)  # docs/deploys.md, "Compatibility rules"
    pending = _pending(env, definition, ctx, step, via_correlation=correlation_id is not None)
    found = definition.find_interrupt(pending.step)
    if found is None:
        raise InterruptNotFoundError(
            f"run {ctx.context_id!r} is paused at {pending.step!r}, but reactor "
            f"{definition.name!r} declares no interrupt there", run_id=ctx.context_id,
            step=pending.step, field="step", status=ctx.status.value,
        )
    spec = found[1]
    now = env.clock.now()
    if pending.deadline is not None and now >= pending.deadline:
        _expire_late(env, definition, ctx.context_id, pending, now, mode)
    decl = spec.interrupt
    assert decl is not None
    value, errors = decl.check_payload(payload, max_bytes=size_limit(env))
    if errors:
        _refuse(env, definition, ctx.context_id, pending, errors, now, mode)
    claim = InterruptClaim("resume", now, payload=value)
    return _decide(env, definition, ctx.context_id, pending.step, claim, mode)


#: ``refused(found, stored)``: whether the expiry job was handed to another worker
#: (docs/deploys.md, "Routing by version").
Refused = Callable[[compatibility.Incompatibility, DefinitionStamp | None], bool]


def expire_due(
    env: Env, *, run_id: str, step: str, deadline: float, lock_wait: float,
    refused: Refused | None = None,
) -> float | None:
    """The active-expiry job's work: fail a run still paused at ``step`` once the deadline
    passed (docs/run-control.md, "Interrupts").

    The run is judged against this process's definition first (docs/deploys.md,
    "Compatibility rules"): one it cannot continue is neither claimed nor failed here. It is
    handed to another worker when ``refused`` says so, else held ``needs_version`` (under its
    liveness lock, with ``paused`` as the status to go back to): ``Reactor.resume_version``
    stores it ``paused`` again and enqueues this job anew.

    Args:
        env: the worker's environment.
        run_id: the paused root run.
        step: the interrupt's step path.
        deadline: the deadline the job was scheduled for (epoch seconds, runtime clock); the
            stored pending interrupt's deadline wins when present.
        lock_wait: seconds to wait for the run's liveness lock.
        refused: called when this definition cannot continue the run, with why and the
            run's stored definition; ``True``: the job was handed back, nothing more to do.

    Returns:
        Seconds after which the job must run again (it came early, or the run stayed
        locked), else ``None`` (done: expired and handed to a worker to roll back, held
        ``needs_version``, handed back, or nothing to do).

    Raises:
        UnknownReactorError: the run's reactor is not registered here.
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    try:
        ctx = load_context(env, run_id, open_secrets=False)
    except DeserializationError as exc:  # the run job quarantines unreadable runs
        log.warning("event=interrupt_timeout_skipped run_id=%s error=%s", run_id, exc)
        return None
    pending = None if ctx is None else ctx.engine_state.interrupt
    if ctx is None or ctx.status is not RunStatus.PAUSED or pending is None or (
        pending.step != step
    ):
        log.info("event=interrupt_timeout_skipped run_id=%s step=%s (not paused there)",
                 run_id, step)
        return None
    due = pending.deadline if pending.deadline is not None else deadline
    now = env.clock.now()
    if now < due:
        return due - now
    definition = registry.get(ctx.reactor).definition
    definition.register_codec_types()
    found = compatibility.judge(definition, ctx)
    if found is not None:  # docs/deploys.md, "Routing by version"
        if refused is not None and refused(found, ctx.engine_state.definition):
            return None
        return _hold_expiry(env, definition, run_id, step, found, lock_wait)
    claim = _expiry_claim(run_id, pending, now)
    if not env.storage.claims.claim_interrupt_resume(run_id, step, claim.encode()):
        recover_claim(env, run_id, step)
        return None
    try:
        apply_claim(env, definition, run_id, step, "background", lock_wait=lock_wait)
    except LockAcquisitionError:
        return float(env.settings.context_lock_ttl)  # then the claim is stale: recovered
    except InterruptAlreadyResumedError:
        return None  # applied by a caller that recovered the claim
    log.info("event=interrupt_expired run_id=%s step=%s deadline=%.3f", run_id, step, due)
    return None


def _hold_expiry(
    env: Env, definition: ReactorDefinition, run_id: str, step: str,
    found: compatibility.Incompatibility, lock_wait: float,
) -> float | None:
    """Hold the run still paused at ``step`` ``needs_version`` (``paused`` to go back to);
    seconds to try again when its liveness lock stayed taken, else ``None``."""
    hold = liveness.take(env, run_id, wait=lock_wait)
    if hold is None:
        return float(env.settings.context_lock_ttl)
    try:
        ctx = load_context(env, run_id, open_secrets=False)  # sealed values kept as is
        pending = None if ctx is None else ctx.engine_state.interrupt
        if ctx is None or ctx.status is not RunStatus.PAUSED or pending is None or (
            pending.step != step
        ):
            return None
        compatibility.hold(ctx, found, definition, env.clock.now())
        FencedCheckpointer(env, ctx, hold).save()
    finally:
        hold.release()
    return None


# ------------------------------------------------------------------------------ checks


def _check_arguments(
    run_id: str | None, correlation_id: str | None, step: str | None, mode: str
) -> None:
    """Refuse unusable arguments before anything is read or counted.

    Raises:
        InterruptArgumentError: naming the argument.
    """
    if (run_id is None) == (correlation_id is None):
        raise InterruptArgumentError(
            "resume needs exactly one of run_id and correlation_id", field="run_id"
        )
    for name, given in (("run_id", run_id), ("correlation_id", correlation_id),
                        ("step", step)):
        if given is not None and (not isinstance(given, str) or not given.strip()):
            raise InterruptArgumentError(
                f"resume({name}=...) must be a non-blank string, got {type(given).__name__}",
                field=name,
            )
    if correlation_id is not None and len(correlation_id) > MAX_CORRELATION_ID_LENGTH:
        raise InterruptArgumentError(
            f"resume(correlation_id=...) is {len(correlation_id)} characters, over "
            f"{MAX_CORRELATION_ID_LENGTH}: no interrupt registers such an id",
            field="correlation_id",
        )
    if mode not in RESUME_MODES:
        raise InterruptArgumentError(
            f"resume(resume=...) must be 'inline' or 'background', got {mode!r}",
            field="resume",
        )


def _load(
    definition: ReactorDefinition | None, env: Env, run_id: str | None,
    correlation_id: str | None,
) -> Context:
    """The run named by ``run_id``, or by ``correlation_id`` (its secrets still sealed).

    Raises:
        InterruptNotFoundError: the correlation id names no run (of this reactor).
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
    """
    if run_id is not None:
        return api.load_run(definition, run_id, env, open_secrets=False)
    assert correlation_id is not None
    holder = env.storage.claims.correlation_context(correlation_id)
    if holder is None:
        raise InterruptNotFoundError(
            f"no paused run has correlation id {correlation_id!r}", field="correlation_id"
        )
    try:
        return api.load_run(definition, holder, env, open_secrets=False)
    except RunNotFoundError as exc:
        raise InterruptNotFoundError(
            f"correlation id {correlation_id!r} names no paused run of this reactor ({exc})",
            run_id=holder, field="correlation_id",
        ) from exc


def _pending(
    env: Env, definition: ReactorDefinition, ctx: Context, step: str | None, *,
    via_correlation: bool,
) -> PendingInterrupt:
    """The interrupt ``ctx`` is paused at, checked against the caller's ``step``.

    Raises:
        InterruptAlreadyResumedError: the run is not paused, and one of its interrupts (the
            named one) was decided by a claim.
        InterruptNotFoundError: the run is not paused (and none was claimed), or it is paused
            at another step.
    """
    run_id = ctx.context_id
    pending = ctx.engine_state.interrupt
    if ctx.status is not RunStatus.PAUSED or pending is None:
        paths: Sequence[str] = [step] if step is not None else definition.interrupt_paths()
        claimed = env.storage.claims.interrupt_resumes(run_id, list(paths)) if paths else {}
        if claimed:
            path = next(iter(claimed))
            raise InterruptAlreadyResumedError(
                f"interrupt {path!r} of run {run_id!r} was already decided "
                f"({_action(claimed[path])}); the run is {ctx.status.value}",
                run_id=run_id, step=path,
            )
        raise InterruptNotFoundError(
            f"run {run_id!r} is {ctx.status.value}, not paused at an interrupt",
            run_id=run_id, step=step or "",
            field="correlation_id" if via_correlation else "run_id", status=ctx.status.value,
        )
    if step is not None and step != pending.step:
        raise InterruptNotFoundError(
            f"run {run_id!r} is paused at interrupt {pending.step!r}, not {step!r}",
            run_id=run_id, step=step, field="step", status=ctx.status.value,
        )
    return pending


def _action(text: str) -> str:
    """A claim's action, for messages (``"unreadable"`` when it cannot be decoded)."""
    try:
        return InterruptClaim.decode(text).action
    except DeserializationError:
        return "unreadable"


# ------------------------------------------------------------------------------ decisions


def _fields(errors: dict[str, list[str]]) -> str:
    return "; ".join(f"{name}: {', '.join(messages)}" for name, messages in errors.items())


def _refuse(
    env: Env, definition: ReactorDefinition, run_id: str, pending: PendingInterrupt,
    errors: dict[str, list[str]], now: float, mode: str,
) -> None:
    """Count an invalid payload; at ``max_attempts`` claim the exhaustion and fail the run.

    Raises:
        InterruptPayloadError: always (``exhausted=True`` at the limit, with ``failure`` when
            the rollback ran here).
        InterruptAlreadyResumedError: the limit was reached but another claim won first.
    """
    path, limit = pending.step, pending.max_attempts
    count = env.storage.claims.increment_interrupt_attempts(run_id, path)
    exhausted = count >= limit
    note = "no attempts left: the run is rolled back" if exhausted else "resume again"
    message = (
        f"invalid payload for interrupt {path!r} of run {run_id!r}: {_fields(errors)} "
        f"(attempt {count} of {limit}; {note})"
    )
    error = InterruptPayloadError(
        message, errors, run_id=run_id, step=path, attempts=count, max_attempts=limit,
        exhausted=exhausted,
    )
    if not exhausted:
        _record_attempts(env, run_id, path, count)
        raise error
    claim = InterruptClaim("exhaust", now, message=message, field_errors=errors)
    outcome = _decide(env, definition, run_id, path, claim, mode)
    error.failure = outcome if isinstance(outcome, Failure) else None
    raise error


def _expiry_claim(run_id: str, pending: PendingInterrupt, now: float) -> InterruptClaim:
    timeout = "" if pending.timeout is None else f" of {pending.timeout:g}s"
    message = (
        f"interrupt {pending.step!r} of run {run_id!r} expired: its timeout{timeout} passed "
        "before it was resumed"
    )
    return InterruptClaim("expire", now, message=message, deadline=pending.deadline)


def _expire_late(
    env: Env, definition: ReactorDefinition, run_id: str, pending: PendingInterrupt,
    now: float, mode: str,
) -> None:
    """A resume after the deadline (lazy expiry): claim the expiry and fail the run.

    Raises:
        InterruptExpiredError: always (with ``failure`` when the rollback ran here).
        InterruptAlreadyResumedError: another claim won first.
    """
    claim = _expiry_claim(run_id, pending, now)
    outcome = _decide(env, definition, run_id, pending.step, claim, mode)
    error = InterruptExpiredError(
        claim.message, run_id=run_id, step=pending.step, deadline=pending.deadline
    )
    error.failure = outcome if isinstance(outcome, Failure) else None
    raise error


def _record_attempts(env: Env, run_id: str, path: str, count: int) -> None:
    """Show ``count`` invalid attempts on the paused run (best effort: one try at its lock;
    the claims store's counter is what decides)."""
    try:
        hold = liveness.take(env, run_id)
        if hold is None:
            return
        try:
            ctx = load_context(env, run_id, open_secrets=False)  # sealed values kept as is
            pending = None if ctx is None else ctx.engine_state.interrupt
            if ctx is None or ctx.status is not RunStatus.PAUSED or pending is None or (
                pending.step != path or pending.attempts >= count
            ):
                return
            ctx.engine_state = replace(
                ctx.engine_state, interrupt=replace(pending, attempts=count)
            )
            FencedCheckpointer(env, ctx, hold).save()
        finally:
            hold.release()
    except Exception as exc:
        log.warning("event=interrupt_attempts_not_recorded run_id=%s error=%s", run_id, exc)


def _decide(
    env: Env, definition: ReactorDefinition, run_id: str, path: str, claim: InterruptClaim,
    mode: str,
) -> Success | Failure | Paused | DispatchHandle:
    """Claim ``claim`` for the interrupt; the winner applies it
    (:func:`~reactor.engine.run_control.unpause.apply_claim`).

    Raises:
        InterruptAlreadyResumedError: another claim won first (a stale one is recovered).
        LockAcquisitionError: see :func:`~reactor.engine.run_control.unpause.apply_claim`.
    """
    if not env.storage.claims.claim_interrupt_resume(run_id, path, claim.encode()):
        recover_claim(env, run_id, path)
        raise InterruptAlreadyResumedError(
            f"interrupt {path!r} of run {run_id!r} was already decided by another caller",
            run_id=run_id, step=path,
        )
    return apply_claim(env, definition, run_id, path, mode,
                  lock_wait=float(env.settings.context_lock_ttl))
