"""Back-pressure and pace of the sweep chain (docs/workers.md, "Back-pressure and pace")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import make_env
from reactor.jobs import sweep_tick
from reactor.jobs.sweep_pace import MIN_PAGE, SweepPace, ready_backlog
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.sweepers import MapSweepCounts, SweepCounts
from reactor.memory import InlineRouter, LocalRouter, ManualClock, MemoryStorage
from reactor.model.context import Context
from reactor.model.status import RunStatus
from reactor.ports.inspection import QueueStats
from reactor.ports.payloads import RunPayload, job
from tests.fake_clock import FakeClock

START = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def _runtime(clock: ManualClock, **settings: Any) -> Runtime:
    return config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock),
        sweeper_interval=10, **settings,
    )


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    config.reset()


def _lost_run(rt: Runtime, clock: ManualClock) -> None:
    ctx = Context(context_id="lost-1", reactor="kill.flow", status=RunStatus.RUNNING)
    Checkpointer(make_env(rt), ctx).save()
    clock.advance(3600.0)  # long settled: lost to every sweep


def _fill(rt: Runtime, jobs: int) -> None:
    for n in range(jobs):
        rt.router.enqueue(job(RunPayload(context_id=f"queued-{n}", reactor="kill.flow")))


def _queued_runs(rt: Runtime) -> int:
    router = rt.router
    assert isinstance(router, LocalRouter)
    return len(router.queued())


def test_a_chain_tick_redispatches_nothing_while_the_queue_is_deep(clock: ManualClock) -> None:
    """Two ready jobs reach ``sweeper_backlog=2``: the tick defers, the lost run stays in its
    index and is re-dispatched by the first tick after the queue drained below the backlog."""
    rt = _runtime(clock, sweeper_backlog=2)
    _lost_run(rt, clock)
    _fill(rt, 2)
    counts = run_sweeps(rt, lateness=0.0)
    assert counts.deferred == 2
    assert counts.runs is None and counts.steps is None and counts.maps is None
    assert _queued_runs(rt) == 2  # nothing added
    router = rt.router
    assert isinstance(router, LocalRouter)
    router.ack(router.receive(1)[0])  # a worker caught up: one ready job left
    counts = run_sweeps(rt, lateness=0.0)
    assert counts.deferred is None
    assert counts.runs is not None and counts.runs.redispatched == 1


def test_an_operators_sweep_never_defers(clock: ManualClock) -> None:
    """``reactor sweep`` and direct calls (no lateness) recover at once, however deep."""
    rt = _runtime(clock, sweeper_backlog=1)
    _lost_run(rt, clock)
    _fill(rt, 5)
    counts = run_sweeps(rt)
    assert counts.deferred is None
    assert counts.runs is not None and counts.runs.redispatched == 1


def test_no_backlog_setting_never_defers(clock: ManualClock) -> None:
    rt = _runtime(clock, sweeper_backlog=None)
    _lost_run(rt, clock)
    _fill(rt, 5)
    counts = run_sweeps(rt, lateness=0.0)
    assert counts.deferred is None
    assert counts.runs is not None and counts.runs.redispatched == 1


def test_the_backlog_counts_ready_jobs_only(clock: ManualClock) -> None:
    """Delayed jobs (parks, retries) and jobs in flight are no backlog."""
    rt = _runtime(clock, sweeper_backlog=2)
    router = rt.router
    for n in range(3):
        router.enqueue(job(RunPayload(context_id=f"parked-{n}", reactor="kill.flow")), 60.0)
    _fill(rt, 2)
    assert isinstance(router, LocalRouter)
    assert len(router.receive(1)) == 1  # one ready job in flight now
    assert router.queue_stats() == QueueStats(ready=1, delayed=3, in_flight=1, dead_letters=0)
    assert ready_backlog(rt) is None
    clock.advance(61.0)  # the parks are due, and the received job's lease lapsed
    assert ready_backlog(rt) == 5


class _FailingStats(LocalRouter):
    def queue_stats(self) -> QueueStats:
        raise RuntimeError("the broker is down")


class _UnknownStats(LocalRouter):
    def queue_stats(self) -> QueueStats:
        return QueueStats()


@pytest.mark.parametrize("router_cls", [_FailingStats, _UnknownStats])
def test_a_router_that_cannot_count_never_defers(
    clock: ManualClock, router_cls: Callable[..., LocalRouter]
) -> None:
    """Failing to count, or not knowing, is no reason to stop recovering work."""
    rt = config.configure(storage=MemoryStorage(clock=clock), router=router_cls(clock=clock),
                          sweeper_backlog=1)
    assert ready_backlog(rt) is None


def test_a_router_without_queue_stats_never_defers(clock: ManualClock) -> None:
    rt = config.configure(storage=MemoryStorage(clock=clock), router=InlineRouter(),
                          sweeper_backlog=1)
    assert ready_backlog(rt) is None


def test_the_pace_sizes_a_page_to_a_quarter_of_the_interval() -> None:
    storage = MemoryStorage()
    pace = SweepPace(storage)
    assert pace.page("runs", limit=1000, interval=30.0) == 1000  # nothing measured yet
    pace.observe("runs", 300, 10.0)  # 30 rows/s
    assert pace.page("runs", limit=1000, interval=30.0) == 225  # 30 x 7.5 s
    pace.observe("runs", 100, 10.0)  # 10 rows/s: averaged with the last, 20 rows/s
    assert pace.page("runs", limit=1000, interval=30.0) == 150
    assert pace.page("steps", limit=1000, interval=30.0) == 1000  # per sweeper
    assert SweepPace(storage).page("runs", limit=1000, interval=30.0) == 150  # per storage
    assert SweepPace(MemoryStorage()).page("runs", limit=1000, interval=30.0) == 1000


def test_the_pace_never_drops_below_min_page_nor_above_the_limit() -> None:
    pace = SweepPace(MemoryStorage())
    pace.observe("runs", 1, 1000.0)
    assert pace.page("runs", limit=1000, interval=30.0) == MIN_PAGE
    assert pace.page("runs", limit=3, interval=30.0) == 3
    pace.observe("maps", 10_000, 0.001)
    assert pace.page("maps", limit=1000, interval=30.0) == 1000


def test_a_pass_without_rows_or_time_says_nothing() -> None:
    pace = SweepPace(MemoryStorage())
    pace.observe("runs", 0, 50.0)
    pace.observe("runs", 50, 0.0)
    assert pace.page("runs", limit=1000, interval=30.0) == 1000


def test_a_slow_chain_pass_makes_the_next_pass_read_fewer_rows(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sweeper's pass is timed on the runtime clock: a pass that handled 1,000 rows in
    100 s (10 rows/s) gets a 25-row page next (a quarter of the 10 s interval); an operator's
    sweep reads ``sweeper_limit`` rows whatever the pace."""
    fake = FakeClock()
    rt = config.configure(storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock),
                          sweeper_interval=10, clock=fake)
    asked: dict[str, list[int]] = {"runs": [], "steps": [], "maps": []}

    def sweeper(name: str) -> Callable[..., Any]:
        def sweep(*_args: Any, limit: int, **_kwargs: Any) -> Any:
            asked[name].append(limit)
            fake.sleep(limit / 10.0)  # 10 rows per second
            if name == "maps":
                return MapSweepCounts(inspected=limit)
            return SweepCounts(inspected=limit)
        return sweep

    for name in asked:
        monkeypatch.setattr(sweep_tick, f"sweep_{name}", sweeper(name))
    run_sweeps(rt, lateness=0.0)
    run_sweeps(rt, lateness=0.0)
    run_sweeps(rt)
    assert asked == {name: [1000, 25, 1000] for name in asked}
