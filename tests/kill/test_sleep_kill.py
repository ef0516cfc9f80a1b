"""A run sleeping 2 s survives the SIGKILL of the worker that runs it and resumes once
(docs/schedules.md, "Durable sleep").

Worker 1 runs :class:`~tests.kill.sleep_reactors.SleepFlow` up to its sleep (the run is
stored ``paused`` with its marker, the ``sleep_wake`` timer queued) and is killed while the
run sleeps. Worker 2 (``--sweep``) picks the timer up (or the sleeping-run sweeper wakes the
run): ``after`` runs exactly once, ``before`` never again, and the run completes. Redis.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from reactor import DispatchHandle, Success
from reactor.config import Runtime
from reactor.model.status import RunStatus
from tests.kill.conftest import Backend, WorkerProcesses, kill_settings, recovery_bound, wait_until
from tests.kill.reactors import entries
from tests.kill.sleep_reactors import SleepFlow

IMPORT = ("--import", "tests.kill.sleep_reactors")
SETTINGS: dict[str, object] = {"sweeper_interval": 1}



@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_a_sleeping_run_survives_a_worker_kill_and_resumes_once(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    handle = SleepFlow.run(log_path=str(log))
    assert isinstance(handle, DispatchHandle)
    assert SleepFlow.find(handle.run_id).status is RunStatus.PAUSED  # slept in this caller
    settings = kill_settings(backend, SETTINGS)
    worker_1 = workers.start(backend, *IMPORT, settings=settings)
    wait_until(lambda: SleepFlow.find(handle.run_id).sleeping_until is not None, 10,
               "the run to sleep", workers.logs)
    worker_1.send_signal(signal.SIGKILL)  # while the run sleeps
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    worker_2 = workers.start(backend, *IMPORT, "--sweep", settings=settings)
    wait_until(lambda: SleepFlow.find(handle.run_id).status is RunStatus.COMPLETED,
               recovery_bound(backend), "the run to wake and complete", workers.logs)
    assert isinstance(handle.wait(timeout=10), Success)
    assert entries(str(log)) == ["before", "after"]
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()
