"""Lease renewal on an interval until stopped or the lease is lost, from one shared scheduler.

Shared by the lock extender, the semaphore lease extender, the ordered-lock heartbeat and the
worker's visibility heartbeat (storage-protocol.md §2.8 "Auto-extend"): every ``interval``
seconds it calls ``renew``; a ``False`` answer means the lease is gone, so it calls ``on_lost``
and stops; an exception (a storage outage) is logged and the next tick tries again.

Threads: one heartbeat used to be one thread, started and joined for every lock held — a cost
paid by every synchronous run (its liveness lock ``async:<id>`` auto-extends). Now every
heartbeat of the process is driven by one lazily started daemon *timer* thread (a heap of
deadlines under a :class:`threading.Condition`) that hands due heartbeats to a small pool of
daemon *renew* threads (at most :data:`MAX_RENEW_THREADS`, started on demand and kept). The
renew calls run on the pool, not on the timer, so one slow or hung ``renew`` (a storage
timeout) delays no other heartbeat as long as a pool thread is free; a heartbeat's own renew
calls never overlap (the next interval starts when its previous ``renew`` returns, as in the
thread-per-heartbeat loop). After ``os.fork`` the child starts a fresh scheduler (the parent's
threads do not exist there); heartbeats started in the parent never renew in the child.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["MAX_RENEW_THREADS", "STOP_WAIT", "Heartbeat"]

log = logging.getLogger("reactor.coordination")

#: The most threads the shared scheduler runs ``renew`` calls on (started only when needed).
MAX_RENEW_THREADS = 4

#: The longest :meth:`Heartbeat.stop` waits for a ``renew`` call in progress, in seconds (the
#: thread-per-heartbeat implementation joined its thread with the same timeout).
STOP_WAIT = 5.0

# Rebuild the heap once this many stopped heartbeats still sit in it (and they are at least
# half of it), so a process taking many short locks does not keep their entries until due.
_COMPACT_MIN = 64


class Heartbeat:
    """Renew a lease every ``interval`` seconds from the process's shared heartbeat scheduler.

    Args:
        name: a label for logs (it was the thread's name when each heartbeat had a thread).
        interval: seconds between the end of one ``renew`` call and the start of the next
            (the first call comes ``interval`` seconds after :meth:`start`).
        renew: returns ``True`` while the lease is still held. Runs on a scheduler thread.
        on_lost: called once, from a scheduler thread, when ``renew`` returns ``False``
            (never after :meth:`stop` was called).
    """

    def __init__(
        self,
        name: str,
        interval: float,
        renew: Callable[[], bool],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.interval = interval
        self._renew = renew
        self._on_lost = on_lost
        # State below is guarded by the scheduler's lock once started.
        self._scheduler: _Scheduler | None = None
        self._stopped = False
        self._in_heap = False
        self._renewing: int | None = None  # ident of the thread running renew, if any
        self._stop_event: threading.Event | None = None  # only for run() without ``wait``

    def start(self) -> Heartbeat:
        """Schedule the first renewal ``interval`` seconds from now; returns ``self``.

        Raises:
            RuntimeError: the heartbeat was already started (as ``Thread.start`` did).
        """
        if self._scheduler is not None:
            raise RuntimeError(f"heartbeat {self.name!r} already started")
        _scheduler().add(self)
        return self

    def run(self, wait: Callable[[float], bool] | None = None) -> None:
        """Run the renewal loop in the calling thread until stopped or the lease is lost.

        Not used by :meth:`start`; kept for tests, which drive the loop with a fake ``wait``.

        Args:
            wait: called with ``interval`` before each renewal; returning ``True`` ends the
                loop (default: wait on this heartbeat's stop signal).
        """
        if wait is None:
            if self._stop_event is None:
                self._stop_event = threading.Event()
                if self._stopped:
                    self._stop_event.set()
            wait = self._stop_event.wait
        while not wait(self.interval):
            try:
                renewed = self._renew()
            except Exception as exc:
                log.warning("event=renew_error name=%s error=%s", self.name, exc)
                continue
            if not renewed:
                log.warning("event=lease_lost name=%s", self.name)
                if self._on_lost is not None:
                    self._on_lost()
                return

    def stop(self) -> None:
        """Stop renewing. Returns at once unless a ``renew`` call is in progress.

        After ``stop`` returns no ``renew`` (nor ``on_lost``) call is made any more. A ``renew``
        call already in progress is waited for (up to :data:`STOP_WAIT` seconds, like the join
        of the former per-heartbeat thread), so its write cannot land after the caller's next
        step (a release, a park's shorter TTL, an ack); it is not waited for when ``stop`` is
        called from that very call (or from ``on_lost``), nor past the timeout — then that
        one call may still complete after ``stop`` returns. Idempotent; never raises.
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
        self._heap: list[tuple[float, int, Heartbeat]] = []
        self._stale = 0  # stopped heartbeats still in the heap
        self._ready: deque[Heartbeat] = deque()
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
            self._push(beat, time.monotonic() + beat.interval)
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._timer_loop, name="reactor-heartbeat-timer", daemon=True
                )
                self._timer.start()

    def remove(self, beat: Heartbeat) -> None:
        with self._lock:
            if not beat._stopped:
                beat._stopped = True
                if beat._in_heap:
                    self._stale += 1
                    if self._stale >= _COMPACT_MIN and self._stale * 2 >= len(self._heap):
                        self._compact()
            if beat._renewing is not None and beat._renewing != threading.get_ident():
                self._done_cv.wait_for(lambda: beat._renewing is None, timeout=STOP_WAIT)

    # ------------------------------------------------------------------ internals (lock held)

    def _push(self, beat: Heartbeat, deadline: float) -> None:
        if not self._heap or deadline < self._heap[0][0]:
            self._timer_cv.notify()  # the timer sleeps until a later deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), beat))
        beat._in_heap = True

    def _compact(self) -> None:
        live = []
        for entry in self._heap:
            if entry[2]._stopped:
                entry[2]._in_heap = False
            else:
                live.append(entry)
        heapq.heapify(live)
        self._heap = live
        self._stale = 0

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
                beat = heapq.heappop(heap)[2]
                beat._in_heap = False
                if beat._stopped:
                    self._stale -= 1
                    continue
                self._ready.append(beat)
                if self._idle > len(self._ready) - 1:
                    self._work_cv.notify()
                elif self._threads < MAX_RENEW_THREADS:
                    self._threads += 1
                    threading.Thread(
                        target=self._renew_loop, name="reactor-heartbeat-renew", daemon=True
                    ).start()
                # else: a busy renew thread takes it when it is done

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
                beat = self._ready.popleft()
                if beat._stopped:
                    continue
                beat._renewing = me
            try:
                renewed = beat._renew()
                error: Exception | None = None
            except Exception as exc:
                renewed, error = True, exc
            with self._lock:
                beat._renewing = None
                self._done_cv.notify_all()
                if beat._stopped:
                    continue
                if renewed:
                    self._push(beat, time.monotonic() + beat.interval)
                else:
                    beat._stopped = True
            if renewed:
                if error is not None:
                    log.warning("event=renew_error name=%s error=%s", beat.name, error)
                continue
            log.warning("event=lease_lost name=%s", beat.name)
            if beat._on_lost is not None:
                try:
                    beat._on_lost()
                except Exception:
                    log.exception("event=on_lost_error name=%s", beat.name)


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
