"""Cancelling a run: ``Reactor.cancel`` (docs/run-control.md, "Cancel").

Every backend (memory, Redis, mongomock, the MongoDB wire server, DynamoDB + SQS): a run
cancelled while step 3 of 5 runs stops at that step's boundary, compensates step 3, undoes steps
2 and 1 exactly once and returns its lock and semaphore slot; a paused run, a queued
background run (its ordered-lock ticket given up, so the next run in line goes at once) and a
run waiting on a fan-out map (the map stops dispatching, the elements that ran are rolled back)
are cancelled; a second cancel changes nothing; a finished run is refused with a typed error;
``rollback=False`` keeps the completed work for a later ``Reactor.undo``. In-process only:
bad arguments, a map element, a paused composed child, a parked worker run whose parked lock is
released, and ``reactor runs cancel``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import (
    CancelArgumentError,
    DispatchHandle,
    Failure,
    InterruptNotFoundError,
    Paused,
    Reactor,
    RunFinishedError,
    RunNotFoundError,
    RunStateError,
    config,
)
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.engine.checkpoint import decode_context
from reactor.engine.env import make_env
from reactor.engine.run_control.cancel import CANCEL_CLAIM_PATH
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.keys import run_liveness_key
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, backend_urls
from tests.engine.cancel_reactors import (
    Approve,
    Fan,
    Five,
    Flaky,
    Nested,
    Parked,
    Queued,
    events,
    gate,
    interrupt_first_undo,
)

CANCELLED = "reactor.errors.RunCancelledError"


# ------------------------------------------------------------------------------ backends


class Backend:
    """One configured backend: its runtime and the clock the runtime runs on."""

    def __init__(self, name: str, runtime: Runtime, clock: TestClock) -> None:
        self.name = name
        self.runtime = runtime
        self.clock = clock

    def worker(self) -> Worker:
        """A worker over this runtime that never waits for a liveness lock."""
        return Worker(self.runtime, liveness_wait=0.0)

    def drain_until(self, done: Callable[[], bool], seconds: float = 60.0) -> None:
        """Run due jobs until ``done()``, for at most ``seconds`` of real time (a remote
        router's delays are real time)."""
        worker = self.worker()
        deadline = time.monotonic() + seconds
        while not done():
            worker.run_pending()
            if done():
                return
            assert time.monotonic() < deadline, "the expected jobs never ran"
            time.sleep(0.05)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    key = generate_key()
    monkeypatch.setenv(ENV_VAR, key)
    return key


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], keys: str
) -> Iterator[Backend]:
    clock = TestClock(time.time())
    name = request.param
    if name == "memory":
        runtime = config.configure(storage=MemoryStorage(clock=clock),
                                   router=LocalRouter(clock=clock), clock=clock,
                                   cancel_check_interval=0)
    else:
        storage_url, router_url = backend_urls(
            name, service_url, f"cx{uuid.uuid4().hex[:10]}", area="cancel"
        )
        runtime = config.configure(storage=storage_url, router=router_url, clock=clock,
                                   cancel_check_interval=0)
    events.clear()
    yield Backend(name, runtime, clock)
    config.reset()


@pytest.fixture
def memory(keys: str) -> Iterator[Backend]:
    clock = TestClock(time.time())
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock), clock=clock,
                               cancel_check_interval=0)
    events.clear()
    yield Backend("memory", runtime, clock)
    config.reset()


def _order() -> str:
    return f"o-{uuid.uuid4().hex[:8]}"


def _cancelled(outcome: Any, run_id: str) -> Failure:
    assert isinstance(outcome, Failure), outcome
    assert outcome.exception_class == CANCELLED and outcome.run_id == run_id
    assert not outcome.retryable
    return outcome


class _Running:
    """A synchronous :class:`Five` run in a thread, held inside step 3 by its gate."""

    def __init__(self, order: str) -> None:
        self.gate = gate(order)
        self.outcomes: list[Any] = []
        self.thread = threading.Thread(
            target=lambda: self.outcomes.append(Five.run(order_id=order)), daemon=True
        )
        self.thread.start()
        assert self.gate.entered.wait(60), "step 3 never started"

    @property
    def run_id(self) -> str:
        return self.gate.run_id

    def finish(self) -> Any:
        self.gate.release.set()
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.outcomes[0]


# ------------------------------------------------------------------------------ every backend


def test_a_run_cancelled_in_step_3_of_5_stops_there_and_rolls_back_once(
    backend: Backend,
) -> None:
    order = _order()
    running = _Running(order)
    run_id = running.run_id
    storage = backend.runtime.storage
    assert storage.locks.held(f"cancel-order:{order}")  # the run holds its reactor lock
    pool = storage.semaphores.state(f"cancel-pool:{order}")
    assert pool is not None and len(pool.holders) == 1  # ...and step 3 its semaphore slot

    handle = Five.cancel(run_id, reason="customer asked")
    assert isinstance(handle, DispatchHandle) and handle.run_id == run_id
    assert handle.job_id == ""  # the executing caller finishes the cancel, not this call
    assert events == [f"run:s1:{order}", f"run:s2:{order}", f"run:s3:{order}"]

    outcome = _cancelled(running.finish(), run_id)
    assert "customer asked" in outcome.message and outcome.rollback_failures == []
    assert events == [
        f"run:s1:{order}", f"run:s2:{order}", f"run:s3:{order}",  # s4 and s5 never ran
        f"compensate:s3:{order}", f"undo:s2:{order}", f"undo:s1:{order}",
    ]
    view = Five.find(run_id)
    assert view.status is RunStatus.CANCELLED and view.undo_stack == ()
    assert view.cancel is not None and view.cancel.reason == "customer asked"
    assert view.cancel.rollback is True
    assert view.failure is not None and view.failure.exception_class == CANCELLED
    assert [e.type for e in view.trace if e.step == "s3"] == ["cancelled", "compensate"]
    assert "s3" not in view.results
    waited = handle.wait(10)
    assert isinstance(waited, Failure) and waited.exception_class == CANCELLED
    assert waited.message == outcome.message
    assert not storage.locks.held(f"cancel-order:{order}")
    pool = storage.semaphores.state(f"cancel-pool:{order}")
    assert pool is None or not pool.holders
    assert not storage.locks.held(run_liveness_key(run_id))


@pytest.mark.parametrize(("waited", "noticed"), [(0.5, False), (1.5, True)])
def test_a_running_run_reads_its_cancel_request_once_per_interval(
    memory: Backend, waited: float, noticed: bool
) -> None:
    # cancel_check_interval (default 1 s) bounds how often a running run reads its cancel
    # request, counted from the execution's start: a run of fast steps pays one read per
    # interval, not one per step (docs/run-control.md, "Cancel").
    config.configure(storage=memory.runtime.storage, router=memory.runtime.router,
                     clock=memory.clock, cancel_check_interval=1.0)
    order = _order()
    running = _Running(order)
    assert isinstance(Five.cancel(running.run_id), DispatchHandle)
    memory.clock.advance(waited)  # step 3 took this long on the runtime clock
    outcome = running.finish()
    if noticed:
        _cancelled(outcome, running.run_id)
        assert f"run:s4:{order}" not in events
    else:  # read less than an interval after the start: the run goes on to its end
        assert outcome.success and f"run:s5:{order}" in events


def test_a_paused_run_is_cancelled_by_the_call(backend: Backend) -> None:
    order = _order()
    paused = Approve.run(order_id=order)
    assert isinstance(paused, Paused)
    run_id = paused.run_id or ""
    outcome = _cancelled(Approve.cancel(run_id, reason="no answer"), run_id)
    assert "no answer" in outcome.message
    assert events == [f"run:reserve:{order}", f"undo:reserve:{order}"]
    view = Approve.find(run_id)
    assert view.status is RunStatus.CANCELLED and view.interrupt is None
    assert view.cancel is not None and view.cancel.reason == "no answer"
    claims = backend.runtime.storage.claims
    assert claims.correlation_context(f"cancel:{order}") is None  # the id was freed
    with pytest.raises(InterruptNotFoundError) as info:
        Approve.resume(run_id, payload={"ok": True})
    assert info.value.status == "cancelled"
    assert events == [f"run:reserve:{order}", f"undo:reserve:{order}"]  # pay never ran


def test_a_queued_background_run_is_cancelled_before_a_worker_takes_it(
    backend: Backend,
) -> None:
    first, second = _order(), _order()
    handle_1 = Queued.run(order_id=first, line="l-1")
    handle_2 = Queued.run(order_id=second, line="l-1")  # behind the first in the line
    assert isinstance(handle_1, DispatchHandle) and isinstance(handle_2, DispatchHandle)
    outcome = _cancelled(Queued.cancel(handle_1.run_id, reason="duplicate"),
                         handle_1.run_id)
    assert outcome.rollback_failures == [] and events == []  # nothing ran: nothing undone
    assert Queued.find(handle_1.run_id).status is RunStatus.CANCELLED
    # the cancelled run gave its place in line up: the second runs at once (no poison-pill
    # wait of 600 s), and the first's job, delivered later, finds it cancelled
    backend.drain_until(lambda: Queued.find(handle_2.run_id).status is RunStatus.COMPLETED)
    assert events == [f"run:work:{second}"]
    assert Queued.find(handle_1.run_id).status is RunStatus.CANCELLED
    waited = handle_1.wait(10)
    assert isinstance(waited, Failure) and waited.exception_class == CANCELLED


def test_a_run_waiting_on_a_fan_out_map_stops_it_and_rolls_back_what_ran(
    backend: Backend,
) -> None:
    order = _order()
    handle = Fan.run(order_id=order)
    assert isinstance(handle, DispatchHandle)  # the map's elements are in the queue
    assert backend.worker().run_pending(max_jobs=2) == 2  # the first throw: two elements
    ran = {e for e in events if e.startswith("run:item")}
    assert len(ran) == 2

    pending = Fan.cancel(handle.run_id, reason="stop the batch")
    assert isinstance(pending, DispatchHandle)  # it waits for the running map to settle
    backend.drain_until(lambda: Fan.find(handle.run_id).status is RunStatus.CANCELLED)
    undone = [e for e in events if e.startswith("undo:item")]
    assert sorted(undone) == sorted(e.replace("run:", "undo:") for e in ran)  # each once
    assert {e for e in events if e.startswith("run:item")} == ran  # the map stopped
    assert events[0] == f"run:prepare:{order}" and events[-1] == f"undo:prepare:{order}"
    outcome = _cancelled(pending.wait(10), handle.run_id)
    assert outcome.rollback_failures == []
    assert "stop the batch" in outcome.message


def test_cancelling_twice_changes_nothing_the_second_time(backend: Backend) -> None:
    order = _order()
    paused = Approve.run(order_id=order)
    run_id = paused.run_id or ""
    first = _cancelled(Approve.cancel(run_id, reason="first"), run_id)
    second = _cancelled(Approve.cancel(run_id, reason="second", rollback=False), run_id)
    assert second.message == first.message and "first" in second.message
    assert second.rollback_failures == first.rollback_failures
    assert events == [f"run:reserve:{order}", f"undo:reserve:{order}"]  # undone once
    view = Approve.find(run_id)
    assert view.cancel is not None and view.cancel.reason == "first" and view.cancel.rollback


def test_two_cancels_racing_on_a_running_run_roll_it_back_once(backend: Backend) -> None:
    order = _order()
    running = _Running(order)
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def cancel(reason: str) -> None:
        barrier.wait()
        results.append(Five.cancel(running.run_id, reason=reason))

    threads = [threading.Thread(target=cancel, args=(r,)) for r in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 2 and all(isinstance(r, DispatchHandle) for r in results)
    outcome = _cancelled(running.finish(), running.run_id)
    assert events.count(f"undo:s1:{order}") == 1 and events.count(f"compensate:s3:{order}") == 1
    view = Five.find(running.run_id)
    assert view.cancel is not None and view.cancel.reason in ("a", "b")  # the first claim
    assert view.cancel.reason in outcome.message


def test_a_finished_run_is_refused_with_its_status(backend: Backend) -> None:
    order = _order()
    done = Approve.run(order_id=order)
    assert isinstance(done, Paused)
    assert Approve.resume(done.run_id, payload=None).success
    with pytest.raises(RunFinishedError) as info:
        Approve.cancel(done.run_id or "")
    error = info.value
    assert isinstance(error, RunStateError)
    assert error.status == "completed" and error.run_id == done.run_id
    assert "completed" in str(error) and "Reactor.undo" in str(error)
    assert Approve.find(done.run_id or "").status is RunStatus.COMPLETED  # untouched
    with pytest.raises(RunNotFoundError):
        Approve.cancel("no-such-run")


def test_rollback_false_keeps_the_completed_work_for_a_later_undo(backend: Backend) -> None:
    order = _order()
    running = _Running(order)
    run_id = running.run_id
    assert isinstance(Five.cancel(run_id, rollback=False), DispatchHandle)
    outcome = _cancelled(running.finish(), run_id)
    assert "rollback=False" in outcome.message
    assert events == [f"run:s1:{order}", f"run:s2:{order}", f"run:s3:{order}"]
    view = Five.find(run_id)
    assert view.status is RunStatus.CANCELLED
    assert view.undo_stack == ("s1", "s2", "s3")  # s3 completed at the boundary: kept
    assert view.cancel is not None and view.cancel.rollback is False
    assert not backend.runtime.storage.locks.held(f"cancel-order:{order}")
    with pytest.raises(RunStateError, match="without rollback"):
        Five.retry(run_id)  # its work stands: a retry would repeat it
    assert Five.undo(run_id).success  # undone later, newest first
    assert events[3:] == [f"undo:s3:{order}", f"undo:s2:{order}", f"undo:s1:{order}"]
    assert Five.find(run_id).undo_stack == ()


# ------------------------------------------------------------------------------ in process


def test_bad_arguments_are_refused_before_anything_is_read(memory: Backend) -> None:
    for kwargs, field in (
        ({"run_id": "  "}, "run_id"),
        ({"run_id": "r", "reason": 3}, "reason"),
        ({"run_id": "r", "reason": "x" * 1001}, "reason"),
        ({"run_id": "r", "rollback": "no"}, "rollback"),
    ):
        with pytest.raises(CancelArgumentError) as info:
            Reactor.cancel(**kwargs)
        assert info.value.field == field and isinstance(info.value, ValueError)
    claims = memory.runtime.storage.claims
    assert claims.interrupt_resumes("r", [CANCEL_CLAIM_PATH]) == {}


def test_a_run_of_another_reactor_is_not_found(memory: Backend) -> None:
    paused = Approve.run(order_id=_order())
    with pytest.raises(RunNotFoundError):
        Five.cancel(paused.run_id or "")
    assert Approve.find(paused.run_id or "").status is RunStatus.PAUSED


def test_a_map_element_is_refused(memory: Backend) -> None:
    handle = Fan.run(order_id=_order())
    assert isinstance(handle, DispatchHandle)
    assert memory.worker().run_pending(max_jobs=1) == 1  # one element ran
    maps = memory.runtime.storage.maps
    stored = memory.runtime.storage.contexts.load(handle.run_id)
    assert stored is not None
    ctx = decode_context(make_env(memory.runtime), stored, open_secrets=False)
    ref = ctx.map_ref("taken")
    assert ref is not None and ref.is_fan_out
    element_id = maps.element_ids(ref.map_id)[0]
    with pytest.raises(RunStateError, match="map element") as info:
        Reactor.cancel(element_id)
    assert not isinstance(info.value, RunFinishedError)
    assert Fan.find(handle.run_id).status is RunStatus.RUNNING  # nothing was claimed


def test_a_paused_composed_child_is_rolled_back_with_its_parent(memory: Backend) -> None:
    order = _order()
    paused = Nested.run(order_id=order)
    assert isinstance(paused, Paused) and paused.step == "inner.approval"
    run_id = paused.run_id or ""
    _cancelled(Reactor.cancel(run_id), run_id)  # the base class takes any reactor's run
    assert events == [
        f"run:open:{order}", f"run:reserve:{order}",
        f"undo:reserve:{order}", f"undo:open:{order}",  # the child first, then the parent
    ]
    view = Nested.find(run_id)
    assert view.status is RunStatus.CANCELLED
    assert view.children["inner"].status is RunStatus.CANCELLED
    assert view.cancel is not None and view.cancel.reason is None


def test_a_parked_worker_run_is_cancelled_when_its_job_comes_back(memory: Backend) -> None:
    order = _order()
    storage = memory.runtime.storage
    assert storage.semaphores.acquire(f"cancel-parked-pool:{order}", "someone", 1, 300)
    handle = Parked.run(order_id=order)
    assert isinstance(handle, DispatchHandle)
    memory.worker().run_pending()  # takes the lock, parks on the full semaphore
    assert storage.locks.held(f"cancel-parked-lock:{order}")  # kept while parked
    assert storage.locks.held(run_liveness_key(handle.run_id))  # the park's stamp

    pending = Parked.cancel(handle.run_id, reason="give up")
    assert isinstance(pending, DispatchHandle)  # the parked job owns the run until it is due
    memory.clock.advance(60)
    memory.drain_until(lambda: Parked.find(handle.run_id).status is RunStatus.CANCELLED)
    assert events == []  # the step never ran
    assert not storage.locks.held(f"cancel-parked-lock:{order}")  # the parked lock released
    view = Parked.find(handle.run_id)
    assert view.cancel is not None and view.cancel.reason == "give up"
    assert isinstance(pending.wait(5), Failure)


def test_a_cancel_cut_off_in_its_rollback_is_finished_by_a_worker(memory: Backend) -> None:
    order = _order()
    interrupt_first_undo(order)
    paused = Flaky.run(order_id=order)
    run_id = paused.run_id or ""
    with pytest.raises(SystemExit):
        Flaky.cancel(run_id, reason="closing")  # the canceller stops inside the undo
    view = Flaky.find(run_id)
    assert view.status is RunStatus.RUNNING and view.undo_stack == ("reserve",)
    assert view.cancel is not None and view.cancel.reason == "closing"  # saved first
    assert not memory.runtime.storage.locks.held(run_liveness_key(run_id))
    assert run_sweeps(memory.runtime).runs.redispatched == 1  # a lost run to the sweeper
    memory.drain_until(lambda: Flaky.find(run_id).status is RunStatus.CANCELLED)
    # the undo cut off runs again (at least once), and the run ends cancelled, not resumed
    assert events == [f"run:reserve:{order}", f"undo:reserve:{order}", f"undo:reserve:{order}"]
    outcome = _cancelled(Flaky.cancel(run_id), run_id)
    assert "closing" in outcome.message and Flaky.find(run_id).undo_stack == ()


def test_cli_runs_cancel(memory: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_cli, "_runtime", lambda *_a, **_k: memory.runtime)
    runner = CliRunner()
    order = _order()
    paused = Approve.run(order_id=order)
    run_id = paused.run_id or ""
    out = runner.invoke(app, ["runs", "cancel", run_id, "--reason", "x" * 1001])
    assert out.exit_code == 2 and "over 1000" in out.stderr
    out = runner.invoke(app, ["runs", "cancel", run_id, "--reason", "ops", "--json"])
    assert out.exit_code == 0, out.output
    assert '"status": "cancelled"' in out.stdout and '"reason": "ops"' in out.stdout
    assert '"pending": false' in out.stdout and '"rollback": true' in out.stdout
    out = runner.invoke(app, ["runs", "cancel", run_id])  # idempotent
    assert out.exit_code == 0 and out.stdout.strip() == f"{run_id}\tcancelled"
    shown = runner.invoke(app, ["runs", "show", run_id, "--json"])
    assert '"cancel": {' in shown.stdout and '"reason": "ops"' in shown.stdout
    out = runner.invoke(app, ["runs", "cancel", "nope"])
    assert out.exit_code == 1 and "no stored run 'nope'" in out.stderr

    kept = Approve.run(order_id=_order())
    out = runner.invoke(app, ["runs", "cancel", kept.run_id or "", "--no-rollback", "--json"])
    assert out.exit_code == 0 and '"rollback": false' in out.stdout
    assert Approve.find(kept.run_id or "").undo_stack == ("reserve",)

    done = Approve.run(order_id=_order())
    Approve.resume(done.run_id, payload=1)
    out = runner.invoke(app, ["runs", "cancel", done.run_id or ""])
    assert out.exit_code == 1 and "is completed" in out.stderr
    assert events.count(f"undo:reserve:{order}") == 1
