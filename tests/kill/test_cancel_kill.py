"""A cancel accepted while a real worker process owns the run survives that worker's
SIGKILL (docs/run-control.md, "Cancel": every execution continuing a stored run reads the
request before any step).

Worker 1 runs :class:`~tests.kill.cancel_reactors.CancelFlow` (a -> b -> c -> d -> e) with
the default ``cancel_check_interval`` and blocks inside ``c``; this process cancels the run,
which finds the run's liveness lock held and only records the request (a ``DispatchHandle``);
worker 1 is killed before ``c``'s boundary. Worker 2 (``--sweep``) re-dispatches the run once
the lock lapsed: the recovered execution reads the request first, never runs ``c`` again nor
``d``, undoes ``b`` then ``a`` exactly once and stores the run ``cancelled``. Steps are counted
in an ``O_APPEND`` log. Redis by default; MongoDB and DynamoDB + SQS with
``REACTOR_TEST_LONG=1`` (the suite's time budget).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure
from reactor.config import Runtime
from reactor.model.keys import run_liveness_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.cancel_reactors import CancelFlow
from tests.kill.conftest import (
    LONG_BACKENDS,
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
)
from tests.kill.reactors import count, entries

IMPORT = ("--import", "tests.kill.cancel_reactors")
#: The default cancel_check_interval (1 s): a boundary reads the request at most once a second.
SETTINGS: dict[str, object] = {"sweeper_interval": 1}  # the lease: kill_settings



@pytest.mark.parametrize("backend", LONG_BACKENDS, indirect=True)
def test_a_cancel_accepted_before_the_worker_was_killed_is_carried_out_by_the_recovery(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = CancelFlow.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)
    settings = kill_settings(backend, SETTINGS)
    worker_1 = workers.start(backend, *IMPORT, settings=settings)
    wait_until(lambda: count(str(log), "start:c") == 1, 60, "worker 1 to enter step c",
               workers.logs)
    assert caller.storage.locks.held(run_liveness_key(handle.run_id))  # worker 1's

    pending = CancelFlow.cancel(handle.run_id, reason="customer left")
    assert isinstance(pending, DispatchHandle)  # accepted: the owner carries it out
    worker_1.send_signal(signal.SIGKILL)  # ...but it dies inside c, before c's boundary
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    block.unlink()
    worker_2 = workers.start(backend, *IMPORT, "--sweep", settings=settings)
    wait_until(lambda: pending.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "the run to be recovered", workers.logs)

    outcome = pending.wait(timeout=10)
    assert isinstance(outcome, Failure), (outcome, workers.logs())
    assert outcome.exception_class == "reactor.errors.RunCancelledError"
    assert "customer left" in outcome.message and outcome.rollback_failures == []
    # c was cut off on its first attempt (no trace, not compensated); nothing ran after the
    # cancel; every completed step undone exactly once, newest first
    assert entries(str(log)) == [
        "start:a", "done:a", "start:b", "done:b", "start:c", "undo:b", "undo:a",
    ]
    assert CancelFlow.find(handle.run_id).status is RunStatus.CANCELLED
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()
