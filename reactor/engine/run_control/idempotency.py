"""Run idempotency keys: at most one run per (reactor, key) (docs/run-control.md,
"Idempotency keys").

``Reactor.run(..., idempotency_key="k")`` claims the key in the claims store
(``storage.claims.claim_idempotency_key``, first writer wins, atomic on every backend) for a
fresh run id, and only the winner runs. Every other caller is answered with that run:

* finished (``completed``, ``halted``, ``failed``, ``cancelled``, ``aborted``): its stored
  outcome (:func:`reactor.engine.dispatch.stored_result`) with its ``run_id``;
* unfinished, background reactor: a :class:`~reactor.engine.dispatch.DispatchHandle` for it at
  once (``job_id`` empty: this caller enqueued nothing);
* unfinished, synchronous reactor: the caller waits for the outcome, up to
  ``async_wait_timeout`` seconds in all (default 30), then gets a ``DispatchHandle`` for it.

**The claimer holds the run's liveness lock before it claims.** It takes ``async:<id>`` for
its fresh id first, then claims the key, and keeps the lock until the run is stored (a
background run) or finished (a synchronous one). So a key whose run is not stored yet names a
run in the making as long as that lock is held. When the lock is free and the run still is not
stored, the claimer died between its claim and its first save: a waiting caller takes the
lock, stores a ``failed`` tombstone under that id (fenced with its newer token, so a claimer
that was only frozen can never save that run afterwards), releases the key (compare-and-delete
on the dead holder) and the callers race for the key again.

**Lifetime.** A key names its run for ``idempotency_key_ttl`` seconds from the run's creation
(setting; default ``context_ttl``, which also caps it: the claims store drops the key then). A
caller meeting a key whose *finished* run is older than that releases it and claims it anew;
an unfinished run keeps its key.

**Failed runs keep their key.** The same key returns the failure. ``Reactor.retry(run_id)``
(:mod:`reactor.engine.run_control.retry_run`) starts over and moves the key to the new run.

Inputs are validated before the key is claimed: a call with invalid inputs runs (and fails)
without a key and leaves the key free.

**Starting without waiting.** :func:`start_once` is the same claim for a caller that only
starts runs and never waits for one (a scheduler, docs/schedules.md): the winner stores the run
with its raw inputs and hands it to a worker whole (as ``Background(all=True)`` does, input
validation included, whatever the reactor declares); every caller gets the run id at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactor.config import Runtime
from reactor.dsl.deadlines import absolute_deadline
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, background, liveness, secret_policy, step_transactions
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle, stored_result, wait_for_run
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.engine.run_control import deadline as run_deadline
from reactor.errors import (
    AbandonedRunError,
    AsyncWaitTimeoutError,
    IdempotencyKeyError,
    InputValidationError,
)
from reactor.model.context import Context, new_context_id
from reactor.model.results import Failure, Paused, Success
from reactor.model.run_links import RunLinks
from reactor.model.status import RunStatus

__all__ = [
    "MAX_KEY_LENGTH", "AbandonedRunError", "check_key", "key_ttl", "run_once", "start_once",
]

#: The longest idempotency key accepted, in characters.
MAX_KEY_LENGTH = 255

#: Seconds between two reads of a holder's run that is not stored yet.
_MISSING_POLL = 0.05


def check_key(key: object) -> str:
    """Validate an idempotency key.

    Args:
        key: the caller's ``idempotency_key``.

    Returns:
        The key, unchanged.

    Raises:
        IdempotencyKeyError: ``key`` is not a string, is empty or blank, or is longer than
            :data:`MAX_KEY_LENGTH` characters; the message and ``exc.field`` name
            ``idempotency_key``.
    """
    if not isinstance(key, str):
        raise IdempotencyKeyError(
            f"idempotency_key must be a string, got {type(key).__name__}"
        )
    if not key.strip():
        raise IdempotencyKeyError("idempotency_key must not be empty or blank")
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyError(
            f"idempotency_key is {len(key)} characters long; at most {MAX_KEY_LENGTH} allowed"
        )
    return key


def key_ttl(env: Env) -> float:
    """How long a key names its run, in seconds from the run's creation:
    ``idempotency_key_ttl``, capped by (and by default) ``context_ttl``."""
    settings = env.settings
    ttl = settings.idempotency_key_ttl
    return settings.context_ttl if ttl is None else min(ttl, settings.context_ttl)


def run_once(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    key: object,
    *,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
    monotonic: Callable[[], float] | None = None,
    deadline: Any = None,
) -> Success | Failure | Paused | DispatchHandle:
    """Run ``definition`` at most once per idempotency key (see the module docstring).

    Args:
        definition: the reactor.
        inputs: the raw inputs.
        key: the idempotency key (validated with :func:`check_key`).
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the per-run retry sleep (as for :func:`reactor.engine.api.run`).
        monotonic: the clock of the wait bound; ``None``: the runtime clock's
            ``monotonic`` (docs/testing.md, "The clock").
        deadline: the new run's deadline (as for :func:`reactor.engine.api.run`; checked
            before the key is claimed). A caller answered with another run's outcome gets
            that run's own deadline.

    Returns:
        The run's result (this caller ran it), or the outcome of the run holding the key, or
        a :class:`~reactor.engine.dispatch.DispatchHandle` for that run while it is not
        finished (at once for a background reactor; after ``async_wait_timeout`` seconds of
        waiting for a synchronous one), or its ``Paused`` while it waits at an interrupt
        (docs/run-control.md, "Interrupts"). Every answer carries the same ``run_id``.

    Raises:
        IdempotencyKeyError: the key is invalid (nothing is claimed or stored).
        DeadlineError: ``deadline`` is invalid (nothing is claimed or stored).
        ConfigurationError: secrets without a key on a real backend (nothing is claimed).
        StorageError: the backend failed; other exceptions as :func:`reactor.engine.api.run`.
    """
    key = check_key(key)
    env = make_env(runtime, sleep)
    if monotonic is None:
        monotonic = env.clock.monotonic
    definition.register_codec_types()
    absolute_deadline(deadline, definition.deadline, env.now())  # refused before any claim
    secret_policy.check(definition, env)
    try:
        definition.contract.validate(inputs)
    except InputValidationError:  # fails without a key: a corrected call may use it
        return api.run(definition, inputs, runtime=env.runtime, sleep=sleep, deadline=deadline)
    wait_until = monotonic() + env.settings.async_wait_timeout
    while True:
        context_id, hold, holder = _claim(definition, env, key)
        if holder is None:
            return api.run(
                definition, inputs, runtime=env.runtime, sleep=sleep, context_id=context_id,
                links=RunLinks(idempotency_key=key), hold=hold, deadline=deadline,
            )
        answer = _answer(definition, env, key, holder, wait_until, monotonic)
        if answer is not None:
            return answer
        # the holder was released (dead claimer or expired key): race for the key again


def _claim(
    definition: ReactorDefinition, env: Env, key: str
) -> tuple[str, Liveness | None, str | None]:
    """Claim ``key`` for a fresh run id, holding that run's liveness lock first (a claimer
    that dies before storing its run is then told from one in the making).

    Returns:
        ``(context_id, hold, holder)``: ``holder`` is ``None`` when this caller claimed the
        key (``hold`` is then the new run's), else the run id holding it (``hold`` has been
        released).

    Raises:
        StorageError: the claim failed (the hold is released).
    """
    context_id = new_context_id()
    hold = liveness.take(env, context_id)
    try:
        holder = env.storage.claims.claim_idempotency_key(definition.name, key, context_id)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    if holder is None or holder == context_id:
        return context_id, hold, None
    if hold is not None:
        hold.release()
    return context_id, None, holder


def start_once(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    key: object,
    *,
    runtime: Runtime | None = None,
) -> str | None:
    """Start ``definition`` in a worker at most once per idempotency key, never waiting for
    it (docs/run-control.md, "Idempotency keys"; the scheduler's start, docs/schedules.md).

    The caller that claims the key stores the run ``running`` with its raw inputs and enqueues
    its ``run`` job: the worker validates the inputs and runs every step (as for
    ``Background(all=True)``, whatever the reactor declares; a run with a ``deadline`` gets its
    timer job). A caller that finds the key held gets the holder's run id, whatever the run's
    status or age. A holder whose run is not stored yet while its claimer still holds the run's
    liveness lock is a run in the making: the answer is ``None`` (ask again later). A holder
    whose claimer died before storing its run is taken over (a ``failed`` tombstone under its
    id, the key released) and the key claimed again.

    Args:
        definition: the reactor.
        inputs: the raw inputs (validated by the worker).
        key: the idempotency key (validated with :func:`check_key`).
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The id of the run holding the key (this caller's or another's), or ``None`` while
        another caller is storing it.

    Raises:
        IdempotencyKeyError: the key is invalid (nothing is claimed or stored).
        ConfigurationError: secrets without a key on a real backend, or a transactional step
            on a storage that cannot run one (nothing is claimed).
        StorageError, RouterError: the backend failed (a run stored before its enqueue failed
            is handed to a worker by the run sweeper).
    """
    key = check_key(key)
    env = make_env(runtime)
    definition.register_codec_types()
    secret_policy.check(definition, env)
    step_transactions.check(definition, env)
    for _ in range(3):  # a dead claimer is taken over at most twice before asking later
        context_id, hold, holder = _claim(definition, env, key)
        if holder is None:
            _start_in_worker(definition, inputs, env, context_id, key, hold)
            return context_id
        if env.storage.contexts.load(holder) is not None:
            return holder
        if not _take_over_abandoned(definition, env, key, holder):
            return None if env.storage.contexts.load(holder) is None else holder
    return None


def _start_in_worker(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    env: Env,
    context_id: str,
    key: str,
    hold: Liveness | None,
) -> None:
    """Store run ``context_id`` with ``key`` and enqueue it whole (see :func:`start_once`);
    ``hold`` is released once the run is stored."""
    try:
        deadline_at = absolute_deadline(None, definition.deadline, env.now())
        outcome = background.start_all(
            definition, inputs, env, context_id=context_id,
            links=RunLinks(idempotency_key=key), hold=hold, deadline=deadline_at,
        )
    finally:
        if hold is not None:
            hold.release()
    if deadline_at is not None and not isinstance(outcome, Success | Failure):
        run_deadline.schedule(env, context_id, definition.name, deadline_at)


def _answer(
    definition: ReactorDefinition,
    env: Env,
    key: str,
    holder: str,
    deadline: float,
    monotonic: Callable[[], float],
) -> Success | Failure | Paused | DispatchHandle | None:
    """The answer of a caller who lost the claim to run ``holder``; ``None`` when the key was
    freed meanwhile (claim again)."""
    while True:
        ctx = load_context(env, holder, open_secrets=False)
        if ctx is None:
            if _take_over_abandoned(definition, env, key, holder):
                return None
            if monotonic() >= deadline:
                return _handle(env, definition, holder)
            env.clock.sleep(_MISSING_POLL)
            continue
        outcome = stored_result(ctx)
        if outcome is not None:
            # a paused run is still in progress: it keeps its key
            if not isinstance(outcome, Paused) and env.now() - ctx.created_at >= key_ttl(env):
                env.storage.claims.release_idempotency_key(definition.name, key, holder)
                return None
            return outcome
        if definition.background is not None:
            return _handle(env, definition, holder, ctx)
        remaining = deadline - monotonic()
        if remaining <= 0:
            return _handle(env, definition, holder, ctx)
        try:
            return wait_for_run(env.runtime, holder, remaining)
        except AsyncWaitTimeoutError:
            return _handle(env, definition, holder)


def _handle(
    env: Env, definition: ReactorDefinition, run_id: str, ctx: Context | None = None
) -> DispatchHandle:
    return DispatchHandle(
        run_id=run_id,
        job_id="",
        reactor=definition.name,
        results=dict(ctx.intermediate_results) if ctx is not None else {},
        runtime=env.runtime,
    )


def _take_over_abandoned(
    definition: ReactorDefinition, env: Env, key: str, holder: str
) -> bool:
    """Free a key whose claimer died before storing its run.

    The claimer held ``async:<holder>`` from before its claim until its run was stored, so a
    free lock and a missing run mean it is gone. Takes the lock, re-checks, stores a ``failed``
    tombstone fenced with the new token (a frozen claimer's later save is refused), releases
    the key from ``holder``.

    Returns:
        ``True`` when the key was freed (or had already moved on); ``False`` while the
        claimer may still be alive.
    """
    hold: Liveness | None = liveness.take(env, holder)
    if hold is None or hold.lock is None:  # held: the claimer is alive (or re-entrant)
        if hold is not None:
            hold.release()
        return False
    try:
        if env.storage.contexts.load(holder) is not None:
            return False  # stored meanwhile: read it again
        tombstone = Context(
            context_id=holder,
            reactor=definition.name,
            status=RunStatus.FAILED,
            created_at=env.now(),
        )
        tombstone.failure = Failure(
            AbandonedRunError(
                f"the caller that claimed idempotency key for run {holder!r} stopped before "
                "storing the run; nothing ran"
            ),
            retryable=False,
            reactor_name=definition.name,
        )
        FencedCheckpointer(env, tombstone, hold).save()
        env.storage.claims.release_idempotency_key(definition.name, key, holder)
        return True
    finally:
        hold.release()
