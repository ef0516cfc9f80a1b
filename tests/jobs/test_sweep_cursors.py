"""Sweep cursors and dispatch leases (docs/workers.md, "Sweep cursors and dispatch leases").

Sweepers read one page per sweep from a cursor saved in storage, so a large index never starves
what lies past ``limit``; settled maps and finished rollbacks leave the index; a unit a sweeper
re-dispatched is not re-dispatched again until its lease lapses, and the lease grows while the
unit stays lost. Every test runs on the memory storage with a manual clock (no sleeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from reactor.config import Runtime, Settings
from reactor.errors import ScanCursorError, StorageError
from reactor.jobs.sweep_tick import dispatch_lease, run_sweeps
from reactor.jobs.sweepers import (
    LEASE_GROWTH,
    MIN_LEASE_SECONDS,
    DispatchLease,
    SweepCounts,
    scan_pages,
    sweep_maps,
    sweep_runs,
    sweep_steps,
)
from reactor.memory import MemoryStorage
from reactor.memory.clock import ManualClock
from reactor.model import codec
from reactor.model.keys import sweep_dispatch_key
from reactor.ports import (
    ContextRecord,
    DeadLetter,
    Delivery,
    Job,
    MapMetadata,
    MapRollbackMetadata,
    RollbackOutcome,
    ScanPage,
    StepResultRecord,
)
from reactor.ports.payloads import RunPayload, parse_payload

START = 1_700_000_000.0
LEASE = DispatchLease(base=60.0, cap=480.0)


class RecordingRouter:
    """A router that only records what was enqueued."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        self.jobs.append(job)
        return job.id

    def take(self) -> list[Any]:
        payloads = [parse_payload(job) for job in self.jobs]
        self.jobs.clear()
        return payloads

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        return []

    def ack(self, delivery: Delivery) -> None: ...
    def retry(self, delivery: Delivery, delay_seconds: float) -> None: ...
    def extend(self, delivery: Delivery, seconds: float) -> None: ...
    def dead_letter(self, delivery: Delivery, reason: str) -> None: ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return []

    def close(self) -> None: ...


@pytest.fixture
def storage() -> MemoryStorage:
    return MemoryStorage(clock=ManualClock(START))


@pytest.fixture
def router() -> RecordingRouter:
    return RecordingRouter()


def _run(storage: MemoryStorage, context_id: str, status: str = "running") -> None:
    storage.contexts.save(
        ContextRecord(
            context_id=context_id, reactor="orders", status=status,
            document=codec.encode_document({"intermediate_results": {}}),
            created_at=START, updated_at=START,
        )
    )


def _map(storage: MemoryStorage, map_id: str, count: int = 1) -> MapMetadata:
    meta = MapMetadata(
        map_id=map_id, count=count, parent_context_id=f"owner-{map_id}", parent_reactor="orders",
        step_name="ship", element_reactor="ship_one", owner_context_id=f"owner-{map_id}",
        owner_reactor="orders", batch_size=count, atomic=False, created_at=storage.now(),
    )
    assert storage.maps.init(meta)
    return meta


def _settle(storage: MemoryStorage, meta: MapMetadata) -> None:
    for index in range(meta.count):
        storage.maps.put_result(meta.map_id, index, "1")
    assert storage.maps.claim_owner_signal(meta.map_id)


# ------------------------------------------------------------------------------ cursors


def test_the_run_sweeper_resumes_from_its_cursor_and_wraps_around(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    ids = [f"run-{i}" for i in range(5)]
    for context_id in ids:
        _run(storage, context_id)
    seen: list[list[str]] = []
    wrapped: list[bool] = []
    for _tick in range(3):
        counts = sweep_runs(storage, router, limit=2, lease=None)
        seen.append(sorted(p.context_id for p in router.take()))
        wrapped.append(counts.wrapped)
    assert sorted(i for page in seen for i in page) == ids  # once per pass: no page read twice
    assert wrapped == [False, False, True]
    sweep_runs(storage, router, limit=2, lease=None)
    assert sorted(p.context_id for p in router.take()) == seen[0]  # the next pass starts over


def test_the_cursor_is_kept_in_storage_so_any_process_resumes_it(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    for i in range(4):
        _step(storage, f"ctx-{i}")
    sweep_steps(storage, router, limit=2, lease=None)
    first = {p.step_context_id for p in router.take()}
    assert storage.sweep_cursors.load("steps") is not None
    elsewhere = MemoryStorage(documents=storage.documents)  # another worker, same records
    sweep_steps(elsewhere, router, limit=2, lease=None)
    second = {p.step_context_id for p in router.take()}
    assert first | second == {f"ctx-{i}" for i in range(4)} and not first & second


def _step(storage: MemoryStorage, context_id: str) -> None:
    storage.step_results.put(
        StepResultRecord(
            context_id=context_id, step_name="charge", status="dispatched",
            root_context_id=context_id, reactor="orders", dispatched_at=START, updated_at=START,
        )
    )


def test_more_settled_maps_than_the_limit_never_starve_a_lost_element(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    for i in range(5):
        _settle(storage, _map(storage, f"m{i}"))  # settled: the owner signal was claimed
    lost = _map(storage, "z-lost", count=2)
    storage.maps.put_result(lost.map_id, 0, "1")
    assert [m.map_id for m in storage.maps.scan()] == ["z-lost"]
    counts = sweep_maps(storage, router, limit=3, lease=None)
    assert [(p.map_id, p.index) for p in router.take()] == [("z-lost", 1)]
    assert counts.redispatched == 1 and counts.recollected == 0


def test_unsettled_maps_past_the_limit_are_reached_within_a_pass(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    for i in range(7):
        _map(storage, f"m{i}")  # each has its only element missing and no lock
    reached: list[str] = []
    for _tick in range(3):  # ceil(7 / 3) ticks make one pass
        sweep_maps(storage, router, limit=3, lease=None)
        reached += [p.map_id for p in router.take()]
    assert sorted(reached) == [f"m{i}" for i in range(7)]


def test_a_finished_rollback_leaves_the_index(storage: MemoryStorage) -> None:
    meta = MapRollbackMetadata(
        map_id="m1", total=1, batch_size=1, step_name="ship", owner_context_id="owner",
        owner_reactor="orders", element_reactor="ship_one", started_at=START,
    )
    assert storage.map_rollbacks.start(meta)[0]
    assert storage.map_rollbacks.scan() == [meta]
    storage.map_rollbacks.put_outcome("m1", 0, RollbackOutcome(index=0, outcome="undone"))
    storage.map_rollbacks.mark_handed_off("m1")
    assert storage.map_rollbacks.claim_signal("m1")
    assert storage.map_rollbacks.scan() == []
    assert storage.map_rollbacks.start(meta) == (False, meta)  # the owner re-enters
    assert storage.map_rollbacks.scan() == []


def test_a_settled_map_stays_out_of_the_index_when_its_counter_moves(
    storage: MemoryStorage,
) -> None:
    meta = _map(storage, "m1", count=2)
    _settle(storage, meta)
    storage.maps.add_to_counter("m1", -1)  # a late duplicate element
    assert storage.maps.scan() == []
    assert storage.maps.claim_owner_signal("m1") is False  # a loser keeps it settled
    assert storage.maps.scan() == [] and storage.maps.metadata("m1") == meta


def test_an_unreadable_saved_cursor_starts_the_sweeper_over(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _run(storage, "run-1")
    storage.sweep_cursors.save("runs", "not a cursor")
    assert sweep_runs(storage, router, lease=None).redispatched == 1
    assert storage.sweep_cursors.load("runs") is None


def test_a_storage_without_cursor_records_keeps_cursors_in_memory(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    for i in range(3):
        _run(storage, f"run-{i}")

    class NoCursors:
        """A storage view of a third-party adapter without ``sweep_cursors``."""

        def __getattr__(self, name: str) -> Any:
            if name == "sweep_cursors":
                raise AttributeError(name)
            return getattr(storage, name)

    view: Any = NoCursors()
    sweep_runs(view, router, limit=2, lease=None)
    sweep_runs(view, router, limit=2, lease=None)
    assert sorted(p.context_id for p in router.take()) == ["run-0", "run-1", "run-2"]


# ------------------------------------------------------------------------------ the pager


class _Scan:
    """A fake store scan handing back scripted pages."""

    def __init__(self, pages: Sequence[ScanPage[int]]) -> None:
        self.pages = list(pages)
        self.calls: list[tuple[int, str | None]] = []

    def __call__(self, *, limit: int = 1000, cursor: str | None = None) -> ScanPage[int]:
        self.calls.append((limit, cursor))
        return self.pages.pop(0)


def test_the_pager_follows_cursors_until_the_limit() -> None:
    scan = _Scan([ScanPage([1], "a"), ScanPage([], "b"), ScanPage([2, 3], "c")])
    assert scan_pages(scan, limit=3) == ([1, 2, 3], "c")
    assert scan.calls == [(3, None), (2, "a"), (2, "b")]


def test_the_pager_stops_at_the_end_of_the_index() -> None:
    scan = _Scan([ScanPage([1], "a"), ScanPage([2], None)])
    assert scan_pages(scan, limit=10, cursor="start") == ([1, 2], None)


@pytest.mark.parametrize(
    "pages",
    [
        [ScanPage([1], "start")],  # the cursor it was given
        [ScanPage([1], "a"), ScanPage([2], "b"), ScanPage([3], "a")],  # a cycle
    ],
)
def test_the_pager_raises_on_a_cursor_that_does_not_advance(
    pages: list[ScanPage[int]],
) -> None:
    with pytest.raises(ScanCursorError, match="does not advance"):
        scan_pages(_Scan(pages), limit=10, cursor="start")


def test_the_pager_reads_a_scan_without_cursor_support_once() -> None:
    calls: list[int] = []

    def legacy_scan(*, limit: int = 1000) -> list[int]:
        calls.append(limit)
        return [1, 2]

    assert scan_pages(legacy_scan, limit=5) == ([1, 2], None)
    assert calls == [5]


def test_a_document_store_whose_keys_do_not_advance_is_an_error(storage: MemoryStorage) -> None:
    _run(storage, "run-1")
    _run(storage, "run-2")
    real = storage.documents.scan

    def stuck(collection: str, **kwargs: Any) -> Any:
        kwargs["after"] = None  # ignores ``after``: always the first page
        return real(collection, **kwargs)

    storage.documents.scan = stuck  # type: ignore[method-assign]
    first = storage.contexts.scan(limit=1)
    with pytest.raises(StorageError, match="strictly greater"):
        storage.contexts.scan(limit=1, cursor=first.next_cursor)


# ------------------------------------------------------------------------------ leases


def test_the_lease_is_derived_from_the_settings() -> None:
    settings = Settings(sweeper_interval=10, visibility_timeout=30)
    assert DispatchLease.from_settings(settings) == DispatchLease(base=30, cap=240)
    assert DispatchLease.from_settings(Settings(sweeper_interval=40)) == DispatchLease(80, 640)
    assert DispatchLease.from_settings(settings, visibility=90).base == 90


def test_a_short_sweep_interval_does_not_shorten_the_lease_below_its_floor() -> None:
    """Queue latency does not shrink with the sweep interval: 1 s ticks on a loaded backend
    must not re-enqueue every queued unit every few seconds (docs/workers.md, "Sweep cursors
    and dispatch leases")."""
    fast = Settings(sweeper_interval=1, visibility_timeout=1)
    assert DispatchLease.from_settings(fast) == DispatchLease(
        base=MIN_LEASE_SECONDS, cap=LEASE_GROWTH * MIN_LEASE_SECONDS)
    assert DispatchLease.from_settings(fast, visibility=0.5).base == MIN_LEASE_SECONDS


def test_lease_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="base"):
        DispatchLease(base=0, cap=1)
    with pytest.raises(ValueError, match="cap"):
        DispatchLease(base=10, cap=5)
    with pytest.raises(ValueError, match="settle"):
        DispatchLease(base=10, cap=10, settle=-1)


def test_the_lease_grows_while_the_unit_stays_lost(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _run(storage, "stuck")  # e.g. its job waits behind a long queue
    times: list[float] = []
    for _second in range(0, 2000, 10):
        if sweep_runs(storage, router, lease=LEASE).redispatched:
            times.append(storage.now() - START)
        storage.advance(10)
    # base, base, doubling up to the cap (480 s), every cap until the episode marker lapses
    # (4 x cap = 1920 s), then a new episode starts at base again
    assert times == [0, 60, 120, 240, 480, 960, 1440, 1920, 1980]


def test_step_map_collector_and_rollback_units_are_leased(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _step(storage, "ctx")
    lost = _map(storage, "m-lost", count=1)
    done = _map(storage, "m-done", count=1)
    storage.maps.put_result(done.map_id, 0, "1")  # settled slots, collector lost
    rollback = MapRollbackMetadata(
        map_id=lost.map_id, total=2, batch_size=2, step_name="ship", owner_context_id="owner",
        owner_reactor="orders", element_reactor="ship_one", started_at=START,
    )
    storage.map_rollbacks.start(rollback)
    assert list(storage.map_rollbacks.claim_positions(lost.map_id, 2)) == [0, 1]

    sweep_steps(storage, router, lease=LEASE)
    sweep_maps(storage, router, lease=LEASE)
    kinds = sorted(type(p).__name__ for p in router.take())
    assert kinds == [
        "MapCollectPayload", "MapElementPayload", "MapElementRollbackPayload",
        "MapElementRollbackPayload", "StepPayload",
    ]
    assert sweep_steps(storage, router, lease=LEASE).leased == 1
    assert sweep_maps(storage, router, lease=LEASE).leased == 4
    assert router.take() == []
    storage.advance(LEASE.base + 1)
    sweep_steps(storage, router, lease=LEASE)
    sweep_maps(storage, router, lease=LEASE)
    assert len(router.take()) == 5


def test_a_dispatch_mark_is_a_period_marker_keyed_by_the_unit(
    storage: MemoryStorage, router: RecordingRouter
) -> None:
    _run(storage, "r1")
    sweep_runs(storage, router, lease=LEASE)
    marker = storage.periods.marker(sweep_dispatch_key("run:r1"))
    assert marker is not None and marker.marked_at == START


def test_run_sweeps_uses_the_lease_of_the_runtime(router: RecordingRouter) -> None:
    storage = MemoryStorage(clock=ManualClock(START))
    runtime = Runtime(storage=storage, router=router, settings=Settings(sweeper_interval=5))
    assert dispatch_lease(runtime) == DispatchLease(base=30, cap=240)
    # a tick of the chain: grown to twice the measured latency, with a settle time
    assert dispatch_lease(runtime, lateness=0) == DispatchLease(base=30, cap=240, settle=30)
    assert dispatch_lease(runtime, lateness=20) == DispatchLease(base=40, cap=320, settle=40)
    assert dispatch_lease(runtime, lateness=-5) == DispatchLease(base=30, cap=240, settle=30)
    _run(storage, "r1")
    assert run_sweeps(runtime).runs == SweepCounts(inspected=1, redispatched=1, wrapped=True)
    counts = run_sweeps(runtime).runs
    assert counts is not None and counts.leased == 1 and counts.redispatched == 0
    storage.advance(31)
    assert run_sweeps(runtime).runs == SweepCounts(inspected=1, redispatched=1, wrapped=True)
    assert [type(p) for p in router.take()] == [RunPayload, RunPayload]
