"""Kill -9 a worker inside an inline map inside a composed child; the recovered run adopts
the map's stored reference (docs/workers.md, "Maps resume").

Worker 1 runs :class:`~tests.kill.inline_map_reactors.InlineShipment` and blocks inside
element 2 of 4 (elements 0 and 1 completed and stored) and is SIGKILLed; worker 2
(``--sweep``) re-dispatches the run once its liveness lock lapsed. Elements 0 and 1 never run
again, element 2 (in flight) runs again once, element 3 once; then ``ship`` fails and every
completed element is undone exactly once. Redis by default; MongoDB and DynamoDB + SQS with
``REACTOR_TEST_LONG=1`` (the suite's time budget).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure
from reactor.config import Runtime
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import (
    LONG_BACKENDS,
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
)
from tests.kill.inline_map_reactors import InlineShipment
from tests.kill.reactors import count, entries

IMPORT = ("--import", "tests.kill.inline_map_reactors")
SETTINGS: dict[str, object] = {"sweeper_interval": 1}  # the lease: kill_settings



@pytest.mark.parametrize("backend", LONG_BACKENDS, indirect=True)
def test_kill_inside_an_inline_map_in_a_child_resumes_it_and_undoes_each_element_once(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = InlineShipment.run(items=[0, 1, 2, 3], log_path=str(log), block_path=str(block),
                                fail_ship=True)
    assert isinstance(handle, DispatchHandle)
    settings = kill_settings(backend, SETTINGS)
    worker_1 = workers.start(backend, *IMPORT, settings=settings)
    wait_until(lambda: count(str(log), "start:2") == 1, 60, "worker 1 to enter element 2",
               workers.logs)
    worker_1.send_signal(signal.SIGKILL)
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    block.unlink()
    worker_2 = workers.start(backend, *IMPORT, "--sweep", settings=settings)
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "the run to be recovered", workers.logs)

    outcome = handle.wait(timeout=10)
    assert isinstance(outcome, Failure), (outcome, workers.logs())
    assert outcome.step_name == "ship" and outcome.rollback_failures == []
    lines = entries(str(log))
    assert {n: lines.count(f"done:{n}") for n in range(4)} == dict.fromkeys(range(4), 1), lines
    assert {n: lines.count(f"start:{n}") for n in range(4)} == {0: 1, 1: 1, 2: 2, 3: 1}, lines
    assert {n: lines.count(f"undo:{n}") for n in range(4)} == dict.fromkeys(range(4), 1), lines
    assert InlineShipment.find(handle.run_id).status is RunStatus.FAILED
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()
