"""Crash recovery of cancels and maps (docs/run-control.md, "Cancel"; docs/workers.md,
"Maps resume"), on every backend, with deterministic fault hooks instead of killed processes
(tests/kill holds the real-process variants).

* A cancel accepted while a worker executes the run (its liveness lock held: the call
  returns a ``DispatchHandle``) is carried out by whichever execution continues the run, even
  when the worker that owned it dies before its next step boundary reads the request: the
  recovering worker rolls the run back and stores it ``cancelled``; no further step runs.
* A worker that dies inside an inline map (inside a composed child, or at the top level)
  leaves the map's reference naming the elements that ran: the recovered execution adopts it,
  so each completed element's step runs once (the element in flight at least once) and, when
  a later step fails, every completed element is undone exactly once (none is leaked).
* A fan-out map dispatched by an owner whose cancel request stands (accepted while the owner
  executed, never noticed by it) runs no further throw: the element that ends a throw reads
  the request and stops the map; the owner, resumed by the collector, rolls back what ran.
* A worker that dies while concurrent branches are in flight (docs/concepts.md,
  "Concurrency") leaves the branches it recorded recorded: the recovered execution runs
  exactly the branches that had not completed (a branch in flight at the death at least
  once more), then the rest of the run; a later failure undoes each branch exactly once.
* Two ``Reactor.undo`` calls of one run at once undo each step once: the undo stack is read
  under the run's liveness lock (docs/protocol.md, "Rollback jobs: lock before read"); so is
  an ``async_reactor`` child's, when its parent's rollback races an undo of the child.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import DispatchHandle, Failure, config
from reactor.config import Runtime
from reactor.engine import api, checkpoint, liveness, rollback
from reactor.engine.async_reactor import child_run_id
from reactor.engine.env import make_env
from reactor.engine.run_control import cancel
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.engine_state import CancelRequest
from reactor.model.keys import run_liveness_key
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, backend_urls
from tests.engine import cancel_reactors
from tests.engine.cancel_reactors import Fan
from tests.engine.crash_reactors import (
    FlatShipment,
    Fork,
    Leg,
    Shipment,
    Trio,
    Trip,
    journal,
    release,
)

CANCELLED = "reactor.errors.RunCancelledError"


class WorkerDied(BaseException):
    """Raised by a fault hook where a worker process would die: not an interruption the
    engine stores (``KeyboardInterrupt``...), nor a step failure (it is raised by engine code,
    outside any step body), so it unwinds the worker's job as a kill would (the job's lock is
    released by its ``finally``, as a dead worker's lapses with its TTL)."""


class Backend:
    """One configured backend: its runtime and the clock the runtime runs on."""

    def __init__(self, name: str, runtime: Runtime, clock: TestClock) -> None:
        self.name = name
        self.runtime = runtime
        self.clock = clock

    def recover_until(self, done: Callable[[], bool], seconds: float = 60.0) -> None:
        """Run due jobs, and sweep for lost runs between rounds, until ``done()`` (at most
        ``seconds`` of real time: a remote router's delays are real time)."""
        worker = Worker(self.runtime, liveness_wait=0.0)
        deadline = time.monotonic() + seconds
        while not done():
            worker.run_pending()
            if done():
                return
            run_sweeps(self.runtime)
            assert time.monotonic() < deadline, "the run was never recovered"
            time.sleep(0.05)


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Backend]:
    monkeypatch.setenv(ENV_VAR, generate_key())
    clock = TestClock(time.time())
    name = request.param
    if name == "memory":  # cancel_check_interval stays 1 s: the clock never moves, so no
        runtime = config.configure(  # step boundary after the start reads the request
            storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock), clock=clock
        )
    else:
        storage_url, router_url = backend_urls(
            name, service_url, f"cr{uuid.uuid4().hex[:10]}", area="crash"
        )
        runtime = config.configure(storage=storage_url, router=router_url, clock=clock)
    journal.clear()
    release.clear()
    yield Backend(name, runtime, clock)
    release.set()  # a branch a failed test left waiting ends
    config.reset()


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """The in-memory backend alone (variants every backend does not need to repeat)."""
    monkeypatch.setenv(ENV_VAR, generate_key())
    clock = TestClock(time.time())
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock), clock=clock
    )
    journal.clear()
    release.clear()
    yield Backend("memory", runtime, clock)
    release.set()
    config.reset()


def _order() -> str:
    return f"o-{uuid.uuid4().hex[:8]}"


def _terminal(run_id: str) -> Callable[[], bool]:
    return lambda: Trio.find(run_id).status in TERMINAL_STATUSES


def test_a_cancel_accepted_before_its_worker_died_is_carried_out_by_the_recovery(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    order = _order()
    handle = Trio.run(order_id=order)
    assert isinstance(handle, DispatchHandle)
    run_id = handle.run_id
    accepted: list[Any] = []
    save = checkpoint.Checkpointer.save

    def dies_after_b(self: checkpoint.Checkpointer, *, force: bool = True) -> None:
        save(self, force=force)
        ctx = self.context
        if ctx.context_id == run_id and "b" in ctx.intermediate_results and not accepted:
            # b's checkpoint is stored; the worker still owns the run: the cancel is only
            # recorded. Then the worker dies before c's boundary would read the request.
            accepted.append(Trio.cancel(run_id, reason="customer left"))
            raise WorkerDied

    monkeypatch.setattr(checkpoint.Checkpointer, "save", dies_after_b)
    with pytest.raises(WorkerDied):
        Worker(backend.runtime, liveness_wait=0.0).run_pending()
    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
    assert isinstance(accepted[0], DispatchHandle)  # accepted: the owner carries it out
    assert Trio.find(run_id).status is RunStatus.RUNNING

    backend.recover_until(_terminal(run_id))
    view = Trio.find(run_id)
    assert view.status is RunStatus.CANCELLED, view.status
    # c never ran; every completed step was undone exactly once, newest first
    assert journal == [f"run:a:{order}", f"run:b:{order}", f"undo:b:{order}",
                       f"undo:a:{order}"]
    assert view.cancel is not None and view.cancel.reason == "customer left"
    outcome = accepted[0].wait(10)
    assert isinstance(outcome, Failure) and outcome.exception_class == CANCELLED
    assert "customer left" in outcome.message


def test_a_worker_dying_inside_an_inline_map_in_a_child_leaks_no_element(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    _die_inside_an_inline_map(backend, monkeypatch, Shipment, fail_ship=True)


@pytest.mark.parametrize(("reactor", "fail_ship"), [
    (Shipment, False), (FlatShipment, True), (FlatShipment, False),
], ids=["in-child-completed", "top-level-rolled-back", "top-level-completed"])
def test_a_worker_dying_inside_an_inline_map_resumes_it_on_memory(
    memory: Backend, monkeypatch: pytest.MonkeyPatch, reactor: Any, fail_ship: bool
) -> None:
    _die_inside_an_inline_map(memory, monkeypatch, reactor, fail_ship=fail_ship)


def _die_inside_an_inline_map(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, reactor: Any, *, fail_ship: bool
) -> None:
    """Kill the worker (:class:`WorkerDied`) right after element 2 of 4 stored its
    completion, recover the run, and count every element's step and undo."""
    order = _order()
    handle = reactor.run(order_id=order, fail_ship=fail_ship, items=[0, 1, 2, 3])
    assert isinstance(handle, DispatchHandle)
    run_id = handle.run_id
    save = checkpoint.Checkpointer.save
    died: list[str] = []

    def dies_after_element_2(self: checkpoint.Checkpointer, *, force: bool = True) -> None:
        save(self, force=force)
        ctx = self.context
        if (not died and ctx.root_context_id == run_id and ctx.map_metadata is not None
                and ctx.map_metadata.index == 2 and "pack" in ctx.intermediate_results):
            died.append(ctx.context_id)  # element 2 completed and stored; element 3 never
            raise WorkerDied             # started: the worker dies here

    monkeypatch.setattr(checkpoint.Checkpointer, "save", dies_after_element_2)
    with pytest.raises(WorkerDied):
        Worker(backend.runtime, liveness_wait=0.0).run_pending()
    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
    assert died and reactor.find(run_id).status is RunStatus.RUNNING

    backend.recover_until(lambda: reactor.find(run_id).status in TERMINAL_STATUSES)
    view = reactor.find(run_id)
    ran = {n: journal.count(f"run:pack{n}:{order}") for n in range(4)}
    assert ran == dict.fromkeys(range(4), 1), journal  # no element ran twice
    undone = {n: journal.count(f"undo:pack{n}:{order}") for n in range(4)}
    if fail_ship:
        assert view.status is RunStatus.FAILED, view.status
        assert undone == dict.fromkeys(range(4), 1), journal  # each undone exactly once
        assert journal[-1] == f"undo:open:{order}"
    else:
        assert view.status is RunStatus.COMPLETED, view.status
        assert undone == dict.fromkeys(range(4), 0), journal


def test_a_fan_out_map_whose_owner_has_a_pending_cancel_dispatches_no_further_throw(
    backend: Backend,
) -> None:
    order = _order()
    cancel_reactors.events.clear()
    handle = Fan.run(order_id=order)  # six elements, two per throw: the first throw is queued
    assert isinstance(handle, DispatchHandle)
    env = make_env(backend.runtime)
    # the request stands, as one accepted while the owner executed and never noticed
    cancel.claim(env, handle.run_id, CancelRequest("stop", True, env.clock.now()))
    backend.recover_until(lambda: Fan.find(handle.run_id).status in TERMINAL_STATUSES)

    events = cancel_reactors.events
    ran = sorted(e for e in events if e.startswith("run:item"))
    assert ran == [f"run:item0:{order}", f"run:item1:{order}"], events  # the first throw only
    undone = sorted(e for e in events if e.startswith("undo:item"))
    assert undone == [f"undo:item0:{order}", f"undo:item1:{order}"], events  # each once
    assert events[-1] == f"undo:prepare:{order}"
    view = Fan.find(handle.run_id)
    assert view.status is RunStatus.CANCELLED and view.cancel is not None
    assert view.cancel.reason == "stop"


def test_two_undos_of_one_run_at_once_undo_each_step_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Trio runs synchronously here: the run completes in this process (inline router). The
    # system clock: the second undo really waits for the first's lock (a server-side TTL).
    config.configure(storage=backend.runtime.storage, router="inline://")
    order = _order()
    done = Trio.run(order_id=order)
    assert done.success and done.run_id is not None
    run_id = done.run_id
    load_run, take = api.load_run, liveness.take
    second_started = threading.Event()  # the second undo finished, or waits for the lock
    outcomes: list[Any] = []

    def second() -> None:
        try:
            outcomes.append(Trio.undo(run_id))
        finally:
            second_started.set()

    def contending(env: Any, context_id: str, *, wait: float = 0.0) -> Any:
        if threading.current_thread().name == "second-undo" and env.storage.locks.held(
            run_liveness_key(context_id)
        ):
            second_started.set()  # it is about to wait for the first undo's lock
        return take(env, context_id, wait=wait)

    def stale_read(*args: Any, **kwargs: Any) -> Any:
        ctx = load_run(*args, **kwargs)
        if threading.current_thread().name != "second-undo" and not outcomes and (
            not getattr(stale_read, "fired", False)
        ):
            stale_read.fired = True  # type: ignore[attr-defined]
            # the first undo has read the run; the second one starts now and runs as far
            # as it can before the first goes on
            racer = threading.Thread(target=second, name="second-undo", daemon=True)
            racer.start()
            assert second_started.wait(30)
            stale_read.racer = racer  # type: ignore[attr-defined]
        return ctx

    monkeypatch.setattr(api, "load_run", stale_read)
    monkeypatch.setattr(liveness, "take", contending)
    first = Trio.undo(run_id)
    stale_read.racer.join(30)  # type: ignore[attr-defined]
    assert first.success and outcomes and outcomes[0].success
    for name in "abc":  # every completed step undone exactly once
        assert journal.count(f"undo:{name}:{order}") == 1, journal
    assert Trio.find(run_id).status is RunStatus.CANCELLED


def test_a_parent_rollback_racing_an_undo_of_its_async_child_undoes_the_child_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inline router: the child runs nested in the caller, so the parent completes here
    config.configure(storage=backend.runtime.storage, router="inline://")
    order = _order()
    done = Trip.run(order_id=order)
    assert done.success and done.run_id is not None
    child_id = child_run_id(done.run_id, "leg")
    load, take = rollback.load_context, liveness.take
    racer_waits = threading.Event()  # the child's undo finished, or waits for its lock
    racers: list[threading.Thread] = []

    def child_undo() -> None:
        try:
            Leg.undo(child_id)
        finally:
            racer_waits.set()

    def contending(env: Any, context_id: str, *, wait: float = 0.0) -> Any:
        if threading.current_thread().name == "child-undo" and env.storage.locks.held(
            run_liveness_key(context_id)
        ):
            racer_waits.set()  # about to wait for the parent rollback's hold on the child
        return take(env, context_id, wait=wait)

    def stale_read(env: Any, context_id: str, **kwargs: Any) -> Any:
        ctx = load(env, context_id, **kwargs)
        if context_id == child_id and not racers:  # the parent's rollback read the child
            racers.append(threading.Thread(target=child_undo, name="child-undo", daemon=True))
            racers[0].start()
            assert racer_waits.wait(30)
        return ctx

    monkeypatch.setattr(rollback, "load_context", stale_read)
    monkeypatch.setattr(liveness, "take", contending)
    assert Trip.undo(done.run_id).success
    racers[0].join(30)
    assert journal.count(f"undo:leg:{order}") == 1, journal  # the child undone once
    assert journal.count(f"undo:hotel:{order}") == 1, journal


@pytest.mark.parametrize("fail_join", [False, True], ids=["completed", "rolled-back"])
def test_a_worker_dying_with_branches_in_flight_resumes_only_the_unfinished_ones(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, fail_join: bool
) -> None:
    order = _order()
    handle = Fork.run(order_id=order, fail_join=fail_join)
    assert isinstance(handle, DispatchHandle)
    run_id = handle.run_id
    save = checkpoint.Checkpointer.save
    died: list[bool] = []

    def dies_after_quick(self: checkpoint.Checkpointer, *, force: bool = True) -> None:
        save(self, force=force)
        ctx = self.context
        if not died and ctx.context_id == run_id and "quick" in ctx.intermediate_results:
            died.append(True)  # quick is stored; held1 and held2 are still in flight
            raise WorkerDied

    monkeypatch.setattr(checkpoint.Checkpointer, "save", dies_after_quick)
    with pytest.raises(WorkerDied):
        Worker(backend.runtime, liveness_wait=0.0).run_pending()
    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
    stored = Fork.find(run_id)
    assert stored.status is RunStatus.RUNNING and set(stored.results) == {"quick"}
    # The dead worker's branches finish their bodies; nothing of them is recorded.
    release.set()
    deadline = time.monotonic() + 30
    while not {f"run:held1:{order}", f"run:held2:{order}"} <= set(journal):
        assert time.monotonic() < deadline, journal
        time.sleep(0.01)

    backend.recover_until(lambda: Fork.find(run_id).status in TERMINAL_STATUSES)
    view = Fork.find(run_id)
    ran = {name: journal.count(f"run:{name}:{order}")
           for name in ("quick", "held1", "held2", "join")}
    # quick was recorded: never again; the branches in flight ran once more; join once
    assert ran == {"quick": 1, "held1": 2, "held2": 2, "join": 1}, journal
    undone = {name: journal.count(f"undo:{name}:{order}") for name in ("quick", "held1", "held2")}
    if fail_join:
        assert view.status is RunStatus.FAILED, view.status
        assert undone == {"quick": 1, "held1": 1, "held2": 1}, journal
    else:
        assert view.status is RunStatus.COMPLETED, view.status
        assert undone == {"quick": 0, "held1": 0, "held2": 0}, journal
