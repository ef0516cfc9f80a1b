"""Kill -9 a worker inside a composed child; the recovered run resumes the embedded child
(``reactor.engine.compose``; docs/workers.md, "Composed children resume").

Same setup as ``test_kill.py`` (Redis, MongoDB, DynamoDB + SQS; the backend's generous
``context_lock_ttl``, 1 s sweeps). Worker 1 blocks inside child step ``b`` after ``a`` was
checkpointed and is SIGKILLed; worker 2 (``--sweep``) resumes the run. Executions are counted
in an ``O_APPEND`` log file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, Success
from reactor.config import Runtime
from reactor.model.status import RunStatus
from tests.kill.conftest import Backend, WorkerProcesses
from tests.kill.reactors import KillCompose, KillComposeFails, entries
from tests.kill.test_kill import _kill_and_recover, caller

__all__ = ["caller"]


def test_kill_inside_a_composed_child_resumes_it(
    request: pytest.FixtureRequest,
    backend: Backend,
    caller: Runtime,
    workers: WorkerProcesses,
    tmp_path: Path,
) -> None:
    log, block = tmp_path / "steps.log", tmp_path / "block"
    block.touch()
    handle = KillCompose.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    result = _kill_and_recover(request, backend, workers, handle, log, block, "start:b")

    assert isinstance(result, Success), (result, workers.logs())
    lines = entries(str(log))
    steps = ("reserve", "a", "b", "c", "ship")
    # a completed (and was checkpointed) before the kill: never run again; b was in flight.
    assert {s: lines.count(f"done:{s}") for s in steps} == dict.fromkeys(steps, 1)
    assert {s: lines.count(f"start:{s}") for s in steps} == {
        "reserve": 1, "a": 1, "b": 2, "c": 1, "ship": 1}
    assert not any(line.startswith("undo") for line in lines)
    view = KillCompose.find(handle.run_id, runtime=caller)
    assert view.status is RunStatus.COMPLETED
    assert view.children["pay"].status is RunStatus.COMPLETED


def test_kill_inside_a_composed_child_that_fails_undoes_each_step_once(
    request: pytest.FixtureRequest,
    backend: Backend,
    caller: Runtime,
    workers: WorkerProcesses,
    tmp_path: Path,
) -> None:
    log, block = tmp_path / "undo.log", tmp_path / "block"
    block.touch()
    handle = KillComposeFails.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)

    result = _kill_and_recover(request, backend, workers, handle, log, block, "start:b")

    assert isinstance(result, Failure), (result, workers.logs())
    assert result.step_name == "pay" and result.rollback_failures == []
    lines = entries(str(log))
    steps = ("reserve", "a", "b", "c")
    assert {s: lines.count(f"done:{s}") for s in steps} == dict.fromkeys(steps, 1)
    assert lines.count("start:a") == 1 and lines.count("start:d") == 1
    # every completed step (child and parent) undone exactly once: nothing leaks
    assert {s: lines.count(f"undo-done:{s}") for s in steps} == dict.fromkeys(steps, 1)
    view = KillComposeFails.find(handle.run_id, runtime=caller)
    assert view.status is RunStatus.FAILED
    assert view.children["pay"].status is RunStatus.FAILED
