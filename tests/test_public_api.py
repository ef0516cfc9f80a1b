"""The public surface of ``reactor`` is pinned: a change here is an API change (httpx style)."""

from __future__ import annotations

import inspect

import reactor
import reactor.ports

EXPECTED_REACTOR = sorted(
    [
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
        "FanOut",
        "Failure",
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
        "SnoozeLimitError",
        "Skipped",
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
)

EXPECTED_PORTS = sorted(
    [
        "FAILED_ROLLBACK_OUTCOMES",
        "JOB_KINDS",
        "Capabilities",
        "ClaimStore",
        "ContextRecord",
        "ContextStore",
        "DeadLetter",
        "Delivery",
        "DocumentStore",
        "Fence",
        "Job",
        "JobKind",
        "LockInfo",
        "LockStore",
        "MapMetadata",
        "MapRollbackMetadata",
        "MapRollbackStore",
        "MapStore",
        "OrderedGate",
        "OrderedGateState",
        "OrderedLockState",
        "OrderedLockStore",
        "OrderedTicket",
        "PeriodMarker",
        "PeriodStore",
        "RateDecision",
        "RateLimitStore",
        "RateWindow",
        "RollbackOutcome",
        "RollbackOutcomeKind",
        "RollbackSummary",
        "Router",
        "RunPage",
        "RunSummary",
        "ScanPage",
        "SemaphoreState",
        "SemaphoreStore",
        "SignalStore",
        "StepResultRecord",
        "StepResultStatus",
        "Storage",
        "StepResultStore",
        "Subscription",
        "SweepCursorStore",
        "Versioned",
    ]
)


def test_reactor_exports_exactly_the_public_names() -> None:
    assert sorted(reactor.__all__) == EXPECTED_REACTOR
    for name in reactor.__all__:
        assert getattr(reactor, name) is not None


def test_ports_export_exactly_the_protocol_names() -> None:
    assert sorted(reactor.ports.__all__) == EXPECTED_PORTS
    for name in reactor.ports.__all__:
        assert hasattr(reactor.ports, name)


def test_every_public_name_has_a_docstring() -> None:
    for module in (reactor, reactor.ports):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert (obj.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"
