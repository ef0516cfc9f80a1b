"""Leases under real timing: renewal keeps every valid hold, loss is reported before anyone else
gets in (``docs/coordination.md``, "Renewal and loss").

These tests drive the :mod:`reactor.coordination` clients (``Lock``, ``Semaphore``,
``OrderedLock``) against the adapter under test with the shortest lease reactor accepts
(:data:`~reactor.model.coordination.renewal.MIN_LEASE`, 1 s), so they prove the adapter's
extend/acquire are fast and exact enough for the renewal policy, and that the policy holds on
this backend: a 1 s hold survives a 3 s holder and transient extend errors; extends failing past
the deadline make the holder learn of the loss no later than a second holder gets in; a take-over
(an extend answering ``False``) is reported.

A hold's duration is real time (the backend's TTL runs on its own clock), so the tests pace their
observations with short sleeps; no assertion depends on a sleep being long enough. Holders use
the storage's declared clock-skew budget (``Capabilities.clock_skew``) as the engine does, so an
application-clock backend must be configured with a budget below 1 s to run them (the DynamoDB
run in ``scripts/test`` declares 0.25 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reactor.coordination import Lock, OrderedLock, Semaphore
from reactor.errors import LockLost, StorageError
from reactor.model.coordination.renewal import MIN_LEASE
from reactor.ports.storage import Storage
from reactor_contract._support import teach, uid
from reactor_contract.probe import Probe

__all__ = ["LeasesContract"]

#: How long a holder keeps its 1 s hold in the "held through" tests, in seconds.
HOLD_FOR = 3.0
#: How often the tests look at the hold (a pace, not a synchronisation).
PACE = 0.05
#: Bounds a wait that only a failing test reaches, in seconds.
TIMEOUT = 10.0


class _Faulty:
    """Wraps a lock or semaphore sub-store; ``extend`` raises ``StorageError`` on demand.

    Args:
        store: the real sub-store.
        fail: decides, from the 1-based number of the extend call, whether it raises.
    """

    def __init__(self, store: Any, fail: Callable[[int], bool]) -> None:
        self._store = store
        self._fail = fail
        self.extends = 0
        self.raised = 0

    def extend(self, *args: Any) -> bool:
        self.extends += 1
        if self._fail(self.extends):
            self.raised += 1
            raise StorageError(f"injected outage on extend #{self.extends}")
        return bool(self._store.extend(*args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _Answers:
    """Wraps a lock or semaphore sub-store and records what each ``extend`` answered:
    ``True``, ``False`` or ``"raised"`` (a ``StorageError``), in call order."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.answers: list[bool | str] = []

    def extend(self, *args: Any) -> bool:
        try:
            answer = bool(self._store.extend(*args))
        except StorageError:
            self.answers.append("raised")
            raise
        self.answers.append(answer)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _told_at_the_next_extend(answers: list[bool | str], primitive: str) -> str | None:
    """``None`` when the loss came from the first extend after the take-over answering
    ``False``; else the teaching message."""
    after = answers[answers.index(False) + 1:] if False in answers else answers
    if False in answers and "raised" not in answers and not after:
        return None
    return teach(
        "leases",
        f"a {primitive} taken over is reported at the holder's next extend, which answers "
        f"False (extends after the take-over answered {answers})",
        "an extend that raises StorageError (or keeps answering True) when another owner "
        "holds the key: losing is a normal False, never an error, and the holder, retrying "
        "an error, learns of the take-over only at its own deadline",
        'docs/protocol.md, "Conventions", and docs/coordination.md, "Renewal and loss"',
    )


class _Loss:
    """Records the first ``on_lost`` report and when it came (monotonic seconds)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.error: LockLost | None = None
        self.at: float | None = None

    def __call__(self, error: LockLost) -> None:
        if self.error is None:
            self.error, self.at = error, time.monotonic()
        self.event.set()


def _skew(storage: Storage) -> float:
    return storage.capabilities.clock_skew


def _hold_for(seconds: float, check: Callable[[], None]) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check()
        time.sleep(PACE)
    check()


@contextmanager
def _released(*holders: Lock | Semaphore) -> Iterator[None]:
    try:
        yield
    finally:
        for holder in holders:
            try:
                holder.release()
            except Exception:
                pass


class LeasesContract:
    """The renewal policy on this adapter, with 1 s leases."""

    reactor_concern = "leases"

    @pytest.mark.obligations("O-leases-1", "O-leases-2")
    def test_a_1s_lock_and_a_1s_semaphore_lease_are_held_through_a_3s_holder(
        self, storage: Storage
    ) -> None:
        """Guarantee: a valid hold never lapses while its holder runs — renewal every lease/3
        keeps a 1 s lock and a 1 s lease through 3 s, and nobody else gets in meanwhile."""
        key, sem_key = uid("lease-lock"), uid("lease-sem")
        lock = Lock(storage.locks, key, ttl=MIN_LEASE, skew=_skew(storage))
        sem = Semaphore(storage.semaphores, sem_key, limit=1, lease=MIN_LEASE,
                        skew=_skew(storage))
        lock.acquire()
        sem.acquire()
        with _released(lock, sem):

            def check() -> None:
                assert not storage.locks.acquire(key, "intruder", 30.0), "lock lapsed while held"
                assert not storage.semaphores.acquire(sem_key, "intruder", 1, 30.0), (
                    "a second holder got the only slot while the first still held it"
                )
                assert lock.lost is None and sem.lost is None

            _hold_for(HOLD_FOR, check)
        assert storage.locks.info(key) is None
        state = storage.semaphores.state(sem_key)
        assert state is None or state.holders == {}

    @pytest.mark.obligations("O-leases-3")
    def test_extends_that_raise_twice_inside_the_lease_keep_the_hold(
        self, storage: Storage
    ) -> None:
        """Guarantee: transient storage errors inside a lease never lose it — a failed extend
        is retried promptly (jittered backoff bounded by the time left), not a full interval
        later."""
        key, sem_key = uid("lease-lock"), uid("lease-sem")
        locks = _Faulty(storage.locks, lambda n: n in (1, 2))
        sems = _Faulty(storage.semaphores, lambda n: n in (1, 2))
        lock_loss, sem_loss = _Loss(), _Loss()
        lock = Lock(locks, key, ttl=MIN_LEASE, on_lost=lock_loss, skew=_skew(storage))
        sem = Semaphore(sems, sem_key, limit=1, lease=MIN_LEASE, on_lost=sem_loss,
                        skew=_skew(storage))
        lock.acquire()
        sem.acquire()
        with _released(lock, sem):

            def check() -> None:
                assert not storage.locks.acquire(key, "intruder", 30.0), "lock lapsed while held"
                assert not storage.semaphores.acquire(sem_key, "intruder", 1, 30.0)
                assert lock.lost is None and sem.lost is None

            _hold_for(HOLD_FOR, check)
        assert locks.raised == 2 and sems.raised == 2
        assert locks.extends > 2 and sems.extends > 2
        assert not lock_loss.event.is_set() and not sem_loss.event.is_set()

    @pytest.mark.obligations("O-leases-4")
    def test_extends_failing_past_the_deadline_lose_the_lock_before_a_second_holder_gets_in(
        self, storage: Storage
    ) -> None:
        """Guarantee: when extends keep failing, the holder learns of the loss (``Lock.lost``,
        ``on_lost``) no later than the moment a second holder can take the lock."""
        key = uid("lease-lock")
        loss = _Loss()
        lock = Lock(_Faulty(storage.locks, lambda n: True), key,
                    ttl=MIN_LEASE, on_lost=loss, skew=_skew(storage))
        lock.acquire()
        with _released(lock):
            deadline = time.monotonic() + TIMEOUT
            while not storage.locks.acquire(key, "second", 30.0):
                assert time.monotonic() < deadline, "the lock never lapsed"
                time.sleep(PACE / 5)
            assert isinstance(lock.lost, LockLost), (
                "a second holder got the lock while the first still believed it held it"
            )
            assert loss.event.wait(TIMEOUT), "on_lost never fired for a lease past its deadline"
            assert isinstance(loss.error, LockLost) and loss.error.key == key
        assert storage.locks.info(key) is not None  # the first holder's release freed nothing
        info = storage.locks.info(key)
        assert info is not None and info.owner == "second"

    @pytest.mark.obligations("O-leases-5")
    def test_extends_failing_past_the_deadline_lose_the_semaphore_lease(
        self, storage: Storage
    ) -> None:
        """Guarantee: a lease whose extends keep failing is reported lost no later than its
        slot can go to another holder."""
        key = uid("lease-sem")
        loss = _Loss()
        sem = Semaphore(_Faulty(storage.semaphores, lambda n: True),
                        key, limit=1, lease=MIN_LEASE, on_lost=loss, skew=_skew(storage))
        sem.acquire()
        with _released(sem):
            deadline = time.monotonic() + TIMEOUT
            while not storage.semaphores.acquire(key, "second", 1, 30.0):
                assert time.monotonic() < deadline, "the lease never lapsed"
                time.sleep(PACE / 5)
            assert isinstance(sem.lost, LockLost) and sem.lost.primitive == "semaphore"
            assert loss.event.wait(TIMEOUT), "on_lost never fired for a lease past its deadline"

    @pytest.mark.obligations("O-leases-6", "O-locks-13")
    def test_a_take_over_is_reported_at_the_next_extend(
        self, storage: Storage, probe: Probe
    ) -> None:
        """Guarantee: when the store hands the lock to someone else (an extend answers
        ``False``), the holder is told at once, and its late release frees nothing."""
        key = uid("lease-lock")
        loss = _Loss()
        locks = _Answers(storage.locks)
        lock = Lock(locks, key, ttl=MIN_LEASE, on_lost=loss, skew=_skew(storage))
        lock.acquire()
        with _released(lock):
            taken_over = len(locks.answers)
            probe.expire("lock", key)
            assert storage.locks.acquire(key, "thief", 30.0)
            assert loss.event.wait(TIMEOUT), "a refused extend was never reported"
            assert isinstance(lock.lost, LockLost)
            wrong = _told_at_the_next_extend(locks.answers[taken_over:], "lock")
            assert wrong is None, wrong
            assert lock.release() is False
        info = storage.locks.info(key)
        assert info is not None and info.owner == "thief"

    @pytest.mark.obligations("O-leases-7", "O-semaphores-4")
    def test_a_semaphore_take_over_is_reported(self, storage: Storage, probe: Probe) -> None:
        """Guarantee: a lease that lapsed in the store (its slot taken) is reported lost."""
        key = uid("lease-sem")
        loss = _Loss()
        sems = _Answers(storage.semaphores)
        sem = Semaphore(sems, key, limit=1, lease=MIN_LEASE, on_lost=loss,
                        skew=_skew(storage))
        sem.acquire()
        with _released(sem):
            taken_over = len(sems.answers)
            probe.expire("semaphore", key, sem.holder)
            assert storage.semaphores.acquire(key, "thief", 1, 30.0)
            assert loss.event.wait(TIMEOUT), "a refused extend was never reported"
            assert isinstance(sem.lost, LockLost)
            wrong = _told_at_the_next_extend(sems.answers[taken_over:], "semaphore lease")
            assert wrong is None, wrong
            assert sem.release() is False

    @pytest.mark.obligations("O-leases-8", "O-ordered_locks-12")
    def test_a_skipped_ordered_turn_is_reported_lost(self, storage: Storage) -> None:
        """Guarantee: an ordered-lock turn whose timer is gone (skipped by an operator or
        drained as a poison pill) is reported lost at the next heartbeat, so its holder stops
        acting in turn."""
        key = uid("lease-ordered")
        client = OrderedLock(storage.ordered_locks, key, poison_pill_timeout=MIN_LEASE,
                             skew=_skew(storage))
        ticket = client.assign()
        assert client.check(ticket) == "go"
        loss = _Loss()
        client.start_heartbeat(ticket, on_lost=loss)
        try:
            client.skip(ticket.nonce)
            assert loss.event.wait(TIMEOUT), "a lost ordered turn was never reported"
            assert isinstance(client.lost, LockLost) and client.lost.primitive == "ordered_lock"
        finally:
            client.stop_heartbeat()


class TestLeases(LeasesContract):
    """The leases contract against ``--reactor-storage``."""
