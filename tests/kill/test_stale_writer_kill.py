"""A real worker frozen between its fence check and its checkpoint write never reopens a run
that another worker completed meanwhile (docs/workers.md, "Stale writers and fenced saves").

Runs on Redis, MongoDB (SecantusDB wire server) and DynamoDB + SQS (moto), the backend's
generous ``context_lock_ttl`` (``tests.kill.conftest.LEASE``) and 1 s sweeps. Worker 1
imports :mod:`tests.kill.fault_points`: right after step ``b`` of
:class:`~tests.kill.fault_reactors.FenceFlow` its worker checkpoint passes the liveness check
and then the process stops itself with ``SIGSTOP``, before the write. While it is frozen its
liveness lock lapses (no extender runs), worker 2 (``--sweep``) takes the run over and
completes it. Then worker 1 gets ``SIGCONT``: its write reaches the store with its old fencing
token and is refused (``StaleWriterError``, ``event=liveness_lost``); the run stays
``completed`` and no step runs again. Every step logs ``start:``/``done:`` lines to an
``O_APPEND`` file shared by the processes.
"""

from __future__ import annotations

import signal
from pathlib import Path

from reactor import DispatchHandle, Success
from reactor.config import Runtime
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from tests.kill.conftest import (
    Backend,
    WorkerProcesses,
    kill_settings,
    marked_pid,
    recovery_bound,
    stopped,
    wait_until,
)
from tests.kill.fault_reactors import FenceFlow
from tests.kill.reactors import entries
from tests.kill.test_kill import SETTINGS, caller

__all__ = ["caller"]

FAULTS = ("--import", "tests.kill.fault_points")
STEPS = "abcd"


def _counts(log: Path, kind: str) -> dict[str, int]:
    lines = entries(str(log))
    return {s: lines.count(f"{kind}:{s}") for s in STEPS}


def test_a_worker_frozen_between_fence_check_and_write_cannot_reopen_the_completed_run(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, freeze = tmp_path / "steps.log", tmp_path / "freeze"
    freeze.touch()
    handle = FenceFlow.run(log_path=str(log), freeze_path=str(freeze))
    assert isinstance(handle, DispatchHandle)
    lock_key = run_liveness_key(handle.run_id)

    settings = kill_settings(backend, SETTINGS)
    stale = workers.start(backend, *FAULTS, settings=settings)
    wait_until(lambda: marked_pid(log, "frozen-pid:") == stale.pid and stopped(stale.pid), 90,
               "worker 1 to freeze between its fence check and its write", workers.logs)
    assert _counts(log, "done") == {"a": 1, "b": 1, "c": 0, "d": 0}
    # Frozen: nothing extends its liveness lock, which lapses after context_lock_ttl.
    wait_until(lambda: not caller.storage.locks.held(lock_key), recovery_bound(backend),
               "the frozen worker's liveness lock to lapse", workers.logs)

    fresh = workers.start(backend, *FAULTS, "--sweep", "--threads", "2", settings=settings)
    wait_until(lambda: handle.status() is RunStatus.COMPLETED, recovery_bound(backend),
               "worker 2 to take the run over and complete it", workers.logs)
    assert stopped(stale.pid), "worker 1 must still be frozen while the run completes"
    taken_over = entries(str(log))

    freeze.unlink()
    stale.send_signal(signal.SIGCONT)
    wait_until(lambda: any(line.startswith("stale-save:") for line in entries(str(log))), 60,
               "worker 1's stale write to reach the store", workers.logs)
    lines = entries(str(log))
    assert "stale-save:refused" in lines, (
        f"the stale write landed: the run is {handle.status().value} again; log {lines}"
    )
    wait_until(lambda: "event=liveness_lost" in workers.log_of(stale), 60,
               "worker 1 to abandon the run", workers.logs)
    lost = [line for line in workers.log_of(stale).splitlines() if "event=liveness_lost" in line]
    assert len(lost) == 1 and "refused" in lost[0], lost
    assert handle.status() is RunStatus.COMPLETED

    for proc in (stale, fresh):
        proc.send_signal(signal.SIGTERM)
    for proc in (stale, fresh):
        assert proc.wait(timeout=30) == 0, workers.logs()

    # Nothing ran after the thaw; b, whose result the frozen write carried, ran again in
    # worker 2 (at least once); every other step exactly once.
    assert [line for line in entries(str(log)) if not line.startswith("stale-save:")] == (
        taken_over
    )
    assert _counts(log, "start") == {"a": 1, "b": 2, "c": 1, "d": 1}
    assert _counts(log, "done") == {"a": 1, "b": 2, "c": 1, "d": 1}
    view = FenceFlow.find(handle.run_id, runtime=caller)
    assert view.status is RunStatus.COMPLETED
    result = handle.wait(timeout=10)
    assert isinstance(result, Success), result
    assert result.value == {"a": "a", "b": "b", "c": "c", "d": "d"}
    assert not caller.storage.locks.held(lock_key)
