"""Lease renewal from one shared scheduler: renew every ``lease/3``, retry errors promptly,
declare the hold lost on a ``False`` answer or at the holder's own deadline.

The renewal policy is :mod:`reactor.model.coordination.renewal` (``docs/coordination.md``,
"Renewal and loss"). Shared by the lock extender, the semaphore lease extender, the ordered-lock
heartbeat, the run/element liveness locks (through :class:`~reactor.coordination.lock.Lock`) and
the worker's visibility heartbeat:

* every ``interval`` seconds (counted from the start of the last successful renewal) it calls
  ``renew``;
* ``renew`` answering ``False`` means the lease is gone: ``on_lost`` is called and renewal stops;
* ``renew`` raising (a storage outage) is logged and retried after a jittered backoff bounded by
  the time left on the lease (:func:`~reactor.model.coordination.renewal.retry_delay`);
* with a ``lease``, the heartbeat keeps the holder's **deadline**: the start of the last
  successful renewal (or of the acquire) plus ``lease`` on the monotonic clock. When it passes
  without a successful renewal — every retry failed, or one renewal hung past it — the lease is
  lost: ``on_lost`` fires at the deadline, not when the hung call returns.

Threads: every heartbeat of the process is driven by one lazily started daemon *timer* thread
(a heap of deadlines under a :class:`threading.Condition`) that hands due work to a small pool
of daemon *renew* threads (at most :data:`MAX_RENEW_THREADS`, started on demand and kept). One
slow or hung ``renew`` delays no other heartbeat as long as a pool thread is free; a
heartbeat's own renew calls never overlap. After ``os.fork`` the child starts a fresh scheduler
(the parent's threads do not exist there); heartbeats started in the parent never renew in the
child.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable

from reactor.model.coordination.renewal import retry_delay
from reactor.model.text import escaping_logger
from reactor.ports.clock import monotonic_reader

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["MAX_RENEW_THREADS", "REFUSED", "STOP_WAIT", "Heartbeat"]

log = escaping_logger("reactor.coordination")

#: The most threads the shared scheduler runs ``renew`` calls on (started only when needed).
MAX_RENEW_THREADS = 4

#: The longest :meth:`Heartbeat.stop` waits for a ``renew`` call in progress, in seconds.
STOP_WAIT = 5.0

# Rebuild the heap once this many entries of stopped heartbeats still sit in it (and they are
# at least half of it), so a process taking many short locks does not keep them until due.
_COMPACT_MIN = 64

#: ``Heartbeat.lost_reason`` when a renewal answered ``False`` (refused by the store).
REFUSED = "renew answered False"

# Heap entry kinds: a renewal is due; the holder's deadline is due (a watch).
_RENEW = 0
_WATCH = 1


def _jitter() -> float:
    return _RANDOM.uniform(0.5, 1.0)


class Heartbeat:
    """Renew a lease every ``interval`` seconds from the process's shared heartbeat scheduler.

    Args:
        name: a label for logs.
        interval: seconds from the start of one successful ``renew`` call to the next call
            (the first call comes ``interval`` seconds after :meth:`start`); for a lease use
            :func:`reactor.model.coordination.renewal.renew_interval` (``lease / 3``).
        renew: returns ``True`` while the lease is still held. Runs on a scheduler thread.
        on_lost: called once, from a scheduler thread, when the lease is lost: ``renew``
            answered ``False``, or (with ``lease``) the deadline passed without a successful
            renewal. Never called after :meth:`stop`.
        lease: seconds the lease lasts after a successful renewal; ``None`` = no deadline
            (only a ``False`` answer loses it).
        clock: the monotonic clock the deadline is kept on (injectable for tests of
            :meth:`expired`); default the system's monotonic clock, read at call time. The
            scheduler itself always waits on ``time.monotonic``.
        jitter: returns the retry jitter factor in ``[0.5, 1.0]`` (injectable for tests).

    Attributes:
        deadline: the holder's deadline on ``clock`` (``None`` without ``lease``).
        lost: ``True`` once the lease was declared lost.
        lost_reason: why it was declared lost (:data:`REFUSED`, or a sentence about the
            deadline), else ``None``.
    """

    def __init__(
        self,
        name: str,
        interval: float,
        renew: Callable[[], bool],
        on_lost: Callable[[], None] | None = None,
        *,
        lease: float | None = None,
        clock: Callable[[], float] | None = None,
        jitter: Callable[[], float] = _jitter,
    ) -> None:
        self.name = name
        self.interval = interval
        self.lease = lease
        self.deadline: float | None = None
        self.lost = False
        self.lost_reason: str | None = None
        self._renew = renew
        self._on_lost = on_lost
        self._clock = monotonic_reader(clock)
        self._jitter = jitter
        self._failures = 0
        # State below is guarded by the scheduler's lock once started.
        self._scheduler: _Scheduler | None = None
        self._stopped = False
        self._entries = 0  # heap entries of this heartbeat
        self._renewing: int | None = None  # ident of the thread running renew, if any
        self._stop_event: threading.Event | None = None  # only for run() without ``wait``

    def start(self, acquired_at: float | None = None) -> Heartbeat:
        """Schedule the first renewal ``interval`` seconds from now; returns ``self``.

        Args:
            acquired_at: the ``clock`` reading taken just *before* the call that granted the
                lease (the deadline counts from it); default: now.

        Raises:
            RuntimeError: the heartbeat was already started.
        """
        if self._scheduler is not None:
            raise RuntimeError(f"heartbeat {self.name!r} already started")
        if self.lease is not None:
            self.deadline = (self._clock() if acquired_at is None else acquired_at) + self.lease
        _scheduler().add(self)
        return self

    def expired(self) -> bool:
        """Whether the lease must be taken as lost *now*: declared lost, or past the deadline.

        Cheap (no I/O): call it before committing work done under the lease.
        """
        if self.lost:
            return True
        deadline = self.deadline
        return deadline is not None and self._clock() >= deadline

    @property
    def refused(self) -> bool:
        """Whether the lease was lost because a renewal answered ``False``."""
        return self.lost_reason == REFUSED

    def time_left(self) -> float:
        """Seconds until the deadline (``math.inf`` without a lease; <= 0 when expired)."""
        deadline = self.deadline
        if self.lost:
            return 0.0
        return math.inf if deadline is None else deadline - self._clock()

    def run(self, wait: Callable[[float], bool] | None = None) -> None:
        """Run the renewal loop in the calling thread until stopped or the lease is lost.

        Not used by :meth:`start`; kept for tests, which drive the loop with a fake ``wait``.
        Same policy as the scheduler: an error is retried (after ``wait(delay)``), a ``False``
        answer or a passed deadline loses the lease.

        Args:
            wait: called with the delay before each renewal; returning ``True`` ends the
                loop (default: wait on this heartbeat's stop signal).
        """
        if wait is None:
            if self._stop_event is None:
                self._stop_event = threading.Event()
                if self._stopped:
                    self._stop_event.set()
            wait = self._stop_event.wait
        if self.lease is not None and self.deadline is None:
            self.deadline = self._clock() + self.lease
        delay = self.interval
        while not wait(delay):
            outcome = self._attempt()
            if outcome is None:
                return
            delay = outcome

    def _attempt(self) -> float | None:
        """One renewal (no scheduler): the delay before the next one, ``None`` when lost."""
        if self.expired():
            self._declare_lost("deadline passed")
            return None
        started = self._clock()
        try:
            renewed = self._renew()
        except Exception as exc:
            delay = self._after_error(exc)
            if delay is None:
                self._declare_lost(f"deadline passed after {self._failures} failed renewals")
            return delay
        if not renewed:
            self._declare_lost(REFUSED)
            return None
        self._renewed(started)
        return self.interval

    def _renewed(self, started: float) -> None:
        self._failures = 0
        if self.lease is not None:
            self.deadline = started + self.lease

    def _after_error(self, exc: Exception) -> float | None:
        """Log a failed renewal; the retry delay, or ``None`` when the deadline has passed."""
        self._failures += 1
        left = self.time_left()
        if left <= 0:
            log.warning(
                "event=renew_error name=%s failures=%d time_left=0 error=%s",
                self.name, self._failures, exc,
            )
            return None
        delay = retry_delay(self._failures, left, self.interval, self._jitter())
        # The first failure of a streak is a warning; its retries are debug (the loss, if it
        # comes, is a warning again), so an outage does not flood the log.
        log.log(
            logging.WARNING if self._failures == 1 else logging.DEBUG,
            "event=renew_error name=%s failures=%d retry_in=%.3f time_left=%.3f error=%s",
            self.name, self._failures, delay, left, exc,
        )
        return delay

    def _declare_lost(self, why: str) -> None:
        self.lost_reason = self.lost_reason or why
        self.lost = True
        self._stopped = True
        log.warning("event=lease_lost name=%s reason=%s", self.name, why)
        if self._on_lost is not None:
            try:
                self._on_lost()
            except Exception:
                log.exception("event=on_lost_error name=%s", self.name)

    def stop(self) -> None:
        """Stop renewing. Returns at once unless a ``renew`` call is in progress.

        After ``stop`` returns no ``renew`` (nor ``on_lost``) call is made any more. A ``renew``
        call already in progress is waited for (up to :data:`STOP_WAIT` seconds), so its write
        cannot land after the caller's next step (a release, a park's shorter TTL, an ack); it
        is not waited for when ``stop`` is called from that very call (or from ``on_lost``),
        nor past the timeout. Idempotent; never raises.
        """
        event = self._stop_event
        if event is not None:
            event.set()
        scheduler = self._scheduler
        if scheduler is None or scheduler.pid != os.getpid():
            self._stopped = True  # never started, or started in the parent of a fork
            return
        scheduler.remove(self)


class _Scheduler:
    """The process's heartbeat scheduler: a timer thread and a small pool of renew threads."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._timer_cv = threading.Condition(self._lock)  # the timer: the heap changed
        self._work_cv = threading.Condition(self._lock)  # renew threads: work is ready
        self._done_cv = threading.Condition(self._lock)  # stop(): a renew call finished
        self._heap: list[tuple[float, int, int, Heartbeat]] = []
        self._stale = 0  # heap entries of stopped heartbeats
        self._ready: deque[tuple[int, Heartbeat]] = deque()
        self._seq = itertools.count()
        self._timer: threading.Thread | None = None
        self._threads = 0
        self._idle = 0

    # ------------------------------------------------------------------ called by Heartbeat

    def add(self, beat: Heartbeat) -> None:
        with self._lock:
            beat._scheduler = self
            if beat._stopped:
                return
            self._push(beat, time.monotonic() + beat.interval, _RENEW)
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._timer_loop, name="reactor-heartbeat-timer", daemon=True
                )
                self._timer.start()

    def remove(self, beat: Heartbeat) -> None:
        with self._lock:
            if self._mark_stopped(beat) and (
                self._stale >= _COMPACT_MIN and self._stale * 2 >= len(self._heap)
            ):
                self._compact()
            if beat._renewing is not None and beat._renewing != threading.get_ident():
                self._done_cv.wait_for(lambda: beat._renewing is None, timeout=STOP_WAIT)

    # ------------------------------------------------------------------ internals (lock held)

    def _mark_stopped(self, beat: Heartbeat) -> bool:
        """Stop ``beat`` (its heap entries become stale); ``False`` when already stopped."""
        if beat._stopped:
            return False
        beat._stopped = True
        self._stale += beat._entries
        return True

    def _push(self, beat: Heartbeat, when: float, kind: int) -> None:
        if not self._heap or when < self._heap[0][0]:
            self._timer_cv.notify()  # the timer sleeps until a later deadline
        heapq.heappush(self._heap, (when, next(self._seq), kind, beat))
        beat._entries += 1

    def _watch_deadline(self, beat: Heartbeat) -> None:
        """Wake at the beat's deadline (on ``time.monotonic``) while a renew call runs."""
        if beat.deadline is None:
            return
        self._push(beat, time.monotonic() + max(beat.time_left(), 0.0), _WATCH)

    def _compact(self) -> None:
        live = []
        for entry in self._heap:
            if entry[3]._stopped:
                entry[3]._entries -= 1
            else:
                live.append(entry)
        heapq.heapify(live)
        self._heap = live
        self._stale = 0

    def _hand_over(self, kind: int, beat: Heartbeat) -> None:
        self._ready.append((kind, beat))
        if self._idle > len(self._ready) - 1:
            self._work_cv.notify()
        elif self._threads < MAX_RENEW_THREADS:
            self._threads += 1
            threading.Thread(
                target=self._renew_loop, name="reactor-heartbeat-renew", daemon=True
            ).start()
        # else: a busy renew thread takes it when it is done

    # ------------------------------------------------------------------ threads

    def _timer_loop(self) -> None:
        with self._lock:
            while True:
                heap = self._heap
                if not heap:
                    self._timer_cv.wait()
                    continue
                delay = heap[0][0] - time.monotonic()
                if delay > 0:
                    self._timer_cv.wait(delay)
                    continue
                _, _, kind, beat = heapq.heappop(heap)
                beat._entries -= 1
                if beat._stopped:
                    self._stale -= 1
                    continue
                if kind == _WATCH:
                    # Only a renew call still running at the deadline loses the lease here;
                    # a renewal that succeeded since has moved the deadline on.
                    if beat._renewing is not None and beat.expired():
                        self._mark_stopped(beat)
                        self._hand_over(_WATCH, beat)
                    continue
                self._hand_over(_RENEW, beat)

    def _renew_loop(self) -> None:
        me = threading.get_ident()
        while True:
            with self._lock:
                while not self._ready:
                    self._idle += 1
                    try:
                        self._work_cv.wait()
                    finally:
                        self._idle -= 1
                kind, beat = self._ready.popleft()
                if kind == _WATCH:
                    lost_at_deadline = True
                else:
                    if beat._stopped:
                        continue
                    lost_at_deadline = beat.expired()
                    if lost_at_deadline:
                        self._mark_stopped(beat)
                    else:
                        beat._renewing = me
                        self._watch_deadline(beat)
            if lost_at_deadline:
                beat._declare_lost("deadline passed without a successful renewal")
                continue
            started = beat._clock()
            error: Exception | None = None
            try:
                renewed = beat._renew()
            except Exception as exc:
                renewed, error = True, exc
            with self._lock:
                beat._renewing = None
                self._done_cv.notify_all()
                if beat._stopped:
                    continue
                delay: float | None = None
                if error is None and renewed:
                    beat._renewed(started)
                    delay = max(beat.interval - (beat._clock() - started), 0.0)
                elif error is not None:
                    delay = beat._after_error(error)
                if delay is None:
                    self._mark_stopped(beat)
                else:
                    self._push(beat, time.monotonic() + delay, _RENEW)
            if delay is None:
                beat._declare_lost(
                    REFUSED if error is None
                    else f"deadline passed after {beat._failures} failed renewals"
                )


_lock = threading.Lock()
_current: _Scheduler | None = None


def _scheduler() -> _Scheduler:
    """The scheduler of this process (a fresh one after ``os.fork``)."""
    global _current
    scheduler = _current
    pid = os.getpid()
    if scheduler is not None and scheduler.pid == pid:
        return scheduler
    with _lock:  # after a fork this lock may be stuck, held by a parent thread: see below
        if _current is None or _current.pid != pid:
            _current = _Scheduler()
        return _current


def _after_fork_in_child() -> None:
    global _lock, _current
    _lock = threading.Lock()
    _current = None


os.register_at_fork(after_in_child=_after_fork_in_child)
