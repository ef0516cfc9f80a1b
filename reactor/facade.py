"""The facade: :class:`Reactor` and :class:`Step`, the classes users subclass
(docs/architecture.md, "Layers").

They add what needs the engine on top of the declarations in :mod:`reactor.dsl`: a reactor's
``run``/``execute``/``find``/``undo``/``retry`` and a step's direct calls. The declaration
layer never imports the engine; this module sits above both.

    class Payment(Reactor, name="payments.payment"):
        amount = Input(Decimal, gt=0)
        authorize = step(Authorize, amount=input("amount"))

    result = Payment.run(amount=Decimal("10"))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.reactor import BaseReactor
from reactor.dsl.step import BaseStep
from reactor.engine import api, coordination, idempotency, invoke, retry_run
from reactor.engine.dispatch import DispatchHandle
from reactor.errors import InputValidationError
from reactor.model.results import Failure, Result, Success
from reactor.model.run_view import RunView
from reactor.model.step_context import StepContext

__all__ = ["Reactor", "Step"]


def _own_definition(cls: type[BaseReactor]) -> ReactorDefinition | None:
    """The definition of a concrete reactor class; ``None`` for :class:`Reactor` itself and
    for ``abstract=True`` bases (their ``find``/``undo``/``retry`` accept any reactor's run)."""
    definition = vars(cls).get("definition")
    return definition if isinstance(definition, ReactorDefinition) else None


class Reactor(BaseReactor, abstract=True):
    """Base class of reactors: subclass it to declare a workflow (docs/concepts.md,
    "Reactors and steps"); the class keywords and attributes are those of
    :class:`~reactor.dsl.reactor.BaseReactor`.
    """

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
            sleep: this run's retry wait (seconds), in place of the runtime clock's
                ``sleep`` (``reactor.configure(clock=...)``); coordination and reader waits
                keep the clock (docs/testing.md, "The clock").
            idempotency_key: see :meth:`run` (docs/run-control.md, "Idempotency keys").

        Returns:
            See :meth:`run`.

        Raises:
            InputValidationError: ``inputs`` is not a mapping (e.g. a list).
            IdempotencyKeyError: ``idempotency_key`` is invalid (see :meth:`run`).
        """
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
        return api.find(_own_definition(cls), run_id, runtime=runtime)

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
        return api.undo(_own_definition(cls), run_id,
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
        return retry_run.retry(_own_definition(cls), run_id,
                               runtime=runtime)


class Step(BaseStep):
    """Base class of class-based steps (docs/concepts.md, "Reactors and steps"): declare
    ``Input`` attributes and implement ``run`` (optionally ``undo`` and ``compensate``); the
    attributes are those of :class:`~reactor.dsl.step.BaseStep`.
    """

    @classmethod
    def call(cls, args: Mapping[str, Any], context: StepContext | None = None) -> Result:
        """Run this step once, directly (no reactor, no retries).

        Enforces the contract, then runs the body; signals and exceptions become results.
        A class with ``coordination`` takes it around the body as its own unit of work: it
        never parks; contention waits up to each primitive's ``wait`` and then fails
        (docs/coordination.md).

        Args:
            args: the input values by name.
            context: an optional step context.

        Returns:
            ``Success``/``Skipped``/``Halt``/``Failure`` (an invalid input gives a ``Failure``
            with ``validation_errors``).
        """
        return coordination.call_direct(cls, args, context)

    @classmethod
    def call_undo(
        cls, result: Any, args: Mapping[str, Any], context: StepContext | None = None
    ) -> Result:
        """Run this step's ``undo`` directly (inputs are not validated).

        Args:
            result: the value ``run`` returned (``self.result`` in ``undo``).
            args: the input values by name.
            context: an optional step context.

        Returns:
            The undo's result (``Failure`` if it failed or raised).
        """
        return invoke.call_class_undo(cls, result, args, context)

    @classmethod
    def call_compensate(
        cls, failure: Failure, args: Mapping[str, Any], context: StepContext | None = None
    ) -> Result:
        """Run this step's ``compensate`` directly (inputs are not validated).

        Args:
            failure: the failure being compensated (``self.failure`` in ``compensate``).
            args: the input values by name.
            context: an optional step context.

        Returns:
            The compensate's result (``Failure`` if it failed or raised).
        """
        return invoke.call_class_compensate(cls, failure, args, context)
