"""Tests of ReferenceCoordination: the protocols over the pure model with a settable clock."""

from __future__ import annotations

import inspect

import pytest

from reactor.model.coordination import ReferenceCoordination, SettableClock
from reactor.model.records import LockInfo, OrderedTicket, PeriodMarker, RateWindow
from reactor.ports.storage import (
    LockStore,
    OrderedLockStore,
    PeriodStore,
    RateLimitStore,
    SemaphoreStore,
)

PAIRS = [
    ("locks", LockStore),
    ("semaphores", SemaphoreStore),
    ("rate_limits", RateLimitStore),
    ("periods", PeriodStore),
    ("ordered_locks", OrderedLockStore),
]


@pytest.mark.parametrize(("attr", "protocol"), PAIRS)
def test_sub_stores_implement_the_protocols_with_identical_signatures(
    attr: str, protocol: type
) -> None:
    store = getattr(ReferenceCoordination(), attr)
    assert isinstance(store, protocol)
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        assert inspect.signature(getattr(type(store), name)) == inspect.signature(member), name


def test_clock_drives_expiry() -> None:
    ref = ReferenceCoordination(start=100.0)
    assert ref.locks.acquire("k", "a", 10) == 100_000_000
    assert ref.locks.info("k") == LockInfo("a", 1, 110.0, 100_000_000)
    assert ref.advance(10) == 110.0
    assert ref.locks.held("k") is False
    ref.set_now(50.0)  # a settable clock may go back, for tests
    assert ref.now() == 50.0
    assert ref.locks.held("k") is True


def test_shared_external_clock() -> None:
    clock = SettableClock(5.0)
    ref = ReferenceCoordination(clock)
    assert ref.periods.mark("p", ttl=1, context_id="c") is True
    assert ref.periods.marker("p") == PeriodMarker("c", 5.0)
    clock.advance(1)
    assert ref.periods.marker("p") is None
    with pytest.raises(TypeError):
        ReferenceCoordination(lambda: 0.0).advance(1)


def test_states_are_exposed_and_deleted_when_absent() -> None:
    ref = ReferenceCoordination()
    ref.semaphores.acquire("s", "h", 1, 5)
    assert set(ref.semaphores.states) == {"s"}
    ref.semaphores.release("s", "h")
    assert ref.semaphores.states == {}


def test_every_store_round_trip() -> None:
    ref = ReferenceCoordination(start=1000.0)
    assert ref.semaphores.acquire("s", "h", 2, 5) is True
    assert ref.semaphores.extend("s", "h", 9) is True
    state = ref.semaphores.state("s")
    assert state is not None and dict(state.holders) == {"h": 1009.0}
    ref.semaphores.reset("s")
    assert ref.semaphores.state("s") is None
    window = RateWindow("m", 60, 1)
    assert ref.rate_limits.hit("r", [window]).allowed is True
    assert ref.rate_limits.count("r", window) == 1
    t1 = ref.ordered_locks.assign("o", ttl=100)
    assert t1 == OrderedTicket(1, 1_000_000_000)
    assert ref.ordered_locks.heartbeat("o", t1) is True
    assert ref.ordered_locks.can_proceed("o", t1, poison_pill_timeout=5).state == "go"
    assert ref.ordered_locks.advance("o", t1, failed=False, ttl=100) == 1
    assert ref.ordered_locks.skip("o", 3) == 0
    assert ref.ordered_locks.peek("o").epoch == t1.epoch
    ref.ordered_locks.reset("o")
    assert ref.ordered_locks.peek("o").epoch == 0
    assert ref.ordered_locks.assign("o", ttl=100) == OrderedTicket(1, t1.epoch + 1)
    assert ref.locks.acquire("l", "a", None) == 1_000_000_000
    assert ref.locks.extend("l", "a", 5) is True
    assert ref.locks.release("l", "a") is True
