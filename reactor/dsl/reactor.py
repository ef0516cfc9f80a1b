"""``BaseReactor``: the declaration half of workflows (docs/concepts.md, "Reactors and steps").

Users subclass :class:`reactor.Reactor`, which adds ``run``/``find``/``undo``/``retry`` on
top of this class; the declarations here never import the engine (docs/architecture.md,
"Layers").

A subclass declares inputs (``Input`` class attributes), steps (``step``/``compose``/
``map_step`` class attributes or ``@step`` functions) and optionally ``returns``. The class is
validated and registered when it is created::

    class Payment(Reactor, name="payments.payment"):
        amount = Input(Decimal, gt=0)
        card_token = Input(str, redact=True)
        authorize = step(Authorize, amount=input("amount"), card_token=input("card_token"))
        capture = step(Capture, authorization=result("authorize", "id"))
        returns = "capture"

    r = Payment.run(amount=Decimal("10"), card_token="tok")
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from reactor import registry
from reactor.dsl.background import Background
from reactor.dsl.coordination import Coordination, normalize_coordination
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import (
    ReactorDefinition,
    attach_background,
    attach_concurrency,
    attach_deadline,
    attach_on_failure,
    attach_version,
    build_definition,
)
from reactor.dsl.fingerprint import fingerprint
from reactor.dsl.inputs import REACTOR_RESERVED_INPUT_NAMES, Input, InputContract, check_input_name
from reactor.dsl.on_failure import OnFailure

__all__ = ["BaseReactor"]


class BaseReactor:
    """Base class of reactor declarations.

    Class keywords:
        name: the registered name (default ``module.QualName``).
        abstract: ``True`` for a base class other reactors extend: it is neither validated
            nor registered, and cannot be run (default ``False``).
        retained: ``True`` for an old release's definition kept importable beside the
            current one of the same ``name``, for the runs stored under it (default
            ``False``): it is registered by name and fingerprint, never as the name's current
            class, so workers keep using the current one while an operator's undo, cancel or
            migrate of such a run uses it (docs/deploys.md, "Operator tools").

    Class attributes:
        returns: the step whose value is the run's value; ``None`` returns every step's
            result as a dict.
        coordination: reactor-level ``with_*`` declarations (one or a list; stored as a
            tuple), keyed on the validated reactor inputs and inherited by subclasses
            (:mod:`reactor.dsl.coordination`).
        background: a :class:`~reactor.dsl.background.Background` declaration (``all=True``,
            ``after="step"`` or ``before="step"``) moving the run to a worker; ``None`` runs
            synchronously.
        max_concurrency: how many independent leaf steps of one run may run at the same
            time (a positive ``int``; ``1``, the default, runs them one after another;
            docs/concepts.md, "Concurrency").
        deadline: each run's deadline, from its start: seconds or a ``timedelta``; ``None``
            (the default) sets none; ``run(deadline=...)`` overrides it (docs/concepts.md,
            "Run deadlines").
        on_failure: ``"rollback"`` (the default: a failed step rolls the run back at once)
            or ``"pause"`` (the run is held ``failed_paused`` before any rollback, for an
            operator to rewind, fork or cancel; a step's own ``on_failure`` wins;
            docs/operations.md, "Pause, rewind, fork").
        version: a label for this definition (a string such as ``"2024-06"``, or ``None``),
            stored with each run beside the definition's fingerprint (docs/deploys.md,
            "Fingerprints"). An ``Input`` or a step named ``version`` is an input or a step,
            not a label.
        reactor_name: the registered name (set on class creation).
        definition: the validated :class:`~reactor.dsl.definition.ReactorDefinition`.
    """

    returns: ClassVar[str | None] = None
    coordination: ClassVar[tuple[Coordination, ...]] = ()
    background: ClassVar[Background | None] = None
    max_concurrency: ClassVar[int] = 1
    deadline: ClassVar[float | timedelta | None] = None
    on_failure: ClassVar[OnFailure] = "rollback"
    version: ClassVar[str | None] = None
    reactor_name: ClassVar[str] = ""
    definition: ClassVar[ReactorDefinition]

    def __init_subclass__(
        cls, *, name: str | None = None, abstract: bool = False, retained: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        inputs: dict[str, Input] = {}
        specs: dict[str, StepSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr_name, attr in vars(klass).items():
                if isinstance(attr, Input):
                    check_input_name(attr_name, cls.__qualname__, REACTOR_RESERVED_INPUT_NAMES)
                    inputs[attr_name] = attr
                    specs.pop(attr_name, None)
                elif isinstance(attr, StepSpec):
                    specs[attr_name] = attr
                    inputs.pop(attr_name, None)
        reactor_name = name or f"{cls.__module__}.{cls.__qualname__}"
        contract = InputContract(
            cls.__qualname__, [decl.bound(n, cls.__qualname__) for n, decl in inputs.items()]
        )
        cls.reactor_name = reactor_name
        cls.coordination = normalize_coordination(cls.coordination, cls.__qualname__)
        cls.definition = build_definition(
            reactor_name, cls.__qualname__, contract, specs, cls.__dict__.get("returns",
                                                                            cls.returns),
            coordination=cls.coordination,
        )
        cls.definition = attach_background(cls.definition, cls.background, cls.__qualname__)
        cls.definition = attach_concurrency(
            cls.definition, cls.max_concurrency, cls.__qualname__
        )
        cls.definition = attach_deadline(cls.definition, cls.deadline, cls.__qualname__)
        cls.definition = attach_on_failure(cls.definition, cls.on_failure, cls.__qualname__)
        cls.definition = attach_version(cls.definition, cls.version, cls.__qualname__)
        if retained:  # an old release kept for its stored runs (docs/deploys.md)
            registry.register_retained(reactor_name, fingerprint(cls.definition), cls)
        else:
            registry.register(reactor_name, cls)
        # a process that only reads this reactor's runs can decode every type they hold
        cls.definition.register_codec_types_on_demand()
