"""Kill -9 real worker processes mid-step and mid-rollback; the sweeper and a second worker
recover the run (docs/architecture.md, "Execution invariants").

Runs on Redis, MongoDB (SecantusDB wire server) and DynamoDB + SQS (moto), each with the
backend's generous ``context_lock_ttl`` (``tests.kill.conftest.LEASE``) and a 1 s sweep
interval: worker 1 blocks at a deterministic point and is killed with SIGKILL; worker 2
(``--sweep``) re-dispatches the run once its liveness lock lapses and finishes it. Step and
undo executions are counted in an ``O_APPEND`` log file.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, Success, config
from reactor.config import Runtime
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import (
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
)
from tests.kill.reactors import KillFlow, KillRollback, count, entries

#: Besides the backend's lease (``kill_settings``).
SETTINGS: dict[str, object] = {"sweeper_interval": 1}

#: Seconds from the kill to the run's terminal state, per test id (printed with -s).
TIMINGS: dict[str, float] = {}


@pytest.fixture
def caller(backend: Backend) -> Iterator[Runtime]:
    """This process's runtime (the caller that starts the background run)."""
    runtime = config.configure(storage=backend.storage, router=backend.router,
                               **kill_settings(backend, SETTINGS))
    try:
        yield runtime
    finally:
        config.reset()


def _kill_and_recover(
    request: pytest.FixtureRequest,
    backend: Backend,
    workers: WorkerProcesses,
    handle: DispatchHandle,
    log: Path,
    block: Path,
    marker: str,
) -> Success | Failure:
    settings = kill_settings(backend, SETTINGS)
    worker_1 = workers.start(backend, settings=settings)
    wait_until(lambda: count(str(log), marker) == 1, 60, f"worker 1 to block at {marker}",
               workers.logs)
    worker_2 = workers.start(backend, "--sweep", "--threads", "2", settings=settings)
    worker_1.send_signal(signal.SIGKILL)
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    block.unlink()
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "the run to finish", workers.logs)
    elapsed = time.monotonic() - killed_at
    result = handle.wait(timeout=5)
    TIMINGS[request.node.name] = elapsed
    print(f"\n[kill timing] {request.node.name}: recovered {elapsed:.2f}s after SIGKILL")
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()
    return result


def test_kill_mid_step_completes_and_completed_steps_ran_once(
    request: pytest.FixtureRequest,
    backend: Backend,
    caller: Runtime,
    workers: WorkerProcesses,
    tmp_path: Path,
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = KillFlow.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    result = _kill_and_recover(request, backend, workers, handle, log, block, "start:c")

    assert isinstance(result, Success), (result, workers.logs())
    assert result.value == {"a": "a", "b": "b", "c": "c", "d": "d"}
    lines = entries(str(log))
    # a and b completed before the kill: exactly once each; c was in flight (repeated once).
    assert {s: lines.count(f"done:{s}") for s in "abcd"} == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert {s: lines.count(f"start:{s}") for s in "abcd"} == {"a": 1, "b": 1, "c": 2, "d": 1}
    assert KillFlow.find(handle.run_id, runtime=caller).status is RunStatus.COMPLETED


def test_kill_mid_rollback_finishes_rollback_each_undo_once(
    request: pytest.FixtureRequest,
    backend: Backend,
    caller: Runtime,
    workers: WorkerProcesses,
    tmp_path: Path,
) -> None:
    log, block = tmp_path / "undo.log", tmp_path / "block"
    block.touch()
    handle = KillRollback.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    result = _kill_and_recover(request, backend, workers, handle, log, block, "undo-start:b")

    assert isinstance(result, Failure), (result, workers.logs())
    assert result.step_name == "d"
    assert result.rollback_failures == []
    lines = entries(str(log))
    assert {s: lines.count(f"done:{s}") for s in "abc"} == {"a": 1, "b": 1, "c": 1}
    assert lines.count("start:d") == 1
    # every undo completed exactly once; only the one cut off by the kill started twice
    assert {s: lines.count(f"undo-done:{s}") for s in "abc"} == {"a": 1, "b": 1, "c": 1}
    assert {s: lines.count(f"undo-start:{s}") for s in "abc"} == {"a": 1, "b": 2, "c": 1}
    # newest first: c was undone before the kill, a only after the recovery
    assert lines.index("undo-done:c") < lines.index("undo-start:b") < lines.index("undo-done:a")
    view = KillRollback.find(handle.run_id, runtime=caller)
    assert view.status is RunStatus.FAILED
    assert view.undo_stack == ()


def test_sigterm_finishes_the_in_flight_job_and_exits_0(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = KillFlow.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)
    worker = workers.start(backend, settings=kill_settings(backend, SETTINGS))
    wait_until(lambda: count(str(log), "start:c") == 1, 60, "the worker to block in c",
               workers.logs)
    worker.send_signal(signal.SIGTERM)
    wait_until(lambda: "event=worker_stopping" in workers.logs(), 30, "the stop signal",
               workers.logs)
    assert worker.poll() is None  # still draining the in-flight job
    block.unlink()
    assert worker.wait(timeout=30) == 0, workers.logs()
    assert isinstance(handle.wait(timeout=10), Success)
    lines = entries(str(log))
    assert [lines.count(f"done:{s}") for s in "abcd"] == [1, 1, 1, 1]
    assert lines.count("start:c") == 1
