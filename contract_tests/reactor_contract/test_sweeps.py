"""Sweeps: the three sweepers run through the public API against the adapter
(docs/contract-suite.md).

One test per sweeper: each builds the records a dead
worker leaves behind, runs the sweeper with a recording router and checks what it re-enqueued.
Then the sweeps that scale and drain (docs/workers.md, "Sweep cursors and dispatch leases"):
settled maps never starve a lost element, every sweeper resumes from its cursor across ticks,
and a unit re-dispatched within its dispatch lease is not enqueued again until the lease lapses
(made to lapse through the probe, never by sleeping).
The module skips while ``reactor.jobs.sweepers`` does not exist.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from reactor.jobs import sweepers
from reactor.memory.clock import ManualClock
from reactor.model.keys import (
    map_element_key,
    run_liveness_key,
    step_liveness_key,
    sweep_dispatch_key,
)
from reactor.model.records import RollbackOutcome
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor.ports.storage import Storage, SweepCursorStore
from reactor_contract._support import (
    CONTEXT_TTL,
    HOUR,
    context,
    map_metadata,
    rollback_metadata,
    step_result,
    teach,
    uid,
)
from reactor_contract.probe import ClockProbe, Probe

__all__ = ["RecordingRouter", "SweepsContract"]

_SWEEPS_DOC = 'docs/workers.md, "Sweep cursors and dispatch leases"'
_CURSORS_DOC = 'docs/protocol.md, "Sweep cursors"'
_SWEEPERS = ("runs", "steps", "maps", "map_rollbacks")
UNDONE = RollbackOutcome(index=None, outcome="undone")


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

    @pytest.mark.obligations("O-sweeps-1")
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

    @pytest.mark.obligations("O-sweeps-2")
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

    @pytest.mark.obligations("O-sweeps-4")
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

    # -- due vs not due, liveness held vs lapsed --------------------------------------------

    @pytest.mark.obligations("O-sweeps-2", "O-sweeps-3")
    def test_step_sweeper_honours_parked_until_both_ways(
        self, storage: Storage
    ) -> None:
        now = storage.now()
        due = step_result(uid("ctx"), "charge", status="dispatched", parked_until=now - 60,
                          contention_attempts=4)
        parked = step_result(uid("ctx"), "charge", status="dispatched", parked_until=now + HOUR)
        for record in (due, parked):
            storage.step_results.put(record)
        router = RecordingRouter()
        sweepers.sweep_steps(storage, router, lease=None)
        swept = router.payloads("step")
        assert [p["step_context_id"] for p in swept] == [due.context_id], teach(
            "sweeps",
            "a dispatched step whose parked_until has passed is due and re-dispatched; one "
            "parked until a future instant is not",
            "a step-result scan that loses parked_until, or stores it in another unit",
            _SWEEPS_DOC,
        )
        assert swept[0]["contention_attempts"] == 4, teach(
            "sweeps",
            "a swept park carries its contention_attempts forward (the park cap still holds)",
            "a step-result scan whose rows drop contention_attempts",
            _SWEEPS_DOC,
        )

    @pytest.mark.obligations("O-sweeps-6")
    @pytest.mark.parametrize("sweeper", ["runs", "steps", "maps"])
    def test_a_held_liveness_lock_protects_the_unit_until_it_lapses(
        self, storage: Storage, probe: Probe, sweeper: str
    ) -> None:
        (unit,) = _lost_units(storage, sweeper, 1)
        lock = _liveness_key(unit)
        assert storage.locks.acquire(lock, "worker-1", HOUR)
        router = RecordingRouter()
        _sweep(storage, router, sweeper, lease=None)
        assert router.take() == [], teach(
            "sweeps",
            f"a unit whose liveness lock {lock!r} is held is alive and never re-dispatched",
            "locks.held() that reports a live lock as free",
            _SWEEPS_DOC,
        )
        probe.expire("lock", lock)  # the worker died: its liveness lock lapses
        _sweep(storage, router, sweeper, lease=None)
        assert [_unit_of(k, p) for k, p in router.take()] == [unit], teach(
            "sweeps",
            "once the liveness lock lapses the unit is lost and the next sweep re-dispatches it",
            "locks.held() that ignores the lock's expiry (a lapsed lock still reads as held)",
            _SWEEPS_DOC,
        )

    @pytest.mark.obligations("O-sweeps-5")
    def test_the_rollback_sweeper_redispatches_claimed_positions_without_an_outcome(
        self, storage: Storage
    ) -> None:
        rollback = rollback_metadata(uid("map"), total=4, batch_size=2)
        storage.map_rollbacks.start(rollback)
        assert list(storage.map_rollbacks.claim_positions(rollback.map_id, 2)) == [0, 1]
        storage.map_rollbacks.put_outcome(rollback.map_id, 0, UNDONE)
        router = RecordingRouter()
        sweepers.sweep_maps(storage, router, lease=None)
        assert [_unit_of(k, p) for k, p in router.take()] == [
            f"map_rollback:{rollback.map_id}:1"
        ], teach(
            "sweeps",
            "only claimed rollback positions without an outcome are lost",
            "outcome_positions() missing a stored outcome, or the offset read wrong",
            _SWEEPS_DOC,
        )
        storage.map_rollbacks.put_outcome(rollback.map_id, 1, UNDONE)
        sweepers.sweep_maps(storage, router, lease=None)  # the next batch's trigger was lost
        assert [_unit_of(k, p) for k, p in router.take()] == [
            f"map_rollback:{rollback.map_id}:2", f"map_rollback:{rollback.map_id}:3"
        ]
        assert storage.map_rollbacks.offset(rollback.map_id) == 4

    # -- racing sweepers ----------------------------------------------------------------------

    @pytest.mark.obligations("O-sweeps-7")
    @pytest.mark.parametrize("sweeper", ["runs", "steps", "maps", "map_rollbacks"])
    def test_racing_sweepers_redispatch_each_lost_unit_once(
        self, storage: Storage, sweeper: str
    ) -> None:
        units = _lost_units(storage, sweeper, 6)
        routers = [RecordingRouter() for _ in range(4)]
        errors: list[BaseException] = []
        start = threading.Barrier(len(routers))

        def sweep(router: RecordingRouter) -> None:
            try:
                start.wait()
                _sweep(storage, router, sweeper)
            except BaseException as exc:  # reported below, with the test's name
                errors.append(exc)

        threads = [threading.Thread(target=sweep, args=(r,)) for r in routers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        swept = [_unit_of(k, p) for router in routers for k, p in router.take()]
        assert sorted(swept) == sorted(units), teach(
            "sweeps",
            "sweepers racing over the same lost units re-dispatch each unit exactly once "
            f"(dispatch leases); got {sorted(swept)}",
            "periods.mark() that is not mark-if-absent under concurrency (two racers both win)",
            _SWEEPS_DOC,
        )

    # -- settled units leave the index ---------------------------------------------------------

    @pytest.mark.obligations("O-sweeps-8")
    @pytest.mark.parametrize("sweeper", ["runs", "steps", "maps", "map_rollbacks"])
    def test_settled_units_leave_the_sweep_index(self, storage: Storage, sweeper: str) -> None:
        units = _lost_units(storage, sweeper, 3)
        for unit in units:
            _settle(storage, unit)
        router = RecordingRouter()
        counts = _sweep(storage, router, sweeper, lease=None)
        assert router.take() == [] and counts.inspected == 0, teach(
            "sweeps",
            f"settled units are no longer listed by the sweeper's scan (inspected "
            f"{counts.inspected} of {len(units)} settled units)",
            "a status index or scan that keeps finished records (the scan must filter by "
            "status before the limit, and settling must leave the index)",
            _SWEEPS_DOC,
        )

    # -- sweeps that scale: cursors ---------------------------------------------------------

    @pytest.mark.obligations("O-sweeps-8", "O-sweeps-9")
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

    @pytest.mark.obligations("O-sweeps-10")
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

    @pytest.mark.obligations("O-sweeps-4", "O-sweeps-11")
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

    # -- the sweep cursor store (optional: a storage without it keeps cursors in memory) -------

    def _cursors(self, storage: Storage) -> SweepCursorStore | None:
        """``storage.sweep_cursors``, or ``None`` when the storage does not offer it (it still
        conforms: docs/protocol.md, "Storage")."""
        store = getattr(storage, "sweep_cursors", None)
        if store is None:
            return None
        assert isinstance(store, SweepCursorStore), teach(
            "sweeps",
            "storage.sweep_cursors, when present, is a SweepCursorStore (load and save)",
            "an attribute of that name that is something else",
            _CURSORS_DOC,
        )
        return store

    @pytest.mark.obligations("O-sweeps-12", "O-sweeps-13", "O-sweeps-14")
    def test_each_sweeper_keeps_its_own_cursor_last_writer_wins(self, storage: Storage) -> None:
        store = self._cursors(storage)
        if store is None:
            return  # optional: the sweepers keep their cursors in process memory
        assert [store.load(s) for s in _SWEEPERS] == [None] * 4, teach(
            "sweeps",
            "sweep_cursors.load(sweeper) is None while no cursor is saved",
            "a default cursor (an empty string) instead of None",
            _CURSORS_DOC,
        )
        for n, sweeper in enumerate(_SWEEPERS):
            store.save(sweeper, f"cursor-{sweeper}-{n}")
        store.save("steps", "cursor-steps-later")
        got = [store.load(s) for s in _SWEEPERS]
        assert got == [
            "cursor-runs-0", "cursor-steps-later", "cursor-maps-2", "cursor-map_rollbacks-3"
        ], teach(
            "sweeps",
            f"each sweeper reads back the cursor it saved last, its own only (got {got})",
            "one cursor shared by every sweeper, or a first-writer-wins save",
            _CURSORS_DOC,
        )
        store.save("maps", None)
        assert store.load("maps") is None, teach(
            "sweeps",
            "save(sweeper, None) means start over: load then returns None",
            "a None cursor ignored (the old cursor kept) or stored as the text 'None'",
            _CURSORS_DOC,
        )
        assert store.load("runs") == "cursor-runs-0"

    @pytest.mark.obligations("O-sweeps-15")
    def test_a_saved_cursor_lives_context_ttl_after_its_save(
        self, storage: Storage, probe: Probe
    ) -> None:
        store = self._cursors(storage)
        if store is None or storage.capabilities.clock != "application":
            return  # no store, or a server clock no client can move: nothing to look at later
        if not isinstance(probe, ClockProbe):
            return
        store.save("runs", "cursor-1")
        saved_at = storage.now()
        clock = ManualClock(saved_at + CONTEXT_TTL - 60)
        later = probe.with_clock(clock)
        if later is None:
            return
        try:
            if not math.isclose(later.now(), clock(), abs_tol=1.0):
                return  # the probe cannot inject a clock into this adapter
            cursors = self._cursors(later)
            assert cursors is not None
            assert cursors.load("runs") == "cursor-1", teach(
                "sweeps",
                "a saved cursor still loads a minute before context_ttl has passed since its "
                "save",
                "a cursor stored with a shorter expiry (a constant, or seconds read as ms)",
                _CURSORS_DOC,
            )
            clock.advance(120)
            assert cursors.load("runs") is None, teach(
                "sweeps",
                "a saved cursor expires context_ttl after its save: load then returns None",
                "a cursor stored without an expiry, or one judged by another clock",
                _CURSORS_DOC,
            )
        finally:
            later.close()


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


def _sweep(
    storage: Storage,
    router: RecordingRouter,
    sweeper: str,
    *,
    limit: int = 1000,
    lease: sweepers.DispatchLease | None = sweepers.DEFAULT_LEASE,
) -> Any:
    """Run ``sweeper`` once; returns its counts (``sweep_maps`` covers ``map_rollbacks``)."""
    if sweeper == "runs":
        return sweepers.sweep_runs(storage, router, limit=limit, lease=lease)
    if sweeper == "steps":
        return sweepers.sweep_steps(storage, router, limit=limit, lease=lease)
    return sweepers.sweep_maps(storage, router, limit=limit, lease=lease)


def _liveness_key(unit: str) -> str:
    """The lock whose holder keeps ``unit`` alive."""
    kind, _, rest = unit.partition(":")
    if kind == "run":
        return run_liveness_key(rest)
    if kind == "step":
        context_id, _, step = rest.rpartition(":")
        return step_liveness_key(context_id, step)
    map_id, _, index = rest.rpartition(":")
    return map_element_key(map_id, int(index))


def _settle(storage: Storage, unit: str) -> None:
    """Finish ``unit`` the way the engine does, so it leaves its sweeper's index."""
    kind, _, rest = unit.partition(":")
    if kind == "run":
        record = storage.contexts.load(rest)
        assert record is not None
        storage.contexts.save(context(rest, status="completed", reactor=record.reactor))
    elif kind == "step":
        context_id, _, step = rest.rpartition(":")
        storage.step_results.put(step_result(context_id, step, status="completed", outcome="1"))
    elif kind == "map_element":
        map_id, _, index = rest.rpartition(":")
        storage.maps.put_result(map_id, int(index), '"done"')
        storage.maps.claim_owner_signal(map_id)  # the collector resumed the owner
    else:
        map_id, _, position = rest.rpartition(":")
        storage.map_rollbacks.put_outcome(map_id, int(position), UNDONE)
        storage.map_rollbacks.mark_handed_off(map_id)
        storage.map_rollbacks.claim_signal(map_id)


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
