"""Fan-out maps and their distributed rollback on every real adapter, in real worker processes
(docs/fan_out.md): Redis, MongoDB (SecantusDB wire server) and DynamoDB + SQS (moto).

* A 200-element fan-out map whose element 137 fails under ``atomic=True``: every completed
  element is undone exactly once and the run fails at the map with the right rollback failures
  (element 5's undo raises: reported with ``map_step`` and ``element_index``). Mid-rollback, the
  worker running element 100's undo is killed with SIGKILL; the map sweeper (a worker started
  with ``--sweep``) re-dispatches the position once the element lock lapsed, and the rollback
  finishes: element 100's undo started twice and completed once.
* A completed map undone because a later step fails, with one element's stored context deleted
  first (a forced expiry through the storage): that element is reported
  ``context_unavailable`` with its index, never silently skipped.

Workers run one handler thread each, so a kill cuts off exactly the job that blocked.

DynamoDB + SQS on moto answers each call in tens of milliseconds, so the full scenarios take
minutes there: they are soak tests, and by default they run scaled down (:data:`SMOKE`: the
same knobs on a map of two throws instead of four, failing in the second throw, with the kill
and the undo failure in the first). ``REACTOR_TEST_LONG=1`` runs the full scenarios there too
(docs/testing.md, "Running reactor's own suite").
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, RollbackFailure
from reactor.config import Runtime
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import (
    Backend,
    WorkerProcesses,
    kill_settings,
    wait_while_progressing,
)
from tests.kill.map_checks import assert_atomic_failure, undo_failure
from tests.kill.map_reactors import MapOwner, inputs
from tests.kill.reactors import entries

#: Besides the backend's lease (``kill_settings``): an element's lease must not lapse between
#: two renewals on a loaded machine, or the element runs twice.
SETTINGS: dict[str, object] = {
    "sweeper_interval": 1, "lock_snooze_base_delay": 0.2, "lock_snooze_jitter": 0.2,
}
IMPORT = ("--import", "tests.kill.map_reactors")

#: Seconds a wait may go without progress (a line in the map log), per backend: bounds a
#: failing test only. moto answers each call in tens of ms (a full scenario there takes about 3
#: minutes); on a loaded 2-core machine every round trip to the Python servers waits for the
#: CPU: the full scenario on SecantusDB took over 3 minutes at a load of 12 (about 3 s per
#: element rollback), the smoke on moto over 10 minutes at a load of 17 (5-10 s per element).
WAIT = {"redis": 300.0, "mongodb": 600.0, "dynamodb": 600.0}
#: Seconds a wait may take in all, however steadily it progresses.
CAP = {name: 3 * stall for name, stall in WAIT.items()}


def _bounded(name: str, *marks: pytest.MarkDecorator) -> object:
    """The ``backend`` parameter ``name``, its pytest timeout covering both of a scenario's
    waits."""
    return pytest.param(name, marks=[*marks, pytest.mark.timeout(2 * CAP[name] + 60)])


def _logged(log: Path) -> Callable[[], int]:
    """The scenario's progress: how many lines its elements logged so far."""
    return lambda: len(entries(str(log)))


#: Every real adapter; DynamoDB + SQS on moto is a soak test.
BACKENDS = pytest.mark.parametrize(
    "backend",
    [_bounded("redis"), _bounded("mongodb"), _bounded("dynamodb", pytest.mark.soak)],
    indirect=True,
)


@dataclass(frozen=True)
class Scenario:
    """The knobs of both scenarios (``map_reactors.inputs``); maps throw 50 elements at a time."""

    count: int  # elements of the atomic map
    fail_at: int  # its element that fails
    block_undo_at: int  # the element whose undo blocks until its worker is killed
    undo_fail_at: int  # the element whose undo raises
    completed_count: int  # elements of the completed map undone after a later step fails
    completed_undo_fail_at: int
    expire_at: int  # its element whose context is deleted before the rollback


FULL = Scenario(count=200, fail_at=137, block_undo_at=100, undo_fail_at=5,
                completed_count=80, completed_undo_fail_at=7, expire_at=42)
#: Two throws instead of four (DynamoDB's soak smoke).
SMOKE = Scenario(count=80, fail_at=57, block_undo_at=30, undo_fail_at=5,
                 completed_count=60, completed_undo_fail_at=7, expire_at=42)


def scenario(backend: Backend) -> Scenario:
    """The full scenario, but on DynamoDB only with ``REACTOR_TEST_LONG=1``."""
    if backend.name == "dynamodb" and os.environ.get("REACTOR_TEST_LONG") != "1":
        return SMOKE
    return FULL



def _blocked_pid(log: Path) -> int | None:
    for line in entries(str(log)):
        if line.startswith("blocked-pid:"):
            return int(line.split(":")[1])
    return None


@BACKENDS
def test_atomic_failure_in_a_later_throw_with_a_worker_killed_mid_rollback(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "map.log", tmp_path / "block"
    block.touch()
    knobs = scenario(backend)
    handle = MapOwner.run(**inputs(str(log), str(block), count=knobs.count,
                                   fail_at=knobs.fail_at, undo_fail_at=knobs.undo_fail_at,
                                   block_undo_at=knobs.block_undo_at))
    assert isinstance(handle, DispatchHandle)
    settings = kill_settings(backend, SETTINGS)
    procs = [workers.start(backend, *IMPORT, settings=settings) for _ in range(2)]
    wait_while_progressing(lambda: _blocked_pid(log) is not None, _logged(log),
                           WAIT[backend.name], CAP[backend.name],
                           f"element {knobs.block_undo_at}'s undo to block", workers.logs)
    victim = next(p for p in procs if p.pid == _blocked_pid(log))
    sweeper = workers.start(backend, *IMPORT, "--sweep", settings=settings)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    block.unlink()
    wait_while_progressing(lambda: handle.status() in TERMINAL_STATUSES, _logged(log),
                           WAIT[backend.name], CAP[backend.name], "the run to finish",
                           workers.logs)
    result = handle.wait(timeout=5)
    assert_atomic_failure(result, str(log), fail_at=knobs.fail_at,
                          undo_fail_at=knobs.undo_fail_at,
                          reruns=frozenset({knobs.block_undo_at}))
    assert MapOwner.find(handle.run_id, runtime=caller).status is RunStatus.FAILED
    for proc in [*procs, sweeper]:
        if proc is not victim:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, workers.logs()


@BACKENDS
def test_undo_of_a_completed_map_reports_expired_and_failed_elements(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "map.log"
    knobs = scenario(backend)
    count, undo_fails, expired = (knobs.completed_count, knobs.completed_undo_fail_at,
                                  knobs.expire_at)
    handle = MapOwner.run(**inputs(str(log), count=count, fail_after=True,
                                   undo_fail_at=undo_fails, expire_at=expired))
    assert isinstance(handle, DispatchHandle)
    # one of the two workers sweeps, as a deployment does: should an element's lease lapse
    # all the same, only a sweep re-dispatches that element
    for sweep in (("--sweep",), ()):
        workers.start(backend, *IMPORT, *sweep, settings=kill_settings(backend, SETTINGS))
    wait_while_progressing(lambda: handle.status() in TERMINAL_STATUSES, _logged(log),
                           WAIT[backend.name], CAP[backend.name], "the run to finish",
                           workers.logs)
    result = handle.wait(timeout=5)
    assert isinstance(result, Failure) and result.step_name == "after", result
    assert result.rollback_failures == [
        RollbackFailure(step="m", kind="undo", reason="context_unavailable",
                        message=f"map element {expired} context expired", map_step="m",
                        element_index=expired),
        undo_failure(undo_fails),
    ]
    lines = Counter(entries(str(log)))
    assert all(lines[f"done:{i}"] == 1 for i in range(count))
    assert all(lines[f"undo-done:{i}"] == 1 for i in range(count) if i not in (undo_fails, expired))
    assert lines[f"undo-start:{expired}"] == 0 and lines[f"undo-start:{undo_fails}"] == 1
    assert os.path.exists(log)
