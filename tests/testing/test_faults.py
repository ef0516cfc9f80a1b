"""Fault injection: a step failing on chosen attempts, storage calls raising StorageError."""

from __future__ import annotations

import pytest

from reactor import StorageError
from reactor.testing import (
    InjectedFault,
    StepFault,
    StorageFault,
    TestEnvironment,
    assert_completed,
    assert_failed,
    assert_rolled_back,
)
from tests.testing.reactors import CALLS, BackgroundOrder, Charge, FanOutDoubles, Order

# ------------------------------------------------------------------------------ step faults


def test_a_step_fails_on_its_first_attempt_and_the_retry_runs_the_body() -> None:
    CALLS.clear()
    with TestEnvironment() as env:
        fault = env.fail_step(Order, "charge")
        assert isinstance(fault, StepFault) and fault.attempts == frozenset({1})
        assert_completed(Order.run())
        assert (fault.raised, fault.seen) == (1, [1, 2])
    assert CALLS == ["run reserve", "run charge 2", "run ship"]  # attempt 1 never ran


def test_a_step_failing_on_every_attempt_rolls_the_run_back() -> None:
    CALLS.clear()
    with TestEnvironment() as env:
        fault = env.fail_step(Order, "charge", on_attempt=None)
        outcome = Order.run()
        assert fault.raised == 3
        assert_failed(outcome, step="charge", error=InjectedFault, reason="attempt 3")
        assert_rolled_back(outcome, ["charge", "reserve"])
    assert CALLS == ["run reserve", "compensate charge", "undo reserve"]


def test_a_function_step_fails_with_the_given_error() -> None:
    with TestEnvironment() as env:
        env.fail_step(Order, "ship", error=TimeoutError("carrier timeout"))
        outcome = Order.run()
        assert_failed(outcome, step="ship", reason="carrier timeout", error="TimeoutError")
        assert_rolled_back(outcome, ["ship", "charge", "reserve"])
        env.fail_step(BackgroundOrder, "ship", on_attempt=1, error=KeyError)
        handle = BackgroundOrder.run()
        env.run_until_idle()
        assert_failed(handle, step="ship", error=KeyError)


def test_a_fault_is_per_reactor_and_removable() -> None:
    with TestEnvironment() as env:
        fault = env.fail_step(BackgroundOrder, "charge", on_attempt=None)
        assert Order.run().success  # the same steps in another reactor are untouched
        fault.remove()
        handle = BackgroundOrder.run()
        env.run_until_idle()
        assert_completed(handle)
        assert fault.raised == 0


def test_faults_are_gone_after_the_environment() -> None:
    with TestEnvironment() as env:
        env.fail_step(Order, "charge", on_attempt=None)
        env.fail_step(Order, "ship", on_attempt=None)
    spec = Order.definition.steps["charge"]
    assert spec.step_class is Charge
    with TestEnvironment():
        assert Order.run().success


def test_fail_step_refuses_what_it_cannot_fail() -> None:
    with TestEnvironment() as env:
        with pytest.raises(TypeError, match="Reactor subclass"):
            env.fail_step(Charge, "run")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"no step 'nope'.*reserve, charge, ship"):
            env.fail_step(Order, "nope")
        with pytest.raises(ValueError, match="map step"):
            env.fail_step(FanOutDoubles, "doubled")
        with pytest.raises(ValueError, match="on_attempt"):
            env.fail_step(Order, "charge", on_attempt=0)
        with pytest.raises(ValueError, match="on_attempt"):
            env.fail_step(Order, "charge", on_attempt=[])


# --------------------------------------------------------------------------- storage faults


def test_a_storage_fault_fails_the_chosen_call_of_a_method() -> None:
    with TestEnvironment() as env:
        fault = env.storage_fails(method="contexts.append", on_call=2)
        assert isinstance(fault, StorageFault)
        with pytest.raises(StorageError, match="injected storage failure on call 2") as caught:
            Order.run()
        assert fault.exhausted and fault.raised == 1
        assert fault.calls == ["contexts.append", "contexts.append"]
        run_id = caught.value.run_id
        assert run_id is not None
        env.sweep()  # the run is running without its lock: re-dispatched
        env.run_until_idle()
        assert_completed(run_id)


def test_a_storage_fault_in_a_worker_is_retried_with_backoff() -> None:
    with TestEnvironment() as env:
        handle = BackgroundOrder.run()
        started = env.clock.now()
        fault = env.storage_fails(method="contexts", on_call=1, times=2)
        env.run_until_idle()  # deliveries 1 and 2 fail, retried after 1 s then 2 s
        assert fault.raised == 2
        assert_completed(handle)
        assert env.clock.now() - started == 3.0


def test_a_storage_fault_over_every_call_and_a_custom_error() -> None:
    with TestEnvironment() as env:
        fault = env.storage_fails(error=ConnectionResetError)
        with pytest.raises(ConnectionResetError):
            Order.run()
        assert len(fault.calls) == 1 and "." in fault.calls[0]
        fault.remove()
        assert Order.run().success


def test_storage_fails_refuses_bad_arguments_and_restores_the_stores() -> None:
    with TestEnvironment() as env:
        contexts = env.storage.contexts
        with pytest.raises(ValueError, match="sub-store"):
            env.storage_fails(method="nope.save")
        with pytest.raises(ValueError, match="no method 'nope'"):
            env.storage_fails(method="contexts.nope")
        with pytest.raises(ValueError, match="on_call"):
            env.storage_fails(on_call=0)
        with pytest.raises(ValueError, match="times"):
            env.storage_fails(times=0)
        env.storage_fails(method="locks")
        assert env.storage.contexts is not contexts  # intercepted while armed
        storage = env.storage
    assert storage.contexts is contexts


def test_a_storage_fault_fails_the_schedule_stores_compare_and_set() -> None:
    """The schedule store (docs/protocol.md, "Schedules") is a sub-store faults can target:
    a scheduler's put fails as an outage would, and nothing is written."""
    with TestEnvironment() as env:
        schedules = env.storage.schedules
        version = schedules.put("nightly", "{}", expected_version=None)
        fault = env.storage_fails(method="schedules.put", on_call=1)
        with pytest.raises(StorageError, match=r"schedules\.put"):
            env.storage.schedules.put("nightly", '{"v":2}', expected_version=version)
        assert fault.exhausted and fault.calls == ["schedules.put"]
        record = env.storage.schedules.get("nightly")
        assert record is not None and record.document == "{}" and record.version == version
        assert env.storage.schedules.put("nightly", '{"v":2}', expected_version=version)
        every = env.storage_fails(method="schedules", on_call=2)
        assert env.storage.schedules.scan() != []
        with pytest.raises(StorageError):
            env.storage.schedules.delete("nightly", expected_version="stale")
        assert every.calls == ["schedules.scan", "schedules.delete"]
        storage = env.storage
    assert storage.schedules is schedules
