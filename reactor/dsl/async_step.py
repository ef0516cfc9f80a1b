"""``async_step``: declare a leaf step that runs as its own job (docs/workers.md, "Async steps").

Two spellings, like :func:`reactor.dsl.declarations.step`::

    class Signup(Reactor):
        email = Input(str)

        charge = async_step(Charge, amount=input("amount"))      # a Step class

        @async_step(to=input("email"), retries=Retries(max_attempts=3))
        def send_email(inputs, ctx):                             # a function step
            return mailer.welcome(inputs.to)

        @send_email.compensate           # runs once, in the unit's job, after its last attempt
        def _(error, inputs, ctx): ...

        @step(delivery=result("send_email"))   # reading the result is what makes it wait
        def confirm(inputs, ctx): ...

Definition-time rules: a unit is never on its parent's undo stack, so an
``undo`` is rejected (``@unit.undo`` on a function unit, or a Step class defining ``undo``), and
``returns`` may not name a unit (:func:`reactor.dsl.definition.build_definition`). Everything
else — arguments, ``wait_for``, ``retries``, step-level ``coordination`` — means what it means on
``step``; the coordination is taken in the worker, under a per-unit owner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, overload

from reactor.dsl.declarations import RunFunction, StepSpec, step
from reactor.dsl.retries import Retries
from reactor.dsl.step import BaseStep
from reactor.errors import DefinitionError

__all__ = ["async_step"]


def _as_unit(spec: StepSpec) -> StepSpec:
    if spec.step_class is not None and spec.step_class.has_undo():
        raise DefinitionError(
            f"async_step({spec.step_class.__qualname__}): the Step class defines undo(), but an "
            "async unit is never on its parent's undo stack; define compensate() instead"
        )
    if spec.transaction:
        raise DefinitionError(
            f"async_step({spec.label}): an async unit cannot be transactional (its result is "
            "recorded by its own job, not by a checkpoint of the run); declare it with step()"
        )
    return replace(spec, kind="async_step")


@overload
def async_step(
    impl: type[BaseStep] | RunFunction,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    **arguments: Any,
) -> StepSpec: ...


@overload
def async_step(
    impl: None = None,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    **arguments: Any,
) -> Callable[[RunFunction], StepSpec]: ...


def async_step(
    impl: type[BaseStep] | RunFunction | None = None,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    **arguments: Any,
) -> StepSpec | Callable[[RunFunction], StepSpec]:
    """Declare an async unit: ``async_step(StepClass, **args)`` or ``@async_step(**args)``.

    The parent writes a ``dispatched`` Step Result Record, checkpoints, enqueues a ``step`` job
    and moves on (the node counts as complete for scheduling only); a step reading
    ``result("<unit>")`` waits for the unit's outcome (:mod:`reactor.engine.async_step`).

    Args:
        impl: a ``Step`` subclass without ``undo``, a function ``fn(inputs, ctx)``, or
            omitted (decorator form).
        wait_for: step names the unit waits for without receiving their results.
        retries: the unit's retry policy; retries happen inside its own job (waiting on the
            runtime's clock), compensation once after the last attempt.
        coordination: step-level ``with_*`` declarations, taken in the worker under the
            derived owner ``async_step:<context id>:<step>``.
        **arguments: the unit's arguments (templates or literals).

    Returns:
        A :class:`~reactor.dsl.declarations.StepSpec` of kind ``"async_step"``, or a decorator
        producing one.

    Raises:
        DefinitionError: as :func:`~reactor.dsl.declarations.step`, plus a Step class that
            defines ``undo`` or declares ``transaction = True``.
    """
    if impl is None:
        decorate = step(wait_for=wait_for, retries=retries, coordination=coordination,
                        **arguments)

        def unit(fn: RunFunction) -> StepSpec:
            return _as_unit(decorate(fn))

        return unit
    return _as_unit(
        step(impl, wait_for=wait_for, retries=retries, coordination=coordination, **arguments)
    )
