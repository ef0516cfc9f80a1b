"""``SlotHost``: one worker thread that keeps many jobs of async units in flight, each as a
suspendable execution (docs/workers.md, "Async slots").

A worker with ``async_slots`` (:class:`reactor.jobs.worker.Worker`) hands the ``step`` jobs
whose unit body is ``async def`` to a host. The host runs each job — the whole of
:meth:`Worker.process <reactor.jobs.worker.Worker.process>`, unchanged: dispatch, the unit's
liveness lock, arguments, step-level coordination, retries, the terminal record, the signal,
the owner's resume, the ack — as a greenlet on its own thread. Where the job would block its
thread for the async body (or through a retry wait), the engine suspends it through the
host's :class:`reactor.engine.handback.Handback` instead: the body awaits on reactor's loop,
the thread goes on with the other jobs it hosts, and the job resumes on the host's thread
once the body ended (or the wait's time passed). A greenlet never leaves the thread that
started it, so a job starts, suspends and finishes on one host.

The host is driven by one queue of events: ``("job", delivery)`` from the worker's handler
threads, ``("wake", execution, source)`` from reactor's loop when a body ends, and its own
timers. While a hosted job runs synchronous code (a storage call, a compensation) the others
wait for the thread, as jobs of one thread always did; their leases, liveness locks and
bodies' time limits run on other threads meanwhile (the renewal thread, reactor's loop).

It needs the ``greenlet`` package (the ``async-slots`` extra: ``pip install
'reactor-saga[async-slots]'``).
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from reactor.engine import handback
from reactor.errors import ConfigurationError
from reactor.model.text import escaping_logger
from reactor.ports.router import Delivery

#: A greenlet (the package is optional and untyped: held as ``Any``).
_Job = Any

__all__ = ["SlotHost", "check_available"]

log = escaping_logger("reactor.worker")

#: The longest a host waits for an event before it looks at the worker's stop again, seconds.
IDLE_CHECK = 0.5


def _greenlet_module() -> Any:
    """The ``greenlet`` module: an optional dependency (the async-slots extra), imported only
    by a worker that uses async slots."""
    return importlib.import_module("greenlet")  # safe: a constant name, never from a payload


def check_available() -> None:
    """Make sure the ``greenlet`` package async slots need is installed.

    Raises:
        ConfigurationError: it is not (install the ``async-slots`` extra).
    """
    try:
        _greenlet_module()
    except ImportError as exc:
        raise ConfigurationError(
            "async_slots needs the greenlet package: pip install 'reactor-saga[async-slots]' "
            "(docs/workers.md, \"Async slots\")"
        ) from exc


class SlotHost:
    """A thread running jobs as suspendable executions; the :class:`Handback` they wait
    through (docs/workers.md, "Async slots").

    Args:
        name: the thread's name.
        run_job: runs one delivery to its end (ack, retry or dead-letter included); it must
            not raise.
        stopping: set when the worker stops: the host takes no new job and ends once every
            hosted job ended.

    Raises:
        ConfigurationError: the ``greenlet`` package is not installed.
    """

    def __init__(
        self, name: str, run_job: Callable[[Delivery], None], stopping: threading.Event
    ) -> None:
        check_available()
        self._gl = _greenlet_module()
        self.name = name
        self._run_job = run_job
        self._stopping = stopping
        self._events: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._queued = 0  # jobs submitted, not started yet
        self._live: set[_Job] = set()  # hosted jobs (also keeps suspended ones alive)
        self._waiting: dict[_Job, tuple[object, int]] = {}  # suspended: (source, wait)
        self._timers: list[tuple[float, int, _Job]] = []
        self._waits = itertools.count()
        self._thread_id: int | None = None
        self._main: _Job | None = None
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)

    # -- the worker's side -------------------------------------------------------------------

    def start(self) -> threading.Thread:
        """Start the host's thread.

        Returns:
            The thread (the worker joins it on stop).
        """
        self.thread.start()
        return self.thread

    def submit(self, delivery: Delivery) -> bool:
        """Hand ``delivery`` to the host, which starts it at once.

        Args:
            delivery: a received job.

        Returns:
            ``False`` when the host has ended (the worker stopped): the caller keeps the job.
        """
        with self._lock:
            if self._closed:
                return False
            self._queued += 1
        self._events.put(("job", delivery, None))
        return True

    def nudge(self) -> None:
        """Make the host look at the worker's stop now (it does every :data:`IDLE_CHECK`
        seconds anyway)."""
        self._events.put(("nudge", None, None))

    @property
    def hosted(self) -> int:
        """Jobs submitted and not finished (suspended ones included)."""
        with self._lock:
            return self._queued + len(self._live)

    # -- Handback ------------------------------------------------------------------------------

    def usable(self) -> bool:
        """Whether the caller is one of this host's jobs, on the host's thread."""
        if threading.get_ident() != self._thread_id:
            return False
        return self._gl.getcurrent() in self._live

    def waker(self, source: object) -> Callable[[], None]:
        """A function any thread may call to resume the calling job when it is suspended on
        ``source``.

        Args:
            source: what the job will wait on.

        Returns:
            The function (it only queues an event: cheap, never blocks).
        """
        job = self._gl.getcurrent()

        def wake() -> None:
            self._events.put(("wake", job, source))

        return wake

    def suspend(self, source: object, seconds: float | None) -> None:
        """Suspend the calling job until its waker for ``source`` is called or ``seconds``
        pass; the host's thread runs the other jobs meanwhile.

        Args:
            source: what the job waits on.
            seconds: the longest wait, in seconds (``None``: until woken).
        """
        job = self._gl.getcurrent()
        wait = next(self._waits)
        self._waiting[job] = (source, wait)
        if seconds is not None:
            heapq.heappush(self._timers, (time.monotonic() + max(seconds, 0.0), wait, job))
        assert self._main is not None
        self._main.switch()

    # -- the host's thread ---------------------------------------------------------------------

    def _serve(self) -> None:
        self._thread_id = threading.get_ident()
        self._main = self._gl.getcurrent()
        while True:
            self._fire_timers()
            with self._lock:
                if self._stopping.is_set() and not self._live and not self._queued:
                    self._closed = True
                    return
            wait = IDLE_CHECK
            if self._timers:
                wait = min(wait, max(self._timers[0][0] - time.monotonic(), 0.0))
            try:
                kind, first, second = self._events.get(timeout=wait)
            except queue.Empty:
                continue
            if kind == "job":
                self._start(first)
            elif kind == "wake":
                entry = self._waiting.get(first)
                if entry is not None and entry[0] is second:
                    self._resume(first)

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, wait, job = heapq.heappop(self._timers)
            entry = self._waiting.get(job)
            if entry is not None and entry[1] == wait:
                self._resume(job)

    def _start(self, delivery: Delivery) -> None:
        assert self._main is not None
        job = self._gl.greenlet(lambda: self._execute(delivery), parent=self._main)
        with self._lock:
            self._queued -= 1
            self._live.add(job)
        self._switch(job)

    def _resume(self, job: _Job) -> None:
        del self._waiting[job]
        self._switch(job)

    def _switch(self, job: _Job) -> None:
        """Run ``job`` until it suspends or ends."""
        job.switch()
        if job.dead:
            with self._lock:
                self._live.discard(job)
            self._waiting.pop(job, None)

    def _execute(self, delivery: Delivery) -> None:
        with handback.bound(self):
            try:
                self._run_job(delivery)
            except self._gl.GreenletExit:
                raise
            except BaseException:  # the host's thread runs the other jobs: never end it
                log.exception("event=slot_job_crashed job_id=%s kind=%s",
                              delivery.job.id, delivery.job.kind)
