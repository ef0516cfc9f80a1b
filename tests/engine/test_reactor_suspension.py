"""A reactor's suspend switch (docs/operations.md, "Suspend and unsuspend";
reactor/engine/run_control/reactor_suspension.py): ``suspend_all(hold_new=True)`` holds the
runs started or continued after it too — each stops before its next step, ``suspended`` with
the switch's reason and ``by`` — until ``unsuspend_all`` clears the switch and lets them go.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Paused, Reactor, config
from reactor.config import Runtime
from reactor.dsl import interrupt, step
from reactor.engine.env import make_env
from reactor.engine.run_control import reactor_suspension
from reactor.errors import RunStateError, SuspendArgumentError
from reactor.model.engine_state import Suspension
from reactor.model.keys import reactor_suspension_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock, TestEnvironment
from tests.backends import BACKENDS, configure_on, work_until


def _chain(events: list[str], *, handed: Background | None = None,
           during_a: Callable[[Any], None] | None = None, concurrency: int = 1,
           name: str = "Chain") -> type[Reactor]:
    """a -> b -> c, each logged; ``during_a(ctx)`` runs inside a."""

    class Chain(Reactor, name=f"test_reactor_suspension.{name}"):
        background = handed
        max_concurrency = concurrency

        @step()
        def a(inputs: Any, ctx: Any) -> str:
            events.append("run a")
            if during_a is not None:
                during_a(ctx)
            return "a"

        @a.undo
        def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo a")

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> str:
            events.append("run b")
            return "b"

        @step(wait_for=["b"])
        def c(inputs: Any, ctx: Any) -> str:
            events.append("run c")
            return "c"

    return Chain


# ----------------------------------------------------------------------------- in memory


def test_a_run_started_after_the_switch_stops_before_its_first_step() -> None:
    events: list[str] = []
    with TestEnvironment() as env:
        chain = _chain(events)
        assert chain.suspend_all(reason="gateway incident", by="alice", hold_new=True) == {
            "suspended": 0, "requested": 0, "skipped": 0}
        switch = chain.suspend_switch()
        assert switch is not None and (switch.reason, switch.by) == ("gateway incident", "alice")
        out = chain.run()
        assert isinstance(out, DispatchHandle)  # suspended under its caller
        view = chain.find(out.run_id)
        assert events == []
        assert view.status is RunStatus.SUSPENDED and view.current_step == "a"
        assert view.suspension is not None
        assert (view.suspension.reason, view.suspension.by) == ("gateway incident", "alice")
        assert [e.type for e in view.trace].count("suspended") == 1
        with pytest.raises(RunStateError, match="switch"):
            chain.unsuspend(out.run_id)  # the switch would hold it again: refused
        assert chain.find(out.run_id).status is RunStatus.SUSPENDED
        assert chain.unsuspend_all() == {"running": 1, "paused": 0, "skipped": 0}
        assert chain.suspend_switch() is None
        env.run_until_idle()
        assert chain.find(out.run_id).status is RunStatus.COMPLETED
    assert events == ["run a", "run b", "run c"]


def test_a_background_run_a_worker_takes_after_the_switch_is_held_where_it_stands() -> None:
    events: list[str] = []
    with TestEnvironment() as env:
        chain = _chain(events, handed=Background(after="a"))
        out = chain.run()  # a runs here, the rest is queued for a worker
        assert isinstance(out, DispatchHandle) and events == ["run a"]
        chain.suspend_all(reason="incident", by="ops", hold_new=True)  # suspends it now
        assert chain.find(out.run_id).status is RunStatus.SUSPENDED
        later = chain.run()
        assert chain.find(later.run_id or "").status is RunStatus.SUSPENDED
        env.run_until_idle()  # the queued jobs find their runs suspended
        assert events == ["run a"]
        chain.unsuspend_all()
        env.run_until_idle()
        for run_id in (out.run_id, later.run_id or ""):
            assert chain.find(run_id).status is RunStatus.COMPLETED
    assert sorted(events) == ["run a", "run a", "run b", "run b", "run c", "run c"]


def test_a_worker_continuing_a_run_after_the_switch_suspends_it_before_its_next_step() -> None:
    """The switch set where suspend_all's listing did not see the run (set on its own): the
    worker's execution of the queued run notices it at start."""
    events: list[str] = []
    with TestEnvironment() as env:
        chain = _chain(events, handed=Background(after="a"))
        out = chain.run()
        assert isinstance(out, DispatchHandle)
        reactor_suspension.switch_on(
            make_env(env.runtime), chain.reactor_name, Suspension("late", "bob", 1.0)
        )
        env.run_until_idle()
        view = chain.find(out.run_id)
        assert view.status is RunStatus.SUSPENDED and view.results == {"a": "a"}
        assert view.suspension is not None and view.suspension.by == "bob"
        assert events == ["run a"]
        chain.unsuspend_all()
        env.run_until_idle()
        assert chain.find(out.run_id).status is RunStatus.COMPLETED
    assert events == ["run a", "run b", "run c"]


def test_a_running_run_sees_a_switch_another_process_set_within_the_staleness_bound() -> None:
    """Set behind this process's cache (the lock written directly): not seen before
    STALENESS seconds passed on the runtime clock, seen at the first step boundary after."""
    events: list[str] = []
    with TestEnvironment() as env:
        key_owner = Suspension("elsewhere", "carol", 1.0).encode()

        def set_elsewhere(ctx: Any) -> None:
            assert env.storage.locks.acquire(reactor_suspension_key(ctx.reactor), key_owner,
                                             None)

        fresh = _chain(events, during_a=set_elsewhere, name="Fresh")
        out = fresh.run()  # the cache read the switch off before a: b and c still run
        assert fresh.find(out.run_id or "").status is RunStatus.COMPLETED
        assert events == ["run a", "run b", "run c"]
        events.clear()
        env.storage.locks.release(reactor_suspension_key(fresh.reactor_name), key_owner)

        def set_and_wait(ctx: Any) -> None:
            set_elsewhere(ctx)
            env.clock.advance(reactor_suspension.STALENESS)

        waited = _chain(events, during_a=set_and_wait, name="Waited")
        out = waited.run()
        view = waited.find(out.run_id or "")
        assert view.status is RunStatus.SUSPENDED and view.current_step == "b"
        assert view.suspension is not None and view.suspension.by == "carol"
        assert events == ["run a"]


def test_a_run_resumed_at_its_interrupt_while_the_switch_is_on_stops_before_its_next_step(
) -> None:
    shipped: list[str] = []
    with TestEnvironment() as env:
        class Approval(Reactor, name="test_reactor_suspension.Approval"):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            approval = interrupt(wait_for="reserve")

            @step(wait_for=["approval"])
            def ship(inputs: Any, ctx: Any) -> str:
                shipped.append("ship")
                return "shipped"

        paused = Approval.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        # the switch set on its own (as suspend_all's listing could miss a run pausing now)
        reactor_suspension.switch_on(
            make_env(env.runtime), Approval.reactor_name, Suspension("freeze", "ops", 1.0)
        )
        Approval.resume(paused.run_id, payload={"ok": True})
        env.run_until_idle()
        view = Approval.find(paused.run_id)
        assert view.status is RunStatus.SUSPENDED and shipped == []
        assert view.suspension is not None and view.suspension.reason == "freeze"
        Approval.unsuspend_all()
        env.run_until_idle()
        assert Approval.find(paused.run_id).status is RunStatus.COMPLETED
    assert shipped == ["ship"]


def test_concurrent_branches_start_nothing_more_and_the_run_suspends() -> None:
    events: list[str] = []
    with TestEnvironment() as env:
        chain = _chain(events, concurrency=4,
                       during_a=lambda ctx: chain.suspend_all(hold_new=True))
        out = chain.run()
        view = chain.find(out.run_id or "")
        assert view.status is RunStatus.SUSPENDED and view.current_step == "b"
        assert events == ["run a"] and view.results["a"] == "a"
        chain.unsuspend_all()
        env.run_until_idle()
        assert chain.find(out.run_id or "").status is RunStatus.COMPLETED
    assert events == ["run a", "run b", "run c"]


def test_the_switch_holds_its_own_reactor_only_and_a_first_switch_stands() -> None:
    events: list[str] = []
    with TestEnvironment():
        held, other = _chain(events, name="Held"), _chain(events, name="Other")
        held.suspend_all(reason="first", by="alice", hold_new=True)
        held.suspend_all(reason="second", by="bob", hold_new=True)  # the first stands
        switch = held.suspend_switch()
        assert switch is not None and (switch.reason, switch.by) == ("first", "alice")
        assert other.suspend_switch() is None
        assert other.run().run_id is not None and events == ["run a", "run b", "run c"]
        out = held.run()
        view = held.find(out.run_id or "")
        assert view.suspension is not None and view.suspension.reason == "first"


def test_cancel_rolls_back_a_run_the_switch_holds() -> None:
    events: list[str] = []
    with TestEnvironment():
        chain = _chain(events, during_a=lambda ctx: chain.suspend_all(hold_new=True))
        out = chain.run()
        assert chain.find(out.run_id or "").status is RunStatus.SUSPENDED
        chain.cancel(out.run_id or "", reason="give up")
        assert chain.find(out.run_id or "").status is RunStatus.CANCELLED
        assert chain.suspend_switch() is not None  # the switch is the reactor's, not the run's
    assert events == ["run a", "undo a"]


def test_bad_requests_set_no_switch() -> None:
    with TestEnvironment():
        chain = _chain([])
        with pytest.raises(SuspendArgumentError) as bad:
            chain.suspend_all(hold_new="yes")  # type: ignore[arg-type]
        assert bad.value.field == "hold_new"
        with pytest.raises(SuspendArgumentError) as long_reason:
            chain.suspend_all(reason="x" * 1001, hold_new=True)
        assert long_reason.value.field == "reason"
        assert chain.suspend_switch() is None
        assert chain.unsuspend_all() == {"running": 0, "paused": 0, "skipped": 0}


def test_an_unreadable_switch_text_still_holds_the_runs() -> None:
    events: list[str] = []
    with TestEnvironment() as env:
        chain = _chain(events)
        env.storage.locks.acquire(reactor_suspension_key(chain.reactor_name), "not json", None)
        out = chain.run()
        view = chain.find(out.run_id or "")
        assert view.status is RunStatus.SUSPENDED and events == []
        assert view.suspension is not None and view.suspension.reason is None
        chain.unsuspend_all()  # clears it whatever its text
        assert chain.suspend_switch() is None


# ----------------------------------------------------------------------------- every backend


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="rsuspend")
    config.reset()



def test_the_switch_holds_new_and_worker_runs_until_unsuspend_all_on_every_backend(
    runtime_on: Runtime,
) -> None:
    events: list[str] = []
    chain = _chain(events, handed=Background(after="a"))
    chain.suspend_all(reason="incident", by="ops", hold_new=True)
    # a run started after the switch: suspended before its first step, in its caller
    first = chain.run()
    assert isinstance(first, DispatchHandle) and events == []
    assert chain.find(first.run_id).status is RunStatus.SUSPENDED
    # a switch set on its own (as another process would), then a background run a worker takes
    chain.unsuspend_all()
    work_until(runtime_on, lambda: chain.find(first.run_id).status in TERMINAL_STATUSES)
    events.clear()
    second = chain.run()  # a runs here; b and c are queued
    assert isinstance(second, DispatchHandle) and events == ["run a"]
    reactor_suspension.switch_on(
        make_env(runtime_on), chain.reactor_name, Suspension("late", "bob", 1.0)
    )
    work_until(runtime_on, lambda: chain.find(second.run_id).status is RunStatus.SUSPENDED)
    view = chain.find(second.run_id)
    assert view.results == {"a": "a"} and events == ["run a"]
    assert view.suspension is not None and view.suspension.by == "bob"
    stored = chain.suspend_switch()
    assert stored is not None and (stored.reason, stored.by) == ("late", "bob")
    assert chain.unsuspend_all() == {"running": 1, "paused": 0, "skipped": 0}
    assert chain.suspend_switch() is None
    work_until(runtime_on, lambda: chain.find(second.run_id).status in TERMINAL_STATUSES)
    assert chain.find(second.run_id).status is RunStatus.COMPLETED
    assert chain.find(first.run_id).status is RunStatus.COMPLETED
    assert events == ["run a", "run b", "run c"]
