"""A fan-out map whose next batch trigger died with its worker is resumed by the one-shot
``reactor sweep --import MODULE`` command (docs/fan_out.md, "Recovery"; docs/workers.md,
"Sweep cursors and dispatch leases").

Runs on Redis, MongoDB (SecantusDB wire server) and DynamoDB + SQS (moto). The map of
:class:`~tests.kill.fault_reactors.LostBatchOwner` runs 8 elements in batches of 4. Worker 1
imports :mod:`tests.kill.fault_points`: the element job that ends the first batch stores its
result, then stops its process (``SIGSTOP``) just before dispatching the second batch; the test
kills it with ``SIGKILL``, so that trigger is lost. No worker runs the sweep chain, so nothing
recovers the map until the test runs ``python -m reactor.cli sweep --import
tests.kill.fault_reactors`` once: its map sweeper finds every claimed element settled and the
rest unclaimed, claims the next batch and dispatches it (running the owner's reactor code to
resolve the elements' inputs, hence ``--import``). Worker 2 (plain) then finishes the map and
the run. Every element logs ``done:<index>`` to an ``O_APPEND`` file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor import DispatchHandle, Success, config
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import (
    ROOT,
    Backend,
    WorkerProcesses,
    kill_settings,
    marked_pid,
    stopped,
    wait_until,
)
from tests.kill.fault_reactors import LOST_BATCH_SIZE, LostBatchOwner, lost_batch_inputs
from tests.kill.reactors import entries

#: Besides the backend's lease (``kill_settings``).
SETTINGS: dict[str, object] = {
    "sweeper_interval": 1, "lock_snooze_base_delay": 0.2, "lock_snooze_jitter": 0.2,
}
COUNT = 2 * LOST_BATCH_SIZE
FAULTS = ("--import", "tests.kill.fault_points")
REACTORS = ("--import", "tests.kill.fault_reactors")


@pytest.fixture
def caller(backend: Backend) -> Iterator[Runtime]:
    """This process's runtime (it only submits the run and reads it back)."""
    runtime = config.configure(storage=backend.storage, router=backend.router,
                               **kill_settings(backend, SETTINGS))
    try:
        yield runtime
    finally:
        config.reset()


def _map_id(runtime: Runtime, run_id: str) -> str | None:
    ctx = load_context(make_env(runtime), run_id, open_secrets=False)
    ref = None if ctx is None else ctx.map_ref("m")
    return None if ref is None else ref.map_id


def _done(log: Path) -> Counter[str]:
    return Counter(line for line in entries(str(log)) if line.startswith("done:"))


def _sweep(backend: Backend, *extra: str) -> subprocess.CompletedProcess[str]:
    """``reactor sweep`` once, in its own process, as an operator runs it."""
    args = [
        sys.executable, "-m", "reactor.cli", "sweep", *extra,
        "--storage", backend.storage, "--router", backend.router,
        *[a for k, v in kill_settings(backend, SETTINGS).items()
          for a in ("--setting", f"{k}={v}")],
    ]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_lost_batch_trigger_is_recovered_by_reactor_sweep_import(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "map.log", tmp_path / "block"
    block.touch()
    handle = LostBatchOwner.run(**lost_batch_inputs(str(log), str(block), COUNT))
    assert isinstance(handle, DispatchHandle)

    settings = kill_settings(backend, SETTINGS)
    victim = workers.start(backend, *FAULTS, "--threads", "2", settings=settings)
    wait_until(lambda: marked_pid(log, "trigger-lost-pid:") == victim.pid
               and stopped(victim.pid), 120,
               "worker 1 to stop before the second batch's trigger", workers.logs)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    block.unlink()

    map_id = _map_id(caller, handle.run_id)
    assert map_id is not None
    maps = caller.storage.maps
    # The first batch settled, its trigger died: the second batch was never claimed.
    assert _done(log) == Counter(f"done:{i}" for i in range(LOST_BATCH_SIZE)), (
        entries(str(log)), workers.logs())
    assert maps.count_results(map_id) == LOST_BATCH_SIZE
    assert maps.offset(map_id) == LOST_BATCH_SIZE, (entries(str(log)), workers.logs())

    worker = workers.start(backend, *REACTORS, settings=settings)  # no --sweep
    swept = _sweep(backend, *REACTORS)
    assert swept.returncode == 0, (swept.stdout, swept.stderr)
    counts = " ".join(swept.stdout.split())  # the console may wrap the line
    assert "| maps: inspected=" in counts and counts.endswith("errors=0"), (
        swept.stdout, swept.stderr)
    assert maps.offset(map_id) == COUNT  # the sweep claimed the second batch

    wait_until(lambda: handle.status() in TERMINAL_STATUSES, 120, "the run to finish",
               workers.logs)
    result = handle.wait(timeout=5)
    assert isinstance(result, Success), (result, workers.logs())
    assert result.value == sum(range(COUNT))
    assert _done(log) == Counter(f"done:{i}" for i in range(COUNT))  # each exactly once
    assert LostBatchOwner.find(handle.run_id, runtime=caller).status is RunStatus.COMPLETED
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, workers.logs()
