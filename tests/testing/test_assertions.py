"""Assertions on stored runs: each passes on the right run and explains a wrong one."""

from __future__ import annotations

import pytest

from reactor import DispatchHandle, Failure, RunNotFoundError, RunView, Success
from reactor.testing import (
    TestEnvironment,
    assert_completed,
    assert_failed,
    assert_rolled_back,
    assert_trace,
    rollback_order,
    run_view,
    step_events,
)
from tests.testing.reactors import BackgroundOrder, Order


def test_every_kind_of_run_reference_reads_the_same_run() -> None:
    with TestEnvironment() as env:
        outcome = Order.run()
        assert outcome.run_id is not None
        view = run_view(outcome)
        assert isinstance(view, RunView)
        assert run_view(outcome.run_id) == view == run_view(view)
        assert run_view(outcome.run_id, runtime=env.runtime) == view
        handle = BackgroundOrder.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        assert run_view(handle).status.value == "completed"
        with pytest.raises(ValueError, match="no run id"):
            run_view(Success(1))
        with pytest.raises(RunNotFoundError):
            run_view("no-such-run")


def test_a_completed_run() -> None:
    with TestEnvironment() as env:
        outcome = Order.run()
        view = assert_completed(outcome)
        assert view.results["ship"] == "s-1"
        assert_trace(outcome, [("run", "reserve"), ("run", "charge"), ("run", "ship")])
        assert rollback_order(outcome) == []
        with pytest.raises(AssertionError, match="expected a failed run"):
            assert_failed(outcome)
        with pytest.raises(AssertionError, match="expected a rolled-back run"):
            assert_rolled_back(outcome, [])
        env.fail_step(Order, "ship")
        failed = Order.run()
        with pytest.raises(AssertionError, match=r"(?s)expected a completed run.*failed"):
            assert_completed(failed)


def test_a_failed_and_rolled_back_run() -> None:
    with TestEnvironment() as env:
        env.fail_step(Order, "ship", error=ValueError("no carrier"))
        outcome = Order.run()
        failure = assert_failed(outcome, reason="no carrier", step="ship", error=ValueError)
        assert isinstance(failure, Failure) and failure.exception_class == "ValueError"
        assert_failed(outcome, error="builtins.ValueError")
        assert rollback_order(outcome) == ["ship", "charge", "reserve"]
        assert_rolled_back(outcome, ["ship", "charge", "reserve"])
        assert step_events(outcome, types={"undo"}) == [("undo", "charge"), ("undo", "reserve")]
        assert_trace(outcome, [("failed", "ship"), ("compensate", "ship")],
                     types={"failed", "compensate"})
        with pytest.raises(AssertionError, match="to say 'declined'"):
            assert_failed(outcome, reason="declined")
        with pytest.raises(AssertionError, match="at step 'charge', got 'ship'"):
            assert_failed(outcome, step="charge")
        with pytest.raises(AssertionError, match="expected a KeyError failure, got ValueError"):
            assert_failed(outcome, error=KeyError)
        with pytest.raises(AssertionError, match=r"got \['ship', 'charge', 'reserve'\]"):
            assert_rolled_back(outcome, ["ship", "reserve", "charge"])
        with pytest.raises(AssertionError, match=r"(?s)expected the trace.*trace:\n  run reserve"):
            assert_trace(outcome, [("run", "reserve")])


def test_an_undone_run_counts_as_rolled_back() -> None:
    with TestEnvironment():
        outcome = Order.run()
        assert Order.undo(outcome.run_id or "").success
        assert_rolled_back(outcome, ["ship", "charge", "reserve"])
