"""``async_step`` units in real ``reactor worker`` processes (docs/workers.md, "Async steps").

* Coordination across processes (Redis): two workers contending on one ``with_lock`` key
  serialize; a semaphore of 3 never has 4 holders; a rate limit of N per window admits exactly N.
* Kill -9 (every adapter): a worker dies inside a unit's body; once the unit's liveness lock
  lapses the step sweeper re-dispatches it, the unit completes exactly once, and the parent's
  reader (parked in a worker meanwhile) gets its value. On Redis, the same with an ``async def``
  body awaiting in an async slot (``--async-slots``, docs/workers.md, "Async slots").
* SIGTERM with a body in an async slot (Redis): the worker drains it and exits 0; past
  ``--drain-timeout`` it exits 1 with the body unfinished, and the unit is recovered exactly
  once by another worker.

Unit bodies log ``start:``/``done:`` lines to an ``O_APPEND`` file shared by the processes.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, Reactor, Success, config
from reactor.config import Runtime
from reactor.engine.async_step import outcome_of
from reactor.model.status import TERMINAL_STATUSES
from tests.kill.async_reactors import (
    AsyncKillUnit,
    KillUnit,
    LockedUnit,
    PooledUnit,
    RateLimitedUnit,
)
from tests.kill.conftest import (
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
    with_query,
)
from tests.kill.reactors import count, entries

#: Besides the backend's lease (``kill_settings``).
SETTINGS: dict[str, object] = {
    "sweeper_interval": 1, "lock_snooze_base_delay": 0.1, "lock_snooze_jitter": 0.1,
}
IMPORT = ("--import", "tests.kill.async_reactors")


@pytest.fixture
def redis_backend(service_url: Callable[[str], str]) -> Backend:
    url = with_query(service_url("redis"), prefix=f"async{uuid.uuid4().hex[:10]}")
    return Backend("redis", url, url)


@contextmanager
def _runtime(backend: Backend, **extra: object) -> Iterator[Runtime]:
    runtime = config.configure(storage=backend.storage, router=backend.router,
                               **kill_settings(backend, {**SETTINGS, **extra}))
    try:
        yield runtime
    finally:
        config.reset()


def _fire(reactor: type[Reactor], n: int, log: Path) -> list[str]:
    ids = []
    for i in range(n):
        out = reactor.run(log_path=str(log), tag=f"u{i}")
        assert isinstance(out, Success) and out.run_id is not None
        ids.append(out.run_id)
    return ids


def _records(runtime: Runtime, ids: list[str]) -> list[Success | Failure | None]:
    found: list[Success | Failure | None] = []
    for run_id in ids:
        record = runtime.storage.step_results.get(run_id, "unit")
        if record is None or record.status != "completed":
            found.append(None)
            continue
        outcome = outcome_of(record)
        assert isinstance(outcome, Success | Failure)
        found.append(outcome)
    return found


def _peak(lines: list[str]) -> int:
    now = peak = 0
    for line in lines:
        now += 1 if line.startswith("start:") else -1
        peak = max(peak, now)
    return peak


def _settle(runtime: Runtime, ids: list[str], workers: WorkerProcesses) -> list[
    Success | Failure | None
]:
    wait_until(lambda: None not in _records(runtime, ids), 180, "every unit to complete",
               workers.logs)
    return _records(runtime, ids)


def _start(backend: Backend, workers: WorkerProcesses, threads: int,
           settings: dict[str, object]) -> list[object]:
    """Start two worker processes and wait until both serve (so both take part)."""
    procs: list[object] = [
        workers.start(backend, *IMPORT, "--threads", str(threads), settings=settings)
        for _ in range(2)
    ]
    wait_until(lambda: workers.logs().count("event=worker_started") == 2, 60,
               "both workers to start", workers.logs)
    return procs


def _stop(procs: list[object], workers: WorkerProcesses) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    for proc in procs:
        assert proc.wait(timeout=30) == 0, workers.logs()  # type: ignore[attr-defined]


def test_two_worker_processes_on_one_lock_serialize(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "lock.log"
    with _runtime(redis_backend) as runtime:
        procs = _start(redis_backend, workers, 2, kill_settings(redis_backend, SETTINGS))
        ids = _fire(LockedUnit, 6, log)
        outcomes = _settle(runtime, ids, workers)
        _stop(procs, workers)
        assert all(isinstance(o, Success) for o in outcomes), workers.logs()
    lines = entries(str(log))
    assert len(lines) == 12 and _peak(lines) == 1, lines


def test_a_semaphore_of_three_never_has_four_holders_across_processes(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "pool.log"
    with _runtime(redis_backend) as runtime:
        procs = _start(redis_backend, workers, 3, kill_settings(redis_backend, SETTINGS))
        ids = _fire(PooledUnit, 10, log)
        outcomes = _settle(runtime, ids, workers)
        _stop(procs, workers)
        assert all(isinstance(o, Success) for o in outcomes), workers.logs()
    lines = entries(str(log))
    assert len(lines) == 20 and 1 <= _peak(lines) <= 3, lines


def test_a_rate_limit_of_n_admits_exactly_n_across_processes(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "rate.log"
    # a refused unit gives up at once
    settings = kill_settings(redis_backend, {**SETTINGS, "lock_snooze_max_attempts": 0})
    with _runtime(redis_backend, lock_snooze_max_attempts=0) as runtime:
        procs = _start(redis_backend, workers, 2, settings)
        ids = _fire(RateLimitedUnit, 10, log)
        outcomes = _settle(runtime, ids, workers)
        _stop(procs, workers)
    assert sum(isinstance(o, Success) for o in outcomes) == 4, workers.logs()
    refused = [o for o in outcomes if isinstance(o, Failure)]
    assert len(refused) == 6
    assert all("SnoozeLimitError" in (o.exception_class or "") for o in refused)
    assert sum(line.startswith("done:") for line in entries(str(log))) == 4


def test_kill_9_inside_a_unit_body_sweeper_recovers_it_exactly_once(
    backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    _kill_inside_a_unit_body(backend, workers, tmp_path, KillUnit, ())


def test_kill_9_inside_an_async_body_in_a_slot_sweeper_recovers_it_exactly_once(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    _kill_inside_a_unit_body(redis_backend, workers, tmp_path, AsyncKillUnit,
                             ("--async-slots", "4"))


def _kill_inside_a_unit_body(
    backend: Backend, workers: WorkerProcesses, tmp_path: Path, reactor: type[Reactor],
    options: tuple[str, ...],
) -> None:
    log, block = tmp_path / "unit.log", tmp_path / "block"
    block.touch()
    with _runtime(backend) as runtime:
        handle = reactor.run(log_path=str(log), block_path=str(block))
        assert isinstance(handle, DispatchHandle)
        settings = kill_settings(backend, SETTINGS)
        worker_1 = workers.start(backend, *IMPORT, *options, settings=settings)
        wait_until(lambda: count(str(log), "start:unit") == 1, 60,
                   "worker 1 to block in the unit", workers.logs)
        worker_2 = workers.start(backend, *IMPORT, "--sweep", "--threads", "2", *options,
                                 settings=settings)
        worker_1.send_signal(signal.SIGKILL)
        assert worker_1.wait(timeout=10) == -signal.SIGKILL
        killed_at = time.monotonic()
        block.unlink()
        wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
                   "the run to finish", workers.logs)
        print(f"\n[kill timing] async unit on {backend.name}: recovered "
              f"{time.monotonic() - killed_at:.2f}s after SIGKILL")
        result = handle.wait(timeout=5)
        assert result == Success("read captured", run_id=handle.run_id), workers.logs()
        record = runtime.storage.step_results.get(handle.run_id, "unit")
        assert record is not None and record.status == "completed"
        worker_2.send_signal(signal.SIGTERM)
        assert worker_2.wait(timeout=30) == 0, workers.logs()
        if options:  # both workers ran with the options asked (async slots)
            started = [log.read_text(errors="replace")
                       for log in sorted(workers.log_dir.glob("worker-*.log"))]
            assert len(started) == 2, workers.logs()
            assert all(f"async_slots={options[-1]} " in text for text in started), started
    lines = entries(str(log))
    # the body cut off by the kill started twice; it completed exactly once
    assert lines.count("start:unit") == 2 and lines.count("done:unit") == 1, lines
    assert lines.count("start:reader") == 1


def test_sigterm_drains_a_body_in_an_async_slot_and_exits_0(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "unit.log", tmp_path / "block"
    block.touch()
    with _runtime(redis_backend) as runtime:
        handle = AsyncKillUnit.run(log_path=str(log), block_path=str(block))
        assert isinstance(handle, DispatchHandle)
        worker = workers.start(redis_backend, *IMPORT, "--async-slots", "4",
                               settings=kill_settings(redis_backend, SETTINGS))
        wait_until(lambda: count(str(log), "start:unit") == 1, 60,
                   "the worker to block in the unit", workers.logs)
        worker.send_signal(signal.SIGTERM)
        wait_until(lambda: "event=worker_stopping" in workers.logs(), 30, "the stop signal",
                   workers.logs)
        assert worker.poll() is None  # still draining the body in its slot
        block.unlink()
        assert worker.wait(timeout=30) == 0, workers.logs()
        record = runtime.storage.step_results.get(handle.run_id, "unit")
        assert record is not None and record.status == "completed"
        assert outcome_of(record) == Success("captured")
    lines = entries(str(log))
    assert lines.count("start:unit") == 1 and lines.count("done:unit") == 1, lines


def test_sigterm_past_the_drain_timeout_leaves_a_slot_unit_recoverable(
    redis_backend: Backend, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log, block = tmp_path / "unit.log", tmp_path / "block"
    block.touch()
    with _runtime(redis_backend):
        handle = AsyncKillUnit.run(log_path=str(log), block_path=str(block))
        assert isinstance(handle, DispatchHandle)
        settings = kill_settings(redis_backend, SETTINGS)
        worker_1 = workers.start(redis_backend, *IMPORT, "--async-slots", "4",
                                 "--drain-timeout", "1", settings=settings)
        wait_until(lambda: count(str(log), "start:unit") == 1, 60,
                   "worker 1 to block in the unit", workers.logs)
        worker_1.send_signal(signal.SIGTERM)
        assert worker_1.wait(timeout=30) == 1, workers.logs()  # the body was still running
        worker_2 = workers.start(redis_backend, *IMPORT, "--sweep", "--async-slots", "4",
                                 settings=settings)
        wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(redis_backend),
                   "the run to finish", workers.logs)
        assert handle.wait(timeout=5) == Success("read captured", run_id=handle.run_id)
        worker_2.send_signal(signal.SIGTERM)
        assert worker_2.wait(timeout=30) == 0, workers.logs()
    lines = entries(str(log))
    # the first body never finished (its process exited); the recovery completed it once
    assert lines.count("start:unit") == 2 and lines.count("done:unit") == 1, lines
