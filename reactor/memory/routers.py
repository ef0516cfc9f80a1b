"""In-process routers: ``InlineRouter`` (tests, scripts) and ``LocalRouter`` (embedded default).

Both implement :class:`reactor.ports.Router` (docs/protocol.md#routers) and
:class:`reactor.ports.router.DeadLetterAdmin` (docs/workers.md, "Dead letters"; a dead
letter's id is its arrival number, ``"1"``, ``"2"``, ...).

:class:`InlineRouter` runs a job at once, in the caller's thread, through a bound handler
(:class:`reactor.ports.capabilities.RunsJobsInline`). Jobs enqueued *by* a running job are
queued and run right after it by the outermost ``enqueue`` (a trampoline), so a long chain of
batches never overflows the stack. A job with a delay is kept in a due-heap that
:meth:`InlineRouter.run_due` (due jobs only, judged by the injected clock) or
:meth:`InlineRouter.drain` (everything, ignoring delays) processes.

:class:`LocalRouter` is :class:`reactor.generic.router.GenericRouter` over the in-process queue
primitive :class:`reactor.memory.queue.MemoryQueue`: delays, visibility leases (default 30 s),
redelivery, dead letters. Delivery is at-least-once: a delivery not acked within its visibility
window is delivered again (judged by the injected clock, so tests use a
:class:`reactor.memory.clock.ManualClock` instead of sleeping). Messages are kept as the JSON
envelope (:meth:`reactor.ports.Job.to_json`), exactly as an external queue would, so an
undecodable message (:meth:`reactor.ports.Job.from_json` raises: not UTF-8, too large, too
deep, not an envelope) is dead-lettered inside ``receive`` with the reason and its raw body and
never returned (docs/workers.md, "Hostile input"). It runs no jobs itself: in-process consumers
(:class:`reactor.jobs.worker.Worker` threads) are attached to it by ``reactor.configure``
(:class:`reactor.ports.capabilities.HostsEmbeddedWorkers`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar, Literal

from reactor.errors import DeserializationError, RouterError
from reactor.generic.router import DEFAULT_VISIBILITY_TIMEOUT, GenericRouter, check_seconds
from reactor.memory.queue import DeadLetterList, MemoryQueue
from reactor.ports.capabilities import JobHandler
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.inspection import QueueStats
from reactor.ports.router import JOB_KINDS, DeadLetter, Delivery, Job

__all__ = ["DEFAULT_VISIBILITY_TIMEOUT", "InlineRouter", "LocalRouter"]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# InlineRouter
# ---------------------------------------------------------------------------------------------


class InlineRouter:
    """A router that runs jobs immediately in the caller (tests and scripts).

    Args:
        handler: the function that runs a job; may be bound later with :meth:`bind`.
        clock: epoch seconds for delays: a callable or a :class:`~reactor.ports.Clock`
            (default ``None``: the system clock, read at call time).

    Behaviour:
        * ``enqueue(job)`` with no delay runs ``handler(job)`` before returning (after the
          job currently running in this thread, if any). The handler's exceptions propagate
          to the outermost ``enqueue``; jobs queued behind it stay pending for the next call.
        * ``enqueue(job, delay)`` with ``delay > 0`` records ``not_before = now + delay`` and
          keeps the job until :meth:`run_due` or :meth:`drain`.
        * A job whose kind is not in :data:`reactor.ports.JOB_KINDS`, or whose handler raises
          :class:`DeserializationError`, is dead-lettered with the reason (logged once).
        * Without a bound handler, jobs wait in the heap (``receive`` can lease them).
    """

    #: Nothing leaves the process (docs/protocol.md, "Capabilities").
    keeps_data_in_process: ClassVar[Literal[True]] = True

    def __init__(
        self,
        handler: JobHandler | None = None,
        *,
        clock: Callable[[], float] | Clock | None = None,
    ) -> None:
        self._handler = handler
        self._clock = wall_reader(clock)
        self._lock = threading.RLock()
        self._local = threading.local()
        self._now_queue: deque[Job] = deque()
        self._delayed: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._dead = DeadLetterList()
        self._leased: dict[str, Job] = {}
        self._deliveries: dict[str, int] = {}  # job id -> deliveries by receive (kept by retry)

    def bind(self, handler: JobHandler) -> None:
        """Set the function that runs jobs (``handler(job)``)."""
        self._handler = handler

    @property
    def bound(self) -> bool:
        """Whether a handler is bound (``reactor.configure`` binds the job handlers)."""
        return self._handler is not None

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Run ``job`` now (no delay) or keep it until it is due.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            Exception: whatever the handler raised (see the class docstring).
        """
        delay = check_seconds(delay_seconds)
        with self._lock:
            if delay > 0 or self._handler is None:
                not_before = self._clock() + delay if delay > 0 else job.not_before
                queued = replace(job, not_before=not_before)
                heapq.heappush(
                    self._delayed, (not_before or self._clock(), next(self._seq), queued)
                )
                return job.id
            self._now_queue.append(job)
        if not getattr(self._local, "running", False):
            self._run_queue()
        return job.id

    def run_due(self) -> int:
        """Run every delayed job whose ``not_before`` has passed (by the clock); returns count.

        Jobs those jobs enqueue without delay run too (and are counted). Without a bound
        handler nothing runs: the jobs stay queued for :meth:`receive`.
        """
        ran = 0
        while self._handler is not None:
            with self._lock:
                if not self._delayed or self._delayed[0][0] > self._clock():
                    return ran
                _, _, job = heapq.heappop(self._delayed)
                self._now_queue.append(job)
            ran += self._run_queue()
        return ran

    def drain(self, max_jobs: int = 10_000) -> int:
        """Run every pending job, delayed or not, ignoring delays, in ``not_before`` order.

        Args:
            max_jobs: stop after this many jobs (guards against a job that re-enqueues itself
                forever).

        Returns:
            How many jobs ran (0 without a bound handler: the jobs stay queued for
            :meth:`receive`).
        """
        ran = 0
        while ran < max_jobs and self._handler is not None:
            with self._lock:
                if not self._delayed:
                    return ran
                _, _, job = heapq.heappop(self._delayed)
                self._now_queue.append(job)
            ran += self._run_queue()
        return ran

    def pending(self) -> list[Job]:
        """Delayed jobs not run yet, in ``not_before`` order (their ``not_before`` is set)."""
        with self._lock:
            return [job for _, _, job in sorted(self._delayed)]

    def _run_queue(self) -> int:
        handler = self._handler  # enqueue, run_due and drain run the queue only with one bound
        assert handler is not None
        ran = 0
        self._local.running = True
        try:
            while True:
                with self._lock:
                    if not self._now_queue:
                        return ran
                    job = self._now_queue.popleft()
                ran += 1
                if job.kind not in JOB_KINDS:
                    self._dead_letter(job.to_json(), f"unknown job kind {job.kind!r}")
                    continue
                try:
                    handler(job)
                except DeserializationError as exc:
                    self._dead_letter(job.to_json(), f"undecodable job payload: {exc}")
        finally:
            self._local.running = False

    def _dead_letter(self, body: str, reason: str) -> None:
        logger.warning("dead-lettered job: %s", reason)
        with self._lock:
            self._dead.add(body, reason, self._clock())

    # -- consumer side (Router protocol) ---------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs from the heap (no waiting: inline never blocks;
        ``max_jobs <= 0``: none).

        ``delivery_count`` counts the receives of the job, those before a :meth:`retry`
        included.
        """
        out: list[Delivery] = []
        with self._lock:
            while len(out) < max_jobs and self._delayed and self._delayed[0][0] <= self._clock():
                _, seq, job = heapq.heappop(self._delayed)
                receipt = f"inline:{seq}"
                self._leased[receipt] = job
                count = self._deliveries.get(job.id, 0) + 1
                self._deliveries[job.id] = count
                out.append(Delivery(job=job, receipt=receipt, delivery_count=count))
        return out

    def ack(self, delivery: Delivery) -> None:
        """Forget a received job (a stale receipt is logged and changes nothing)."""
        with self._lock:
            if self._leased.pop(delivery.receipt, None) is None:
                logger.warning("ack of unknown receipt %s", delivery.receipt)
                return
            self._deliveries.pop(delivery.job.id, None)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Put a received job back to run after ``delay_seconds`` (its delivery count kept).

        A stale receipt (acked, retried or dead-lettered already) is logged and re-queues
        nothing.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
        """
        check_seconds(delay_seconds)
        with self._lock:
            if self._leased.pop(delivery.receipt, None) is None:
                logger.warning("retry of unknown receipt %s ignored", delivery.receipt)
                return
        self.enqueue(delivery.job, delay_seconds)

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """No-op: inline leases never lapse."""

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Record a received job as dead with ``reason`` (and forget its lease)."""
        with self._lock:
            if self._leased.pop(delivery.receipt, None) is None:
                logger.warning("dead_letter of unknown receipt %s ignored", delivery.receipt)
                return
            self._deliveries.pop(delivery.job.id, None)
        self._dead_letter(delivery.job.to_json(), reason)

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Dead-lettered messages, oldest first (docs/workers.md, "Dead letters").

        Args:
            limit: the most letters returned.
            cursor: the id of the last letter of the previous page (``None``: the oldest).

        Raises:
            ValueError: ``cursor`` is not a dead-letter id of this router's form.
        """
        with self._lock:
            return self._dead.page(limit, cursor)

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter with id ``letter_id``, else ``None`` (docs/workers.md, "Dead
        letters")."""
        with self._lock:
            return self._dead.get(letter_id)

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Remove a dead letter and enqueue its job again (run now when a handler is bound).

        Returns:
            The job id, or ``None`` when there is no such dead letter.

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept.
            Exception: whatever the handler raised (as :meth:`enqueue`).
        """
        with self._lock:
            letter = self._dead.get(letter_id)
            if letter is None:
                return None
            job = letter.to_job()
            self._dead.pop(letter_id)
            self._deliveries.pop(job.id, None)  # a fresh delivery count
        return self.enqueue(job)

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: all); returns how many."""
        with self._lock:
            return self._dead.purge(ids)

    def close(self) -> None:
        """Nothing to release; idempotent."""


# ---------------------------------------------------------------------------------------------
# LocalRouter
# ---------------------------------------------------------------------------------------------


class LocalRouter(GenericRouter):
    """The embedded default: :class:`~reactor.generic.router.GenericRouter` over a
    :class:`~reactor.memory.queue.MemoryQueue`, plus in-process consumers.

    It is a complete router (delays, visibility leases, redelivery, dead letters and their
    administration, poison messages dead-lettered inside ``receive``) and declares four
    capabilities (docs/protocol.md, "Capabilities"): :class:`~reactor.ports.capabilities.InProcess`,
    :class:`~reactor.ports.capabilities.HostsEmbeddedWorkers` (``reactor.configure`` attaches
    :attr:`workers` :class:`reactor.jobs.worker.Worker` threads to a ``local://`` router it
    built), :class:`~reactor.ports.capabilities.KnowsConsumers` and
    :class:`~reactor.ports.inspection.QueueInspector`. It runs no worker of its
    own: jobs are run by the attached consumers, or by a ``Worker`` the caller drives.

    Args:
        visibility_timeout: seconds a delivery stays invisible before it comes back
            (default 30).
        clock: epoch seconds used for delays and leases: a callable or a
            :class:`~reactor.ports.Clock` (default ``None``: the system clock, read at call
            time).
        workers: the thread count of the consumers ``reactor.configure`` attaches to a
            ``local://`` router (0 = queue only).

    Attributes:
        workers: see ``workers`` above.
        receive_count: ``receive`` calls served so far.

    Raises:
        ValueError: a setting is out of range.
    """

    #: Nothing leaves the process (docs/protocol.md, "Capabilities").
    keeps_data_in_process: ClassVar[Literal[True]] = True

    def __init__(
        self,
        *,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        clock: Callable[[], float] | Clock | None = None,
        workers: int = 1,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers!r}")
        self._queue = MemoryQueue()
        super().__init__(self._queue, visibility_timeout=visibility_timeout, clock=clock)
        self.workers = workers
        self.receive_count = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._consumers: tuple[Callable[[], None], Callable[[], None]] | None = None
        self._consumers_started = False

    # -- producer side -----------------------------------------------------------------------

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds`` (any finite delay >= 0), and
        start the attached consumers if they are not running yet.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the router is closed.
        """
        job_id = super().enqueue(job, delay_seconds)
        self._start_consumers()
        return job_id

    def enqueue_raw(self, body: str | bytes, delay_seconds: float = 0) -> None:
        """Queue a raw message body as an external producer would (tests of poison messages).

        Args:
            body: the body, unvalidated: text, or bytes that need not be UTF-8.
            delay_seconds: seconds before it becomes visible.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the router is closed.
        """
        delay = check_seconds(delay_seconds)
        self._put(uuid.uuid4().hex, body, self._clock() + delay)
        self._start_consumers()

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Put a dead letter's job back on the queue, due now, with a fresh delivery count
        (:meth:`GenericRouter.requeue_dead_letter`), and start the attached consumers."""
        job_id = super().requeue_dead_letter(letter_id)
        if job_id is not None:
            self._start_consumers()
        return job_id

    # -- attached consumers ----------------------------------------------------------------------

    def queue_stats(self) -> QueueStats:
        """The queue's counts now (``reactor info``, the sweep chain's back-pressure;
        :class:`reactor.ports.inspection.QueueInspector`): ``ready``, ``delayed``,
        ``in_flight`` and ``dead_letters`` exactly, ``consumers`` unknown (``None``).

        Returns:
            The counts (:meth:`reactor.memory.queue.MemoryQueue.counts` at the router's clock).
        """
        return self._queue.counts(self._clock())

    def attach_consumers(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Attach in-process consumers started lazily by the first enqueue
        (:class:`~reactor.ports.capabilities.HostsEmbeddedWorkers`).

        ``reactor.configure`` attaches :class:`reactor.jobs.worker.Worker` threads to a router
        it built from a ``local://`` URL (the embedded default).

        Args:
            start: starts the consumers; called once, by the first :meth:`enqueue` after this
                call (at once when jobs are queued already), outside the router's lock.
            stop: stops them and waits for their jobs; called by :meth:`close` (only when they
                were started).

        Raises:
            RouterError: the router is closed.
        """
        with self._lock:
            if self.closed or self._stopping.is_set():
                raise RouterError("the local router is closed")
            self._consumers = (start, stop)
            self._consumers_started = False
        if self._queue.size():  # jobs enqueued before the attach: serve them too
            self._start_consumers()

    def _start_consumers(self) -> None:
        with self._lock:
            if self._consumers is None or self._consumers_started or self._stopping.is_set():
                return  # a job in flight enqueueing while close() stops them: no restart
            self._consumers_started = True
            start = self._consumers[0]
        start()  # outside the lock: the consumers receive from this router

    @property
    def has_consumers(self) -> bool:
        """Whether attached consumers consume this router in-process right now
        (:class:`~reactor.ports.capabilities.KnowsConsumers`)."""
        with self._lock:
            return self._consumers_started and not self._stopping.is_set()

    # -- consumer side -----------------------------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` real seconds
        (:meth:`GenericRouter.receive`); counted in :attr:`receive_count`.

        Each delivery stays invisible for ``visibility_timeout`` seconds by the clock. A
        closing router returns no deliveries, at once.
        """
        with self._lock:
            self.receive_count += 1
        return super().receive(max_jobs, wait_seconds)

    def _stopped(self) -> bool:
        return self._stopping.is_set() or super()._stopped()

    def size(self) -> int:
        """Messages not yet acked or dead-lettered (visible, delayed or leased)."""
        return self._queue.size()

    def queued(self) -> list[tuple[float, str | bytes]]:
        """``(visible_at, body)`` of every message not yet acked or dead-lettered, earliest
        first (:meth:`MemoryQueue.queued`; for tests)."""
        return self._queue.queued()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop receiving, stop the attached consumers (their jobs in flight finish and may
        still enqueue), then refuse new jobs; idempotent."""
        with self._lock:
            self._stopping.set()
            stop = None
            if self._consumers is not None and self._consumers_started:
                stop = self._consumers[1]
                self._consumers_started = False
        self._queue.wake()  # waiting receives return now
        if stop is not None:
            stop()
        super().close()
