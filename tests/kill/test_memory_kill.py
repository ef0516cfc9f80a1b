"""The kill tests on the memory adapter: a simulated dead worker thread.

A thread cannot be killed, so worker A's death is simulated: while its thread is blocked at the
deterministic point, its liveness lock is forced to lapse (what happens when the extender stops
and the TTL runs out) and its delivery is abandoned. The sweeper re-dispatches the run, worker B
finishes it, and when worker A's thread finally wakes up (a "zombie", like a process resuming
after a long pause) its writes are fenced on the lost lock: it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, Reactor, Success, config
from reactor.config import Runtime
from reactor.jobs.sweepers import sweep_runs
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryProbe, MemoryStorage
from reactor.model.keys import run_liveness_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import wait_until
from tests.kill.reactors import KillFlow, KillRollback, count, entries

#: The workers' liveness lease, in seconds. Worker A's is forced to lapse (``MemoryProbe``);
#: worker B's must never lapse by itself, however late its heartbeat thread runs on a loaded
#: machine (nothing here would sweep the run again).
LEASE = 60
#: Bounds a failing wait, in seconds (the threads run the steps at once; only the load slows
#: them).
BOUND = 120


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    rt = config.configure(
        storage=MemoryStorage(), router=LocalRouter(visibility_timeout=30),
        context_lock_ttl=LEASE,
    )
    yield rt
    config.reset()


def _die_and_recover(
    rt: Runtime, handle: DispatchHandle, log: Path, block: Path, marker: str
) -> tuple[Worker, Worker, float]:
    """Block worker A at ``marker``, let its lock lapse, sweep, let worker B finish the run."""
    storage = rt.storage
    assert isinstance(storage, MemoryStorage)
    worker_a = Worker(rt, poll_seconds=0.05, liveness_wait=0.0)
    worker_a.start()
    wait_until(lambda: count(str(log), marker) == 1, BOUND, f"worker A to block at {marker}")
    # worker A "dies": its liveness lock lapses (no more extends), its delivery is abandoned
    assert MemoryProbe(storage).expire("locks", run_liveness_key(handle.run_id))
    worker_b = Worker(rt, poll_seconds=0.05, liveness_wait=0.0)
    worker_b.start()
    assert sweep_runs(storage, rt.router).redispatched == 1
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, BOUND,
               "worker B to finish the run")
    stamp = Reactor.find(handle.run_id).updated_at
    # the zombie wakes up: whatever it does next is fenced on the lost lock
    block.unlink()
    assert worker_a.stop(timeout=BOUND) and worker_b.stop(timeout=BOUND)
    return worker_a, worker_b, stamp


def test_dead_worker_thread_mid_step(runtime: Runtime, tmp_path: Path) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = KillFlow.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    _, _, stamp = _die_and_recover(runtime, handle, log, block, "start:c")

    result = handle.wait(timeout=1)
    assert isinstance(result, Success)
    assert result.value == {"a": "a", "b": "b", "c": "c", "d": "d"}
    lines = entries(str(log))
    assert [lines.count(f"done:{s}") for s in "ab"] == [1, 1]
    assert lines.count("start:c") == 2 and lines.count("start:d") == 1
    # the zombie's c finished its body, but it recorded nothing and never ran d
    view = KillFlow.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED and view.updated_at == stamp


def test_dead_worker_thread_mid_rollback(runtime: Runtime, tmp_path: Path) -> None:
    log, block = tmp_path / "undo.log", tmp_path / "block"
    block.touch()
    handle = KillRollback.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    _, _, stamp = _die_and_recover(runtime, handle, log, block, "undo-start:b")

    result = handle.wait(timeout=1)
    assert isinstance(result, Failure) and result.step_name == "d"
    lines = entries(str(log))
    assert [lines.count(f"done:{s}") for s in "abc"] == [1, 1, 1]
    assert lines.count("start:d") == 1
    assert [lines.count(f"undo-start:{s}") for s in "abc"] == [1, 2, 1]
    # c and a undone once; b's undo was cut off and repeated (its zombie half returns late)
    assert lines.count("undo-done:c") == 1 and lines.count("undo-done:a") == 1
    view = KillRollback.find(handle.run_id)
    assert view.status is RunStatus.FAILED and view.undo_stack == ()
    assert view.updated_at == stamp  # the zombie wrote nothing
