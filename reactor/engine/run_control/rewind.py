"""``Reactor.rewind``: continue a run held ``failed_paused`` from its failed step, or from an
earlier step it completed (docs/operations.md, "Pause, rewind, fork"; the undo rules are in
docs/concepts.md, "Rollback").

1. The arguments are checked, the run read: it must be ``failed_paused``
   (:class:`~reactor.errors.RunStateError` otherwise) and still match the reactor's definition
   (:class:`~reactor.errors.DefinitionMismatchError`); ``from_step`` (default: the failed step)
   must be a declared step the run completed, or the failed step
   (:class:`~reactor.errors.RewindArgumentError`), and every step run again must be a leaf,
   compose or inline map step.
2. Under the run's liveness lock the rewind is recorded on the hold
   (``FailureHold.rewinding``), then the steps run again are **undone first**, newest first,
   each entry popped after its undo returned and checkpointed
   (:func:`reactor.engine.rollback.undo_down_to`): their earlier side effects are reversed
   once, never left standing under a new result. A rewind cut off by a crash leaves the run
   held with ``rewinding`` set; the next rewind continues it from the same step (any other
   ``from_step`` is refused) and undoes only what is left.
3. Their results, composed children and attempt counts are dropped, the failure and the hold
   cleared, a ``rewound`` trace entry added, and the run stored ``running``; then it continues
   (:mod:`reactor.engine.run_control.proceed`): in a worker for a reactor with ``background``,
   else in the caller. The failed step's compensate does not run: the step runs again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, liveness, rollback
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.run_control import cancel, failure_hold, proceed, rerun
from reactor.engine.run_control.arguments import check_run_id, check_text
from reactor.engine.state import RunState
from reactor.errors import (
    LockAcquisitionError,
    RewindArgumentError,
    RunNotFoundError,
    RunStateError,
)
from reactor.model.context import Context
from reactor.model.engine_state import FailureHold
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus

__all__ = ["rewind"]

log = logging.getLogger("reactor.rewind")


def rewind(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    from_step: str | None = None,
    reason: str | None = None,
    by: str | None = None,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
) -> proceed.Outcome:
    """Continue held run ``run_id`` from ``from_step`` (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the held run.
        from_step: a step the run completed, or its failed step; ``None``: the failed step.
        reason: why (kept on the ``rewound`` trace entry), at most 1,000 characters.
        by: who asked, at most 1,000 characters.
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the waits of the steps run here (as for :func:`reactor.engine.api.run`).

    Returns:
        The run's result when it continued here (``run_id`` set; ``Failure`` again, the run
        held again, when a step fails again under ``on_failure="pause"``), or a
        ``DispatchHandle`` when a worker continues it.

    Raises:
        RewindArgumentError: an unusable argument (``exc.field``); nothing changed.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the run is not ``failed_paused``, or a step to run again cannot be
            (an interrupt, async or fan-out step), or another rewind is in progress from
            another step, or a cancel request of the run stands (cancel it instead); nothing
            changed.
        DefinitionMismatchError: the stored run no longer matches the definition.
        LockAcquisitionError: another operator call holds the run (try again).
        UnknownReactorError: the run's reactor is not registered in this process.
        StorageError, RouterError, LockLost: a backend failed.
    """
    check_run_id("rewind", run_id, RewindArgumentError)
    if from_step is not None and (not isinstance(from_step, str) or not from_step.strip()):
        raise RewindArgumentError(
            f"rewind(from_step=...) must be a step name or None, got {from_step!r}",
            field="from_step",
        )
    check_text("rewind", "reason", reason, RewindArgumentError)
    check_text("rewind", "by", by, RewindArgumentError)
    env = make_env(runtime, sleep)
    ctx = api.load_run(definition, run_id, env, open_secrets=False)
    if definition is None:
        definition = registry.get(ctx.reactor).definition
    definition.register_codec_types()
    _plan(definition, ctx, from_step)  # refused before the lock: nothing changed
    hold = liveness.take(env, run_id)
    if hold is None:
        raise LockAcquisitionError(
            f"run {run_id!r} is held by another execution (its liveness lock); try again",
            key=run_liveness_key(run_id),
        )
    try:
        stored = load_context(env, run_id)  # secrets opened: the undos run here
        if stored is None:
            raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
        start, steps = _plan(definition, stored, from_step)
        if cancel.requested(env, run_id) is not None:
            # the run stops at once when it goes on: rewinding first would drop the failed
            # step's pending compensate (its hold is what records it); cancel rolls back
            raise RunStateError(
                f"run {run_id!r} has a cancel request standing: cancel it (Reactor.cancel "
                "rolls the held run back, compensating its failed step) instead of "
                "rewinding it",
                run_id=run_id, status=stored.status.value,
            )
        _rewind_held(definition, stored, start, steps, FencedCheckpointer(env, stored, hold),
                     reason=reason, by=by)
    except BaseException:
        hold.release()
        raise
    log.info("event=run_rewound run_id=%s from=%s by=%s", run_id, start, by)
    return proceed.proceed(env, definition, stored, hold, origin="resume")


def _held(ctx: Context) -> FailureHold:
    found = failure_hold.held(ctx)
    if found is None:
        raise RunStateError(
            f"run {ctx.context_id!r} is {ctx.status.value}, not failed_paused: only a run held "
            "by on_failure='pause' can be rewound (Reactor.retry runs a failed run again)",
            run_id=ctx.context_id, status=ctx.status.value,
        )
    return found


def _plan(
    definition: ReactorDefinition, ctx: Context, from_step: str | None
) -> tuple[str, list[str]]:
    """The step the rewind starts from and the steps it runs again.

    Raises:
        RunStateError, DefinitionMismatchError, RewindArgumentError: see :func:`rewind`.
    """
    found = _held(ctx)
    rerun.check_matches(definition, ctx, failed=found.step)
    start = from_step if from_step is not None else (found.rewinding or found.step)
    if found.rewinding is not None and start != found.rewinding:
        raise RunStateError(
            f"run {ctx.context_id!r} is being rewound from {found.rewinding!r} (a rewind was "
            f"cut off); rewind it again from {found.rewinding!r}",
            run_id=ctx.context_id, status=ctx.status.value,
        )
    if start not in definition.steps:
        raise RewindArgumentError(
            f"rewind(from_step={start!r}): {definition.name!r} declares no such step",
            field="from_step",
        )
    if start != found.step and start not in ctx.intermediate_results:
        raise RewindArgumentError(
            f"rewind(from_step={start!r}): run {ctx.context_id!r} did not complete that step; "
            f"rewind from a completed step or from its failed step {found.step!r}",
            field="from_step",
        )
    steps = rerun.rerun_steps(definition, ctx, start)
    blocked = rerun.unsupported(definition, steps)
    if blocked is not None:
        raise RunStateError(
            f"run {ctx.context_id!r} cannot be rewound from {start!r}: step {blocked!r} "
            f"({definition.steps[blocked].kind}) cannot run again; rewind from a later step, "
            "or cancel the run", run_id=ctx.context_id, status=ctx.status.value,
        )
    return start, steps


def _rewind_held(
    definition: ReactorDefinition, ctx: Context, start: str, steps: list[str],
    checkpoint: FencedCheckpointer, *, reason: str | None, by: str | None,
) -> None:
    """Undo the steps run again, then store the run ``running`` without them (under the
    run's liveness lock; see the module docstring)."""
    state = RunState(definition, ctx, checkpoint.env, checkpoint)
    found = _held(ctx)
    if found.rewinding != start:
        ctx.engine_state = replace(
            ctx.engine_state, failure_hold=replace(found, rewinding=start)
        )
        checkpoint.save()
    failures = rollback.undo_down_to(
        state, rerun.undo_keep(ctx, steps), roll_back_fan_out=roll_back_fan_out
    )
    for name in steps:
        ctx.intermediate_results.pop(name, None)
        ctx.composed_contexts.pop(name, None)
        ctx.count_attempts(name, None)
    ctx.engine_state = replace(ctx.engine_state, failure_hold=None)
    ctx.failure = None
    ctx.rollback = None
    ctx.current_step = None
    ctx.status = RunStatus.RUNNING
    detail = "; ".join(
        part for part in (
            reason, f"by {by}" if by else None,
            f"{len(failures)} undo failure(s)" if failures else None,
        ) if part
    )
    state.trace("rewound", start, detail=detail or None)
    checkpoint.save()
