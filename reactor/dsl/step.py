"""``Step``: the base class of class-based steps (docs/concepts.md, "Reactors and steps").

A subclass declares its input contract as ``Input`` class attributes, an optional ``retries``
policy, and implements ``run`` (and optionally ``undo``/``compensate``)::

    class ChargeCard(Step):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)
        retries = Retries(max_attempts=3, backoff="exponential", base_delay=0.1)

        def run(self):
            return gateway.charge(self.inputs.amount, self.inputs.card_token)

        def undo(self):
            gateway.refund(self.result["id"])

Each action builds a **fresh instance**, so nothing set in ``run`` is visible in ``undo``.
Only ``run`` enforces the contract (on every attempt); ``undo`` and ``compensate`` never
validate, so a rollback cannot fail on the inputs that caused the failure.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from reactor.dsl.callables import check_step_class
from reactor.dsl.coordination import Coordination, normalize_coordination
from reactor.dsl.inputs import (
    STEP_RESERVED_INPUT_NAMES,
    Input,
    InputContract,
    Inputs,
    check_input_name,
)
from reactor.dsl.retries import Retries
from reactor.dsl.timeouts import Timeouts
from reactor.errors import DefinitionError
from reactor.model.results import Failure, Skipped
from reactor.model.step_context import StepContext

__all__ = ["BaseStep"]


class BaseStep:
    """The declaration half of class-based steps: users subclass :class:`reactor.Step`, which
    adds the direct calls (``Step.call``...) on top (docs/architecture.md, "Layers").

    Class attributes:
        retries: an optional :class:`~reactor.dsl.retries.Retries` policy (overridden by
            ``step(..., retries=...)``).
        timeouts: optional :class:`~reactor.dsl.timeouts.Timeouts` (overridden by
            ``step(..., timeouts=...)``; docs/concepts.md, "Time limits").
        coordination: step-level ``with_*`` declarations (one or a list; stored as a tuple),
            keyed on this step's validated inputs (:mod:`reactor.dsl.coordination`).
        transaction: ``True``: ``run`` and ``undo`` execute in a database transaction of the
            run's storage that also writes the step's checkpoint (``self.context.transaction``;
            docs/concepts.md, "Transactional steps"); overridden by ``step(...,
            transaction=)``. Default ``False``.
        contract: the collected :class:`~reactor.dsl.inputs.InputContract` (set by
            ``__init_subclass__``; inherited and extended by subclasses).

    Instance attributes (set by the engine for each action):
        inputs: the frozen :class:`~reactor.dsl.inputs.Inputs` (validated in ``run`` only).
        context: the :class:`~reactor.model.step_context.StepContext`, or ``None`` when called
            directly without one.
        result: in ``undo``: the value ``run`` returned.
        error: in ``compensate``: the failure's error (exception or message).
        failure: in ``compensate``: the whole :class:`~reactor.model.results.Failure`.
    """

    retries: ClassVar[Retries | None] = None
    timeouts: ClassVar[Timeouts | None] = None
    coordination: ClassVar[tuple[Coordination, ...]] = ()
    transaction: ClassVar[bool] = False
    contract: ClassVar[InputContract] = InputContract("Step", [])

    def __init__(
        self,
        inputs: Inputs,
        context: StepContext | None = None,
        *,
        result: Any = None,
        failure: Failure | None = None,
    ) -> None:
        self.inputs = inputs
        self.context = context
        self.result = result
        self.failure = failure
        self.error: Any = failure.error if failure is not None else None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared: dict[str, Input] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                if isinstance(attr, Input):
                    check_input_name(name, cls.__qualname__, STEP_RESERVED_INPUT_NAMES)
                    declared[name] = attr
        cls.contract = InputContract(
            cls.__qualname__,
            [decl.bound(name, cls.__qualname__) for name, decl in declared.items()],
        )
        for hook in ("run", "undo", "compensate"):
            fn = cls.__dict__.get(hook)
            if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
                raise DefinitionError(
                    f"{cls.__qualname__}.{hook} is a generator: a step hook is a plain or "
                    "async def method that returns its result (docs/concepts.md, \"Async steps\")"
                )
        check_step_class(cls, ("run", "undo", "compensate"))
        retries = cls.__dict__.get("retries")
        if retries is not None and not isinstance(retries, Retries):
            raise DefinitionError(f"{cls.__qualname__}.retries must be a Retries(...)")
        timeouts = cls.__dict__.get("timeouts")
        if timeouts is not None and not isinstance(timeouts, Timeouts):
            raise DefinitionError(
                f"{cls.__qualname__}.timeouts must be a Timeouts(...), got {timeouts!r}"
            )
        if not isinstance(cls.transaction, bool):
            raise DefinitionError(
                f"{cls.__qualname__}.transaction must be True or False, got {cls.transaction!r}"
            )
        cls.coordination = normalize_coordination(cls.coordination, cls.__qualname__)

    # ----------------------------------------------------------------- user hooks

    def run(self) -> Any:
        """The step body. Return a value (becomes ``Success(value)``) or a result.

        Raises:
            NotImplementedError: the subclass did not implement ``run`` (fails the step).
        """
        raise NotImplementedError(f"step class {type(self).__qualname__} does not define run()")

    def undo(self) -> Any:
        """Reverse a completed ``run`` (``self.result`` holds its value). Default: nothing."""
        return Skipped()

    def compensate(self) -> Any:
        """Clean up after this step's own failure (``self.error``). Default: nothing."""
        return Skipped()

    # ----------------------------------------------------------------- introspection

    @classmethod
    def has_undo(cls) -> bool:
        """``True`` when the class overrides :meth:`undo`."""
        return cls.undo is not BaseStep.undo

    @classmethod
    def has_compensate(cls) -> bool:
        """``True`` when the class overrides :meth:`compensate`."""
        return cls.compensate is not BaseStep.compensate
