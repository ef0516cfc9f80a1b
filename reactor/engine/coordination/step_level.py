"""The step-level coordination around every attempt of a leaf step's body
(:class:`StepCoordination`), the failure of a step whose hold was lost (:func:`hold_lost`), and
direct ``Step.call`` calls (:func:`call_direct`) (docs/coordination.md, "Order", "Renewal and
loss").
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from reactor import config
from reactor.dsl.inputs import Inputs
from reactor.engine import invoke
from reactor.engine.coordination.holds import (
    refused_loss,
)
from reactor.engine.coordination.keys import class_key, root_id, step_default_key
from reactor.engine.coordination.unit import Scratch, Unit
from reactor.engine.parks import Park
from reactor.engine.run_control import deadline
from reactor.errors import (
    InputValidationError,
    LockLost,
)
from reactor.model.results import (
    Failure,
    Result,
)

if TYPE_CHECKING:
    from reactor.dsl.declarations import StepSpec
    from reactor.dsl.step import BaseStep
    from reactor.engine.state import RunState
    from reactor.model.step_context import StepContext

log = logging.getLogger("reactor.coordination")


_STEP_ORDER = ("ordered", "period", "lock", "semaphore", "period_recheck", "rate")


class StepCoordination:
    """The step-level coordination of one leaf step execution (all its attempts).

    Build it with :meth:`for_step`; call :meth:`attempt` around every attempt of the body and
    :meth:`finish` with the step's final result (advances a step-level ordered lock).
    """

    def __init__(self, state: RunState, spec: StepSpec) -> None:
        self.state = state
        self.spec = spec
        self._unit: Unit | None = None

    @classmethod
    def for_step(cls, state: RunState, spec: StepSpec) -> StepCoordination | None:
        """The coordination of leaf step ``spec``, or ``None`` when it declares none."""
        return cls(state, spec) if spec.coordination else None

    def attempt(self, arguments: Mapping[str, Any], body: Callable[[], Result]) -> Result:
        """Run ``body`` under the step's holds (order: see the module docstring).

        Args:
            arguments: the step's validated inputs (the keys are computed from them).
            body: runs the step body once; called only when every hold was taken.

        Returns:
            The body's result; ``Skipped(None)`` when the step's period is already marked;
            a ``Halt`` from the ordered lock; a non-retryable ``Failure`` on synchronous
            contention, a key error or an unknown named rate limit; of
            :class:`~reactor.errors.RunDeadlineExceeded` when a synchronous wait reached the
            run's deadline (docs/concepts.md, "Run deadlines").

        Raises:
            Park: in a worker, on contention (this step's holds detached and recorded; the
                reactor-level wrapper saves the context).
        """
        state = self.state
        ctx = state.ctx
        env = state.env
        unit = Unit(
            self.spec.coordination, storage=env.storage, settings=env.settings,
            clock=env.clock, owner=state.coordination_owner or root_id(ctx),
            mode="worker" if env.in_worker else "sync", scope=self.spec.name,
            default_key=step_default_key(state.definition.name, self.spec),
            inputs=arguments, target=ctx, context_id=ctx.context_id,
            step=self.spec.name, on_ticket=state.on_ordered_ticket, hooks=env.runtime.hooks,
            deadline=deadline.governing(state),
        )
        # A retry attempt finds the first attempt's ticket in the engine state (same place
        # in line).
        self._unit = unit
        try:
            early = unit.enter(_STEP_ORDER)
        except Park as park:
            state.trace(
                "contention_park", self.spec.name,
                detail=f"{park.reason} {park.key or ''}".strip(),
            )
            raise
        if early is not None:
            unit.leave_ordered()
            return early
        state.step_holds = unit.views("step")
        lost: LockLost | None = None
        try:
            result = body()
            lost = unit.lost_hold()
            if lost is None:
                unit.mark_period(result)
        finally:
            state.step_holds = ()
            held = list(unit.held)
            unit.release()
            unit.leave_ordered()
        lost = lost or refused_loss(held)
        if lost is not None:
            return hold_lost(state, self.spec.name, result, lost)
        return result

    def finish(self, result: Result) -> None:
        """Advance a step-level ordered lock after the step's final result."""
        if self._unit is not None:
            self._unit.finish_ordered(failed=isinstance(result, Failure))



def hold_lost(state: RunState, step: str, result: Result, lost: LockLost) -> Result:
    """Fail a step whose hold was lost while its body ran, before its result is recorded.

    Traces ``hold_lost`` (which primitive and key, and when) and returns a non-retryable
    ``Failure(LockLost)`` in place of a ``Success``; a ``Failure`` stays as it was. The body
    started, so the step is compensated (``docs/coordination.md``, "Renewal and loss").

    Args:
        state: the run.
        step: the step name.
        result: what the body returned.
        lost: the loss.

    Returns:
        The result to record.
    """
    state.trace(
        "hold_lost", step, primitive=lost.primitive, key=lost.key, lost_at=lost.lost_at,
        detail=f"{lost} (detected at {lost.lost_at:.3f})",
    )
    log.warning("event=hold_lost step=%s primitive=%s key=%s", step, lost.primitive, lost.key)
    if isinstance(result, Failure):
        return result
    return Failure(lost, retryable=False)



def call_direct(
    cls: type[BaseStep], args: Mapping[str, Any], context: StepContext | None
) -> Result:
    """``Step.call``: validate, coordinate as its own unit of work, run once.

    The lock owner is the calling run's root id when a step context is given (a step body
    calling another step re-enters its run's locks), else a fresh id. Contention waits up to
    each declaration's ``wait`` and then fails; it never parks, and no state is kept on any
    context. Runs against :func:`reactor.config.current`.

    Returns:
        The body's result, ``Skipped(None)`` when the period is marked, or a ``Failure``
        (invalid inputs, contention, key error, unknown named rate limit).
    """
    if not cls.coordination:
        return invoke.call_class_run(cls, args, context)
    try:
        validated = cls.contract.validate(args, step_name=cls.__qualname__)
    except InputValidationError as exc:
        return Failure(exc, retryable=False, validation_errors=exc.field_errors)
    runtime = config.current()
    unit = Unit(
        cls.coordination, storage=runtime.storage, settings=runtime.settings,
        clock=runtime.clock,
        owner=(context.root_run_id or context.run_id) if context is not None
        else f"direct:{uuid.uuid4()}",
        mode="direct", scope=cls.__qualname__, default_key=class_key(cls),
        inputs=validated, target=Scratch(), context_id=None, step=None,
    )
    early = unit.enter(_STEP_ORDER)
    if early is not None:
        unit.finish_ordered(failed=False)
        return early
    result: Result | None = None
    try:
        instance = cls(Inputs(validated, declared=cls.contract.names), context)
        result = invoke.capture(instance.run).result
        unit.mark_period(result)
        return result
    finally:
        unit.release()
        if result is not None:
            unit.finish_ordered(failed=isinstance(result, Failure))
        else:
            unit.leave_ordered()
