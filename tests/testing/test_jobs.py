"""Running jobs synchronously: queued jobs through the real worker, inline jobs, the pending
list, and the bounds of ``run_until_idle``."""

from __future__ import annotations

import pytest

from reactor import DispatchHandle, MapResultEnumerator, Success
from reactor.testing import NotIdleError, PendingJob, TestEnvironment, assert_completed
from reactor.testing.clock import DEFAULT_START
from tests.testing.reactors import BackgroundOrder, FanOutDoubles, NeverSettles, WithUnit


def test_a_background_run_waits_in_the_queue_until_run() -> None:
    with TestEnvironment() as env:
        handle = BackgroundOrder.run()
        assert isinstance(handle, DispatchHandle)
        [job] = env.pending_jobs()
        assert isinstance(job, PendingJob)
        assert (job.kind, job.reactor, job.run_id, job.due_in) == (
            "run", "tests.testing.background_order", handle.run_id, 0.0
        )
        assert job.due_at == DEFAULT_START and job.attempt == 0
        assert "run job reactor=tests.testing.background_order" in job.describe()
        assert "due now" in job.describe()
        assert BackgroundOrder.find(handle.run_id).results == {}  # stored, nothing ran
        assert env.run_until_idle() == 1
        assert env.pending_jobs() == []
        assert handle.wait(1) == Success("s-1", run_id=handle.run_id)


def test_a_fan_out_map_runs_to_completion() -> None:
    with TestEnvironment() as env:
        handle = FanOutDoubles.run(xs=[1, 2, 3, 4, 5])
        assert isinstance(handle, DispatchHandle)
        kinds = {job.kind for job in env.pending_jobs()}
        assert kinds == {"map_element"}
        assert all(job.map_id for job in env.pending_jobs())
        ran = env.run_until_idle()
        assert ran >= 7  # 5 elements, the collector, the owner's resume
        view = assert_completed(handle)
        doubled = view.results["doubled"]
        assert isinstance(doubled, MapResultEnumerator)
        assert list(doubled.values()) == [2, 4, 6, 8, 10]


def test_run_until_idle_names_what_never_settles() -> None:
    with TestEnvironment() as env:
        handle = NeverSettles.run()
        with pytest.raises(NotIdleError) as caught:
            env.run_until_idle(max_seconds=4 * 3600)
        message = str(caught.value)
        assert "max_seconds" in message
        assert f"run job reactor=tests.testing.never_settles run={handle.run_id}" in message
        assert "due in 3600s" in message
        assert [job.run_id for job in caught.value.pending] == [handle.run_id]
        assert env.clock.now() == DEFAULT_START + 4 * 3600  # attempts 1..5 ran
        with pytest.raises(NotIdleError, match=r"max_jobs=2"):
            env.run_until_idle(max_jobs=2)
        with pytest.raises(ValueError, match="finite"):
            env.run_until_idle(max_seconds=float("inf"))


def test_run_pending_does_not_move_the_clock() -> None:
    with TestEnvironment() as env:
        NeverSettles.run()
        assert env.run_pending() == 1
        assert env.run_pending() == 0  # the retry is an hour away
        assert env.clock.now() == DEFAULT_START
        assert len(env.pending_jobs()) == 1


def test_inline_jobs_finish_inside_run() -> None:
    with TestEnvironment(jobs="inline") as env:
        done = FanOutDoubles.run(xs=[1, 2, 3])
        assert done.success and env.pending_jobs() == []
        assert WithUnit.run(x=4) == Success(41, run_id=None)  # the unit ran inside enqueue
        assert BackgroundOrder.run() == Success("s-1", run_id=None)  # ran inside run()
        env.fail_step(BackgroundOrder, "charge", on_attempt=1)
        handle = BackgroundOrder.run()  # the retry is a delayed job, even inline
        assert isinstance(handle, DispatchHandle)
        assert [job.due_in for job in env.pending_jobs()] == [10.0]
        env.clock.advance(10)
        assert_completed(handle)
        assert env.pending_jobs() == [] and env.run_until_idle() == 0


