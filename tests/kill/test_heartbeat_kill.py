"""A worker SIGKILLed while its step heartbeats: the next attempt, on another worker, reads
the last heartbeat the killed one stored (docs/concepts.md, "Heartbeats").

Worker 1 runs ``kill.heartbeat``'s step, which stops at an offset and keeps heartbeating it;
once the store shows that heartbeat (written while the attempt runs, at most once a second),
worker 1 is killed with SIGKILL. Worker 2 (``--sweep``) recovers the run when worker 1's
liveness lease lapses, and its attempt starts from ``ctx.last_heartbeat``: it copies only the
offsets the killed attempt had not. Redis by default, every backend in the long mode
(``tests.kill.conftest.LONG_BACKENDS``).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from reactor import DispatchHandle, Success
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.model.status import TERMINAL_STATUSES
from tests.kill.conftest import (
    LONG_BACKENDS,
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
)
from tests.kill.heartbeat_reactors import END, STOP_AT, KillHeartbeat
from tests.kill.reactors import entries

#: Besides the backend's lease (``kill_settings``).
SETTINGS: dict[str, object] = {"sweeper_interval": 1}

IMPORT = ("--import", "tests.kill.heartbeat_reactors")


@pytest.mark.parametrize("backend", LONG_BACKENDS, indirect=True)
def test_a_worker_killed_while_its_step_heartbeats_leaves_the_last_details_to_the_next(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path,
) -> None:
    log, block = tmp_path / "copy.log", tmp_path / "block"
    block.touch()
    handle = KillHeartbeat.run(log_path=str(log), block_path=str(block))
    assert isinstance(handle, DispatchHandle)
    env = make_env(caller)
    settings = kill_settings(backend, SETTINGS)

    def stored_offset() -> object:
        stored = load_context(env, handle.run_id, open_secrets=False)
        last = None if stored is None else stored.kept_heartbeat("copy")
        return None if last is None else last.details["offset"]

    worker_1 = workers.start(backend, *IMPORT, settings=settings)
    wait_until(lambda: "stopped" in entries(str(log)), 60, "worker 1 to stop at its offset",
               workers.logs)
    # The store shows the heartbeat of the offset the attempt stopped at: written while the
    # attempt runs (the worker's executor thread, at most once a second).
    wait_until(lambda: stored_offset() == STOP_AT, 30, "the heartbeat to be stored",
               workers.logs)
    worker_1.send_signal(signal.SIGKILL)
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    block.unlink()  # a second execution never blocks anyway: "stopped" is logged once
    worker_2 = workers.start(backend, *IMPORT, "--sweep", "--threads", "2", settings=settings)
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "the run to finish", workers.logs)
    recovered = time.monotonic() - killed_at
    result = handle.wait(timeout=5)
    print(f"\n[heartbeat kill] {backend.name}: recovered {recovered:.2f}s after SIGKILL "
          f"(lease {backend.lease:g}s, sweep interval 1s)")
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()

    assert isinstance(result, Success), (result, workers.logs())
    assert result.value == {"copy": END}
    lines = entries(str(log))
    starts = [line.rsplit(":", 1)[0] for line in lines if line.startswith("start:")]
    # the first attempt started afresh; the next read the killed one's last heartbeat
    assert starts == ["start:none", f"start:{STOP_AT}:1"], lines
    copied = [int(line.split(":")[1]) for line in lines if line.startswith("copied:")]
    assert copied == list(range(END)), lines  # each offset copied once: resumed, not redone
    assert stored_offset() is None  # dropped when the step ended
