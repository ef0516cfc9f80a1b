"""Fan-out maps and their distributed rollback on the memory adapter with worker threads
(the memory row; the real adapters run the same scenario in
``tests/kill/test_map_kill.py``).

A :class:`LocalRouter` served by in-process :class:`Worker` threads: the owner run, the element
jobs, the collector and the element-rollback jobs all go through the router. A killed worker is
simulated by a router that loses one job (what a dead process does to the job it held): the map
sweeper finds the claimed position without an outcome and without a live element lock and
re-dispatches it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor import DispatchHandle, Failure, RunStatus, Success, config
from reactor.config import Runtime
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.results import RollbackFailure
from reactor.model.secrets import generate_key
from reactor.ports.router import Job
from tests.kill.conftest import wait_until
from tests.kill.map_checks import assert_atomic_137, assert_undone_once, undo_failure
from tests.kill.map_reactors import MapOwner, inputs
from tests.kill.reactors import entries

SETTINGS: dict[str, Any] = {"lock_snooze_base_delay": 0.05, "lock_snooze_jitter": 0.05}


class LosingRouter:
    """A :class:`LocalRouter` that loses the first job matching ``lose`` (a dead worker)."""

    def __init__(self, inner: LocalRouter, lose: Any) -> None:
        self.inner = inner
        self.lose = lose
        self.lost: list[Job] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        if not self.lost and self.lose(job):
            self.lost.append(job)
            return "lost"
        return self.inner.enqueue(job, delay_seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    rt = config.configure(storage=MemoryStorage(), router=LocalRouter(visibility_timeout=30),
                          **SETTINGS)
    yield rt
    config.reset()


@pytest.fixture
def worker(runtime: Runtime) -> Iterator[Worker]:
    w = Worker(runtime, threads=4, poll_seconds=0.02, liveness_wait=0.5)
    w.start()
    yield w
    assert w.stop(timeout=10)


def _finish(handle: Any) -> Success | Failure:
    assert isinstance(handle, DispatchHandle)
    return handle.wait(timeout=60)


def test_200_elements_atomic_failure_at_137_undoes_every_completed_element_once(
    worker: Worker, tmp_path: Path
) -> None:
    log = str(tmp_path / "map.log")
    result = _finish(MapOwner.run(**inputs(log, fail_at=137, undo_fail_at=5)))
    assert_atomic_137(result, log)
    assert MapOwner.find(result.run_id or "").status is RunStatus.FAILED


def test_completed_map_is_undone_distributed_when_a_later_step_fails(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    log = str(tmp_path / "map.log")
    result = _finish(MapOwner.run(**inputs(log, fail_after=True, undo_fail_at=7, expire_at=42)))
    assert isinstance(result, Failure) and result.step_name == "after"
    assert result.rollback_failures == [
        RollbackFailure(step="m", kind="undo", reason="context_unavailable",
                        message="map element 42 context expired", map_step="m",
                        element_index=42),
        undo_failure(7),
    ]
    lines = Counter(entries(log))
    assert {lines[f"done:{i}"] for i in range(200)} == {1}
    assert all(lines[f"undo-done:{i}"] == 1 for i in range(200) if i not in (7, 42))
    assert lines["undo-start:42"] == 0 and lines["undo-start:7"] == 1
    assert runtime.storage.map_rollbacks.scan() == []  # finished: out of the sweep index
    heads = runtime.storage.documents.scan("map_rollbacks")  # type: ignore[attr-defined]
    assert len(heads) == 1 and heads[0][1]["meta"]["total"] == 200


def test_owner_hands_off_as_rolling_back_and_the_last_job_resumes_it(
    runtime: Runtime, tmp_path: Path
) -> None:
    log = str(tmp_path / "map.log")
    handle = MapOwner.run(**inputs(log, count=12, fail_after=True))
    assert isinstance(handle, DispatchHandle)
    w = Worker(runtime, poll_seconds=0.01, liveness_wait=0.0)
    statuses: set[RunStatus] = set()
    while handle.status() not in (RunStatus.FAILED, RunStatus.COMPLETED):
        assert w.run_pending(max_jobs=1) == 1
        statuses.add(handle.status())
    assert RunStatus.ROLLING_BACK in statuses
    assert isinstance(handle.wait(timeout=1), Failure)
    assert_undone_once(log)


def test_a_lost_rollback_job_is_recovered_by_the_map_sweeper(tmp_path: Path) -> None:
    inner = LocalRouter(visibility_timeout=30)
    router = LosingRouter(
        inner, lambda job: job.kind == "map_element_rollback" and job.payload["position"] == 60
    )
    # a wrapped router is not in-process: a worker there needs a key for the test session's
    # reactors with secrets (docs/security.md, "When a key is wrong or missing")
    rt = config.configure(storage=MemoryStorage(), router=router,  # type: ignore[arg-type]
                          secret_keys=[generate_key()], **SETTINGS)
    w = Worker(rt, threads=4, poll_seconds=0.02, liveness_wait=0.5)
    w.start()
    try:
        log = str(tmp_path / "map.log")
        handle = MapOwner.run(**inputs(log, fail_at=137, undo_fail_at=5))
        assert isinstance(handle, DispatchHandle)
        wait_until(lambda: bool(router.lost), 30, "the rollback job of position 60 to be lost")
        wait_until(lambda: inner.size() == 0 and w.in_flight == 0, 30, "the queue to drain")
        assert handle.status() is RunStatus.ROLLING_BACK  # stuck until the sweeper acts
        counts = run_sweeps(rt)
        assert counts.maps is not None and counts.maps.rollback_redispatched == 1
        assert_atomic_137(handle.wait(timeout=30), log)
    finally:
        assert w.stop(timeout=10)
        config.reset()
