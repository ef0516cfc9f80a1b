"""Suspend and unsuspend (docs/operations.md, "Suspend and unsuspend";
reactor/engine/run_control/suspend.py).

An operator suspends a run: one nobody executes is stored ``suspended`` at once; one an
execution owns is asked and suspends before its next step. A suspended run starts no step,
holds no lock, keeps its undo stack, and goes back to ``running`` (a worker continues it) or
``paused`` (its interrupt) on unsuspend; cancel and its deadline still work on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Paused, Reactor, config, with_lock, with_semaphore
from reactor.config import Runtime
from reactor.coordination import Semaphore
from reactor.dsl import input, interrupt, step
from reactor.dsl.inputs import Input
from reactor.errors import (
    DefinitionError,
    InterruptError,
    RunFinishedError,
    RunNotFoundError,
    RunStateError,
    SuspendArgumentError,
)
from reactor.jobs.worker import Worker
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock, TestEnvironment
from tests.backends import BACKENDS, configure_on, work_until


class _Journal:
    def __init__(self) -> None:
        self.events: list[str] = []


def _order(journal: _Journal, *, handed: Background | None = None,
           during_a: Callable[[Any], None] | None = None) -> type[Reactor]:
    """a -> b -> c, each logged; ``during_a(ctx)`` runs inside a."""

    class Order(Reactor):
        background = handed

        @step()
        def a(inputs: Any, ctx: Any) -> str:
            journal.events.append("run a")
            if during_a is not None:
                during_a(ctx)
            return "a"

        @a.undo
        def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            journal.events.append("undo a")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> str:
            journal.events.append("run b")
            return "b"

        @step(wait_for=["b"])
        def c(inputs: Any, ctx: Any) -> str:
            journal.events.append("run c")
            return "c"

    return Order


# ----------------------------------------------------------------------------- in memory


def test_a_queued_run_is_suspended_at_once_and_continues_on_unsuspend() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        order = _order(journal, handed=Background(all=True))
        handle = order.run()
        assert isinstance(handle, DispatchHandle)
        assert order.suspend(handle.run_id, reason="gateway incident", by="alice") == "suspended"
        assert order.suspend(handle.run_id) == "suspended"  # again: the same answer
        env.run_until_idle()  # its queued job finds it suspended: no step runs
        view = order.find(handle.run_id)
        assert journal.events == []
        assert view.status is RunStatus.SUSPENDED
        assert view.suspension is not None
        assert (view.suspension.reason, view.suspension.by) == ("gateway incident", "alice")
        assert order.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = order.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED
    assert view.suspension is None
    assert journal.events == ["run a", "run b", "run c"]


def test_a_running_run_suspends_before_its_next_step_and_keeps_its_results() -> None:
    journal = _Journal()
    answers: list[str] = []
    with TestEnvironment() as env:
        def ask(ctx: Any) -> None:
            answers.append(order.suspend(ctx.run_id, reason="incident"))
            env.clock.advance(2)  # past cancel_check_interval: the boundary reads it

        order = _order(journal, during_a=ask)
        out = order.run()
        assert isinstance(out, DispatchHandle)  # the caller's run continues elsewhere
        view = order.find(out.run_id)
        assert answers == ["requested"]
        assert view.status is RunStatus.SUSPENDED
        assert view.current_step == "b" and view.results["a"] == "a"
        assert [e.type for e in view.trace].count("suspended") == 1
        assert journal.events == ["run a"]  # a finished and was recorded; b never started
        assert order.unsuspend(out.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert order.find(out.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]  # each once


def test_a_run_paused_at_an_interrupt_goes_back_to_its_interrupt() -> None:
    undone: list[str] = []
    with TestEnvironment():
        class Approval(Reactor):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            @reserve.undo
            def release(result: Any, inputs: Any, ctx: Any) -> None:
                undone.append("reserve")

            approval = interrupt(wait_for="reserve")

            @step(wait_for=["approval"])
            def ship(inputs: Any, ctx: Any) -> str:
                return "shipped"

        paused = Approval.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        assert Approval.suspend(paused.run_id) == "suspended"
        with pytest.raises(InterruptError):
            Approval.resume(paused.run_id, payload={"ok": True})  # not until unsuspended
        assert Approval.unsuspend(paused.run_id) is RunStatus.PAUSED
        out = Approval.resume(paused.run_id, payload={"ok": True})
        assert out.success, out
    assert undone == []


def test_cancel_still_works_on_a_suspended_run_and_undoes_each_step_once() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def ask(ctx: Any) -> None:
            order.suspend(ctx.run_id)
            env.clock.advance(2)

        order = _order(journal, during_a=ask)
        out = order.run()
        assert isinstance(out, DispatchHandle)
        cancelled = order.cancel(out.run_id, reason="customer left")
        assert not cancelled.success  # type: ignore[union-attr]
        view = order.find(out.run_id)
        env.run_until_idle()
    assert view.status is RunStatus.CANCELLED
    assert journal.events == ["run a", "undo a"]


def test_a_suspended_run_past_its_deadline_is_rolled_back_and_failed() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def ask(ctx: Any) -> None:
            order.suspend(ctx.run_id)
            env.clock.advance(2)

        order = _order(journal, during_a=ask)
        out = order.run(deadline=60)
        assert isinstance(out, DispatchHandle)
        env.run_until_idle()  # the timer job at the deadline
        view = order.find(out.run_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.RunDeadlineExceeded"
    assert journal.events == ["run a", "undo a"]


def test_a_suspended_run_holds_no_lock_its_park_kept() -> None:
    with TestEnvironment() as env:
        class Locked(Reactor):
            background = Background(all=True)
            account = Input(str)
            coordination = with_lock(key=lambda i: f"acct:{i.account}", auto_extend=False)

            @step(coordination=with_semaphore(key="pool", limit=1))
            def post(inputs: Any, ctx: Any) -> str:
                return "posted"

        blocker = Semaphore(env.storage.semaphores, "pool", limit=1, holder="other",
                            auto_extend=False)
        assert blocker.try_acquire()
        handle = Locked.run(account="7")
        assert isinstance(handle, DispatchHandle)
        env.run_pending()  # takes acct:7, parks on the full semaphore keeping the lock
        assert env.storage.locks.held("acct:7")
        # the parked job keeps the run's liveness lock as a stamp: its execution is asked,
        # and suspends when the job comes back, before it takes its coordination again
        assert Locked.suspend(handle.run_id) == "requested"
        env.run_until_idle()
        assert Locked.find(handle.run_id).status is RunStatus.SUSPENDED
        assert not env.storage.locks.held("acct:7")  # released: a suspended run holds none
        assert blocker.release()
        assert Locked.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = Locked.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED and view.results["post"] == "posted"


def test_bad_requests_are_refused_and_change_nothing() -> None:
    journal = _Journal()
    with TestEnvironment():
        order = _order(journal)
        done = order.run()
        assert done.run_id is not None
        with pytest.raises(SuspendArgumentError) as caught:
            order.suspend("   ")
        assert caught.value.field == "run_id"
        with pytest.raises(SuspendArgumentError) as caught:
            order.suspend(done.run_id, reason="x" * 1001)
        assert caught.value.field == "reason"
        with pytest.raises(SuspendArgumentError) as caught:
            order.suspend(done.run_id, by=7)  # type: ignore[arg-type]
        assert caught.value.field == "by"
        with pytest.raises(RunNotFoundError):
            order.suspend("no-such-run")
        with pytest.raises(RunFinishedError):
            order.suspend(done.run_id)
        with pytest.raises(RunStateError, match="not suspended"):
            order.unsuspend(done.run_id)
        assert order.find(done.run_id).status is RunStatus.COMPLETED


def test_suspend_and_unsuspend_are_reserved_names() -> None:
    with pytest.raises(DefinitionError, match="suspend"):
        class Bad(Reactor):
            suspend = Input(str)

            @step(x=input("suspend"))
            def a(inputs: Any, ctx: Any) -> None:
                return None


# ----------------------------------------------------------------------------- every backend


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="suspend")
    config.reset()



def test_suspend_a_queued_run_then_unsuspend_it_on_every_backend(runtime_on: Runtime) -> None:
    journal = _Journal()
    order = _order(journal, handed=Background(all=True))
    handle = order.run()
    assert isinstance(handle, DispatchHandle)
    assert order.suspend(handle.run_id, reason="incident", by="ops") == "suspended"
    Worker(runtime_on, liveness_wait=0.0).run_pending()  # its job is dropped
    view = order.find(handle.run_id)
    assert view.status is RunStatus.SUSPENDED and journal.events == []
    assert order.unsuspend(handle.run_id) is RunStatus.RUNNING
    work_until(runtime_on, lambda: order.find(handle.run_id).status in TERMINAL_STATUSES)
    assert order.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_a_worker_run_suspends_before_its_next_step_on_every_backend(
    runtime_on: Runtime,
) -> None:
    journal = _Journal()
    clock = runtime_on.clock
    assert isinstance(clock, TestClock)
    answers: list[str] = []

    def ask(ctx: Any) -> None:
        answers.append(order.suspend(ctx.run_id, reason="incident"))
        clock.advance(2)  # past cancel_check_interval on the runtime clock

    order = _order(journal, handed=Background(all=True), during_a=ask)
    handle = order.run()
    assert isinstance(handle, DispatchHandle)
    work_until(runtime_on, lambda: order.find(handle.run_id).status is RunStatus.SUSPENDED)
    assert answers == ["requested"]
    view = order.find(handle.run_id)
    assert view.current_step == "b" and journal.events == ["run a"]
    assert order.unsuspend(handle.run_id) is RunStatus.RUNNING
    work_until(runtime_on, lambda: order.find(handle.run_id).status in TERMINAL_STATUSES)
    assert order.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]
