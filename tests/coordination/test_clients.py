"""Coordination clients on the memory storage, with an injected clock (no sleeping on TTLs)."""

from __future__ import annotations

import pytest

from reactor.coordination import (
    Lock,
    OrderedLock,
    Period,
    RateLimit,
    RateLimitRegistry,
    Semaphore,
    windows_from,
)
from reactor.coordination.heartbeat import Heartbeat
from reactor.errors import (
    LockAcquisitionError,
    LockLost,
    OrderedLockWaitError,
    RateLimitExceeded,
    SemaphoreAcquisitionError,
    UnknownRateLimitError,
)
from reactor.memory import MemoryStorage
from reactor.memory.clock import ManualClock


@pytest.fixture
def storage() -> MemoryStorage:
    # 2026-11-29T12:00:00Z
    return MemoryStorage(clock=ManualClock(1_795_953_600.0))


class FakeTime:
    """A monotonic clock that advances when the client sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_lock_is_reentrant_for_its_owner_and_exclusive_for_others(storage: MemoryStorage) -> None:
    first = Lock(storage.locks, "k", owner="a", auto_extend=False)
    again = Lock(storage.locks, "k", owner="a", auto_extend=False)
    other = Lock(storage.locks, "k", owner="b", auto_extend=False)
    assert first.try_acquire() and again.try_acquire()
    assert not other.try_acquire()
    info = storage.locks.info("k")
    assert info is not None and info.count == 2
    assert first.release() and storage.locks.held("k")
    assert again.release() and not storage.locks.held("k")


def test_lock_wait_polls_until_the_deadline_then_names_the_holder(storage: MemoryStorage) -> None:
    assert Lock(storage.locks, "k", owner="holder", auto_extend=False).try_acquire()
    clock = FakeTime()
    waiter = Lock(storage.locks, "k", owner="w", wait=0.35, auto_extend=False,
                  sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(LockAcquisitionError, match="holder"):
        waiter.acquire()
    assert_backoff(clock.sleeps, total=0.35)


def assert_backoff(sleeps: list[float], *, total: float) -> None:
    """Waits back off exponentially (jittered into [50 %, 100 %] of 50 ms x 2^n, at most 1 s)
    and never sleep past the wait deadline."""
    assert sum(sleeps) == pytest.approx(total)
    for n, slept in enumerate(sleeps[:-1]):
        ceiling = min(0.05 * 2**n, 1.0)
        assert ceiling / 2 - 1e-9 <= slept <= ceiling + 1e-9


def test_lock_wait_succeeds_once_the_holder_lets_go(storage: MemoryStorage) -> None:
    holder = Lock(storage.locks, "k", owner="holder", auto_extend=False)
    assert holder.try_acquire()
    clock = FakeTime()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        holder.release()

    waiter = Lock(storage.locks, "k", owner="w", wait=1, auto_extend=False,
                  sleep=sleep, monotonic=clock.monotonic)
    assert waiter.acquire() is waiter
    assert waiter.held_by_me()


def test_detached_lock_is_reattached_without_bumping_the_count(storage: MemoryStorage) -> None:
    lock = Lock(storage.locks, "k", owner="a", ttl=30, auto_extend=False)
    lock.acquire()
    lock.detach()
    assert lock.reattach()
    info = storage.locks.info("k")
    assert info is not None and info.count == 1
    storage.advance(31)
    assert not lock.reattach()  # the hold lapsed: the caller must acquire afresh


def test_extender_reports_lock_lost_when_extend_fails(storage: MemoryStorage) -> None:
    lost: list[LockLost] = []
    lock = Lock(storage.locks, "k", owner="a", ttl=30, auto_extend=False, on_lost=lost.append)
    lock.acquire()
    storage.advance(31)
    assert storage.locks.acquire("k", "thief", 30)

    ticks = iter([False, True])
    Heartbeat("test", 0.0, lock.extend, lock._report_lost).run(wait=lambda _: next(ticks))
    assert len(lost) == 1 and isinstance(lock.lost, LockLost)
    info = storage.locks.info("k")
    assert info is not None and info.owner == "thief"
    assert not lock.release()  # the old owner's release never deletes the new owner's lock
    assert storage.locks.held("k")


def test_a_semaphore_waiter_backs_off_instead_of_polling_every_50ms(
    storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A waiter on a full semaphore costs a handful of acquire attempts per second, not 20.

    Counted at the worst case of the jitter (every wait scaled by 0.5, the shortest): 5 waits
    ramping up (0.775 s), then 0.5 s waits until the 10 s deadline: 26 attempts, 11 of them
    in the last 5 s. (With random jitter the count varied: 21 was seen once.)"""
    monkeypatch.setattr("reactor.coordination.semaphore._RANDOM.uniform", lambda a, b: a)
    assert Semaphore(storage.semaphores, "s", limit=1, auto_extend=False).try_acquire()
    clock = FakeTime()
    attempts: list[float] = []
    real_acquire = storage.semaphores.acquire

    class Counting:
        def acquire(self, *args: object) -> bool:
            attempts.append(clock.now)
            return bool(real_acquire(*args))  # type: ignore[arg-type]

        def __getattr__(self, name: str) -> object:
            return getattr(storage.semaphores, name)

    waiter = Semaphore(Counting(), "s", limit=1, wait=10.0,  # type: ignore[arg-type]
                       auto_extend=False, sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(SemaphoreAcquisitionError):
        waiter.acquire()
    assert_backoff(clock.sleeps, total=10.0)
    assert len(attempts) <= 26  # 10 s of waiting: at most 2 attempts/s once backed off
    late = [t for t in attempts if t >= 5.0]
    assert len(late) <= 11


def test_semaphore_lease_lapses_for_a_silent_holder(storage: MemoryStorage) -> None:
    dead = Semaphore(storage.semaphores, "s", limit=1, lease=30, auto_extend=False)
    live = Semaphore(storage.semaphores, "s", limit=1, lease=30, auto_extend=False)
    assert dead.try_acquire()
    with pytest.raises(SemaphoreAcquisitionError):
        live.acquire()
    storage.advance(31)
    assert live.try_acquire()
    assert not dead.release()  # its late release returns False and frees nothing
    state = storage.semaphores.state("s")
    assert state is not None and set(state.holders) == {live.holder}


def test_semaphore_reattach_keeps_the_same_slot(storage: MemoryStorage) -> None:
    sem = Semaphore(storage.semaphores, "s", limit=2, holder="unit-1", lease=30, auto_extend=False)
    sem.acquire()
    sem.detach()
    assert sem.reattach()
    state = storage.semaphores.state("s")
    assert state is not None and list(state.holders) == ["unit-1"]


def test_semaphore_rejects_bad_arguments(storage: MemoryStorage) -> None:
    with pytest.raises(ValueError, match="limit"):
        Semaphore(storage.semaphores, "s", limit=0)
    with pytest.raises(ValueError, match="lease"):
        Semaphore(storage.semaphores, "s", limit=1, lease=0)


def test_rate_limit_denies_with_retry_after_and_charges_nothing(storage: MemoryStorage) -> None:
    limit = RateLimit(storage.rate_limits, "api", windows_from(limits={"minute": 2, 3600: 3}))
    limit.hit()
    limit.hit()
    with pytest.raises(RateLimitExceeded) as denied:
        limit.hit()
    assert denied.value.window == "minute" and denied.value.limit == 2
    assert denied.value.retry_after is not None and 0.1 <= denied.value.retry_after <= 60
    assert limit.counts() == {"minute": 2, "3600s": 2}


def test_named_rate_limits_come_from_the_registry() -> None:
    registry = RateLimitRegistry()
    windows = registry.register("stripe", limit=25, period="second")
    assert registry.windows("stripe") == windows
    with pytest.raises(UnknownRateLimitError, match="nope"):
        registry.windows("nope")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({}, "either"), ({"limit": 1, "limits": {"second": 1}}, "either"),
     ({"limits": {"fortnight": 1}}, "fortnight")],
)
def test_window_specs_are_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        windows_from(**kwargs)  # type: ignore[arg-type]


def test_period_marks_once_per_bucket(storage: MemoryStorage) -> None:
    period = Period(storage.periods, "invoice:42", "day", now=storage.now)
    assert not period.seen()
    assert period.mark("run-1")
    assert not period.mark("run-2")
    marker = period.marker()
    assert marker is not None and marker.context_id == "run-1"
    storage.advance(86400)
    assert not period.seen()  # the next calendar day is a new bucket


def test_period_rejects_an_unknown_unit(storage: MemoryStorage) -> None:
    with pytest.raises(ValueError):
        Period(storage.periods, "x", "fortnight", now=storage.now)


def test_ordered_lock_runs_in_ticket_order_and_skips_after_a_failure(
    storage: MemoryStorage,
) -> None:
    lock = OrderedLock(storage.ordered_locks, "account:1", poison_pill_timeout=600)
    first, second, third = lock.assign(), lock.assign(), lock.assign()
    with pytest.raises(OrderedLockWaitError) as waiting:
        lock.check(second)
    assert waiting.value.retry_after is not None and waiting.value.retry_after >= 1
    assert lock.check(first) == "go"
    assert lock.advance(first, failed=True) == 1
    assert lock.check(second) == "skip_chain_failed"
    assert lock.advance(second) == 2
    assert lock.check(third) == "skip_chain_failed"
    relaxed = OrderedLock(storage.ordered_locks, "account:1", strict=False)
    assert relaxed.check(third) == "go"


def test_ordered_lock_poison_pill_skips_a_dead_blocker(storage: MemoryStorage) -> None:
    lock = OrderedLock(storage.ordered_locks, "k", poison_pill_timeout=60)
    lock.assign()
    second = lock.assign()
    storage.advance(61)
    assert lock.check(second) == "go"
    assert lock.peek().last_completed == 1


def test_numeric_periods_become_named_windows() -> None:
    windows = windows_from(limit=5, period=1.5)
    assert windows[0].seconds == 1.5 and windows[0].name == "1.5s"


def test_heartbeat_survives_a_storage_outage_and_stops_when_the_lease_is_gone() -> None:
    answers: list[object] = [RuntimeError("connection reset"), True, False]
    lost: list[bool] = []

    def renew() -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    Heartbeat("test", 0.0, renew, lambda: lost.append(True)).run(wait=lambda _: False)
    assert answers == [] and lost == [True]


def test_waiting_never_draws_from_the_global_random_state(storage: MemoryStorage) -> None:
    """Jitter comes from the library's own streams: a user's seeded ``random`` (or
    hypothesis, which fails a test whose strategies see the global state move) is untouched
    by a waiter's back-off, a park delay or a compare-and-set retry."""
    import random

    from reactor.config import Settings
    from reactor.engine.parks import park_delay

    holder = Lock(storage.locks, "k", owner="holder", auto_extend=False)
    assert holder.try_acquire()
    clock = FakeTime()
    before = random.getstate()
    waiter = Lock(storage.locks, "k", owner="w", wait=2, auto_extend=False,
                  sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(LockAcquisitionError):
        waiter.acquire()
    assert park_delay(Settings(lock_snooze_jitter=1.0)) >= Settings().lock_snooze_base_delay
    assert random.getstate() == before


def test_change_ttl_sets_the_remaining_lease_at_once_and_keeps_the_token(
    storage: MemoryStorage,
) -> None:
    lock = Lock(storage.locks, "k", owner="a", ttl=60, auto_extend=False)
    lock.acquire()
    token = lock.token
    assert lock.change_ttl(3)
    info = storage.locks.info("k")
    assert info is not None and info.expires_at == pytest.approx(storage.now() + 3)
    assert lock.ttl == 3 and lock.token == token
    storage.advance(4)
    assert not storage.locks.held("k")  # the shorter lease lapsed: no 60 s wait for it
    assert not lock.change_ttl(60)  # gone: nothing changes, the loss is reported
    assert isinstance(lock.lost, LockLost)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "3", 0.5])
def test_change_ttl_refuses_a_lease_it_could_not_hold(storage: MemoryStorage, ttl: object) -> None:
    lock = Lock(storage.locks, "k", owner="a", ttl=60)
    lock.acquire()
    try:
        with pytest.raises(ValueError, match="ttl"):
            lock.change_ttl(ttl)  # type: ignore[arg-type]
        assert lock.ttl == 60  # nothing changed
    finally:
        lock.release()


def test_change_ttl_below_the_skew_budget_is_refused(storage: MemoryStorage) -> None:
    lock = Lock(storage.locks, "k", owner="a", ttl=60, skew=2.0, auto_extend=False)
    lock.acquire()
    with pytest.raises(ValueError, match="clock-skew budget"):
        lock.change_ttl(2.0)
    assert lock.ttl == 60


def test_a_failed_change_keeps_the_old_lease_renewed(storage: MemoryStorage) -> None:
    lock = Lock(storage.locks, "k", owner="a", ttl=60)
    lock.acquire()
    real_extend = storage.locks.extend

    def failing(*args: object) -> object:
        raise OSError("store down")

    storage.locks.extend = failing  # type: ignore[method-assign]
    try:
        with pytest.raises(OSError):
            lock.change_ttl(3)
    finally:
        storage.locks.extend = real_extend  # type: ignore[method-assign]
    try:
        assert lock.ttl == 60 and lock._heartbeat is not None  # still auto-extended
        assert lock.lost is None
    finally:
        lock.release()
