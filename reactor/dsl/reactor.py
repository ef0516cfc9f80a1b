"""``Reactor``: the base class of workflows (docs/concepts.md, "Reactors and steps").

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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from reactor import registry
from reactor.dsl.background import Background, attach_background
from reactor.dsl.coordination import Coordination, normalize_coordination
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition, build_definition
from reactor.dsl.inputs import REACTOR_RESERVED_INPUT_NAMES, Input, InputContract, check_input_name
from reactor.model.errors import InputValidationError
from reactor.model.results import Failure, Success

if TYPE_CHECKING:
    from reactor.config import Runtime
    from reactor.engine.dispatch import DispatchHandle
    from reactor.model.run_view import RunView

__all__ = ["Reactor"]


class Reactor:
    """Base class of reactors.

    Class keyword:
        name: the registered name (default ``module.QualName``).

    Class attributes:
        returns: the step whose value is the run's value; ``None`` returns every step's
            result as a dict.
        coordination: reactor-level ``with_*`` declarations (one or a list; stored as a
            tuple), keyed on the validated reactor inputs and inherited by subclasses
            (:mod:`reactor.dsl.coordination`).
        background: a :class:`~reactor.dsl.background.Background` declaration (``all=True``,
            ``after="step"`` or ``before="step"``) moving the run to a worker; ``None`` runs
            synchronously.
        reactor_name: the registered name (set on class creation).
        definition: the validated :class:`~reactor.dsl.definition.ReactorDefinition`.
    """

    returns: ClassVar[str | None] = None
    coordination: ClassVar[tuple[Coordination, ...]] = ()
    background: ClassVar[Background | None] = None
    reactor_name: ClassVar[str] = ""
    definition: ClassVar[ReactorDefinition]

    def __init_subclass__(cls, *, name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
        registry.register(reactor_name, cls)

    @classmethod
    def run(
        cls, *, idempotency_key: str | None = None, **inputs: Any
    ) -> Success | Failure | DispatchHandle:
        """Run the reactor with ``inputs`` (docs/concepts.md; docs/workers.md with ``background``).

        Args:
            idempotency_key: run at most once per (reactor, key) for the key's lifetime
                (``idempotency_key_ttl`` seconds, default ``context_ttl``): every caller gets
                the same ``run_id`` and, once that run finished, its outcome; a synchronous
                caller whose key names a run still in progress waits for it up to
                ``async_wait_timeout`` seconds, then gets a ``DispatchHandle`` for it
                (docs/run-control.md, "Idempotency keys"). ``None``: no key.
            **inputs: the reactor inputs by name.

        Returns:
            ``Success`` (value: the ``returns`` step's value, or all results), ``Halt`` (a
            ``Success`` subclass) or ``Failure``; ``result.run_id`` is the stored run's id.
            A reactor with ``background`` returns a
            :class:`~reactor.engine.dispatch.DispatchHandle` once the run was handed to a
            worker (or its final result when the run already finished, e.g. on the inline
            router).

        Raises:
            IdempotencyKeyError: ``idempotency_key`` is not a non-empty string of at most 255
                characters (nothing is claimed or run).
            KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError: re-raised after the run
                is stored as ``aborted`` (finish it with :meth:`undo`).
        """
        return cls.execute(inputs, idempotency_key=idempotency_key)

    @classmethod
    def execute(
        cls,
        inputs: Mapping[str, Any] | None = None,
        *,
        runtime: Runtime | None = None,
        sleep: Callable[[float], None] | None = None,
        idempotency_key: str | None = None,
    ) -> Success | Failure | DispatchHandle:
        """Run the reactor with an inputs mapping and optional per-run hooks.

        Args:
            inputs: the reactor inputs by name.
            runtime: the runtime to use (default: ``reactor.config.current()``).
            sleep: the function retries sleep with (seconds); default
                :data:`reactor.engine.retries.sleep`.
            idempotency_key: see :meth:`run` (docs/run-control.md, "Idempotency keys").

        Returns:
            See :meth:`run`.

        Raises:
            InputValidationError: ``inputs`` is not a mapping (e.g. a list).
            IdempotencyKeyError: ``idempotency_key`` is invalid (see :meth:`run`).
        """
        from reactor.engine import api, idempotency

        if inputs is not None and not isinstance(inputs, Mapping):
            raise InputValidationError(
                f"{cls.__qualname__}.execute(inputs): inputs must be a mapping of input name -> "
                f"value, got {type(inputs).__name__}"
            )
        if idempotency_key is not None:
            return idempotency.run_once(
                cls.definition, dict(inputs or {}), idempotency_key, runtime=runtime,
                sleep=sleep,
            )
        return api.run(cls.definition, dict(inputs or {}), runtime=runtime, sleep=sleep)

    @classmethod
    def find(cls, run_id: str, *, runtime: Runtime | None = None) -> RunView:
        """Load a stored run of this reactor.

        Args:
            run_id: the ``run_id`` of a result.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            A :class:`~reactor.model.run_view.RunView` (secrets shown as ``"[REDACTED]"``).

        Raises:
            RunNotFoundError: no stored run with this id belongs to this reactor.
            DeserializationError: the stored context is malformed (the message names the run
                id; a worker that met it stored it ``failed`` with the reason instead).
        """
        from reactor.engine import api

        return api.find(cls.definition if cls is not Reactor else None, run_id, runtime=runtime)

    @classmethod
    def undo(
        cls,
        run_id: str,
        *,
        runtime: Runtime | None = None,
    ) -> Success | Failure:
        """Roll back a stored run: finish an aborted run's rollback, or undo a completed one.

        Compensates a step whose compensate was cut off, then undoes every completed step
        newest first; the run ends ``cancelled`` (undo rolls back, then cancels: docs/concepts.md,
        "Stored runs"). A failed run (already rolled back) is left as is.

        Returns:
            ``Success(None)`` when everything was rolled back, else ``Failure(UndoError)``
            with ``rollback_failures``.

        Raises:
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run is still running, pending, paused or rolling back.
            DeserializationError: the stored context is malformed (the message names the run id).
        """
        from reactor.engine import api

        return api.undo(cls.definition if cls is not Reactor else None, run_id,
                        runtime=runtime)

    @classmethod
    def retry(
        cls,
        run_id: str,
        *,
        runtime: Runtime | None = None,
    ) -> Success | Failure | DispatchHandle:
        """Run a failed (or cancelled) run again, as a new run with the same inputs.

        The inputs are the old run's stored ones, ``redact=True`` values decrypted with the
        configured keys. The runs are linked both ways: the new run's view shows
        ``retried_from``, the old one's lists it in ``retries``. An idempotency key the old
        run holds moves to the new run (docs/run-control.md, "Retrying a failed run").

        Args:
            run_id: the ``run_id`` of the failed run.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The new run's result, like :meth:`run` (``result.run_id`` is the new run's id).

        Raises:
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run is not ``failed`` or ``cancelled`` (a ``completed``,
                ``halted`` or ``aborted`` run must be undone first), is a map element, or
                failed validating its inputs (nothing to retry).
            SecretKeyError: its sealed inputs cannot be decrypted with the configured keys.
        """
        from reactor.engine import retry_run

        return retry_run.retry(cls.definition if cls is not Reactor else None, run_id,
                               runtime=runtime)
