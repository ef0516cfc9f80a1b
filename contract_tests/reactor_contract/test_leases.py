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
observations with short sleeps; no assertion depends on a sleep being long enough. A 1 s lease
holds only when the backend answers an extend well inside it: when a "held through" test loses
its hold **and** the recorded timings show the machine starved the holder (an extend round trip
above a quarter of the lease, an extend still in flight that long when the loss is found, or
extends started more than half a lease apart, or none started for half a lease before it), the
test runs again with twice the lease (up to 4 s) and fails, naming the stalls, when every lease
starved. A lapse without a stall fails at once. Holders use
the storage's declared clock-skew budget (``Capabilities.clock_skew``) as the engine does, so an
application-clock backend must be configured with a budget below 1 s to run them (the DynamoDB
run in ``scripts/test`` declares 0.25 s).
"""

from __future__ import annotations

import itertools
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
#: The leases a "held through" test tries, shortest first; a longer one only after the machine
#: starved the holder at the shorter (:meth:`_Faulty.stall`).
LEASES = (MIN_LEASE, 2 * MIN_LEASE, 4 * MIN_LEASE)


class _Faulty:
    """Wraps a lock or semaphore sub-store; ``extend`` raises ``StorageError`` on demand.

    Args:
        store: the real sub-store.
        fail: decides, from the 1-based number of the extend call, whether it raises.
    """

    def __init__(self, store: Any, fail: Callable[[int], bool] = lambda n: False) -> None:
        self._store = store
        self._fail = fail
        self.extends = 0
        self.raised = 0
        self.calls: list[tuple[float, float]] = []  # (start, end) of each real extend
        self.pending: dict[int, float] = {}  # extend number -> start, while it is in flight

    def extend(self, *args: Any) -> bool:
        self.extends += 1
        if self._fail(self.extends):
            self.calls.append((time.monotonic(), time.monotonic()))
            self.raised += 1
            raise StorageError(f"injected outage on extend #{self.extends}")
        number, start = self.extends, time.monotonic()
        self.pending[number] = start
        try:
            return bool(self._store.extend(*args))
        finally:
            del self.pending[number]
            self.calls.append((start, time.monotonic()))

    def stall(self, lease: float, since: float, until: float) -> str | None:
        """How the machine starved this holder of a ``lease``-second hold taken at ``since``
        and found lost at ``until`` (monotonic): an extend round trip above ``lease / 4`` (an
        extend still in flight at ``until`` counts as lasting until then), or extends started
        more than ``lease / 2`` apart, or the last one started more than ``lease / 2`` before
        ``until`` (renewal runs every ``lease / 3``); ``None`` when it did not."""
        calls = [*self.calls, *((start, until) for start in self.pending.values())]
        starts = [*sorted([since, *(start for start, _ in calls)]), until]
        trip = max((end - start for start, end in calls), default=0.0)
        gap = max((b - a for a, b in itertools.pairwise(starts)), default=0.0)
        if trip > lease / 4 or gap > lease / 2:
            return f"{lease:g} s lease: slowest extend {trip:.3f} s, widest gap {gap:.3f} s"
        return None

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


def _told_or_starved(answers: list[bool | str], primitive: str, timed: _Faulty) -> None:
    """Assert :func:`_told_at_the_next_extend`; a loss reported with no extend answered after
    the take-over came from the holder's own deadline, which only a starved holder reaches:
    raised as :class:`_Lost`, so :func:`_at_the_shortest_lease` retries it with a longer lease
    when ``timed`` recorded the stall (and fails at once when it did not)."""
    wrong = _told_at_the_next_extend(answers, primitive)
    if wrong is None:
        return
    with _lost_through(*([timed] if not answers else [])):
        raise AssertionError(wrong)


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


def _nobody_else_in(storage: Storage, lock: Lock, sem: Semaphore) -> None:
    """Assert that an intruder can take neither the held lock nor the only slot of ``sem``,
    and that neither holder believes its hold lost."""
    assert not storage.locks.acquire(lock.key, "intruder", 30.0), "lock lapsed while held"
    assert not storage.semaphores.acquire(sem.key, "intruder", 1, 30.0), (
        "a second holder got the only slot while the first still held it"
    )
    assert lock.lost is None and sem.lost is None


def _at_the_shortest_lease(attempt: Callable[[float], object]) -> None:
    """Run ``attempt(lease)`` with each of :data:`LEASES` until one passes.

    ``attempt`` raises :class:`_Lost` (through :func:`_lost_through`) when the hold lapsed. A
    loss is retried with a longer lease only when one of its stores recorded a stall
    (:meth:`_Faulty.stall`); otherwise, or when every lease starved, the assertion is raised
    (naming the stalls).
    """
    stalls: list[str] = []
    for lease in LEASES:
        since = time.monotonic()
        try:
            attempt(lease)
            return
        except _Lost as lost:
            found = [s for s in (store.stall(lease, since, lost.at) for store in lost.stores)
                     if s]
            if not found:
                raise lost.error from None
            stalls.extend(found)
    raise AssertionError(f"every lease starved on this machine: {stalls}")


class _Lost(Exception):
    """A hold lapsed inside an attempt: the assertion and the stores to look for stalls in."""

    def __init__(self, error: AssertionError, stores: list[_Faulty]) -> None:
        super().__init__(str(error))
        self.error = error
        self.stores = stores
        self.at = time.monotonic()  # when the loss was found


@contextmanager
def _lost_through(*stores: _Faulty) -> Iterator[None]:
    """Turn an ``AssertionError`` inside the block into :class:`_Lost` naming ``stores``."""
    try:
        yield
    except AssertionError as exc:
        raise _Lost(exc, list(stores)) from exc


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

        def attempt(lease: float) -> None:
            key, sem_key = uid("lease-lock"), uid("lease-sem")
            locks, sems = _Faulty(storage.locks), _Faulty(storage.semaphores)
            lock = Lock(locks, key, ttl=lease, skew=_skew(storage))
            sem = Semaphore(sems, sem_key, limit=1, lease=lease, skew=_skew(storage))
            lock.acquire()
            sem.acquire()
            with _lost_through(locks, sems), _released(lock, sem):

                _hold_for(HOLD_FOR, lambda: _nobody_else_in(storage, lock, sem))
            assert storage.locks.info(key) is None
            state = storage.semaphores.state(sem_key)
            assert state is None or state.holders == {}

        _at_the_shortest_lease(attempt)

    @pytest.mark.obligations("O-leases-3")
    def test_extends_that_raise_twice_inside_the_lease_keep_the_hold(
        self, storage: Storage
    ) -> None:
        """Guarantee: transient storage errors inside a lease never lose it — a failed extend
        is retried promptly (jittered backoff bounded by the time left), not a full interval
        later."""

        def attempt(lease: float) -> None:
            key, sem_key = uid("lease-lock"), uid("lease-sem")
            locks = _Faulty(storage.locks, lambda n: n in (1, 2))
            sems = _Faulty(storage.semaphores, lambda n: n in (1, 2))
            lock_loss, sem_loss = _Loss(), _Loss()
            lock = Lock(locks, key, ttl=lease, on_lost=lock_loss, skew=_skew(storage))
            sem = Semaphore(sems, sem_key, limit=1, lease=lease, on_lost=sem_loss,
                            skew=_skew(storage))
            lock.acquire()
            sem.acquire()
            with _lost_through(locks, sems), _released(lock, sem):

                _hold_for(HOLD_FOR, lambda: _nobody_else_in(storage, lock, sem))
            assert locks.raised == 2 and sems.raised == 2
            assert locks.extends > 2 and sems.extends > 2
            assert not lock_loss.event.is_set() and not sem_loss.event.is_set()

        _at_the_shortest_lease(attempt)

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

        def attempt(lease: float) -> None:
            key = uid("lease-lock")
            loss = _Loss()
            timed = _Faulty(storage.locks)
            locks = _Answers(timed)
            lock = Lock(locks, key, ttl=lease, on_lost=loss, skew=_skew(storage))
            lock.acquire()
            with _released(lock):
                taken_over = len(locks.answers)
                probe.expire("lock", key)
                assert storage.locks.acquire(key, "thief", 30.0)
                assert loss.event.wait(TIMEOUT), "a refused extend was never reported"
                assert isinstance(lock.lost, LockLost)
                _told_or_starved(locks.answers[taken_over:], "lock", timed)
                assert lock.release() is False
            info = storage.locks.info(key)
            assert info is not None and info.owner == "thief"

        _at_the_shortest_lease(attempt)

    @pytest.mark.obligations("O-leases-7", "O-semaphores-4")
    def test_a_semaphore_take_over_is_reported(self, storage: Storage, probe: Probe) -> None:
        """Guarantee: a lease that lapsed in the store (its slot taken) is reported lost."""

        def attempt(lease: float) -> None:
            key = uid("lease-sem")
            loss = _Loss()
            timed = _Faulty(storage.semaphores)
            sems = _Answers(timed)
            sem = Semaphore(sems, key, limit=1, lease=lease, on_lost=loss,
                            skew=_skew(storage))
            sem.acquire()
            with _released(sem):
                taken_over = len(sems.answers)
                probe.expire("semaphore", key, sem.holder)
                assert storage.semaphores.acquire(key, "thief", 1, 30.0)
                assert loss.event.wait(TIMEOUT), "a refused extend was never reported"
                assert isinstance(sem.lost, LockLost)
                _told_or_starved(sems.answers[taken_over:], "semaphore lease", timed)
                assert sem.release() is False

        _at_the_shortest_lease(attempt)

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
