"""Sweeps: the three sweepers run through the public API against the adapter (ARCHITECTURE §7).

One test per sweeper (storage-protocol.md §4.2 items 56-58): each builds the records a dead
worker leaves behind, runs the sweeper with a recording router and checks what it re-enqueued.
The module skips while ``reactor.jobs.sweepers`` does not exist.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from reactor.model.keys import map_element_key, run_liveness_key
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, context, map_metadata, step_result, uid

__all__ = ["RecordingRouter", "SweepsContract"]

if importlib.util.find_spec("reactor.jobs.sweepers") is None:  # pragma: no cover
    pytest.skip("sweepers not built yet", allow_module_level=True)

from reactor.jobs import sweepers


class RecordingRouter:
    """A :class:`reactor.ports.Router` that only records what is enqueued."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Job, float]] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Record ``job`` and its delay."""
        self.jobs.append((job, delay_seconds))
        return job.id

    def payloads(self, kind: str) -> list[dict[str, Any]]:
        """Payloads of the recorded jobs of ``kind``."""
        return [dict(job.payload) for job, _ in self.jobs if job.kind == kind]

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Nothing is ever delivered."""
        return []

    def ack(self, delivery: Delivery) -> None:
        """Unused."""

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Unused."""

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Unused."""

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Unused."""

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Always empty."""
        return []

    def close(self) -> None:
        """Nothing to release."""


class SweepsContract:
    """The sweepers find lost units on this adapter, and only those."""

    reactor_concern = "sweeps"

    def test_run_sweeper_redispatches_runs_without_a_liveness_lock(self, storage: Storage) -> None:
        lost = context(status="running")
        alive = context(status="running")
        done = context(status="completed")
        rolling = context(status="rolling_back")
        element = context(status="running", parent=lost.context_id)
        for record in (lost, alive, done, rolling, element):
            storage.contexts.save(record)
        storage.locks.acquire(run_liveness_key(alive.context_id), "worker-1", HOUR)
        router = RecordingRouter()
        counts = sweepers.sweep_runs(storage, router)
        swept = sorted(p["context_id"] for p in router.payloads("run"))
        assert swept == sorted([lost.context_id, rolling.context_id])
        assert counts.redispatched == 2 and counts.errors == 0

    def test_step_sweeper_redispatches_dispatched_units_without_a_lock(
        self, storage: Storage
    ) -> None:
        lost = step_result(uid("ctx"), "charge", status="dispatched")
        parked = step_result(
            uid("ctx"), "charge", status="dispatched", parked_until=storage.now() + HOUR
        )
        done = step_result(uid("ctx"), "charge", status="completed", outcome="1")
        for record in (lost, parked, done):
            storage.step_results.put(record)
        router = RecordingRouter()
        counts = sweepers.sweep_steps(storage, router)
        assert [p["step_context_id"] for p in router.payloads("step")] == [lost.context_id]
        assert counts.redispatched == 1

    def test_map_sweeper_redispatches_missing_elements_without_a_lock(
        self, storage: Storage
    ) -> None:
        meta = map_metadata(count=3)
        storage.maps.init(meta)
        storage.maps.put_result(meta.map_id, 0, '"done"')
        storage.locks.acquire(map_element_key(meta.map_id, 1), "worker-1", HOUR)
        router = RecordingRouter()
        counts = sweepers.sweep_maps(storage, router)
        swept = [(p["map_id"], p["index"]) for p in router.payloads("map_element")]
        assert swept == [(meta.map_id, 2)]
        assert counts.redispatched == 1


class TestSweeps(SweepsContract):
    """The sweeps contract against ``--reactor-storage``."""
