"""reactor: a saga orchestrator for Python with pluggable storage and router backends.

Declare a workflow as a :class:`Reactor` of steps with ``run``, ``undo`` and ``compensate``;
``MyReactor.run(...)`` runs them in dependency order, checkpoints after every step, and on a
failure compensates the failing step and undoes every completed step, newest first.
Storage and queues are chosen with :func:`configure` (default: in-process, no server).
"""

from __future__ import annotations

from reactor.config import Runtime, Settings, configure
from reactor.dsl import (
    Input,
    Inputs,
    Reactor,
    Retries,
    Step,
    async_step,
    compose,
    element,
    input,
    map_step,
    result,
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
from reactor.model.codec import EncodeError
from reactor.model.errors import (
    ArgumentResolutionError,
    AsyncWaitTimeoutError,
    CompensationError,
    ConfigurationError,
    ContextTooLargeError,
    CoordinationError,
    DefinitionError,
    DependencyError,
    DeserializationError,
    IdempotencyKeyError,
    InputValidationError,
    LockAcquisitionError,
    LockLost,
    OrderedLockWaitError,
    RateLimitExceeded,
    ReactorError,
    RouterError,
    RunNotFoundError,
    RunStateError,
    SchemaVersionError,
    SemaphoreAcquisitionError,
    SignalOutsideStepError,
    SnoozeLimitError,
    StorageError,
    UndeclaredInputError,
    UndoError,
    UnknownRateLimitError,
    UnknownReactorError,
)
from reactor.model.map_results import MapResultEnumerator
from reactor.model.results import (
    Failure,
    Halt,
    MapResults,
    Result,
    RollbackFailure,
    Skipped,
    Success,
)
from reactor.model.run_view import RunView, TraceEntry
from reactor.model.signals import fail, halt, skip, succeed
from reactor.model.status import RunStatus
from reactor.model.step_context import StepContext

__all__ = [
    "ArgumentResolutionError",
    "AsyncWaitTimeoutError",
    "Background",
    "CompensationError",
    "ConfigurationError",
    "ContextTooLargeError",
    "CoordinationError",
    "DefinitionError",
    "DependencyError",
    "DeserializationError",
    "DispatchHandle",
    "EncodeError",
    "Failure",
    "FanOut",
    "Halt",
    "IdempotencyKeyError",
    "Input",
    "InputValidationError",
    "Inputs",
    "LockAcquisitionError",
    "LockLost",
    "MapResultEnumerator",
    "MapResults",
    "OrderedLockWaitError",
    "RateLimitExceeded",
    "Reactor",
    "ReactorError",
    "Result",
    "Retries",
    "RollbackFailure",
    "RouterError",
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
    "StorageError",
    "Success",
    "TraceEntry",
    "UndeclaredInputError",
    "UndoError",
    "UnknownRateLimitError",
    "UnknownReactorError",
    "async_step",
    "compose",
    "configure",
    "element",
    "fail",
    "halt",
    "input",
    "map_step",
    "result",
    "skip",
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
