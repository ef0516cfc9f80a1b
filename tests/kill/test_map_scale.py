"""The CI variant of the fan-out scale run (the 10,000-element figures come
from ``benchmarks/fan_out_scale.py``): a 1,000-element fan-out map and its distributed
rollback on Redis with 2 real worker processes. Every element runs once and is undone once, and
the forward and backward rates are printed (``-s``), never asserted.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reactor import DispatchHandle, Failure, config
from reactor.config import Runtime
from reactor.model import checkpoints
from reactor.model.records import MapRollbackMetadata
from reactor.model.status import TERMINAL_STATUSES
from tests.kill.conftest import Backend, WorkerProcesses, kill_settings, wait_until, with_query
from tests.kill.map_reactors import MapOwner, inputs
from tests.kill.reactors import entries

COUNT = 1000
#: Besides the backend's lease (``kill_settings``): no worker sweeps here, so a lease that
#: lapsed would leave its element to nobody.
SETTINGS: dict[str, object] = {}
#: Bounds each of the two waits, in seconds (a failing test only; the load slows both halves).
WAIT = 300.0


@pytest.fixture
def redis_backend(service_url: Callable[[str], str]) -> Backend:
    """A Redis storage and router under a fresh key prefix."""
    url = with_query(service_url("redis"), prefix=f"scale{uuid.uuid4().hex[:10]}")
    return Backend("redis", url, url)


@pytest.fixture
def caller(redis_backend: Backend) -> Iterator[Runtime]:
    runtime = config.configure(storage=redis_backend.storage, router=redis_backend.router,
                               **kill_settings(redis_backend, SETTINGS))
    try:
        yield runtime
    finally:
        config.reset()


def _rollback(runtime: Runtime, run_id: str) -> MapRollbackMetadata | None:
    """The rollback of the owner's map ``m``, once started (finished ones leave the scan)."""
    record = runtime.storage.contexts.load(run_id)
    ref = None if record is None else checkpoints.stored_document(record)[
        "composed_contexts"
    ].get("m")
    if not isinstance(ref, dict):
        return None
    return runtime.storage.map_rollbacks.metadata(str(ref["map_id"]))


@pytest.mark.timeout(2 * WAIT + 60)
def test_1000_element_map_and_its_rollback_on_redis_with_two_workers(
    redis_backend: Backend, caller: Runtime, workers: WorkerProcesses, tmp_path: Path
) -> None:
    log = tmp_path / "map.log"
    procs = [
        workers.start(redis_backend, "--import", "tests.kill.map_reactors", "--threads", "4",
                      settings=kill_settings(redis_backend, SETTINGS))
        for _ in range(2)
    ]
    started = time.monotonic()
    handle = MapOwner.run(**inputs(str(log), count=COUNT, fail_after=True))
    assert isinstance(handle, DispatchHandle)
    wait_until(lambda: _rollback(caller, handle.run_id) is not None, WAIT, "the forward map",
               workers.logs)
    forward = time.monotonic() - started
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, WAIT, "the rollback", workers.logs)
    backward = time.monotonic() - started - forward
    result = handle.wait(timeout=5)
    assert isinstance(result, Failure) and result.step_name == "after"
    assert result.rollback_failures == []
    lines = Counter(entries(str(log)))
    assert all(lines[f"done:{i}"] == 1 for i in range(COUNT))
    assert all(lines[f"undo-done:{i}"] == 1 for i in range(COUNT))
    rollback = _rollback(caller, handle.run_id)
    assert rollback is not None
    assert caller.storage.map_rollbacks.scan() == []  # finished: out of the sweep index
    summary = caller.storage.map_rollbacks.summary(rollback.map_id)
    assert summary is not None and (summary.total, summary.settled, summary.failed) == (
        COUNT, COUNT, 0
    )
    print(f"\n[fan-out scale] {COUNT} elements on redis, 2 workers x 4 threads: "
          f"forward {COUNT / forward:.0f} elements/s, rollback {COUNT / backward:.0f} elements/s")
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, workers.logs()
