"""The facade: :class:`Reactor` and :class:`Step`, the classes users subclass
(docs/architecture.md, "Layers").

They add what needs the engine on top of the declarations in :mod:`reactor.dsl`: a reactor's
``run``/``execute``/``find``/``undo``/``retry``/``resume``/``cancel`` and a step's direct
calls. The
declaration layer never imports the engine; this module sits above both.

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
from reactor.engine import api, coordination, coroutines, invoke
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.run_control import cancel_run, idempotency, retry_run
from reactor.engine.run_control import fork as forking
from reactor.engine.run_control import migrate as migrating
from reactor.engine.run_control import resume as resuming
from reactor.engine.run_control import resume_version as version_resuming
from reactor.engine.run_control import rewind as rewinding
from reactor.engine.run_control import suspend as suspending
from reactor.errors import InputValidationError
from reactor.model.engine_state import Suspension
from reactor.model.results import Failure, Paused, Result, Success
from reactor.model.run_view import RunView
from reactor.model.status import RunStatus
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
        cls, *, idempotency_key: str | None = None, deadline: Any = None, **inputs: Any
    ) -> Success | Failure | Paused | DispatchHandle:
        """Run the reactor with ``inputs`` (docs/concepts.md; docs/workers.md with ``background``).

        Args:
            idempotency_key: run at most once per (reactor, key) for the key's lifetime
                (``idempotency_key_ttl`` seconds, default ``context_ttl``): every caller gets
                the same ``run_id`` and, once that run finished, its outcome; a synchronous
                caller whose key names a run still in progress waits for it up to
                ``async_wait_timeout`` seconds, then gets a ``DispatchHandle`` for it
                (docs/run-control.md, "Idempotency keys"). ``None``: no key.
            deadline: when the run must have finished: seconds from now (``int``/``float``),
                a ``timedelta`` or a timezone-aware ``datetime``; ``None``: the class's
                ``deadline``, if any. Once it passes the run starts no further step, rolls
                back and is stored ``failed`` with ``RunDeadlineExceeded``
                (docs/concepts.md, "Run deadlines").
            **inputs: the reactor inputs by name.

        Returns:
            ``Success`` (value: the ``returns`` step's value, or all results), ``Halt`` (a
            ``Success`` subclass) or ``Failure``; ``result.run_id`` is the stored run's id.
            A run that reaches an ``interrupt`` returns ``Paused`` (stored ``paused``, waiting
            for :meth:`resume`: docs/run-control.md, "Interrupts").
            A reactor with ``background`` returns a
            :class:`~reactor.engine.dispatch.DispatchHandle` once the run was handed to a
            worker (or its final result when the run already finished, e.g. on the inline
            router).

        Raises:
            IdempotencyKeyError: ``idempotency_key`` is not a non-empty string of at most 255
                characters (nothing is claimed or run).
            DeadlineError: ``deadline`` is not usable (another type, not finite, not above 0,
                a naive or past ``datetime``, beyond 3,650 days); nothing is claimed or run.
            KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError: re-raised after the run
                is stored as ``aborted`` (finish it with :meth:`undo`).
        """
        return cls.execute(inputs, idempotency_key=idempotency_key, deadline=deadline)

    @classmethod
    def execute(
        cls,
        inputs: Mapping[str, Any] | None = None,
        *,
        runtime: Runtime | None = None,
        sleep: Callable[[float], None] | None = None,
        idempotency_key: str | None = None,
        deadline: Any = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """Run the reactor with an inputs mapping and optional per-run hooks.

        Args:
            inputs: the reactor inputs by name.
            runtime: the runtime to use (default: ``reactor.config.current()``).
            sleep: this run's retry wait (seconds), in place of the runtime clock's
                ``sleep`` (``reactor.configure(clock=...)``); coordination and reader waits
                keep the clock (docs/testing.md, "The clock").
            idempotency_key: see :meth:`run` (docs/run-control.md, "Idempotency keys").
            deadline: see :meth:`run` (docs/concepts.md, "Run deadlines").

        Returns:
            See :meth:`run`.

        Raises:
            InputValidationError: ``inputs`` is not a mapping (e.g. a list).
            IdempotencyKeyError: ``idempotency_key`` is invalid (see :meth:`run`).
            DeadlineError: ``deadline`` is invalid (see :meth:`run`).
        """
        if inputs is not None and not isinstance(inputs, Mapping):
            raise InputValidationError(
                f"{cls.__qualname__}.execute(inputs): inputs must be a mapping of input name -> "
                f"value, got {type(inputs).__name__}"
            )
        if idempotency_key is not None:
            return idempotency.run_once(
                cls.definition, dict(inputs or {}), idempotency_key, runtime=runtime,
                sleep=sleep, deadline=deadline,
            )
        return api.run(cls.definition, dict(inputs or {}), runtime=runtime, sleep=sleep,
                       deadline=deadline)

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
        "Stored runs"). A failed run (already rolled back) is left as is; so is a cancelled
        one, except a run cancelled with ``rollback=False``, whose kept work is undone
        (docs/run-control.md, "Cancel", "Undoing a run").

        Returns:
            ``Success(None)`` when everything was rolled back, else ``Failure(UndoError)``
            with ``rollback_failures``. The failures are stored with the run (its
            ``failure``), so a run left as is answers with the failures its earlier rollback
            stored: asking twice gives the same answer.

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
    ) -> Success | Failure | Paused | DispatchHandle:
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


    @classmethod
    def resume(
        cls,
        run_id: str | None = None,
        *,
        correlation_id: str | None = None,
        payload: Any = None,
        step: str | None = None,
        resume: resuming.ResumeMode = "inline",
        runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """Resume a run paused at an interrupt with ``payload`` (docs/run-control.md,
        "Interrupts").

        The payload is checked against the interrupt's ``schema``; a valid one claims the
        interrupt (exactly one of concurrent resumes wins), becomes the interrupt step's
        result, and the run continues. ``Reactor.resume`` on the base class accepts a run of
        any registered reactor.

        Args:
            run_id: the paused run's id (``result.run_id`` of the ``Paused``); or give
                ``correlation_id`` instead (exactly one of the two).
            correlation_id: the correlation id the interrupt registered.
            payload: the outside input (a mapping for a ``schema``, or any storable value).
            step: the interrupt's step path the caller means (``"approval"``, or
                ``"review.approval"`` inside a composed child); ``None``: whichever the run
                waits at.
            resume: ``"inline"`` (default) continues the run in this call; ``"background"``
                hands it to a worker (a ``run`` job) and returns a ``DispatchHandle``.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The continued run's result, like :meth:`run`: ``Success``, ``Halt``, ``Failure``,
            a ``Paused`` at its next interrupt, or a ``DispatchHandle``.

        Raises:
            InterruptArgumentError: neither or both of ``run_id``/``correlation_id``, a blank
                ``step`` or an unknown ``resume`` mode (``exc.field``).
            RunNotFoundError: no stored run ``run_id`` belongs to this reactor.
            InterruptNotFoundError: unknown correlation id, the run is not paused, or it is
                paused at another step.
            InterruptAlreadyResumedError: another resume (or the expiry) decided the
                interrupt first; this payload was not applied.
            InterruptPayloadError: the payload does not match the schema (``field_errors``;
                one attempt counted); ``exhausted=True``: it was the last allowed attempt and
                the run was rolled back and stored ``failed`` (``exc.failure``).
            InterruptExpiredError: the interrupt's timeout had passed; the run was rolled back
                and stored ``failed`` (``exc.failure``).
        """
        return resuming.resume(
            _own_definition(cls), run_id=run_id, correlation_id=correlation_id,
            payload=payload, step=step, mode=resume, runtime=runtime,
        )

    @classmethod
    def cancel(
        cls,
        run_id: str,
        *,
        reason: str | None = None,
        rollback: bool = True,
        runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """Cancel a run that has not finished: it stops at its next step boundary, wherever
        it runs, is rolled back and is stored ``cancelled`` (docs/run-control.md, "Cancel").

        A running run notices the request at a step boundary, reading it at most every
        ``cancel_check_interval`` seconds (default 1; docs/run-control.md, "Cancel"): the
        step whose body started is compensated, every completed step is undone once. A
        queued, parked or paused run is cancelled by this call, under the run's liveness
        lock. Holds the run keeps (locks, semaphore leases, ordered-lock tickets) are
        released. Cancelling twice is idempotent: the first request stands and nothing is
        rolled back twice.
        ``Reactor.cancel`` on the base class accepts a run of any registered reactor.

        Args:
            run_id: the run's id (a top-level run).
            reason: why (at most 1,000 characters), stored and shown in
                ``Reactor.find(run_id).cancel`` and in the ``Failure``; ``None``: none.
            rollback: ``True`` (default) rolls the run back; ``False`` keeps its completed
                work (``Reactor.undo(run_id)`` can roll it back later).
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The ``Failure`` of :class:`~reactor.errors.RunCancelledError` (``run_id`` set,
            ``rollback_failures`` for undos that did not complete) when the run was cancelled
            by this call, or by an earlier one; a
            :class:`~reactor.engine.dispatch.DispatchHandle` when the execution that owns the
            run finishes the cancel at its next step boundary (``handle.wait()`` returns the
            outcome: that ``Failure``, or the run's own result when it finished before).

        Raises:
            CancelArgumentError: a blank ``run_id``, a ``reason`` that is not a string of at
                most 1,000 characters, or a ``rollback`` that is not a ``bool``
                (``exc.field``).
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunFinishedError: the run is ``completed``, ``halted``, ``failed`` or ``aborted``
                (``exc.status``; a ``RunStateError``): undo it with :meth:`undo` instead.
            RunStateError: the run is a map element, or it is rolling back after a failure.
        """
        return cancel_run.cancel(
            _own_definition(cls), run_id, reason=reason, rollback=rollback, runtime=runtime,
        )


    @classmethod
    def suspend(
        cls, run_id: str, *, reason: str | None = None, by: str | None = None,
        runtime: Runtime | None = None,
    ) -> str:
        """Hold run ``run_id`` for an operator: it starts no further step until
        :meth:`unsuspend` (docs/operations.md, "Suspend and unsuspend"). Steps in flight
        finish; the run releases its locks and slots, keeps its undo stack and is stored
        ``suspended``; ``cancel`` still works on it.

        Args:
            run_id: the top-level run.
            reason: why (shown in views), at most 1,000 characters; ``None``: none.
            by: who asked, at most 1,000 characters; ``None``: unknown.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            ``"suspended"`` when the run is stored ``suspended`` (by this call or an earlier
            one); ``"requested"`` when the execution that owns it suspends it before its
            next step.

        Raises:
            SuspendArgumentError: an unusable argument (``exc.field``); nothing read.
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunFinishedError: the run finished; nothing changed.
            RunStateError: a map element, or a run rolling back; nothing changed.
        """
        return suspending.suspend(
            _own_definition(cls), run_id, reason=reason, by=by, runtime=runtime
        )

    @classmethod
    def unsuspend(cls, run_id: str, *, runtime: Runtime | None = None) -> RunStatus:
        """Let a suspended run go on (docs/operations.md, "Suspend and unsuspend"): it is
        stored back ``running`` and its job enqueued (a worker continues it at its next
        step), or back ``paused`` when it was waiting at an interrupt.

        Args:
            run_id: the run.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            ``RunStatus.RUNNING`` or ``RunStatus.PAUSED``.

        Raises:
            SuspendArgumentError: an unusable ``run_id``.
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run is not suspended; nothing changed.
            LockAcquisitionError: the run's liveness lock stayed held (try again).
        """
        return suspending.unsuspend(_own_definition(cls), run_id, runtime=runtime)

    @classmethod
    def suspend_all(
        cls, *, reason: str | None = None, by: str | None = None, hold_new: bool = False,
        runtime: Runtime | None = None,
    ) -> dict[str, int]:
        """:meth:`suspend` every unfinished top-level run of this reactor now
        (docs/operations.md, "Suspend and unsuspend"). With ``hold_new=True`` the reactor's
        suspend switch is set first: until :meth:`unsuspend_all`, every run of it started or
        continued later (a new run, a background run a worker takes, a resumed one) starts
        no further step and is stored ``suspended`` with the switch's reason and ``by``;
        steps in flight finish. Without it, runs started later are not held.

        Args:
            reason: why, at most 1,000 characters.
            by: who asked, at most 1,000 characters.
            hold_new: set the reactor's suspend switch too (a switch already set stands).
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            ``{"suspended": n, "requested": n, "skipped": n}``.

        Raises:
            SuspendArgumentError: an unusable ``reason``, ``by`` or ``hold_new``; nothing read.
            LockAcquisitionError: other operators changed the switch under this call (retry).
        """
        return suspending.suspend_all(
            cls.definition, reason=reason, by=by, hold_new=hold_new, runtime=runtime
        )

    @classmethod
    def unsuspend_all(cls, *, runtime: Runtime | None = None) -> dict[str, int]:
        """Clear this reactor's suspend switch (if set), then :meth:`unsuspend` every
        suspended top-level run of it (docs/operations.md, "Suspend and unsuspend").

        Args:
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            ``{"running": n, "paused": n, "skipped": n}``.

        Raises:
            LockAcquisitionError: other operators changed the switch under this call (retry).
        """
        return suspending.unsuspend_all(cls.definition, runtime=runtime)

    @classmethod
    def suspend_switch(cls, *, runtime: Runtime | None = None) -> Suspension | None:
        """This reactor's suspend switch as stored now (set by ``suspend_all(hold_new=True)``,
        cleared by :meth:`unsuspend_all`; docs/operations.md, "Suspend and unsuspend").

        Args:
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The switch (``reason``, ``by``, ``at`` in epoch seconds), or ``None`` when off.
        """
        return suspending.reactor_switch(cls.definition, runtime=runtime)

    @classmethod
    def resume_version(cls, run_id: str, *, runtime: Runtime | None = None) -> DispatchHandle:
        """Continue a run held ``needs_version`` (no process could safely continue it under
        its definition) once this process's definition can: judge it again and hand it to a
        worker (docs/deploys.md, "Compatibility rules").

        Args:
            run_id: the held run.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The handle of the run's ``run`` job (``wait()`` returns its outcome).

        Raises:
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run is not ``needs_version``; nothing changed.
            DefinitionMismatchError: this definition cannot continue it either (``exc.step``
                names the step, the message the rule); nothing changed.
            LockAcquisitionError: an execution holds the run (try again).
        """
        return version_resuming.resume_version(_own_definition(cls), run_id, runtime=runtime)

    @classmethod
    def migrate(
        cls, run_id: str, *, renames: Mapping[str, str] | None = None,
        to_version: str | None = None, dry_run: bool = False, runtime: Runtime | None = None,
    ) -> migrating.Migration:
        """Move a stored run onto this process's definition of its reactor, renaming the
        records of renamed steps, once the compatibility rules allow it (docs/deploys.md,
        "Operator tools"): under the run's liveness lock, in a fenced save; a
        ``needs_version`` run goes back to its previous status and a worker continues it.

        Args:
            run_id: the run (any status but ``running`` and ``rolling_back``).
            renames: old step name -> new step name (``step`` and ``compose`` steps), e.g.
                ``{"reserve": "hold_stock"}``.
            to_version: when given, the current definition's ``version`` label must be this.
            dry_run: judge and report only; nothing is written.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The :class:`~reactor.engine.run_control.migrate.Migration` (``changed=False``:
            the run already carried this definition).

        Raises:
            MigrationArgumentError: an unusable argument or rename (``exc.field``); nothing
                changed.
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: an execution owns the run (``running``, ``rolling_back``), or it
                is a map element; nothing changed.
            DefinitionMismatchError: the renamed run still breaks a compatibility rule
                (``exc.step``; the message names the rule); nothing changed.
            LockAcquisitionError: an execution holds the run (try again).
        """
        return migrating.migrate(
            _own_definition(cls), run_id, renames=renames, to_version=to_version,
            dry_run=dry_run, runtime=runtime,
        )

    @classmethod
    def rewind(
        cls, run_id: str, *, from_step: str | None = None, reason: str | None = None,
        by: str | None = None, runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """Continue a run held ``failed_paused`` (``on_failure="pause"``) from its failed
        step, or from an earlier step it completed (docs/operations.md, "Pause, rewind,
        fork"): the steps run again are undone first (newest first, each once), the other
        completed steps keep their results.

        Args:
            run_id: the held run.
            from_step: a completed step, or the failed step; ``None``: the failed step.
            reason: why (on the ``rewound`` trace entry), at most 1,000 characters.
            by: who asked, at most 1,000 characters.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The run's result (continued here), or a ``DispatchHandle`` (a worker continues
            a ``background`` reactor's run).

        Raises:
            RewindArgumentError: an unusable argument (``exc.field``); nothing changed.
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run is not ``failed_paused``, or a step cannot run again;
                nothing changed.
            DefinitionMismatchError: the run no longer matches this reactor's definition.
            LockAcquisitionError: another operator call holds the run (try again).
        """
        return rewinding.rewind(
            _own_definition(cls), run_id, from_step=from_step, reason=reason, by=by,
            runtime=runtime,
        )

    @classmethod
    def fork(
        cls, run_id: str, *, from_step: str, input_patch: str | Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """Start a new run from step ``from_step`` of run ``run_id``, copying the results of
        the steps before it, with an optional JSON merge patch on the inputs
        (docs/operations.md, "Pause, rewind, fork"). The original is left as it is; the
        fork's undo stack holds only the steps the fork runs.

        Args:
            run_id: a ``failed_paused``, ``completed`` or ``halted`` run.
            from_step: a declared step: it and the steps after it run in the fork.
            input_patch: JSON text of an object, or a mapping: input name -> new value
                (``None`` removes it); ``None``: the same inputs.
            runtime: the runtime to use (default: ``reactor.config.current()``).

        Returns:
            The fork's result (``run_id`` is the new run's), or a ``DispatchHandle``.

        Raises:
            ForkArgumentError: an unusable argument (``exc.field``); nothing stored.
            InputValidationError: the patched inputs are invalid; nothing stored.
            RunNotFoundError: no stored run with this id belongs to this reactor.
            RunStateError: the run cannot be forked (its status, a step that cannot run
                again); nothing stored.
            DefinitionMismatchError: the run no longer matches this reactor's definition.
        """
        return forking.fork(
            _own_definition(cls), run_id, from_step=from_step, input_patch=input_patch,
            runtime=runtime,
        )

    # -- the awaitable API (docs/concepts.md, "Async steps") ------------------------------------

    @classmethod
    async def arun(
        cls, *, idempotency_key: str | None = None, deadline: Any = None, **inputs: Any
    ) -> Success | Failure | Paused | DispatchHandle:
        """:meth:`run`, awaitable: the engine's blocking work runs in reactor's thread pool, off
        the calling event loop, and ``async def`` step bodies run on this loop (they may use
        the application's loop-bound clients). Cancelling the awaiting task does not stop the
        run (use :meth:`acancel`).

        Args:
            idempotency_key: see :meth:`run`.
            deadline: see :meth:`run`.
            **inputs: the reactor inputs by name.

        Returns:
            See :meth:`run`.

        Raises:
            IdempotencyKeyError, DeadlineError: see :meth:`run`.
        """
        return await coroutines.off_loop(
            cls.execute, inputs, idempotency_key=idempotency_key, deadline=deadline
        )

    @classmethod
    async def aexecute(
        cls,
        inputs: Mapping[str, Any] | None = None,
        *,
        runtime: Runtime | None = None,
        sleep: Callable[[float], None] | None = None,
        idempotency_key: str | None = None,
        deadline: Any = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """:meth:`execute`, awaitable (see :meth:`arun`); ``sleep`` runs in the engine's thread,
        never on the calling loop.

        Raises:
            InputValidationError, IdempotencyKeyError, DeadlineError: see :meth:`execute`.
        """
        return await coroutines.off_loop(
            cls.execute, inputs, runtime=runtime, sleep=sleep, idempotency_key=idempotency_key,
            deadline=deadline,
        )

    @classmethod
    async def afind(cls, run_id: str, *, runtime: Runtime | None = None) -> RunView:
        """:meth:`find`, awaitable (the store is read off the calling loop).

        Raises:
            RunNotFoundError, DeserializationError: see :meth:`find`.
        """
        return await coroutines.off_loop(cls.find, run_id, runtime=runtime)

    @classmethod
    async def aundo(cls, run_id: str, *, runtime: Runtime | None = None) -> Success | Failure:
        """:meth:`undo`, awaitable (see :meth:`arun`).

        Raises:
            RunNotFoundError, RunStateError, DeserializationError: see :meth:`undo`.
        """
        return await coroutines.off_loop(cls.undo, run_id, runtime=runtime)

    @classmethod
    async def aretry(
        cls, run_id: str, *, runtime: Runtime | None = None
    ) -> Success | Failure | Paused | DispatchHandle:
        """:meth:`retry`, awaitable (see :meth:`arun`).

        Raises:
            RunNotFoundError, RunStateError, SecretKeyError: see :meth:`retry`.
        """
        return await coroutines.off_loop(cls.retry, run_id, runtime=runtime)

    @classmethod
    async def aresume(
        cls,
        run_id: str | None = None,
        *,
        correlation_id: str | None = None,
        payload: Any = None,
        step: str | None = None,
        resume: resuming.ResumeMode = "inline",
        runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """:meth:`resume`, awaitable (see :meth:`arun`).

        Raises:
            InterruptArgumentError, RunNotFoundError, InterruptNotFoundError,
            InterruptAlreadyResumedError, InterruptPayloadError, InterruptExpiredError: see
            :meth:`resume`.
        """
        return await coroutines.off_loop(
            cls.resume, run_id, correlation_id=correlation_id, payload=payload, step=step,
            resume=resume, runtime=runtime,
        )

    @classmethod
    async def acancel(
        cls,
        run_id: str,
        *,
        reason: str | None = None,
        rollback: bool = True,
        runtime: Runtime | None = None,
    ) -> Success | Failure | Paused | DispatchHandle:
        """:meth:`cancel`, awaitable (see :meth:`arun`).

        Raises:
            CancelArgumentError, RunNotFoundError, RunFinishedError, RunStateError: see
            :meth:`cancel`.
        """
        return await coroutines.off_loop(
            cls.cancel, run_id, reason=reason, rollback=rollback, runtime=runtime
        )


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
