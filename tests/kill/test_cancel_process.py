"""Cancelling a run that a real worker process executes (docs/run-control.md, "Cancel").

On Redis: a ``reactor worker`` process runs a five-step background run and blocks inside step
``c``; this process calls ``Reactor.cancel``, which finds the run's liveness lock held by the
worker, records the request and returns a ``DispatchHandle`` without touching the run; once
``c`` returns, the worker notices the request at that step boundary: it compensates ``c``,
undoes ``b`` then ``a`` exactly once, never starts ``d``, and stores the run ``cancelled``
with the reason. Step executions are counted in an ``O_APPEND`` log file.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, config
from reactor.config import Runtime
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from tests.kill.cancel_reactors import CancelFlow
from tests.kill.conftest import Backend, WorkerProcesses, wait_until, with_query
from tests.kill.reactors import count, entries

IMPORT = ("--import", "tests.kill.cancel_reactors")
SETTINGS: dict[str, object] = {"context_lock_ttl": 10, "cancel_check_interval": 0}


@pytest.fixture
def backend(service_url: Callable[[str], str]) -> Backend:
    """The Redis adapter, namespaced for this test."""
    url = with_query(service_url("redis"), prefix=f"cancel{uuid.uuid4().hex[:10]}")
    return Backend("redis", url, url)


@pytest.fixture
def caller(backend: Backend) -> Iterator[Runtime]:
    """This process's runtime: it starts the run and cancels it."""
    runtime = config.configure(storage=backend.storage, router=backend.router, **SETTINGS)
    try:
        yield runtime
    finally:
        config.reset()


def test_a_worker_process_notices_the_cancel_at_its_next_step_boundary(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = CancelFlow.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)
    worker = workers.start(backend, *IMPORT, settings=SETTINGS)
    wait_until(lambda: count(str(log), "start:c") == 1, 60, "the worker to enter step c",
               workers.logs)
    assert caller.storage.locks.held(run_liveness_key(handle.run_id))  # the worker's

    pending = CancelFlow.cancel(handle.run_id, reason="stop it")
    assert isinstance(pending, DispatchHandle) and pending.run_id == handle.run_id
    assert CancelFlow.find(handle.run_id).status is RunStatus.RUNNING  # not touched here
    assert entries(str(log)) == ["start:a", "done:a", "start:b", "done:b", "start:c"]

    block.unlink()  # step c returns; its boundary is where the worker notices the cancel
    wait_until(lambda: pending.status() is RunStatus.CANCELLED, 60, "the run to be cancelled",
               workers.logs)
    outcome = pending.wait(timeout=10)
    assert isinstance(outcome, Failure), (outcome, workers.logs())
    assert outcome.exception_class == "reactor.errors.RunCancelledError"
    assert "stop it" in outcome.message and outcome.rollback_failures == []
    assert entries(str(log)) == [
        "start:a", "done:a", "start:b", "done:b", "start:c", "done:c",
        "compensate:c", "undo:b", "undo:a",
    ]
    view = CancelFlow.find(handle.run_id)
    assert view.cancel is not None and view.cancel.reason == "stop it"
    assert view.undo_stack == () and "c" not in view.results
    assert "event=run_finished" in workers.log_of(worker)
    assert "status=cancelled" in workers.log_of(worker)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, workers.logs()
