"""In-process routers: ``InlineRouter`` (tests, scripts) and ``LocalRouter`` (embedded default).

Both implement :class:`reactor.ports.Router` (docs/protocol.md#routers).

:class:`InlineRouter` runs a job at once, in the caller's thread, through a bound handler.
Jobs enqueued *by* a running job are queued and run right after it by the outermost
``enqueue`` (a trampoline), so a long chain of batches never overflows the stack. A job with a
delay is kept in a due-heap that :meth:`InlineRouter.run_due` (due jobs only, judged by the
injected clock) or :meth:`InlineRouter.drain` (everything, ignoring delays) processes.

:class:`LocalRouter` is an in-process queue with a delay heap, visibility leases (default
30 s), a dead-letter list and optional worker threads. Delivery is at-least-once: a delivery
not acked within its visibility window is delivered again (judged by the injected clock, so
tests use a :class:`reactor.memory.clock.ManualClock` instead of sleeping). Messages are kept
as the JSON envelope (:meth:`reactor.ports.Job.to_json`), exactly as an external queue would,
so an undecodable message (:meth:`reactor.ports.Job.from_json` raises: not UTF-8, too large,
too deep, not an envelope) is dead-lettered inside ``receive`` with the reason and its raw body
and never returned (docs/workers.md, "Hostile input").

Both offer :class:`reactor.ports.router.DeadLetterAdmin` (docs/workers.md, "Dead letters"): a
dead letter's id is its arrival number (``"1"``, ``"2"``, ...), and requeue, list and purge run
under the router's lock, so a requeue claims, enqueues and removes in one step.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from reactor.model.errors import DeserializationError, RouterError
from reactor.ports.router import JOB_KINDS, DeadLetter, Delivery, Job

__all__ = ["DEFAULT_VISIBILITY_TIMEOUT", "InlineRouter", "LocalRouter", "default_backoff"]

logger = logging.getLogger(__name__)

#: Seconds a delivered job stays invisible before it is redelivered (docs/protocol.md#routers).
DEFAULT_VISIBILITY_TIMEOUT = 30.0

Handler = Callable[[Job], object]


def _check_delay(delay_seconds: float) -> float:
    delay = float(delay_seconds)
    if not math.isfinite(delay) or delay < 0:
        raise ValueError(f"delay_seconds must be a finite number >= 0, got {delay_seconds!r}")
    return delay


def default_backoff(delivery_count: int) -> float:
    """Retry delay in seconds after a handler raised: ``min(2 ** (n - 1), 60)`` for delivery n."""
    return float(min(2 ** max(delivery_count - 1, 0), 60))


class _DeadLetterList:
    """The dead letters of an in-process router, by id in arrival order.

    Ids are arrival numbers as text (``"1"``, ``"2"``, ...), never reused, so a cursor stays
    meaningful after the letter it names is requeued or purged. Not locked: the owning router
    holds its lock around every call.
    """

    def __init__(self) -> None:
        self._letters: dict[str, DeadLetter] = {}
        self._ids = itertools.count(1)

    def add(self, body: str | bytes, reason: str, at: float) -> DeadLetter:
        """Record a dead letter keeping ``body`` raw (:meth:`DeadLetter.from_raw`)."""
        letter = DeadLetter.from_raw(body, reason, at, str(next(self._ids)))
        self._letters[letter.id] = letter
        return letter

    def page(self, limit: int, cursor: str | None) -> list[DeadLetter]:
        """At most ``limit`` letters, oldest first, after the one whose id is ``cursor``.

        Raises:
            ValueError: ``cursor`` is not an id of this list's form.
        """
        if limit <= 0:
            return []
        after = _arrival(cursor) if cursor is not None else 0
        if after is None:
            raise ValueError(f"bad dead-letter cursor {cursor!r}: not a dead-letter id")
        out: list[DeadLetter] = []
        for letter in self._letters.values():
            if int(letter.id) > after:
                out.append(letter)
                if len(out) >= limit:
                    break
        return out

    def get(self, letter_id: str) -> DeadLetter | None:
        """The letter with id ``letter_id``, else ``None``."""
        return self._letters.get(letter_id)

    def pop(self, letter_id: str) -> DeadLetter | None:
        """Remove and return the letter with id ``letter_id`` (``None`` when absent)."""
        return self._letters.pop(letter_id, None)

    def purge(self, ids: Sequence[str] | None) -> int:
        """Remove the letters named by ``ids`` (``None``: all); returns how many went."""
        if ids is None:
            count = len(self._letters)
            self._letters.clear()
            return count
        return sum(self._letters.pop(letter_id, None) is not None for letter_id in set(ids))


def _arrival(letter_id: str) -> int | None:
    """The arrival number of an in-process dead-letter id, ``None`` when it is not one."""
    return int(letter_id) if letter_id.isascii() and letter_id.isdigit() else None


# ---------------------------------------------------------------------------------------------
# InlineRouter
# ---------------------------------------------------------------------------------------------


class InlineRouter:
    """A router that runs jobs immediately in the caller (tests and scripts).

    Args:
        handler: the function that runs a job; may be bound later with :meth:`bind`.
        clock: epoch seconds for delays (default :func:`time.time`).

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

    def __init__(self, handler: Handler | None = None, *, clock: Callable[[], float] = time.time):
        self._handler = handler
        self._clock = clock
        self._lock = threading.RLock()
        self._local = threading.local()
        self._now_queue: deque[Job] = deque()
        self._delayed: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._dead = _DeadLetterList()
        self._leased: dict[str, Job] = {}
        self._deliveries: dict[str, int] = {}  # job id -> deliveries by receive (kept by retry)

    def bind(self, handler: Handler) -> None:
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
        delay = _check_delay(delay_seconds)
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

        Jobs those jobs enqueue without delay run too (and are counted).
        """
        ran = 0
        while True:
            with self._lock:
                if not self._delayed or self._delayed[0][0] > self._clock():
                    return ran
                _, _, job = heapq.heappop(self._delayed)
                self._now_queue.append(job)
            ran += self._run_queue()

    def drain(self, max_jobs: int = 10_000) -> int:
        """Run every pending job, delayed or not, ignoring delays, in ``not_before`` order.

        Args:
            max_jobs: stop after this many jobs (guards against a job that re-enqueues itself
                forever).

        Returns:
            How many jobs ran.
        """
        ran = 0
        while ran < max_jobs:
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
        handler = self._handler
        if handler is None:
            return 0
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
        """Lease up to ``max_jobs`` due jobs from the heap (no waiting: inline never blocks).

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
        _check_delay(delay_seconds)
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


@dataclass(slots=True)
class _Message:
    body: str | bytes  # bytes only from enqueue_raw (a foreign producer's poison)
    visible_at: float
    generation: int = 0
    delivery_count: int = 0
    held: bool = False


class LocalRouter:
    """An in-process queue with delays, visibility leases, dead letters and worker threads.

    Args:
        visibility_timeout: seconds a delivery stays invisible before it comes back
            (default 30).
        clock: epoch seconds used for delays and leases (default :func:`time.time`).
        workers: the worker count :meth:`start_workers` uses when not told otherwise (and the
            thread count of the consumers ``reactor.configure`` attaches to a ``local://``
            router; 0 = queue only).
        max_deliveries: a job whose handler raised on this many deliveries is dead-lettered
            by the worker threads (``None``: retry forever).
        backoff: ``delivery_count -> seconds`` before a failed job is retried by the workers
            (default :func:`default_backoff`).

    Raises:
        ValueError: a setting is out of range.
    """

    def __init__(
        self,
        *,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        clock: Callable[[], float] = time.time,
        workers: int = 1,
        max_deliveries: int | None = 20,
        backoff: Callable[[int], float] = default_backoff,
    ) -> None:
        if not (visibility_timeout > 0 and math.isfinite(visibility_timeout)):
            raise ValueError(f"visibility_timeout must be > 0, got {visibility_timeout!r}")
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers!r}")
        if max_deliveries is not None and max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries!r}")
        self.visibility_timeout = float(visibility_timeout)
        self.workers = workers
        self.max_deliveries = max_deliveries
        self._backoff = backoff
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._messages: dict[str, _Message] = {}
        self._heap: list[tuple[float, int, str, int]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._dead = _DeadLetterList()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._closed = False
        self._consumers: tuple[Callable[[], None], Callable[[], None]] | None = None
        self._consumers_started = False
        self.receive_count = 0

    # -- producer side -----------------------------------------------------------------------

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds`` (any finite delay >= 0).

        The stored envelope's ``not_before`` is set to ``now + delay`` when delayed.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the router is closed.
        """
        delay = _check_delay(delay_seconds)
        now = self._clock()
        if delay > 0:
            job = replace(job, not_before=now + delay)
        self._put(job.to_json(), now + delay)
        return job.id

    def enqueue_raw(self, body: str | bytes, delay_seconds: float = 0) -> None:
        """Queue a raw message body as an external producer would (tests of poison messages).

        Args:
            body: the body, unvalidated: text, or bytes that need not be UTF-8.
            delay_seconds: seconds before it becomes visible.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the router is closed.
        """
        delay = _check_delay(delay_seconds)
        self._put(body, self._clock() + delay)

    def _put(
        self, body: str | bytes, visible_at: float, dead_letter_id: str | None = None
    ) -> bool:
        """Queue ``body``; with ``dead_letter_id``, only by removing that dead letter in the
        same locked step (``False``, nothing queued, when it is gone: a requeue's claim)."""
        with self._cond:
            if self._closed:
                raise RouterError("the local router is closed")
            if dead_letter_id is not None and self._dead.pop(dead_letter_id) is None:
                return False
            message_id = str(next(self._ids))
            self._messages[message_id] = _Message(body=body, visible_at=visible_at)
            heapq.heappush(self._heap, (visible_at, next(self._seq), message_id, 0))
            self._cond.notify()
            start = None
            if self._consumers is not None and not self._consumers_started:
                self._consumers_started = True
                start = self._consumers[0]
        if start is not None:  # outside the lock: the consumers receive from this router
            start()
        return True

    # -- attached consumers ----------------------------------------------------------------------

    def attach_consumers(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Attach in-process consumers started lazily by the first enqueue.

        ``reactor.configure`` attaches :class:`reactor.jobs.worker.Worker` threads to a router
        it built from a ``local://`` URL (the embedded default).

        Args:
            start: starts the consumers; called once, by the first :meth:`enqueue` after this
                call, outside the router's lock.
            stop: stops them and waits for their jobs; called by :meth:`stop` and
                :meth:`close` (only when they were started).

        Raises:
            RouterError: the router is closed.
        """
        with self._cond:
            if self._closed:
                raise RouterError("the local router is closed")
            self._consumers = (start, stop)
            self._consumers_started = False
            pending = bool(self._messages)
            if pending:
                self._consumers_started = True
        if pending:  # jobs enqueued before the attach: serve them too
            start()

    @property
    def has_consumers(self) -> bool:
        """Whether worker threads consume this router in-process right now (attached consumers
        that were started, or :meth:`start_workers` threads)."""
        with self._cond:
            if self._stopping.is_set() or self._closed:
                return False
            return self._consumers_started or any(t.is_alive() for t in self._threads)

    # -- consumer side -----------------------------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one.

        Each delivery stays invisible for ``visibility_timeout`` seconds (by the clock);
        undecodable messages are dead-lettered with the reason and their raw body and not
        returned, without stopping the receive (docs/workers.md, "Hostile input"). The wait
        itself is in real seconds (re-checking due times at least every 50 ms).
        """
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        out: list[Delivery] = []
        with self._cond:
            self.receive_count += 1
            while True:
                self._collect(max_jobs, out)
                remaining = deadline - time.monotonic()
                if out or remaining <= 0 or self._stopping.is_set() or self._closed:
                    return out
                self._cond.wait(min(remaining, 0.05))

    def _collect(self, max_jobs: int, out: list[Delivery]) -> None:
        now = self._clock()
        while len(out) < max_jobs and self._heap and self._heap[0][0] <= now:
            visible_at, _, message_id, generation = heapq.heappop(self._heap)
            message = self._messages.get(message_id)
            if (
                message is None
                or message.generation != generation
                or message.visible_at != visible_at
            ):
                continue  # superseded entry (acked, retried or extended)
            if message.held:
                # a worker thread of this router is still running it: keep it leased
                message.visible_at = now + self.visibility_timeout
                heapq.heappush(
                    self._heap, (message.visible_at, next(self._seq), message_id, generation)
                )
                continue
            try:
                job = Job.from_json(message.body)
            except DeserializationError as exc:
                del self._messages[message_id]
                self._record_dead(message.body, f"undecodable message: {exc}", now)
                continue  # the next message of this receive
            message.generation += 1
            message.delivery_count += 1
            message.visible_at = now + self.visibility_timeout
            heapq.heappush(
                self._heap,
                (message.visible_at, next(self._seq), message_id, message.generation),
            )
            out.append(
                Delivery(
                    job=job,
                    receipt=f"{message_id}:{message.generation}",
                    delivery_count=message.delivery_count,
                )
            )

    def _leased(self, delivery: Delivery) -> tuple[str, _Message] | None:
        """The message a receipt still leases (caller holds the lock), else ``None``."""
        message_id, _, generation = delivery.receipt.partition(":")
        message = self._messages.get(message_id)
        if message is None or str(message.generation) != generation:
            logger.warning("stale receipt %s for job %s", delivery.receipt, delivery.job.id)
            return None
        return message_id, message

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good; a stale receipt is logged, never raised."""
        with self._cond:
            leased = self._leased(delivery)
            if leased is not None:
                del self._messages[leased[0]]

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Make the job visible again after ``delay_seconds`` (keeps its delivery count).

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
        """
        delay = _check_delay(delay_seconds)
        with self._cond:
            leased = self._leased(delivery)
            if leased is None:
                return
            message_id, message = leased
            message.generation += 1
            message.held = False
            message.visible_at = self._clock() + delay
            heapq.heappush(
                self._heap,
                (message.visible_at, next(self._seq), message_id, message.generation),
            )
            self._cond.notify()

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job invisible for ``seconds`` from now (the receipt stays valid).

        Raises:
            ValueError: ``seconds`` is negative or not finite.
        """
        extra = _check_delay(seconds)
        with self._cond:
            leased = self._leased(delivery)
            if leased is None:
                return
            message_id, message = leased
            message.visible_at = self._clock() + extra
            heapq.heappush(
                self._heap,
                (message.visible_at, next(self._seq), message_id, message.generation),
            )

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move a delivered job to the dead letters with ``reason`` (and ack it); logs once.

        A stale receipt (acked, retried or redelivered since) is logged and dead-letters
        nothing (docs/writing-an-adapter.md, routers: the stale-receipt rule).
        """
        with self._cond:
            leased = self._leased(delivery)
            if leased is None:
                return
            del self._messages[leased[0]]
            self._record_dead(leased[1].body, reason, self._clock())

    def _record_dead(self, body: str | bytes, reason: str, at: float) -> None:
        logger.warning("dead-lettered message: %s", reason)
        self._dead.add(body, reason, at)

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Dead-lettered messages, oldest first (docs/workers.md, "Dead letters").

        Args:
            limit: the most letters returned.
            cursor: the id of the last letter of the previous page (``None``: the oldest).

        Raises:
            ValueError: ``cursor`` is not a dead-letter id of this router's form.
        """
        with self._cond:
            return self._dead.page(limit, cursor)

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter with id ``letter_id``, else ``None`` (docs/workers.md, "Dead
        letters")."""
        with self._cond:
            return self._dead.get(letter_id)

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Move a dead letter back to the queue, due now, with a fresh delivery count.

        The dead letter is removed and its body queued in one locked step, so concurrent
        requeues of one id queue it once (docs/workers.md, "Dead letters").

        Returns:
            The job id (the original job's), or ``None`` when there is no such dead letter.

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept.
            RouterError: the router is closed (the letter is kept).
        """
        letter = self.get_dead_letter(letter_id)
        if letter is None:
            return None
        job = letter.to_job()
        body = letter.raw_body().decode("utf-8")  # to_job decoded it: UTF-8
        if not self._put(body, self._clock(), dead_letter_id=letter_id):
            return None
        return job.id

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: all); returns how many
        (docs/workers.md, "Dead letters")."""
        with self._cond:
            return self._dead.purge(ids)

    def size(self) -> int:
        """Messages not yet acked or dead-lettered (visible, delayed or leased)."""
        with self._cond:
            return len(self._messages)

    # -- worker threads ------------------------------------------------------------------------

    def start_workers(self, n: int | None, handler: Handler, *, poll_seconds: float = 0.1) -> None:
        """Start ``n`` daemon threads that run ``receive -> handler(job) -> ack``.

        A handler that raises gets the job retried after ``backoff(delivery_count)`` seconds;
        after ``max_deliveries`` failed deliveries the job is dead-lettered. A job whose kind
        is not in :data:`JOB_KINDS`, or whose handler raises :class:`DeserializationError`, is
        dead-lettered at once. A worker never dies on a job (no crash loops). While a worker
        runs a job its lease does not lapse.

        Args:
            n: threads to start (``None``: the ``workers`` setting).
            handler: runs one job.
            poll_seconds: the longest a worker blocks in ``receive`` before re-checking stop.

        Raises:
            RouterError: the router is closed.
        """
        count = self.workers if n is None else n
        with self._cond:
            if self._closed:
                raise RouterError("the local router is closed")
            self._stopping.clear()
            for _ in range(count):
                thread = threading.Thread(
                    target=self._work,
                    args=(handler, poll_seconds),
                    name=f"reactor-local-worker-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()

    def _work(self, handler: Handler, poll_seconds: float) -> None:
        while not self._stopping.is_set():
            try:
                for delivery in self.receive(1, wait_seconds=poll_seconds):
                    self.process(delivery, handler)
            except Exception:  # pragma: no cover - defensive: a worker must never die
                logger.exception("local router worker loop error")

    def process(self, delivery: Delivery, handler: Handler) -> None:
        """Run one delivery the way a worker thread does (ack, retry or dead-letter).

        Exposed so tests can drive the worker policy without threads.
        """
        job = delivery.job
        if job.kind not in JOB_KINDS:
            self.dead_letter(delivery, f"unknown job kind {job.kind!r}")
            return
        self._hold(delivery, True)
        try:
            handler(job)
        except DeserializationError as exc:
            self.dead_letter(delivery, f"undecodable job payload: {exc}")
            return
        except Exception as exc:
            if self.max_deliveries is not None and delivery.delivery_count >= self.max_deliveries:
                self.dead_letter(
                    delivery,
                    f"handler failed on {delivery.delivery_count} deliveries: "
                    f"{type(exc).__name__}: {exc}",
                )
                return
            delay = self._backoff(delivery.delivery_count)
            logger.warning(
                "job %s (%s) failed on delivery %d; retrying in %.1f s",
                job.id, job.kind, delivery.delivery_count, delay, exc_info=True,
            )
            self.retry(delivery, delay)
            return
        finally:
            self._hold(delivery, False)
        self.ack(delivery)

    def _hold(self, delivery: Delivery, held: bool) -> None:
        with self._cond:
            message_id, _, generation = delivery.receipt.partition(":")
            message = self._messages.get(message_id)
            if message is not None and str(message.generation) == generation:
                message.held = held

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker threads (and the attached consumers, :meth:`attach_consumers`) and
        wait up to ``timeout`` seconds for each thread to finish."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
            threads, self._threads = self._threads, []
            stop_consumers = None
            if self._consumers is not None and self._consumers_started:
                stop_consumers = self._consumers[1]
                self._consumers_started = False
        if stop_consumers is not None:
            stop_consumers()
        for thread in threads:
            thread.join(timeout)

    def close(self) -> None:
        """Stop the workers and refuse new jobs; idempotent."""
        self.stop()
        with self._cond:
            self._closed = True
