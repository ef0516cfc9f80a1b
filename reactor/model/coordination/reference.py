"""The reference coordination stores: the pure state machines over a dict and a settable clock.

The contract suite checks each adapter against the pure model with random operation sequences
(docs/contract-suite.md). :class:`ReferenceCoordination` exposes one object per
coordination Protocol of :mod:`reactor.ports.storage` — ``locks`` (:class:`LockStore`),
``semaphores``, ``rate_limits``, ``periods`` and ``ordered_locks`` — with exactly their method
signatures. Each call reads the settable clock once and applies the matching pure function
under a mutex. It is the oracle a model-based test compares a real adapter against, call by
call, after setting both clocks to the same instant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from reactor.model.coordination import locks as _locks
from reactor.model.coordination import ordered_locks as _ordered
from reactor.model.coordination import periods as _periods
from reactor.model.coordination import rate_limits as _rates
from reactor.model.coordination import semaphores as _semaphores
from reactor.model.records import (
    LockInfo,
    OrderedGate,
    OrderedLockState,
    OrderedTicket,
    PeriodMarker,
    RateDecision,
    RateWindow,
    SemaphoreState,
)

__all__ = [
    "ReferenceCoordination",
    "ReferenceLockStore",
    "ReferenceOrderedLockStore",
    "ReferencePeriodStore",
    "ReferenceRateLimitStore",
    "ReferenceSemaphoreStore",
    "SettableClock",
]

S = TypeVar("S")
R = TypeVar("R")


class SettableClock:
    """A callable clock that only moves when told to (epoch seconds; may go backwards).

    Args:
        start: the initial time in epoch seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        """The current time in epoch seconds."""
        return self._now

    def set(self, now: float) -> None:
        """Jump to ``now`` epoch seconds."""
        self._now = float(now)

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        self._now += seconds
        return self._now


class _Cells(Generic[S]):
    """States by key, each transition applied under one mutex with one clock read."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.states: dict[str, S] = {}
        self._mutex = threading.Lock()

    def apply(self, key: str, transition: Callable[[S | None, float], tuple[S | None, R]]) -> R:
        with self._mutex:
            new, result = transition(self.states.get(key), self.clock())
            if new is None:
                self.states.pop(key, None)
            else:
                self.states[key] = new
            return result

    def read(self, key: str, view: Callable[[S | None, float], R]) -> R:
        with self._mutex:
            return view(self.states.get(key), self.clock())


class ReferenceLockStore:
    """:class:`reactor.ports.LockStore` over :mod:`reactor.model.coordination.locks`.

    Nothing is ever garbage-collected here, so a lapsed lock or a tombstone keeps its fencing
    token forever (a real store keeps it ``FENCE_RETENTION`` seconds; after that the clock term
    of the token formula gives the same ordering, docs/coordination.md#fencing-tokens).

    Attributes:
        states: ``{key: LockState}`` as stored (may hold lapsed states and tombstones).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._cells: _Cells[_locks.LockState] = _Cells(clock)
        self.states = self._cells.states

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        """See :func:`reactor.model.coordination.locks.acquire`.

        Returns:
            The fencing token (>= 1) when ``owner`` holds the lock now, 0 when refused
            (docs/coordination.md#fencing-tokens).
        """
        return self._cells.apply(key, lambda s, now: _locks.acquire(s, now, owner, ttl))

    def release(self, key: str, owner: str) -> bool:
        """See :func:`reactor.model.coordination.locks.release`."""
        return self._cells.apply(key, lambda s, now: _locks.release(s, now, owner))

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        """See :func:`reactor.model.coordination.locks.extend`."""
        return self._cells.apply(key, lambda s, now: _locks.extend(s, now, owner, ttl))

    def held(self, key: str) -> bool:
        """See :func:`reactor.model.coordination.locks.held`."""
        return self._cells.read(key, _locks.held)

    def info(self, key: str) -> LockInfo | None:
        """See :func:`reactor.model.coordination.locks.info`."""
        return self._cells.read(key, _locks.info)


class ReferenceSemaphoreStore:
    """:class:`reactor.ports.SemaphoreStore` over :mod:`reactor.model.coordination.semaphores`.

    Attributes:
        states: ``{key: SemaphoreLeases}`` as stored.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._cells: _Cells[_semaphores.SemaphoreLeases] = _Cells(clock)
        self.states = self._cells.states

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        """See :func:`reactor.model.coordination.semaphores.acquire`."""
        return self._cells.apply(
            key, lambda s, now: _semaphores.acquire(s, now, holder, limit, lease)
        )

    def release(self, key: str, holder: str) -> bool:
        """See :func:`reactor.model.coordination.semaphores.release`."""
        return self._cells.apply(key, lambda s, now: _semaphores.release(s, now, holder))

    def extend(self, key: str, holder: str, lease: float) -> bool:
        """See :func:`reactor.model.coordination.semaphores.extend`."""
        return self._cells.apply(key, lambda s, now: _semaphores.extend(s, now, holder, lease))

    def state(self, key: str) -> SemaphoreState | None:
        """See :func:`reactor.model.coordination.semaphores.view`."""
        return self._cells.read(key, _semaphores.view)

    def reset(self, key: str) -> None:
        """See :func:`reactor.model.coordination.semaphores.reset`."""
        self._cells.apply(key, _semaphores.reset)


class ReferenceRateLimitStore:
    """:class:`reactor.ports.RateLimitStore` over :mod:`reactor.model.coordination.rate_limits`.

    Attributes:
        states: ``{key: RateCounters}`` as stored.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._cells: _Cells[_rates.RateCounters] = _Cells(clock)
        self.states = self._cells.states

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        """See :func:`reactor.model.coordination.rate_limits.hit`."""
        return self._cells.apply(key, lambda s, now: _rates.hit(s, now, windows))

    def count(self, key: str, window: RateWindow) -> int:
        """See :func:`reactor.model.coordination.rate_limits.count`."""
        return self._cells.read(key, lambda s, now: _rates.count(s, now, window))


class ReferencePeriodStore:
    """:class:`reactor.ports.PeriodStore` over :mod:`reactor.model.coordination.periods`.

    Attributes:
        states: ``{key: PeriodMarkState}`` as stored.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._cells: _Cells[_periods.PeriodMarkState] = _Cells(clock)
        self.states = self._cells.states

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        """See :func:`reactor.model.coordination.periods.mark`."""
        return self._cells.apply(key, lambda s, now: _periods.mark(s, now, ttl, context_id))

    def marker(self, key: str) -> PeriodMarker | None:
        """See :func:`reactor.model.coordination.periods.marker`."""
        return self._cells.read(key, _periods.marker)


class ReferenceOrderedLockStore:
    """:class:`reactor.ports.OrderedLockStore` over :mod:`...coordination.ordered_locks`.

    Like :class:`ReferenceLockStore` it never garbage-collects: a lapsed or reset epoch stays
    in the state as the fence of the next batch.

    Attributes:
        states: ``{key: OrderedLockRecord}`` as stored.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._cells: _Cells[_ordered.OrderedLockRecord] = _Cells(clock)
        self.states = self._cells.states

    def assign(self, key: str, *, ttl: float) -> OrderedTicket:
        """See :func:`reactor.model.coordination.ordered_locks.assign`."""
        return self._cells.apply(key, lambda s, now: _ordered.assign(s, now, ttl))

    def can_proceed(
        self, key: str, ticket: OrderedTicket, *, poison_pill_timeout: float
    ) -> OrderedGate:
        """See :func:`reactor.model.coordination.ordered_locks.can_proceed`."""
        return self._cells.apply(
            key, lambda s, now: _ordered.can_proceed(s, now, ticket, poison_pill_timeout)
        )

    def advance(self, key: str, ticket: OrderedTicket, *, failed: bool, ttl: float) -> int:
        """See :func:`reactor.model.coordination.ordered_locks.advance`."""
        return self._cells.apply(key, lambda s, now: _ordered.advance(s, now, ticket, failed, ttl))

    def heartbeat(self, key: str, ticket: OrderedTicket) -> bool:
        """See :func:`reactor.model.coordination.ordered_locks.heartbeat`."""
        return self._cells.apply(key, lambda s, now: _ordered.heartbeat(s, now, ticket))

    def skip(self, key: str, nonce: int) -> int:
        """See :func:`reactor.model.coordination.ordered_locks.skip`."""
        return self._cells.apply(key, lambda s, now: _ordered.skip(s, now, nonce))

    def reset(self, key: str) -> None:
        """See :func:`reactor.model.coordination.ordered_locks.reset`."""
        self._cells.apply(key, _ordered.reset)

    def peek(self, key: str) -> OrderedLockState:
        """See :func:`reactor.model.coordination.ordered_locks.peek`."""
        return self._cells.read(key, _ordered.peek)


class ReferenceCoordination:
    """The five coordination stores over the pure model, sharing one clock.

    Args:
        clock: a callable returning epoch seconds to share (e.g. the manual clock of the
            adapter under test); a new :class:`SettableClock` at ``start`` when omitted.
        start: the initial epoch seconds of a new clock.

    Attributes:
        clock: the shared clock callable.
        locks: a :class:`reactor.ports.LockStore`.
        semaphores: a :class:`reactor.ports.SemaphoreStore`.
        rate_limits: a :class:`reactor.ports.RateLimitStore`.
        periods: a :class:`reactor.ports.PeriodStore`.
        ordered_locks: a :class:`reactor.ports.OrderedLockStore`.
    """

    def __init__(self, clock: Callable[[], float] | None = None, *, start: float = 0.0) -> None:
        self.clock: Callable[[], float] = clock if clock is not None else SettableClock(start)
        self.locks = ReferenceLockStore(self.clock)
        self.semaphores = ReferenceSemaphoreStore(self.clock)
        self.rate_limits = ReferenceRateLimitStore(self.clock)
        self.periods = ReferencePeriodStore(self.clock)
        self.ordered_locks = ReferenceOrderedLockStore(self.clock)

    def now(self) -> float:
        """The shared clock's time in epoch seconds."""
        return self.clock()

    def set_now(self, now: float) -> None:
        """Set the owned :class:`SettableClock` to ``now`` epoch seconds.

        Raises:
            TypeError: the clock was passed in; drive that clock instead.
        """
        self._own_clock().set(now)

    def advance(self, seconds: float) -> float:
        """Move the owned :class:`SettableClock` forward by ``seconds``; returns the new time.

        Raises:
            TypeError: the clock was passed in; drive that clock instead.
        """
        return self._own_clock().advance(seconds)

    def _own_clock(self) -> SettableClock:
        if not isinstance(self.clock, SettableClock):
            raise TypeError("this ReferenceCoordination shares an external clock; drive that one")
        return self.clock
