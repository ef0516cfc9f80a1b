"""Sweeps: the three sweepers run through the public API against the adapter (ARCHITECTURE §7).

One test per sweeper (storage-protocol.md §4.2 items 56-58): each builds the records a dead
worker leaves behind, runs the sweeper with a recording router and checks what it re-enqueued.
Then the sweeps that scale and drain (docs/workers.md, "Sweep cursors and dispatch leases"):
settled maps never starve a lost element, every sweeper resumes from its cursor across ticks,
and a unit re-dispatched within its dispatch lease is not enqueued again until the lease lapses
(made to lapse through the probe, never by sleeping).
The module skips while ``reactor.jobs.sweepers`` does not exist.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from reactor.model.keys import map_element_key, run_liveness_key, sweep_dispatch_key
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor.ports.storage import Storage
from reactor_contract._support import (
    HOUR,
    context,
    map_metadata,
    rollback_metadata,
    step_result,
    uid,
)
from reactor_contract.probe import Probe

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

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """``(kind, payload)`` of every recorded job, forgetting them."""
        taken = [(job.kind, dict(job.payload)) for job, _ in self.jobs]
        self.jobs.clear()
        return taken

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

    # -- sweeps that scale: cursors ---------------------------------------------------------

    def test_settled_maps_past_the_limit_never_starve_a_lost_element(
        self, storage: Storage
    ) -> None:
        limit = 3
        for _ in range(limit + 2):  # more settled maps than one sweep inspects
            settled = map_metadata(count=1)
            storage.maps.init(settled)
            storage.maps.put_result(settled.map_id, 0, '"done"')
            storage.maps.claim_owner_signal(settled.map_id)  # the collector resumed the owner
        lost = map_metadata(f"zz-{uid('map')}", count=2, created_at=1_700_000_100.0)
        storage.maps.init(lost)
        storage.maps.put_result(lost.map_id, 0, '"done"')  # element 1 died with its worker
        router = RecordingRouter()
        bound = -(-(limit + 3) // limit) + 1  # one whole pass over every map ever stored, + 1
        for _tick in range(bound):
            sweepers.sweep_maps(storage, router, limit=limit)
            if router.payloads("map_element"):
                break
        swept = [(p["map_id"], p["index"]) for p in router.payloads("map_element")]
        assert swept == [(lost.map_id, 1)]

    @pytest.mark.parametrize("sweeper", ["runs", "steps", "maps", "map_rollbacks"])
    def test_a_sweeper_resumes_from_its_cursor_across_ticks(
        self, storage: Storage, sweeper: str
    ) -> None:
        units = _lost_units(storage, sweeper, 5)
        router = RecordingRouter()
        for _tick in range(3):  # ceil(5 / 2): one pass
            _sweep(storage, router, sweeper, limit=2)
        swept = [_unit_of(kind, payload) for kind, payload in router.take()]
        assert sorted(swept) == sorted(units)  # each once: no tick re-read an earlier page
        _sweep(storage, router, sweeper, limit=2)  # the next pass starts over, within leases
        assert router.take() == []

    # -- sweeps that drain: dispatch leases --------------------------------------------------

    @pytest.mark.parametrize(
        "unit_kind", ["run", "step", "map_element", "map_collect", "map_rollback"]
    )
    def test_a_second_sweep_within_the_dispatch_lease_enqueues_nothing(
        self, storage: Storage, probe: Probe, unit_kind: str
    ) -> None:
        sweeper = {"run": "runs", "step": "steps", "map_rollback": "map_rollbacks"}.get(
            unit_kind, "maps"
        )
        (unit,) = _lost_units(storage, sweeper, 1, collect=unit_kind == "map_collect")
        router = RecordingRouter()
        _sweep(storage, router, sweeper)
        assert [_unit_of(k, p) for k, p in router.take()] == [unit]
        _sweep(storage, router, sweeper)  # its job may merely still be queued
        _sweep(storage, router, sweeper)
        assert router.take() == []
        probe.expire("period", sweep_dispatch_key(unit))  # the first re-dispatch's lease lapses
        _sweep(storage, router, sweeper)
        assert [_unit_of(k, p) for k, p in router.take()] == [unit]


def _lost_units(storage: Storage, sweeper: str, n: int, *, collect: bool = False) -> list[str]:
    """Store ``n`` units a dead worker left behind for ``sweeper``; returns their unit names
    (docs/workers.md, "Sweep cursors and dispatch leases")."""
    units: list[str] = []
    for _ in range(n):
        if sweeper == "runs":
            record = context(status="running")
            storage.contexts.save(record)
            units.append(f"run:{record.context_id}")
        elif sweeper == "steps":
            result = step_result(uid("ctx"), "charge", status="dispatched")
            storage.step_results.put(result)
            units.append(f"step:{result.context_id}:charge")
        elif sweeper == "maps":
            meta = map_metadata(count=1)
            storage.maps.init(meta)
            if collect:  # every slot is there but the collector died
                storage.maps.put_result(meta.map_id, 0, '"done"')
                units.append(f"map_collect:{meta.map_id}")
            else:
                units.append(f"map_element:{meta.map_id}:0")
        else:
            rollback = rollback_metadata(uid("map"), total=1, batch_size=1)
            storage.map_rollbacks.start(rollback)
            assert list(storage.map_rollbacks.claim_positions(rollback.map_id, 1)) == [0]
            units.append(f"map_rollback:{rollback.map_id}:0")
    return units


def _sweep(storage: Storage, router: RecordingRouter, sweeper: str, *, limit: int = 1000) -> None:
    if sweeper == "runs":
        sweepers.sweep_runs(storage, router, limit=limit)
    elif sweeper == "steps":
        sweepers.sweep_steps(storage, router, limit=limit)
    else:
        sweepers.sweep_maps(storage, router, limit=limit)


def _unit_of(kind: str, payload: dict[str, Any]) -> str:
    """The unit name of a re-enqueued job."""
    if kind == "run":
        return f"run:{payload['context_id']}"
    if kind == "step":
        return f"step:{payload['step_context_id']}:{payload['step_name']}"
    if kind == "map_element":
        return f"map_element:{payload['map_id']}:{payload['index']}"
    if kind == "map_collect":
        return f"map_collect:{payload['map_id']}"
    if kind == "map_element_rollback":
        return f"map_rollback:{payload['map_id']}:{payload['position']}"
    raise AssertionError(f"unexpected job kind {kind!r}")


class TestSweeps(SweepsContract):
    """The sweeps contract against ``--reactor-storage``."""
