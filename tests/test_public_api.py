"""The public surface of ``reactor`` is pinned: a change here is an API change (httpx style)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import reactor
import reactor.codec
import reactor.errors
import reactor.ports
import reactor.runs

EXPECTED_REACTOR = sorted(
    [
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
        "Timeouts",
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
        "SnoozeLimitError",
        "StepTimeout",
        "Skipped",
        "Step",
        "StepContext",
        "StorageError",
        "SuspendArgumentError",
        "DefinitionMismatchError",
        "ForkArgumentError",
        "RewindArgumentError",
        "Success",
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
)

EXPECTED_PORTS = sorted(
    [
        "FAILED_ROLLBACK_OUTCOMES",
        "JOB_KINDS",
        "SYSTEM_CLOCK",
        "Capabilities",
        "ClaimStore",
        "Clock",
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
        "ScheduleRecord",
        "ScheduleStore",
        "SemaphoreState",
        "SemaphoreStore",
        "SignalStore",
        "StepResultRecord",
        "StepResultStatus",
        "Storage",
        "StepResultStore",
        "Subscription",
        "SweepCursorStore",
        "SystemClock",
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


def test_runs_and_codec_export_the_run_views_and_the_type_registration() -> None:
    assert sorted(reactor.runs.__all__) == [
        "DispatchHandle", "MAP_OUTCOMES", "MAX_ELEMENT_PAGE", "MapElement", "MapElementPage",
        "MapElementsArgumentError", "MapInfo", "MapOutcome", "RunStatus", "RunView",
        "TERMINAL_STATUSES", "TraceEntry", "iter_map_elements", "map_element_page",
        "map_infos",
    ]
    assert sorted(reactor.codec.__all__) == [
        "EncodeError", "is_registered", "register", "register_dataclass", "register_enum",
        "register_model", "registered_tag",
    ]
    assert reactor.runs.RunView is reactor.RunView


def _reactor_error_classes() -> set[type[BaseException]]:
    """Every ReactorError subclass defined anywhere in the package (all modules imported)."""
    for info in pkgutil.walk_packages(reactor.__path__, "reactor."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    found: set[type[BaseException]] = set()
    todo: list[type[BaseException]] = [reactor.errors.ReactorError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("reactor") and cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return found


def test_the_whole_error_hierarchy_lives_in_reactor_errors() -> None:
    # A stored failure names its exception class: one module keeps those names stable
    # (docs/protocol.md, "Stored failures"). The testing kit's own errors are raised to test
    # code only and never stored (reactor.testing.errors).
    classes = {c for c in _reactor_error_classes()
               if not c.__module__.startswith("reactor.testing")}
    assert len(classes) >= 30
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes
                     if c.__module__ != "reactor.errors")
    assert outside == []
    assert {c.__name__ for c in classes} <= set(reactor.errors.__all__)
    for name in reactor.__all__:
        obj = getattr(reactor, name)
        if inspect.isclass(obj) and issubclass(obj, reactor.errors.ReactorError):
            assert getattr(reactor.errors, name) is obj


def test_every_public_name_has_a_docstring() -> None:
    for module in (reactor, reactor.ports, reactor.errors, reactor.runs, reactor.codec):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert (obj.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"
