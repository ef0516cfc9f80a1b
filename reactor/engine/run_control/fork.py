"""``Reactor.fork``: start a new run from a step of an earlier one, copying the results of
the steps before it (docs/operations.md, "Pause, rewind, fork"; the undo rules are in
docs/concepts.md, "Rollback").

The original run must be ``failed_paused``, ``completed`` or ``halted``: its completed steps'
effects stand (a ``failed`` or ``cancelled`` run was rolled back: ``Reactor.retry`` runs it
again). It is only read, never changed. The fork is a run of its own (a new id) with:

* the original's inputs (its sealed values opened with the configured keys and sealed again),
  with an optional JSON merge patch (RFC 7386) applied per input: a top-level key names a
  reactor input (any other is refused), ``null`` removes it (its default applies), an object
  is merged into an object value, anything else replaces it; the result is validated as a
  new run's inputs are;
* the results of the original's recorded steps that are not run again from ``from_step``
  (:func:`reactor.engine.run_control.rerun.rerun_steps`), and **no undo entry for them**:
  their side effects belong to the original, whose own undo stack is the only one that can
  undo them, so no side effect is ever undone twice (a rollback of the fork undoes only the
  steps the fork ran itself);
* ``forked_from`` (the original id and ``from_step``) and a ``forked`` trace entry.

It runs like a continued run (:mod:`reactor.engine.run_control.proceed`): in a worker for a
reactor with ``background``, else in the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.engine import api, liveness, secret_policy
from reactor.engine.env import make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.run_control import failure_hold, proceed, rerun
from reactor.engine.run_control.arguments import check_run_id
from reactor.errors import ForkArgumentError, LockAcquisitionError, RunStateError
from reactor.model.context import Context, new_context_id
from reactor.model.engine_state import EngineState, ForkOrigin
from reactor.model.keys import run_liveness_key
from reactor.model.run_records import TraceRecord
from reactor.model.status import RunStatus

__all__ = ["FORKABLE_STATUSES", "fork", "merge_patch"]

#: The statuses of a run ``Reactor.fork`` copies from: its completed steps' effects stand.
FORKABLE_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.FAILED_PAUSED, RunStatus.COMPLETED, RunStatus.HALTED}
)


def fork(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    from_step: str,
    input_patch: str | Mapping[str, Any] | None = None,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
) -> proceed.Outcome:
    """Start a new run from step ``from_step`` of run ``run_id`` (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the original run (left as it is).
        from_step: a declared step: it and the steps after it run in the fork.
        input_patch: a JSON merge patch over the inputs: JSON text of an object, or a
            mapping; ``None``: the same inputs.
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the waits of the steps run here (as for :func:`reactor.engine.api.run`).

    Returns:
        The fork's result (its ``run_id`` is the new run's), or a ``DispatchHandle`` when a
        worker runs it.

    Raises:
        ForkArgumentError: an unusable argument (``exc.field``; a patch naming an unknown
            input names it); nothing stored.
        InputValidationError: the patched inputs are invalid (``exc.field_errors``); nothing
            stored.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the original's status is not in :data:`FORKABLE_STATUSES`, or it is
            a map element, or a step to run again cannot be (an interrupt, async or fan-out
            step); nothing stored.
        DefinitionMismatchError: the original no longer matches the definition.
        UnknownReactorError: the run's reactor is not registered in this process.
        SecretKeyError: the original's sealed values cannot be opened.
        StorageError, RouterError: a backend failed.
    """
    check_run_id("fork", run_id, ForkArgumentError)
    if not isinstance(from_step, str) or not from_step.strip():
        raise ForkArgumentError(
            f"fork(from_step=...) must be a step name, got {from_step!r}", field="from_step"
        )
    patch = _patch(input_patch)
    env = make_env(runtime, sleep)
    original = api.load_run(definition, run_id, env, open_secrets=False)
    if definition is None:
        definition = registry.get(original.reactor).definition
    definition.register_codec_types()
    _check_forkable(definition, original, from_step, patch)
    opened = api.load_run(definition, run_id, env, open_secrets=True)
    inputs = definition.contract.validate(merge_patch(dict(opened.inputs), patch))
    secret_policy.check(definition, env)
    steps = set(rerun.rerun_steps(definition, opened, from_step))
    fork_id = new_context_id()
    now = env.now()
    ctx = Context(
        context_id=fork_id, reactor=definition.name, inputs=inputs,
        status=RunStatus.RUNNING,
        intermediate_results={
            name: value for name, value in opened.intermediate_results.items()
            if name not in steps
        },
        redacted=sorted(definition.contract.redacted), created_at=now,
        engine_state=EngineState(
            forked_from=ForkOrigin(run_id=run_id, step=from_step),
            definition=definition_id(definition),
        ),
        execution_trace=[TraceRecord.of("forked", from_step, now, detail=run_id)],
    )
    hold = liveness.take(env, fork_id)
    if hold is None:  # a fresh id: only a clash of ids could hold it
        raise LockAcquisitionError(f"run {fork_id!r} is held; fork again",
                                   key=run_liveness_key(fork_id))
    try:
        FencedCheckpointer(env, ctx, hold).save()
    except BaseException:
        hold.release()
        raise
    return proceed.proceed(env, definition, ctx, hold, origin="start")


def _patch(value: object) -> dict[str, Any]:
    """The patch as an object.

    Raises:
        ForkArgumentError: not JSON text of an object, nor a mapping with string keys.
    """
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ForkArgumentError(
                f"fork(input_patch=...) is not valid JSON: {exc}", field="input_patch"
            ) from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ForkArgumentError(
            "fork(input_patch=...) must be a JSON object of input name -> value, got "
            f"{type(value).__name__}", field="input_patch",
        )
    return dict(value)


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with JSON merge patch ``patch`` applied (RFC 7386): an object patch merges
    key by key (``None`` removes a key), anything else replaces the target.

    Args:
        target: the value patched (not changed).
        patch: the patch.

    Returns:
        A new value.
    """
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _check_forkable(
    definition: ReactorDefinition, original: Context, from_step: str, patch: Mapping[str, Any]
) -> None:
    """Refuse a fork that cannot be made (see :func:`fork`); nothing is read but ``original``.
    """
    run_id, status = original.context_id, original.status
    if original.parent_context_id is not None:
        raise RunStateError(
            f"run {run_id!r} is part of run {original.parent_context_id!r}; fork the "
            "top-level run", run_id=run_id, status=status.value,
        )
    if status not in FORKABLE_STATUSES:
        raise RunStateError(
            f"run {run_id!r} is {status.value}; only a failed_paused, completed or halted run "
            "can be forked (a failed or cancelled run was rolled back: Reactor.retry runs it "
            "again)", run_id=run_id, status=status.value,
        )
    held = failure_hold.held(original)
    rerun.check_matches(definition, original, failed=held.step if held else None)
    if from_step not in definition.steps:
        raise ForkArgumentError(
            f"fork(from_step={from_step!r}): {definition.name!r} declares no such step",
            field="from_step",
        )
    unknown = sorted(set(patch) - set(definition.contract.inputs))
    if unknown:
        raise ForkArgumentError(
            f"fork(input_patch=...) names {unknown[0]!r}, which {definition.name!r} does not "
            f"declare as an input (declared: {sorted(definition.contract.inputs)})",
            field="input_patch",
        )
    blocked = rerun.unsupported(definition, rerun.rerun_steps(definition, original, from_step))
    if blocked is not None:
        raise RunStateError(
            f"run {run_id!r} cannot be forked from {from_step!r}: step {blocked!r} "
            f"({definition.steps[blocked].kind}) cannot run again in a fork",
            run_id=run_id, status=status.value,
        )
