"""A rolling deploy with real ``reactor worker`` processes: v1 and v2 workers side by side,
then v1 stopped, then a v1 worker back (docs/deploys.md, "Routing by version").

Releases: tests/kill/deploy_v1.py and tests/kill/deploy_v2.py. ``Incompatible``'s v2 renamed
its completed first step, so v2 cannot continue a v1 run; ``Compatible``'s v2 only added a
step, so either release continues it. This process submits and resumes the runs under v1.

1. Two v1 workers: runs of both reactors pause at their interrupt after their first step.
2. Two v2 workers join: resumed runs and newly queued runs of ``Incompatible`` are handed
   back to the v1 workers and finish there (or pause, for the new ones).
3. The v1 workers stop: resumed and queued ``Incompatible`` runs are held ``needs_version``
   with the rule and step, their undo stacks intact; ``Compatible`` runs finish on v2.
4. A v1 worker starts again: it resumes the held runs, which finish.

No step of ``Incompatible`` ever runs under v2 (the step bodies journal which release ran
them, one file per process), no undo runs, and every first step ran exactly once.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reactor import DispatchHandle
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.model.context import Context
from reactor.model.status import RunStatus
from tests.kill.conftest import Backend, WorkerProcesses, kill_settings, wait_until
from tests.kill.deploy_journal import COMPATIBLE, INCOMPATIBLE
from tests.kill.deploy_v1 import Compatible, Incompatible

#: Seconds a phase may take (only a failing test waits this long).
BOUND = 120.0


def _stored(runtime: Runtime, run_id: str) -> Context:
    ctx = load_context(make_env(runtime), run_id, open_secrets=False)
    assert ctx is not None, run_id
    return ctx


def _all(runtime: Runtime, run_ids: list[str], status: RunStatus) -> bool:
    return all(_stored(runtime, run_id).status is status for run_id in run_ids)


def _journal(directory: Path) -> list[str]:
    return [line for path in sorted(directory.glob("*.log"))
            for line in path.read_text(encoding="utf-8").splitlines() if line]


def _resume(reactor: Any, run_ids: list[str]) -> None:
    for run_id in run_ids:
        handle = reactor.resume(run_id, payload={"ok": True}, resume="background")
        assert isinstance(handle, DispatchHandle)


def _announced(workers: WorkerProcesses, procs: list[subprocess.Popen[bytes]]) -> bool:
    return all("event=announced" in workers.log_of(proc) for proc in procs)


@pytest.mark.parametrize("backend", ["redis", "mongodb"], indirect=True)
def test_a_rolling_deploy_completes_every_run(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    directory.mkdir()
    journal = str(directory)
    settings = kill_settings(backend, {})

    def start(release: str) -> subprocess.Popen[bytes]:
        return workers.start(backend, "--import", f"tests.kill.deploy_{release}",
                             "--threads", "2", settings=settings)

    def held(run_ids: list[str]) -> bool:
        return _all(caller, run_ids, RunStatus.NEEDS_VERSION)

    # 1. v1 only: runs pause at their interrupt after their first step
    v1 = [start("v1"), start("v1")]
    first = [Incompatible.run(journal=journal).run_id for _ in range(5)]
    steady = [Compatible.run(journal=journal).run_id for _ in range(3)]
    wait_until(lambda: _all(caller, first + steady, RunStatus.PAUSED), BOUND,
               "the v1 runs to pause", workers.logs)

    # 2. v2 joins: v1 runs go to the v1 workers
    v2 = [start("v2"), start("v2")]
    wait_until(lambda: _announced(workers, v2), BOUND, "the v2 workers to announce",
               workers.logs)
    _resume(Incompatible, first[:2])
    _resume(Compatible, steady[:1])
    queued = [Incompatible.run(journal=journal).run_id for _ in range(3)]
    wait_until(lambda: _all(caller, first[:2] + steady[:1], RunStatus.COMPLETED)
               and _all(caller, queued, RunStatus.PAUSED), BOUND,
               "side by side: the resumed runs to finish, the queued ones to pause",
               workers.logs)

    # 3. the v1 workers stop: what v2 cannot continue is held with its reason
    for proc in v1:
        proc.send_signal(signal.SIGTERM)
    for proc in v1:
        assert proc.wait(timeout=BOUND) == 0, workers.logs()
    _resume(Incompatible, first[2:] + queued)
    _resume(Compatible, steady[1:])
    late = [Incompatible.run(journal=journal).run_id for _ in range(2)]
    wait_until(lambda: held(first[2:] + queued + late)
               and _all(caller, steady, RunStatus.COMPLETED), BOUND,
               "v2 alone: incompatible runs held, compatible ones finished", workers.logs)
    for run_id in first[2:] + queued:
        ctx = _stored(caller, run_id)
        reason = ctx.engine_state.needs_version
        assert reason is not None
        assert (reason.step, reason.rule, reason.status) == (
            "reserve", "completed_step_removed", "running")
        assert "reserve" in reason.reason
        assert [entry.step for entry in ctx.undo_stack] == ["reserve"]  # intact
        assert ctx.intermediate_results["reserve"] == "stock"
    for run_id in late:
        reason = _stored(caller, run_id).engine_state.needs_version
        assert reason is not None and reason.reason
        assert reason.rule in ("current_step_removed", "pending_step_rewired")

    # 4. a v1 worker again: it resumes the held runs
    start("v1")
    wait_until(lambda: _all(caller, first + queued, RunStatus.COMPLETED)
               and _all(caller, late, RunStatus.PAUSED), BOUND,
               "a v1 worker back: the held runs to finish (the late ones to pause)",
               workers.logs)
    _resume(Incompatible, late)
    wait_until(lambda: _all(caller, late, RunStatus.COMPLETED), BOUND,
               "the late runs to finish", workers.logs)

    lines = _journal(directory)
    assert not [line for line in lines if line.startswith("v2 incompatible")], lines
    assert not [line for line in lines if " undo-" in line], lines
    for run_id in first + queued + late:
        assert lines.count(f"v1 incompatible reserve {run_id}") == 1, (run_id, lines)
        assert lines.count(f"v1 incompatible charge {run_id}") == 1, (run_id, lines)
    for run_id in steady:
        ran = [line.split()[0] for line in lines if line.endswith(f"compatible finish {run_id}")
               and " incompatible " not in line]
        assert len(ran) == 1, (run_id, lines)
        assert _stored(caller, run_id).status is RunStatus.COMPLETED
    assert {INCOMPATIBLE, COMPATIBLE} == {_stored(caller, first[0]).reactor,
                                          _stored(caller, steady[0]).reactor}
