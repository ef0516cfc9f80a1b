"""A worker SIGKILLed while its step heartbeats: the next attempt, on another worker, reads
the last heartbeat the killed one stored, and the run is taken over within about the step's
heartbeat limit, not the run lease or the visibility timeout (docs/concepts.md, "Heartbeats").

Worker 1 runs ``kill.heartbeat``'s step (``Timeouts(heartbeat=6)``), which stops at an offset
and keeps heartbeating it; once the store shows that heartbeat (written while the attempt
runs, at most once every 2 s), worker 1 is killed with SIGKILL. Worker 2 (``--sweep``), idle
since before the kill, takes the run over when worker 1's leases lapse: the run lock and the
job's visibility are held with 6 s leases while the step runs, though ``context_lock_ttl`` and
``visibility_timeout`` are 60 s here, so a take-over well under 60 s can only come from the
heartbeat lease. Its attempt starts from ``ctx.last_heartbeat``: it copies only the offsets
the killed attempt had not. Redis by default, every backend in the long mode
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
#: The workers' run lease and visibility: far above the step's 6 s heartbeat limit.
LONG_LEASES: dict[str, object] = {"context_lock_ttl": 60, "visibility_timeout": 60}

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
    settings = {**kill_settings(backend, SETTINGS), **LONG_LEASES}

    def stored_offset() -> object:
        stored = load_context(env, handle.run_id, open_secrets=False)
        last = None if stored is None else stored.kept_heartbeat("copy")
        return None if last is None else last.details["offset"]

    worker_1 = workers.start(backend, *IMPORT, settings=settings)
    wait_until(lambda: "stopped" in entries(str(log)), 60, "worker 1 to stop at its offset",
               workers.logs)
    # The store shows the heartbeat of the offset the attempt stopped at: written while the
    # attempt runs (the worker's executor thread, at most once every 2 s).
    wait_until(lambda: stored_offset() == STOP_AT, 30, "the heartbeat to be stored",
               workers.logs)
    # worker 2 is up and idle before the kill: the take-over time is not its start-up
    worker_2 = workers.start(backend, *IMPORT, "--sweep", "--threads", "2", settings=settings)
    wait_until(lambda: "event=worker_started" in workers.log_of(worker_2), 60,
               "worker 2 to start", workers.logs)
    worker_1.send_signal(signal.SIGKILL)
    assert worker_1.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    block.unlink()  # a second execution never blocks anyway: "stopped" is logged once
    wait_until(lambda: any(line.startswith("start:") and not line.startswith("start:none")
                           for line in entries(str(log))),
               recovery_bound(backend), "the next attempt to start", workers.logs)
    taken_over = time.monotonic() - killed_at
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "the run to finish", workers.logs)
    result = handle.wait(timeout=5)
    print(f"\n[heartbeat kill] {backend.name}: the next attempt started {taken_over:.2f}s "
          "after SIGKILL (heartbeat limit 6 s; run lease and visibility 60 s)")
    worker_2.send_signal(signal.SIGTERM)
    assert worker_2.wait(timeout=30) == 0, workers.logs()

    # well under the 60 s leases: only the 6 s heartbeat lease lets go of the run that soon
    assert taken_over < 40, (taken_over, workers.logs())
    assert isinstance(result, Success), (result, workers.logs())
    assert result.value == {"copy": END}
    lines = entries(str(log))
    starts = [line.rsplit(":", 1)[0] for line in lines if line.startswith("start:")]
    # the first attempt started afresh; the next read the killed one's last heartbeat
    assert starts == ["start:none", f"start:{STOP_AT}:1"], lines
    copied = [int(line.split(":")[1]) for line in lines if line.startswith("copied:")]
    assert copied == list(range(END)), lines  # each offset copied once: resumed, not redone
    assert stored_offset() is None  # dropped when the step ended
