"""``reactor worker --schedules``: the worker runs a scheduler thread beside its handler
threads, and stops it with them (docs/schedules.md, "Running schedulers")."""

from __future__ import annotations

import threading
import time

from reactor import config
from reactor.jobs.worker import Worker
from reactor.model.status import RunStatus
from reactor.schedules import Schedule, list_schedules, register, unregister
from tests.schedules.reactors import Plain


def test_a_worker_with_schedules_starts_and_runs_the_ticks_then_stops_its_scheduler() -> None:
    runtime = config.configure(storage="memory://", router="local://?workers=0")
    register(Schedule(Plain, every=1, name="worker-thread-every-second"))
    worker = Worker(runtime, threads=1, poll_seconds=0.1, schedules=True)
    try:
        assert worker.scheduler is not None
        worker.scheduler.poll_seconds = 0.2
        worker.start()
        deadline = time.monotonic() + 60  # two ticks, each run by the worker: a bound only
        while True:
            (view,) = [v for v in list_schedules(runtime=runtime)
                       if v.name == "worker-thread-every-second"]
            if view.last_run_status is RunStatus.COMPLETED and view.last_tick is not None:
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
    finally:
        assert worker.stop(timeout=30)
        unregister("worker-thread-every-second")
        config.reset()
    assert not any(t.name == "reactor-scheduler" for t in threading.enumerate())
