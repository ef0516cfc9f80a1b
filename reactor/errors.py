"""The exception hierarchy of reactor.

Every error reactor raises on purpose derives from :class:`ReactorError`. The hierarchy is
grouped by who can fix the problem:

* definition errors (the reactor class is wrong) are raised when the class is created;
* input errors (the caller passed bad data) carry field-level details;
* storage and router errors wrap a backend exception (chained as ``__cause__``);
* coordination errors report contention on locks, semaphores, rate limits and ordered locks.

This module sits at the bottom of the layers (docs/architecture.md, "Layers"): it imports
nothing from reactor, and every layer raises from it. A stored failure names its exception's
class as ``module.QualName``; reactor's own classes are stored as ``reactor.errors.<Name>``
whatever module raised them, and :func:`canonical_exception_name` maps the names older
versions stored (``reactor.model.errors.InputValidationError``...) to those, so a stored run
reads the same after a file moves (docs/protocol.md, "Stored failures").
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AbandonedRunError",
    "ArgumentResolutionError",
    "AsyncStepCancelledError",
    "AsyncStepDeadlockError",
    "AsyncWaitTimeoutError",
    "CancelArgumentError",
    "CompensationError",
    "ConfigurationError",
    "ContextTooLargeError",
    "CoordinationError",
    "CoordinationKeyError",
    "DeadlineError",
    "DefinitionError",
    "DefinitionMismatchError",
    "DependencyError",
    "DeserializationError",
    "EncodeError",
    "EventLoopBlockedError",
    "ForkArgumentError",
    "IdempotencyKeyError",
    "InputValidationError",
    "InterruptAlreadyResumedError",
    "InterruptArgumentError",
    "InterruptCorrelationError",
    "InterruptError",
    "InterruptExpiredError",
    "InterruptNotFoundError",
    "InterruptPayloadError",
    "LockAcquisitionError",
    "LockLost",
    "MapElementsArgumentError",
    "MigrationArgumentError",
    "OrderedLockWaitError",
    "PoisonedRunError",
    "QuarantineRestoreError",
    "RateLimitExceeded",
    "ReactorError",
    "RewindArgumentError",
    "RouterError",
    "RunCancelledError",
    "RunDeadlineExceeded",
    "RunFinishedError",
    "RunNotFoundError",
    "RunStateError",
    "ScanCursorError",
    "ScheduleConflictError",
    "ScheduleNotFoundError",
    "ScheduleValueError",
    "SchemaVersionError",
    "SecretKeyError",
    "SemaphoreAcquisitionError",
    "SignalOutsideStepError",
    "SleepValueError",
    "SnoozeLimitError",
    "StaleWriterError",
    "StepTimeout",
    "StepTransactionError",
    "StepTransactionMisuseError",
    "StorageError",
    "SuspendArgumentError",
    "UndeclaredInputError",
    "UndoError",
    "UnknownRateLimitError",
    "UnknownReactorError",
    "canonical_exception_name",
]


class ReactorError(Exception):
    """Base class of every error reactor raises on purpose."""


class DefinitionError(ReactorError):
    """A reactor or step class is declared wrongly.

    Raised when the class is created (``__init_subclass__``), never at run time: an unknown step
    named by ``result()``/``wait_for``, a dependency cycle, an unwired required step input,
    ``returns`` naming no step, a reserved input name, conflicting declarations.
    """


class ConfigurationError(ReactorError):
    """``reactor.configure(...)`` received something it cannot use.

    Examples: an unknown URL scheme, an adapter whose optional dependency is missing (the
    message names the extra to install, e.g. ``pip install 'reactor-saga[redis]'``), a setting
    of the wrong type.
    """


class StepTransactionError(ReactorError):
    """A transactional step's transaction cannot commit with its checkpoint
    (docs/concepts.md, "Transactional steps"): a statement of the body failed and the body
    caught the error (the transaction is aborted; catch inside a savepoint,
    ``with ctx.transaction.transaction():``, to go on), or its connection was closed or
    dropped. The attempt fails like a body that raised it: rolled back, retried per the
    step's policy, compensated.
    """


class StepTransactionMisuseError(StepTransactionError):
    """The body of a transactional step called ``commit()``, ``rollback()``, ``close()`` or
    ``set_autocommit()`` on ``ctx.transaction``: the transaction belongs to the step's
    checkpoint, which the engine commits (docs/concepts.md, "Transactional steps"). Raised by
    that call, so the attempt fails where the mistake is. Not retryable.
    """

    retryable = False


class InputValidationError(ReactorError):
    """Inputs (of a reactor, a step, or an interrupt payload) failed validation.

    Attributes:
        field_errors: ``{"field.path": ["message", ...]}`` — one entry per invalid field.
        step_name: the step whose inputs were invalid, or ``None`` for reactor inputs.
    """

    def __init__(
        self,
        message: str,
        field_errors: Mapping[str, Sequence[str]] | None = None,
        step_name: str | None = None,
    ) -> None:
        super().__init__(message)
        self.field_errors: dict[str, list[str]] = {
            k: list(v) for k, v in (field_errors or {}).items()
        }
        self.step_name = step_name


class UndeclaredInputError(ReactorError, AttributeError):
    """A step read ``inputs.<name>`` for a name its contract does not declare (never retried)."""


class ArgumentResolutionError(ReactorError):
    """Resolving a step argument (a template or its transform) raised.

    The step body never started: it is not compensated and not retried; completed steps are
    undone (docs/concepts.md, "Arguments and wiring").
    """


class SleepValueError(ReactorError, ValueError):
    """A ``sleep`` step's wake time is unusable (docs/schedules.md, "Durable sleep").

    Raised at definition time as a :class:`DefinitionError` instead; this one fails the
    step at run time when the value read from the run's input (``from_input=``) is not a
    positive, finite number of seconds or a timezone-aware ``datetime`` (or an ISO 8601 text
    with an offset). The step has no body: it is not retried and not compensated; completed
    steps are undone.

    Args:
        message: the reason (it names the field).
        field: the offending field (the input's name, ``"seconds"`` or ``"until"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str = "seconds") -> None:
        super().__init__(message)
        self.field = field


class DependencyError(ReactorError):
    """No step is ready although the run is not finished (a broken graph at run time)."""


class CompensationError(ReactorError):
    """A ``compensate`` failed while rolling back; the final ``Failure`` carries this error.

    Attributes:
        step_name: the step whose compensate failed.
        original: the error that triggered the rollback.
    """

    def __init__(self, message: str, step_name: str | None = None, original: Any = None) -> None:
        super().__init__(message)
        self.step_name = step_name
        self.original = original


class UndoError(ReactorError):
    """An ``undo`` failed; raised by ``Reactor.undo(run_id)`` callers that ask for strictness."""


class DeserializationError(ReactorError):
    """A stored context or job payload is malformed (never surfaces as a bare ``KeyError``)."""


class SchemaVersionError(DeserializationError):
    """A stored document carries a ``schema_version`` this release cannot read."""


class ContextTooLargeError(ReactorError):
    """A serialized context exceeds the size limit; raised before anything is written.

    Attributes:
        size_bytes: the encoded size.
        limit_bytes: the limit that was exceeded (the smaller of the configured
            ``max_context_bytes`` and the adapter's ``max_document_bytes``).
    """

    def __init__(self, message: str, size_bytes: int = 0, limit_bytes: int = 0) -> None:
        super().__init__(message)
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class StorageError(ReactorError):
    """A storage backend failed (connection lost, timeout, server error).

    The backend's own exception is chained as ``__cause__``. A lost conditional write is never a
    ``StorageError``: it is a normal ``False``/``None`` return.

    Args:
        *args: the message (and any further exception arguments).
        run_id: the run whose execution hit the failure, when known.

    Attributes:
        run_id: the run id when the error escaped a run, else ``None``. ``Reactor.run`` sets it
            (and names the run in the message) when a synchronous run's checkpoint or liveness
            lock hits a storage outage; the run is left at its last stored checkpoint for the
            sweeper to resume (docs/workers.md, "Storage outages during a synchronous run").
    """

    def __init__(self, *args: object, run_id: str | None = None) -> None:
        super().__init__(*args)
        self.run_id = run_id


class RouterError(ReactorError):
    """A router backend failed to enqueue, receive, ack or extend a job.

    The backend's own exception is chained as ``__cause__``.

    Args:
        *args: the message (and any further exception arguments).
        run_id: the run whose job could not be enqueued, when known.

    Attributes:
        run_id: the run id when the error escaped a run, else ``None``. ``Reactor.run`` sets it
            (and names the run in the message) when a background hand-off stored the run and
            then failed to enqueue its job: the run is stored ``running`` and the run sweeper
            hands it to a worker (docs/workers.md, "Storage outages during a synchronous
            run").
    """

    def __init__(self, *args: object, run_id: str | None = None) -> None:
        super().__init__(*args)
        self.run_id = run_id


class CoordinationError(ReactorError):
    """Base of contention errors on coordination primitives.

    Attributes:
        key: the primitive's key.
        retry_after: seconds after which a retry may succeed, when known (else ``None``).
    """

    def __init__(self, message: str, key: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.retry_after = retry_after


class CoordinationKeyError(ReactorError):
    """A coordination declaration's ``key`` function raised or returned nothing usable.

    A permanent error: the unit fails at once, without retries, parks or compensation (its body
    never started), like ruby_reactor's ``StepCoordination::KeyError``.
    """


class LockAcquisitionError(CoordinationError):
    """A lock is held by another owner and did not free up within the wait (seconds)."""


class SemaphoreAcquisitionError(CoordinationError):
    """Every slot of a semaphore is leased and none freed up within the wait."""


class RateLimitExceeded(CoordinationError):
    """A rate-limit window is full.

    Attributes:
        window: the name of the window that denied (e.g. ``"minute"`` or ``"60s"``).
        limit: that window's limit.
        retry_after: seconds until that window rolls over (at least 0.1).
    """

    def __init__(
        self, message: str, key: str = "", retry_after: float | None = None,
        window: str = "", limit: int = 0,
    ) -> None:
        super().__init__(message, key=key, retry_after=retry_after)
        self.window = window
        self.limit = limit


class UnknownRateLimitError(ReactorError):
    """``with_rate_limit("name")`` names no registered limit: a permanent configuration error."""


class OrderedLockWaitError(CoordinationError):
    """An ordered-lock nonce is not yet next in line (``retry_after`` seconds until re-check)."""


class LockLost(ReactorError):
    """A hold (lock, semaphore lease, ordered-lock turn) is gone while its holder still ran.

    Reported by the client (``Lock.lost``, ``on_lost``) when an extend answered ``False`` (taken
    over or lapsed) or the holder's deadline passed without a successful extend; the engine
    fails a step whose hold was lost with it, before its result is recorded
    (``docs/coordination.md``, "Renewal and loss").

    Attributes:
        key: the primitive's key.
        primitive: ``"lock"``, ``"semaphore"`` or ``"ordered_lock"``.
        lost_at: epoch seconds (wall clock) when the loss was detected.
    """

    def __init__(self, message: str, key: str = "", primitive: str = "lock") -> None:
        super().__init__(message)
        self.key = key
        self.primitive = primitive
        self.lost_at = time.time()


class StaleWriterError(LockLost):
    """A fenced context save was refused: a newer holder of the run's lock wrote the run.

    Raised by ``ContextStore.save(record, fence=...)`` when the stored record carries a fencing
    token greater than the fence's token: the writer's liveness lock lapsed (a GC pause, a
    frozen process or VM) and another execution took the run over. Nothing was written. It is a
    :class:`LockLost`, so every worker path that handles a lost liveness lock (stop, leave the
    stored run alone, never release the other holder's lock) handles it the same way
    (docs/workers.md, "Stale writers and fenced saves").

    Args:
        message: the human-readable reason.
        run_id: the context id whose save was refused.
        key: the lock key the fence named (``async:<id>`` or a map element's key).
        token: the refused fence's token.
        stored_token: the larger token already on the stored record.

    Attributes:
        run_id: as given.
        token: as given.
        stored_token: as given.
    """

    def __init__(
        self, message: str, run_id: str = "", key: str = "", token: int = 0,
        stored_token: int = 0,
    ) -> None:
        super().__init__(message, key=key, primitive="lock")
        self.run_id = run_id
        self.token = token
        self.stored_token = stored_token

    @classmethod
    def refused(cls, run_id: str, *, key: str, token: int, stored_token: int) -> StaleWriterError:
        """The error of a refused fenced save, with the standard message (used by every store).

        Args:
            run_id: the record whose save was refused.
            key: the fence's lock key.
            token: the fence's token.
            stored_token: the larger token stored on the record.
        """
        return cls(
            f"save of run {run_id!r} refused: fence {key!r} token {token} is below the stored "
            f"token {stored_token} (the lock lapsed and a newer holder wrote the run)",
            run_id=run_id, key=key, token=token, stored_token=stored_token,
        )


class SignalOutsideStepError(ReactorError):
    """``fail()``/``halt()``/``skip()``/``succeed()`` was called outside a step body.

    Signals only work inside ``run``/``undo``/``compensate`` of a step that the engine (or
    ``Step.call``) is executing; raising one elsewhere is a programming error.
    """


class RunNotFoundError(ReactorError, LookupError):
    """No stored run has this id (or it belongs to another reactor).

    Attributes:
        run_id: the id that was looked up.
    """

    def __init__(self, message: str, run_id: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id


class RunStateError(ReactorError):
    """The run's status does not allow the operation (e.g. ``Reactor.undo`` on a running run).

    Attributes:
        run_id: the run's id.
        status: the run's current status value.
    """

    def __init__(self, message: str, run_id: str = "", status: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class RunFinishedError(RunStateError):
    """``Reactor.cancel`` was asked to cancel a run that already finished: ``completed``,
    ``halted``, ``failed`` or ``aborted`` (docs/run-control.md, "Cancel"). Nothing was
    changed; undo a finished run with ``Reactor.undo`` instead.

    Args:
        message: the reason; it names the run and its status.
        run_id: the run.
        status: its status value (``"completed"``, ``"halted"``, ``"failed"``, ``"aborted"``).

    Attributes:
        field: the argument naming the run, ``"run_id"``.
    """

    def __init__(self, message: str, run_id: str = "", status: str = "") -> None:
        super().__init__(message, run_id=run_id, status=status)
        self.field = "run_id"


class RunCancelledError(RunStateError):
    """The error of a cancelled run's ``Failure`` (docs/run-control.md, "Cancel"): what
    ``Reactor.cancel`` returns when it cancelled the run itself, what a run that noticed a
    cancel request at a step boundary returns, and what ``DispatchHandle.wait`` and
    ``Reactor.find(run_id).failure`` show for a run stored ``cancelled`` by a cancel. Not
    retryable.

    Args:
        message: the reason; it names the run and the cancel's ``reason``.
        run_id: the run.
        reason: the ``reason`` given to ``Reactor.cancel`` (``None``: none given).
        rolled_back: whether the run's completed work was rolled back (``rollback=True``).

    Attributes:
        reason, rolled_back: as given; ``status`` is ``"cancelled"``.
    """

    retryable = False

    def __init__(
        self, message: str, run_id: str = "", *, reason: str | None = None,
        rolled_back: bool = True,
    ) -> None:
        super().__init__(message, run_id=run_id, status="cancelled")
        self.reason = reason
        self.rolled_back = rolled_back


class CancelArgumentError(ReactorError, ValueError):
    """``Reactor.cancel`` was called with an unusable argument (docs/run-control.md,
    "Cancel"): a ``run_id`` that is not a non-blank string, a ``reason`` that is not a string
    of at most 1,000 characters, or a ``rollback`` that is not a ``bool``. Nothing was read
    or claimed.

    Args:
        message: the reason; it names the argument.
        field: the offending argument's name (``"run_id"``, ``"reason"`` or ``"rollback"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class MapElementsArgumentError(ReactorError, ValueError):
    """``RunView.map_elements`` (or :func:`reactor.runs.map_element_page`) was called with an
    unusable argument (docs/fan_out.md, "Listing a map's elements"): a ``step`` that names no
    map step the run started, an unknown ``outcome``, a negative ``offset`` or a ``limit``
    outside 1..1000, or a view not read from storage. Nothing was read.

    Args:
        message: the reason; it names the argument.
        field: the offending argument's name (``"step"``, ``"outcome"``, ``"offset"``,
            ``"limit"`` or ``"view"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class IdempotencyKeyError(ReactorError, ValueError):
    """An idempotency key is not usable: not a string, empty, or too long
    (docs/run-control.md, "Idempotency keys").

    Attributes:
        field: the offending argument's name, ``"idempotency_key"``.
    """

    def __init__(self, message: str, field: str = "idempotency_key") -> None:
        super().__init__(message)
        self.field = field


class InterruptError(ReactorError):
    """Base of the errors of interrupts: pausing a run for outside input and resuming it
    (docs/run-control.md, "Interrupts").

    Args:
        message: the human-readable reason.
        run_id: the paused (or looked-up) run, ``""`` when unknown.
        step: the interrupt's step path (``"approval"``, ``"review.approval"`` inside a
            composed child), ``""`` when unknown.

    Attributes:
        run_id: as given.
        step: as given.
    """

    def __init__(self, message: str, *, run_id: str = "", step: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step


class InterruptArgumentError(InterruptError, ValueError):
    """``Reactor.resume`` was called with unusable arguments: neither or both of ``run_id``
    and ``correlation_id``, a blank ``run_id``/``correlation_id``/``step``, or a ``resume=``
    mode other than ``"inline"``/``"background"`` (docs/run-control.md, "Interrupts"). Nothing
    was claimed or counted.

    Args:
        message: the reason (it names the argument).
        field: the offending argument's name (``"run_id"``, ``"correlation_id"``,
            ``"resume"`` or ``"step"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InterruptNotFoundError(InterruptError, LookupError):
    """No paused interrupt matches a resume (docs/run-control.md, "Interrupts"): the
    correlation id is unknown, the run is not paused (it finished, or it is running), or it is
    paused at another step than the one named.

    Args:
        message: the reason.
        run_id: the run, when one was found.
        step: the step path the caller named (or the run is paused at).
        field: the argument that did not match: ``"correlation_id"``, ``"run_id"`` or
            ``"step"``.
        status: the run's status value, when a run was found.

    Attributes:
        field: as given.
        status: as given.
    """

    def __init__(
        self, message: str, *, run_id: str = "", step: str = "", field: str = "run_id",
        status: str = "",
    ) -> None:
        super().__init__(message, run_id=run_id, step=step)
        self.field = field
        self.status = status


class InterruptAlreadyResumedError(InterruptError):
    """Another caller decided this interrupt first: a concurrent resume won the claim, or the
    interrupt expired or ran out of attempts (docs/run-control.md, "Interrupts"). This caller's
    payload was not applied; the run belongs to the winner.
    """


class InterruptPayloadError(InputValidationError):
    """A resume payload does not match the interrupt's schema (docs/run-control.md,
    "Interrupts"). Each invalid payload counts one attempt; the one that reaches the
    interrupt's ``max_attempts`` fails the run (it is rolled back and stored ``failed`` with
    this error).

    Args:
        message: the reason; it names every invalid field (never the values).
        field_errors: ``{"field.path": ["message", ...]}``; the whole payload is ``"payload"``.
        run_id: the paused run.
        step: the interrupt's step path.
        attempts: invalid payloads counted so far, this one included.
        max_attempts: the interrupt's ``max_attempts``.
        exhausted: this payload used the last attempt: the run was failed and rolled back
            (inline), or handed to a worker to be rolled back (``resume="background"``).

    Attributes:
        run_id, step, attempts, max_attempts, exhausted: as given.
        failure: the run's final ``Failure`` when ``exhausted`` and the rollback ran in the
            caller, else ``None``.
    """

    retryable = False

    def __init__(
        self, message: str, field_errors: Mapping[str, Sequence[str]] | None = None, *,
        run_id: str = "", step: str = "", attempts: int = 0, max_attempts: int = 0,
        exhausted: bool = False,
    ) -> None:
        super().__init__(message, field_errors, step_name=step or None)
        self.run_id = run_id
        self.step = step
        self.attempts = attempts
        self.max_attempts = max_attempts
        self.exhausted = exhausted
        self.failure: Any = None


class InterruptExpiredError(InterruptError):
    """An interrupt's timeout passed before it was resumed (docs/run-control.md,
    "Interrupts"): the run was rolled back and stored ``failed`` with this error, by the resume
    that came too late (lazy expiry) or by the interrupt's delayed job (active expiry).

    Args:
        message: the reason.
        run_id: the run.
        step: the interrupt's step path.
        deadline: the deadline, in epoch seconds on the runtime clock (docs/testing.md,
            "The clock").

    Attributes:
        deadline: as given.
        failure: the run's final ``Failure`` when the rollback ran in the caller, else
            ``None``.
    """

    retryable = False

    def __init__(
        self, message: str, *, run_id: str = "", step: str = "", deadline: float | None = None
    ) -> None:
        super().__init__(message, run_id=run_id, step=step)
        self.deadline = deadline
        self.failure: Any = None


class InterruptCorrelationError(InterruptError):
    """An interrupt's correlation id cannot be used (docs/run-control.md, "Interrupts"): it
    is not a non-blank string of at most 255 characters, or another paused run holds it. The
    interrupt step fails (it is not retried) and the run is rolled back.

    Args:
        message: the reason.
        run_id: the run that reached the interrupt.
        step: the interrupt's step path.
        field: ``"correlation_id"``.

    Attributes:
        field: as given.
    """

    retryable = False

    def __init__(
        self, message: str, *, run_id: str = "", step: str = "", field: str = "correlation_id"
    ) -> None:
        super().__init__(message, run_id=run_id, step=step)
        self.field = field


class UnknownReactorError(ReactorError, LookupError):
    """No reactor is registered under this name (see ``reactor.registry``)."""


class AsyncWaitTimeoutError(ReactorError, TimeoutError):
    """Waiting for a background run (``DispatchHandle.wait``) reached its deadline.

    The run keeps going in its worker; wait again or read it with ``Reactor.find(run_id)``.

    Attributes:
        run_id: the run waited for.
        timeout: the wait's bound in seconds.
    """

    def __init__(self, message: str, run_id: str = "", timeout: float = 0.0) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.timeout = timeout


class SnoozeLimitError(ReactorError):
    """A run that was never admitted parked ``lock_snooze_max_attempts`` times and gave up.

    The run is stored ``failed`` without rollback: nothing ran (docs/coordination.md,
    "Contention"). Not retryable.

    Attributes:
        reason: what the last park waited for (``"lock"``, ``"semaphore"``, ``"rate_limit"``).
        key: the coordination key it waited on, when known.
        attempts: the parks made.
    """

    retryable = False

    def __init__(self, message: str, reason: str = "", key: str | None = None,
                 attempts: int = 0) -> None:
        super().__init__(message)
        self.reason = reason
        self.key = key
        self.attempts = attempts


class AsyncStepDeadlockError(ReactorError):
    """An ``async_step`` was refused at dispatch: its step-level lock (or limit-1 semaphore)
    key is held by the dispatching execution itself (docs/workers.md, "Async steps").

    The unit would wait in its worker for a hold its own parent keeps until the parent finishes,
    so the dispatch is refused instead; the body never started, so the unit is not compensated.
    Not retryable.

    Attributes:
        step: the refused unit.
        key: the coordination key held by the execution.
    """

    retryable = False

    def __init__(self, message: str, step: str = "", key: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.key = key


class EventLoopBlockedError(ReactorError):
    """An ``async def`` step body cannot run: the thread that would wait for it is running the
    event loop the body needs (a synchronous ``Reactor.run``, ``resume``, ``retry``, ``undo`` or
    ``cancel`` called from async code on that loop; docs/concepts.md, "Async steps"). Await
    ``Reactor.arun`` and the other awaitable methods instead. Not retryable: a retry would
    block the same loop again.
    """

    retryable = False


class AsyncStepCancelledError(ReactorError):
    """An ``async def`` step body was cancelled by its event loop going away while it ran: the
    task that awaited ``Reactor.arun`` was cancelled and its loop shut down (docs/concepts.md,
    "Async steps"). The step fails (compensated, as its body started) and the run rolls back,
    its later async bodies running on reactor's own loop. Not retryable.
    """

    retryable = False


class StepTimeout(ReactorError, TimeoutError):
    """A step's attempt ran past its time limit (``Timeouts(per_attempt=..., total=...)``;
    docs/concepts.md, "Time limits").

    The attempt fails with this error: the step's retry policy applies to a ``per_attempt``
    timeout; a ``total`` timeout is not retried (no time is left). An ``async def`` body is
    cancelled; a plain body cannot be stopped: the engine stops waiting for it, and what it
    returns later is discarded (logged, never recorded).

    Attributes:
        step_name: the step.
        limit: ``"per_attempt"`` or ``"total"``.
        seconds: the limit that passed, in seconds.
        attempt: the attempt that timed out (1-based).
    """

    def __init__(self, message: str, *, step_name: str = "", limit: str = "per_attempt",
                 seconds: float = 0.0, attempt: int = 0) -> None:
        super().__init__(message)
        self.step_name = step_name
        self.limit = limit
        self.seconds = seconds
        self.attempt = attempt
        self.retryable = limit != "total"


class RunDeadlineExceeded(ReactorError, TimeoutError):
    """A run's deadline passed before it finished (``deadline=`` on the reactor class or at
    start; docs/concepts.md, "Run deadlines"). The run started no further step, was rolled
    back (the step in flight compensated when its body had started, every completed step
    undone once, newest first) and is stored ``failed`` with this error. Not retryable.

    Args:
        message: the reason; it names the run and the deadline.
        run_id: the run.
        deadline: the deadline that passed, in epoch seconds on the runtime clock.

    Attributes:
        run_id, deadline: as given.
    """

    retryable = False

    def __init__(self, message: str, run_id: str = "", *, deadline: float = 0.0) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.deadline = deadline


class DeadlineError(ReactorError, ValueError):
    """A run deadline is not usable (docs/concepts.md, "Run deadlines"): not a number of
    seconds, a ``timedelta`` or a timezone-aware ``datetime``; not finite; not above 0 (or
    already past, for a ``datetime``); or beyond :data:`reactor.dsl.deadlines.MAX_SECONDS`.
    Nothing was stored or run.

    Args:
        message: the reason; it names the field.
        field: ``"deadline"``.

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str = "deadline") -> None:
        super().__init__(message)
        self.field = field


class SuspendArgumentError(ReactorError, ValueError):
    """``Reactor.suspend`` or ``Reactor.unsuspend`` was called with an unusable argument
    (docs/operations.md, "Suspend and unsuspend"): a ``run_id`` that is not a non-blank
    string, or a ``reason``/``by`` that is not a string of at most 1,000 characters. Nothing
    was read or claimed.

    Args:
        message: the reason; it names the argument.
        field: the offending argument's name.

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class RewindArgumentError(ReactorError, ValueError):
    """``Reactor.rewind`` was called with an unusable argument (docs/operations.md, "Pause,
    rewind, fork"): a ``run_id`` that is not a non-blank string, a ``from_step`` that is not
    a declared step the run completed (or its failed step), or a ``reason``/``by`` that is
    not a string of at most 1,000 characters. Nothing was changed.

    Args:
        message: the reason; it names the argument.
        field: the offending argument's name.

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ForkArgumentError(ReactorError, ValueError):
    """``Reactor.fork`` was called with an unusable argument (docs/operations.md, "Pause,
    rewind, fork"): a ``run_id`` that is not a non-blank string, a ``from_step`` that is not
    a declared step, or an ``input_patch`` that is not a JSON object (text or mapping) or
    names an input the reactor does not declare. Nothing was stored.

    Args:
        message: the reason; it names the argument (and the input, for a patch).
        field: the offending argument's name.

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class MigrationArgumentError(ReactorError, ValueError):
    """``Reactor.migrate`` (``reactor runs migrate``) was called with an unusable argument
    (docs/deploys.md, "Operator tools"): a ``run_id`` that is not a non-blank string, a
    ``renames`` mapping that is not step name -> step name, an old name the run never
    recorded, a new name the current definition does not declare, two old names renamed to
    one new name, a renamed step of a kind whose records are keyed by its name elsewhere (a
    map, an ``async_step``, an ``async_reactor``, an interrupt, a sleep), or a ``to_version``
    that is not the current definition's version label. Nothing was changed.

    Args:
        message: the reason; it names the argument and the problem.
        field: the offending argument's name (``"run_id"``, ``"renames"``,
            ``"to_version"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class DefinitionMismatchError(RunStateError):
    """A stored run no longer matches its reactor's definition, so it cannot be rewound or
    forked (docs/operations.md, "Pause, rewind, fork"): a step it recorded (a result, an undo
    entry, its failed step) is not declared any more, or is declared with another kind.
    Nothing was changed; cancel the run (its rollback skips undeclared steps, recording a
    rollback failure for each) or deploy the definition it ran with.

    Args:
        message: the reason; it names the run and the step.
        run_id: the run.
        status: its status value.
        step: the step that does not match.

    Attributes:
        step: as given.
    """

    def __init__(self, message: str, run_id: str = "", status: str = "", *,
                 step: str = "") -> None:
        super().__init__(message, run_id=run_id, status=status)
        self.step = step


class EncodeError(ReactorError, TypeError):
    """A value cannot be encoded: its type is neither JSON-native, built in, nor registered.

    Also raised for a reference cycle, an unregistered enum, model, dataclass or named tuple, a
    registered encoder that raised, and a value whose JSON form nests deeper than
    :data:`reactor.model.codec.MAX_DEPTH` (docs/workers.md, "Hostile input").

    Attributes:
        type_name: the qualified name of the offending value's type.
        path: where the value sits in the encoded structure, e.g. ``inputs.order.lines[2].price``
            (``"<root>"`` for the top-level value). The message shows a path longer than 160
            characters (a value nested too deeply) with its middle elided; this attribute
            keeps it whole.
    """

    def __init__(self, message: str, *, type_name: str, path: str) -> None:
        shown = path if len(path) <= 160 else f"{path[:100]}...{path[-50:]}"
        super().__init__(f"{message} (type {type_name} at {shown})")
        self.type_name = type_name
        self.path = path


class SecretKeyError(DeserializationError):
    """A sealed value cannot be opened: no configured key has its id, or the key does not
    authenticate it (wrong key, or the stored value was altered).

    A subclass of :class:`DeserializationError`, so the engine treats the
    run like any unreadable stored run: it is quarantined, stored ``failed`` with this message
    as the reason and its original document kept (docs/security.md, "When a key is wrong or
    missing").

    Attributes:
        kid: the key id the sealed value names.
    """

    def __init__(self, message: str, *, kid: str | None = None) -> None:
        super().__init__(message)
        self.kid = kid


class AbandonedRunError(ReactorError):
    """The failure stored under a run id whose claimer died between claiming its idempotency
    key and storing the run (docs/run-control.md, "Idempotency keys")."""


class PoisonedRunError(ReactorError):
    """The failure stored on a run whose ``run`` job failed on every delivery with an error
    of reactor's own and was dead-lettered: the run is stored ``aborted`` instead of being
    re-dispatched into the same error, and ``Reactor.undo`` rolls it back (docs/workers.md,
    "Dead letters")."""


class QuarantineRestoreError(ReactorError):
    """A quarantined run cannot be restored (docs/run-control.md, "Restoring a quarantined
    run"): the original record it keeps still does not decode here (a codec type this process
    does not register, a secret key it is not configured with, a document that is corrupt),
    or only a prefix of it was kept. Nothing is written: the run stays quarantined.

    Args:
        message: the reason, naming the run and the field.
        run_id: the quarantined run.
        field: what cannot be used: ``"original_document"`` (the kept text: truncated, not a
            stored run of this id, or still undecodable) or ``"original_status"`` (not a run
            status).
        reason: the decode error of the kept text, ``"<ErrorClass>: <message>"`` (``""`` when
            the text was not decoded at all).

    Attributes:
        run_id, field, reason: as given.
    """

    def __init__(
        self, message: str, *, run_id: str = "", field: str = "original_document",
        reason: str = "",
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.field = field
        self.reason = reason


class ScanCursorError(StorageError):
    """A store's sweeper scan handed back a cursor that does not advance (the same cursor it
    was given, or one seen earlier in the same walk): paging on would loop forever.

    Raised by :func:`reactor.jobs.sweepers.scan_pages`; the store breaks the keyset-paging
    contract of :class:`reactor.model.records.ScanPage` (docs/workers.md, "Sweep cursors and
    dispatch leases").
    """


class ScheduleValueError(DefinitionError, ValueError):
    """A schedule is declared with an unusable value (docs/schedules.md, "Schedules"):
    ``Schedule(...)``, ``reactor schedules add`` and the stored definition a scheduler reads
    raise it, naming the field. A bad cron expression, an unknown time zone, ``every`` that is
    not a whole number of seconds of at least 1, both or neither of ``cron`` and ``every``, an
    unknown ``catchup`` or ``overlap`` policy, a ``max_catchup`` below 1, ``jitter`` below 0,
    a name that is not 1-100 letters, digits, ``_``, ``.`` or ``-``, ``args`` that do not
    match the reactor's inputs, or a reactor that is not a registered ``Reactor``.

    Args:
        message: the reason; it names the field and the problem.
        field: the offending field (``"name"``, ``"reactor"``, ``"cron"``, ``"every"``,
            ``"timezone"``, ``"args"``, ``"catchup"``, ``"max_catchup"``, ``"jitter"``,
            ``"overlap"``, ``"tick_input"``).

    Attributes:
        field: as given.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ScheduleNotFoundError(ReactorError, LookupError):
    """No schedule of that name is stored or declared (``reactor schedules pause|resume|
    remove``; docs/schedules.md, "Managing schedules").

    Args:
        message: the reason, naming the schedule.
        name: the schedule name asked for.

    Attributes:
        name: as given.
        field: ``"name"``.
    """

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.field = "name"


class ScheduleConflictError(ReactorError):
    """A schedule operation conflicts with what is stored (docs/schedules.md, "Managing
    schedules"): ``add`` of a name that is already stored (or whose state a code schedule
    keeps), ``remove`` of a schedule declared in code (remove it from the code; ``pause``
    stops it), or a stored schedule changed by someone else between the read and the write
    too many times in a row.

    Args:
        message: the reason, naming the schedule.
        name: the schedule.

    Attributes:
        name: as given.
        field: ``"name"``.
    """

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.field = "name"


#: Modules that defined reactor's exceptions in earlier versions: a stored failure naming
#: ``<one of these>.<Name>`` for a class now in this module reads as ``reactor.errors.<Name>``.
_FORMER_MODULES = (
    "reactor.model.errors",
    "reactor.model.codec",
    "reactor.model.secrets",
    "reactor.engine.run_control.idempotency",
    "reactor.jobs.sweepers",
)


def canonical_exception_name(name: str) -> str:
    """The current name of an exception class named in a stored failure.

    Args:
        name: a stored ``exception_class`` (``module.QualName``, or a builtin's bare name).

    Returns:
        ``reactor.errors.<Name>`` when ``name`` is one of reactor's exceptions under a module
        that defined it before (docs/protocol.md, "Stored failures"); otherwise ``name``
        unchanged.
    """
    module, _, qualname = name.rpartition(".")
    if module in _FORMER_MODULES and qualname in __all__ and qualname[:1].isupper():
        return f"{__name__}.{qualname}"
    return name
