"""``TestClock``: time moves only when told; an environment's advance fires what is due and
nothing really sleeps (each test bounds its wall-clock time)."""

from __future__ import annotations

import time

import pytest

from reactor import DispatchHandle, RunStatus
from reactor.model.keys import run_liveness_key
from reactor.testing import TestClock, TestEnvironment, assert_completed
from reactor.testing.clock import DEFAULT_START
from tests.testing.reactors import CALLS, BackgroundOrder, Order, SlowRetry

#: Far above what the tests need, far below the delays they skip (600 s, 3600 s).
WALL_CLOCK_BOUND = 30.0


def test_a_standalone_clock_moves_only_when_told() -> None:
    clock = TestClock()
    assert clock() == clock.now() == DEFAULT_START
    assert clock.advance(1.5) == DEFAULT_START + 1.5
    clock.sleep(2)
    assert clock.now() == DEFAULT_START + 3.5 and clock.sleeps == [2.0]
    with pytest.raises(ValueError, match="seconds"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="seconds"):
        clock.advance(float("nan"))
    with pytest.raises(ValueError, match="start"):
        TestClock(float("inf"))
    assert TestClock(start=10.0).now() == 10.0


def test_advance_fires_a_worker_retry_without_sleeping() -> None:
    CALLS.clear()
    started = time.monotonic()
    with TestEnvironment() as env:
        handle = SlowRetry.run()
        assert isinstance(handle, DispatchHandle)
        env.fail_step(SlowRetry, "call", on_attempt=1)
        env.run_pending()  # attempt 1 fails; the run job is re-enqueued 600 s later
        assert [job.due_in for job in env.pending_jobs()] == [600.0]
        env.clock.advance(599)
        assert SlowRetry.find(handle.run_id).status is RunStatus.RUNNING
        env.clock.advance(1)
        assert_completed(handle)
        assert env.pending_jobs() == []
        retried_at = [e.at for e in SlowRetry.find(handle.run_id).trace]
        assert retried_at == [DEFAULT_START, DEFAULT_START + 600]  # ran at its due time
    assert CALLS == ["run call 2"]
    assert time.monotonic() - started < WALL_CLOCK_BOUND


def test_advance_runs_due_jobs_in_order_at_their_due_times() -> None:
    with TestEnvironment() as env:
        env.fail_step(BackgroundOrder, "charge", on_attempt=[1, 2])
        handle = BackgroundOrder.run()
        env.clock.advance(3600)  # attempt 1 now, 2 at +10 s, 3 at +30 s, then done
        view = assert_completed(handle)
        retries = [(e.type, e.at - DEFAULT_START) for e in view.trace if e.step == "charge"]
        assert retries == [("retry", 0.0), ("retry", 10.0), ("run", 30.0)]
        assert env.clock.now() == DEFAULT_START + 3600


def test_synchronous_retry_waits_move_the_clock_and_never_sleep() -> None:
    CALLS.clear()
    started = time.monotonic()
    with TestEnvironment() as env:
        env.fail_step(Order, "charge", on_attempt=[1, 2])
        outcome = Order.run()
        assert outcome.success
        assert env.clock.sleeps == [10.0, 20.0]
        assert env.clock.now() == DEFAULT_START + 30
    assert "run charge 3" in CALLS
    assert time.monotonic() - started < WALL_CLOCK_BOUND


def test_advance_expires_leases_and_ttls() -> None:
    with TestEnvironment(context_ttl=100, context_lock_ttl=30) as env:
        outcome = Order.run()
        key = run_liveness_key("someone-else")
        assert env.storage.locks.acquire(key, "owner", 30)
        assert env.storage.locks.held(key)
        env.clock.advance(31)
        assert not env.storage.locks.held(key)
        assert Order.find(outcome.run_id or "").status is RunStatus.COMPLETED
        env.clock.advance(100)
        with pytest.raises(Exception, match="no stored run"):
            Order.find(outcome.run_id or "")
