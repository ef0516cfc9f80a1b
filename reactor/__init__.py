"""reactor: a saga orchestrator for Python with pluggable storage and router backends.

Declare a workflow as a :class:`Reactor` of steps with ``run``, ``undo`` and ``compensate``;
``MyReactor.run(...)`` runs them in dependency order, checkpoints after every step, and on a
failure compensates the failing step and undoes every completed step, newest first.
Storage and queues are chosen with :func:`configure` (default: in-process, no server).

The public surface: this package's names; :mod:`reactor.errors` (the whole exception
hierarchy), :mod:`reactor.runs` (stored-run views), :mod:`reactor.codec` (registering your own
types), :mod:`reactor.testing` (the testing kit) and :mod:`reactor.ports` (for adapter
authors). Everything else is internal (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from reactor import config as _config
from reactor.config import Runtime, Settings, configure
from reactor.dsl import (
    Input,
    Inputs,
    Retries,
    Timeouts,
    async_reactor,
    async_step,
    compose,
    element,
    input,
    interrupt,
    map_step,
    result,
    sleep,
    step,
    value,
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)
from reactor.dsl.background import Background
from reactor.dsl.fan_out import FanOut
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.maps.results import MapResultEnumerator
from reactor.errors import (
    ArgumentResolutionError,
    AsyncWaitTimeoutError,
    CancelArgumentError,
    CompensationError,
    ConfigurationError,
    ContextTooLargeError,
    CoordinationError,
    DeadlineError,
    DefinitionError,
    DefinitionMismatchError,
    DependencyError,
    DeserializationError,
    EncodeError,
    ForkArgumentError,
    IdempotencyKeyError,
    InputValidationError,
    InterruptAlreadyResumedError,
    InterruptArgumentError,
    InterruptCorrelationError,
    InterruptError,
    InterruptExpiredError,
    InterruptNotFoundError,
    InterruptPayloadError,
    LockAcquisitionError,
    LockLost,
    MigrationArgumentError,
    OrderedLockWaitError,
    RateLimitExceeded,
    ReactorError,
    RewindArgumentError,
    RouterError,
    RunCancelledError,
    RunDeadlineExceeded,
    RunFinishedError,
    RunNotFoundError,
    RunStateError,
    SchemaVersionError,
    SemaphoreAcquisitionError,
    SignalOutsideStepError,
    SnoozeLimitError,
    StepTimeout,
    StorageError,
    SuspendArgumentError,
    UndeclaredInputError,
    UndoError,
    UnknownRateLimitError,
    UnknownReactorError,
)
from reactor.facade import Reactor, Step
from reactor.jobs.binding import bind_runtime as _bind_runtime
from reactor.jobs.worker import Worker
from reactor.model.results import (
    Failure,
    Halt,
    MapResults,
    Paused,
    Result,
    RollbackFailure,
    Skipped,
    Success,
)
from reactor.model.run_view import RunView, TraceEntry
from reactor.model.secrets import generate_key
from reactor.model.signals import fail, halt, skip, succeed
from reactor.model.status import RunStatus
from reactor.model.step_context import StepContext

__all__ = [
    "ArgumentResolutionError",
    "AsyncWaitTimeoutError",
    "Background",
    "CancelArgumentError",
    "CompensationError",
    "ConfigurationError",
    "ContextTooLargeError",
    "CoordinationError",
    "DeadlineError",
    "DefinitionError",
    "DefinitionMismatchError",
    "DependencyError",
    "DeserializationError",
    "DispatchHandle",
    "EncodeError",
    "Failure",
    "FanOut",
    "ForkArgumentError",
    "Halt",
    "IdempotencyKeyError",
    "Input",
    "InputValidationError",
    "Inputs",
    "InterruptAlreadyResumedError",
    "InterruptArgumentError",
    "InterruptCorrelationError",
    "InterruptError",
    "InterruptExpiredError",
    "InterruptNotFoundError",
    "InterruptPayloadError",
    "LockAcquisitionError",
    "LockLost",
    "MapResultEnumerator",
    "MapResults",
    "MigrationArgumentError",
    "OrderedLockWaitError",
    "Paused",
    "RateLimitExceeded",
    "Reactor",
    "ReactorError",
    "Result",
    "Retries",
    "RewindArgumentError",
    "RollbackFailure",
    "RouterError",
    "RunCancelledError",
    "RunDeadlineExceeded",
    "RunFinishedError",
    "RunNotFoundError",
    "RunStateError",
    "RunStatus",
    "RunView",
    "Runtime",
    "SchemaVersionError",
    "SemaphoreAcquisitionError",
    "Settings",
    "SignalOutsideStepError",
    "Skipped",
    "SnoozeLimitError",
    "Step",
    "StepContext",
    "StepTimeout",
    "StorageError",
    "Success",
    "SuspendArgumentError",
    "Timeouts",
    "TraceEntry",
    "UndeclaredInputError",
    "UndoError",
    "UnknownRateLimitError",
    "UnknownReactorError",
    "Worker",
    "async_reactor",
    "async_step",
    "compose",
    "configure",
    "element",
    "fail",
    "generate_key",
    "halt",
    "input",
    "interrupt",
    "map_step",
    "result",
    "skip",
    "sleep",
    "step",
    "succeed",
    "value",
    "with_lock",
    "with_ordered_lock",
    "with_period",
    "with_rate_limit",
    "with_semaphore",
]

__version__ = "0.1.0"

# The composition root: every runtime configure() builds is connected to the job layer
# (docs/architecture.md, "Layers").
_config.install_binder(_bind_runtime)
