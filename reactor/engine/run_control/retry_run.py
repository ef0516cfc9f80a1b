"""``Reactor.retry(run_id)``: run a failed run again, as a new run (docs/run-control.md,
"Retrying a failed run").

The new run is a fresh run of the same reactor with the same inputs: the stored, validated
inputs of the old run, its sealed ``redact=True`` values decrypted with the configured keys
(docs/security.md) and sealed again when the new run is stored. The two are linked both ways:
the new run's run-control links (:class:`~reactor.model.run_links.RunLinks`, in its engine
state) record ``retried_from`` (the old id), and the old run gains the new id in its
``retries`` list, written under the old run's liveness lock (so two concurrent
retries both appear) *before* the new run starts. ``RunView`` shows both.

Only a ``failed`` or ``cancelled`` run can be retried: both are rolled back, so running the
inputs again cannot double a side effect of the old run. Refused with
:class:`~reactor.errors.RunStateError`: ``completed`` and ``halted`` runs (their effects
stand: undo them first with ``Reactor.undo``, which leaves them ``cancelled``), ``aborted``
runs (their rollback is unfinished: ``Reactor.undo`` first), unfinished runs, map elements and
runs that failed validating their inputs (nothing ran, and the invalid inputs were stored
masked: run again with corrected inputs).

When the old run holds an idempotency key (:mod:`reactor.engine.run_control.idempotency`), the
key moves to
the new run (a compare-and-set in the claims store), so later callers with that key get the
retry's outcome. When another retry moved it first, the new run runs without the key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, liveness
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.errors import (
    AbandonedRunError,
    InputValidationError,
    LockAcquisitionError,
    RunNotFoundError,
    RunStateError,
)
from reactor.model.context import Context, new_context_id
from reactor.model.results import Failure, Paused, Success, exception_class_name
from reactor.model.run_links import RunLinks
from reactor.model.status import RunStatus

__all__ = ["RETRYABLE_STATUSES", "retry"]

#: The statuses of a run ``Reactor.retry`` accepts.
RETRYABLE_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})

_NOT_RETRIED_FAILURES = frozenset(
    {exception_class_name(InputValidationError("")), exception_class_name(AbandonedRunError())}
)


def retry(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Success | Failure | Paused | DispatchHandle:
    """Start a new run with the inputs of failed run ``run_id`` (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the run to retry.
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the per-run retry sleep (as for :func:`reactor.engine.api.run`).

    Returns:
        The new run's result, as :func:`reactor.engine.api.run` returns it (a
        ``DispatchHandle`` for a background reactor); its ``run_id`` is the new run's.

    Raises:
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the run cannot be retried (its status, or it is a map element, or it
            failed validating its inputs); ``exc.status`` is its status.
        UnknownReactorError: the run's reactor is not registered in this process.
        SecretKeyError: its sealed inputs cannot be decrypted with the configured keys.
        LockAcquisitionError: the old run stayed locked for ``context_lock_ttl`` seconds.
        StorageError: the backend failed.
    """
    env = make_env(runtime, sleep)
    old = api.load_run(definition, run_id, env, open_secrets=False)
    _check_retryable(old)
    if definition is None:
        definition = registry.get(old.reactor).definition
    opened = api.load_run(definition, run_id, env, open_secrets=True)  # the inputs, decrypted
    new_id = new_context_id()
    hold = liveness.take(env, new_id)
    links = RunLinks(retried_from=run_id)
    try:
        key = _link(env, run_id, new_id)
        if key is not None and env.storage.claims.reclaim_idempotency_key(
            definition.name, key, run_id, new_id
        ):
            links = replace(links, idempotency_key=key)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    return api.run(
        definition, opened.inputs, runtime=env.runtime, sleep=sleep, context_id=new_id,
        links=links, hold=hold,
    )


def _check_retryable(ctx: Context) -> None:
    run_id, status = ctx.context_id, ctx.status
    if ctx.parent_context_id is not None:
        raise RunStateError(
            f"run {run_id!r} is a map element of run {ctx.parent_context_id!r}; retry the "
            "top-level run instead", run_id=run_id, status=status.value,
        )
    if status not in RETRYABLE_STATUSES:
        hint = {
            RunStatus.COMPLETED: "undo it first (Reactor.undo) to run it again",
            RunStatus.HALTED: "undo it first (Reactor.undo) to run it again",
            RunStatus.ABORTED: "finish its rollback first (Reactor.undo)",
            RunStatus.FAILED_PAUSED: "it is held before its rollback: rewind, fork or cancel "
                                     "it",
        }.get(status, "wait until it finished")
        raise RunStateError(
            f"run {run_id!r} is {status.value}; only a failed or cancelled run can be retried "
            f"({hint})", run_id=run_id, status=status.value,
        )
    if status is RunStatus.CANCELLED and ctx.undo_stack:  # cancelled with rollback=False
        raise RunStateError(
            f"run {run_id!r} was cancelled without rollback and its completed work stands; "
            "undo it first (Reactor.undo) to run it again", run_id=run_id, status=status.value,
        )
    failure = ctx.failure
    if failure is not None and (
        failure.validation_errors or failure.exception_class in _NOT_RETRIED_FAILURES
    ):
        raise RunStateError(
            f"run {run_id!r} failed before any step ran ({failure.exception_class}); there is "
            "nothing to retry: run the reactor again with corrected inputs",
            run_id=run_id, status=status.value,
        )


def _link(env: Env, run_id: str, new_id: str) -> str | None:
    """Append ``new_id`` to the ``retries`` of stored run ``run_id`` under its liveness lock
    (fenced save); returns the idempotency key the old run holds, if any.

    Raises:
        LockAcquisitionError: the old run stayed locked for ``context_lock_ttl`` seconds.
        RunStateError: the run changed status meanwhile and is no longer retryable.
    """
    hold: Liveness | None = liveness.take(env, run_id, wait=env.settings.context_lock_ttl)
    if hold is None:
        raise LockAcquisitionError(
            f"run {run_id!r} stayed locked for {env.settings.context_lock_ttl:g}s; retry later",
            key=f"async:{run_id}",
        )
    try:
        ctx = load_context(env, run_id, open_secrets=False)  # sealed values are saved as is
        if ctx is None:
            raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
        _check_retryable(ctx)
        links = ctx.engine_state.links.with_retry(new_id)
        ctx.engine_state = replace(ctx.engine_state, links=links)
        FencedCheckpointer(env, ctx, hold).save()
        return links.idempotency_key
    finally:
        hold.release()
