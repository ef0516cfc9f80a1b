"""Three scheduler processes, one SIGKILLed mid-tick, a schedule every second: exactly one
run per tick, none missed (docs/schedules.md, "How a tick becomes one run").

Three ``reactor schedules run`` processes and one ``reactor worker`` run
:mod:`tests.kill.schedule_reactors` (``every=1``, ``catchup="all"``, ``overlap="allow"``).
Each run appends its tick to a log. A few seconds in, one scheduler is killed with SIGKILL
just after a second begins, while the schedulers settle that tick; the other two go on. At
the end the schedulers are stopped, this process settles what is left (a pass of its own),
and every tick from the schedule's first to its last settled one is in the log exactly once.
The smoke runs 15 s on Redis and PostgreSQL; ``REACTOR_TEST_LONG=1`` runs a minute on every
backend (docs/testing.md, "Running reactor's own suite").
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from reactor.config import Runtime
from reactor.model.status import RunStatus
from reactor.schedules import Scheduler, tick_text
from reactor.schedules.records import ScheduleState, schedule_store
from tests.kill.conftest import (
    LONG_BACKENDS,
    ROOT,
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
)
from tests.kill.schedule_reactors import LOG_VARIABLE, Tick, every_second

LONG = os.environ.get("REACTOR_TEST_LONG") == "1"
#: Seconds the schedule runs: a smoke in the default suite, a minute in the long mode.
DURATION = 60.0 if LONG else 15.0
IMPORT = ("--import", "tests.kill.schedule_reactors")
SETTINGS: dict[str, object] = {"sweeper_interval": 1}
NAME = "kill-every-second"


def _start(workers: WorkerProcesses, backend: Backend, log: Path, *command: str) -> (
    subprocess.Popen[bytes]
):
    """A ``reactor`` process (``command``) on ``backend`` with the tick log in its
    environment."""
    os.environ[LOG_VARIABLE] = str(log)
    try:
        args = [
            sys.executable, "-m", "reactor.cli", *command, *IMPORT,
            "--storage", backend.storage, "--router", backend.router,
            *[a for k, v in kill_settings(backend, SETTINGS).items()
              for a in ("--setting", f"{k}={v}")],
        ]
        env = {k: v for k, v in os.environ.items()
               if k not in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL")}
        out = open(workers.log_dir / f"worker-{len(workers.procs) + 1}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        workers.procs.append(proc)
        return proc
    finally:
        del os.environ[LOG_VARIABLE]


def _state(runtime: Runtime) -> ScheduleState | None:
    record = schedule_store(runtime.storage).get(NAME)
    return None if record is None else ScheduleState.from_document(NAME, record.document)


@pytest.mark.parametrize("backend", sorted({"redis", "postgres", *LONG_BACKENDS}),
                         indirect=True)
@pytest.mark.timeout(900)
def test_three_schedulers_one_killed_mid_tick_make_one_run_per_tick(
    backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "ticks.log"
    worker = _start(workers, backend, log, "worker", "--threads", "4", "--sweep")
    schedulers = [_start(workers, backend, log, "schedules", "run", "--poll", "0.5")
                  for _ in range(3)]

    def settled() -> int:
        return workers.logs().count("event=schedule_tick schedule=kill-every-second")

    wait_until(lambda: settled() >= 3, 120, "the schedulers to settle their first ticks",
               workers.logs)
    started = time.time()
    time.sleep(min(5.0, DURATION / 3))
    time.sleep(math.ceil(time.time()) - time.time() + 0.01)  # just after a tick: mid-tick
    victim = schedulers[0]
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    time.sleep(max(DURATION - (time.time() - started), 0.0))
    for scheduler in schedulers[1:]:
        scheduler.send_signal(signal.SIGTERM)
    for scheduler in schedulers[1:]:
        assert scheduler.wait(timeout=60) == 0, workers.logs()
    # what the schedulers left (a decision pending, ticks due since): settled here
    Scheduler(caller, schedules=[every_second(str(log))]).tick()
    state = _state(caller)
    assert state is not None and state.pending is None and state.last is not None
    first, last = math.floor(state.created_at) + 1, state.cursor
    ticks = [tick_text(float(t)) for t in range(int(first), int(last) + 1)]
    assert len(ticks) >= DURATION - 2
    assert state.last_run_id is not None
    wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= len(ticks),
               recovery_bound(backend), "every tick's run to run", workers.logs)
    wait_until(lambda: Tick.find(state.last_run_id or "").status is RunStatus.COMPLETED,
               recovery_bound(backend), "the last run to complete", workers.logs)
    seen = Counter(log.read_text().splitlines())
    assert [t for t in ticks if seen[t] != 1] == [], (seen, workers.logs())
    assert set(seen) == set(ticks)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, workers.logs()
