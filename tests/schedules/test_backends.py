"""Every backend: the schedule store's compare-and-set, and schedulers racing one tick start
exactly one run (docs/schedules.md, "How a tick becomes one run"; docs/protocol.md,
"Schedules")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.model.status import RunStatus
from reactor.schedules import Schedule, Scheduler, TickOutcome, tick_text
from reactor.schedules.records import keeps_schedules, schedule_store
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on, work_until
from tests.schedules.reactors import JOURNAL, Report


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock at a whole minute."""
    start = float(int(time.time()) // 60 * 60)
    yield configure_on(request.param, service_url, TestClock(start), area="schedules")
    config.reset()


def test_the_schedule_store_compares_and_sets(runtime_on: Runtime) -> None:
    assert keeps_schedules(runtime_on.storage)
    store = schedule_store(runtime_on.storage)
    assert store.get("a") is None
    first = store.put("a", '{"x":1}', expected_version=None)
    assert first is not None
    assert store.put("a", '{"x":2}', expected_version=None) is None  # exists
    assert store.put("a", '{"x":2}', expected_version="stale") is None
    second = store.put("a", '{"x":2}', expected_version=first)
    assert second is not None and second != first
    record = store.get("a")
    assert record is not None and (record.document, record.version) == ('{"x":2}', second)
    for name in ("c", "b.x", "b-y"):
        assert store.put(name, "{}", expected_version=None)
    assert [r.name for r in store.scan()] == ["a", "b-y", "b.x", "c"]
    assert [r.name for r in store.scan(after="a", limit=2)] == ["b-y", "b.x"]
    assert [r.name for r in store.scan(after="b.x")] == ["c"]
    assert not store.delete("a", expected_version=first)
    assert store.delete("a", expected_version=second)
    assert store.get("a") is None and [r.name for r in store.scan()] == ["b-y", "b.x", "c"]
    with pytest.raises(ValueError):
        store.scan(limit=0)


def test_schedulers_racing_the_same_ticks_start_one_run_each(runtime_on: Runtime) -> None:
    JOURNAL.clear()
    clock = runtime_on.clock
    assert isinstance(clock, TestClock)
    schedule = Schedule(Report, every=60, tick_input="tick", name="race", overlap="allow")
    schedulers = [Scheduler(runtime_on, schedules=[schedule]) for _ in range(3)]
    schedulers[0].tick()
    start = clock.now()
    settled: list[TickOutcome] = []
    lock = threading.Lock()
    for _ in range(3):
        clock.advance(60)
        barrier = threading.Barrier(len(schedulers))

        def race(scheduler: Scheduler, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            outcomes = scheduler.tick()
            with lock:
                settled.extend(outcomes)

        threads = [threading.Thread(target=race, args=(s,)) for s in schedulers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    ticks = [start + 60 * k for k in (1, 2, 3)]
    assert sorted(o.tick for o in settled) == ticks  # each tick settled once
    run_ids = [o.run_id for o in sorted(settled, key=lambda o: o.tick)]
    assert all(run_ids) and len(set(run_ids)) == 3
    work_until(runtime_on, lambda: len(JOURNAL) >= 3 and all(
        Report.find(r or "").status is RunStatus.COMPLETED for r in run_ids))
    assert sorted(JOURNAL) == [tick_text(t) for t in ticks]
    JOURNAL.clear()
