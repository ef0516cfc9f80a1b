"""``GenericRouter``: a whole router over one :class:`~reactor.ports.queues.QueuePrimitive`.

An adapter that implements the nine operations of the queue primitive
(``reactor/ports/queues.py``) gets a contract-conforming :class:`~reactor.ports.router.Router`
that also offers :class:`~reactor.ports.router.DeadLetterAdmin` by constructing
:class:`GenericRouter` (docs/protocol.md, "Building a router"). The primitive keeps opaque
bodies; this module does everything a router means on top:

* **jobs**: ``enqueue`` writes :meth:`Job.to_json` under a fresh message id (:func:`new_message_id`:
  time-ordered, so a primitive that orders equal visibility times by id keeps put order), visible
  after the delay (the envelope's ``not_before`` set to the due time when delayed); ``receive``
  decodes each claimed body with :meth:`Job.from_json`;
* **leases**: a claim makes a message invisible for ``visibility_timeout`` seconds; a delivery
  not settled by then is claimed again, with a new receipt and ``delivery_count + 1``;
* **receipts**: a :attr:`Delivery.receipt` names the message and the primitive's receipt of that
  claim; ``ack``/``retry``/``extend``/``dead_letter`` pass it to the primitive's conditional
  operation, so a stale receipt changes nothing (it is logged, never raised);
* **poison messages**: a body :meth:`Job.from_json` refuses is moved to the dead letters inside
  ``receive`` with the reason ``undecodable message: ...`` and its raw body, and the same
  ``receive`` goes on with the messages behind it (docs/workers.md, "Hostile input");
* **dead-letter administration**: list by page, show, requeue, purge. A requeue puts the letter's
  body under a message id derived from the letter id (insert-if-absent: the id is the claim),
  then removes the letter; two concurrent requeues enqueue the job once, and a crash between
  the two steps leaves the letter in place (a later requeue puts it again only if it is gone
  from the queue: at least once, never lost).

Time: leases and delays are judged by the injected ``clock`` (epoch seconds), so tests drive
them with a manual clock; the ``wait_seconds`` of ``receive`` is real time. A waiting
``receive`` over a primitive that cannot signal polls: the first pause is ``poll_interval``,
each next one doubles up to ``max_poll_interval`` (an idle fleet on a remote store costs a
claim per worker every ``max_poll_interval`` seconds, not every ``poll_interval``).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from reactor.errors import DeserializationError, ReactorError, RouterError
from reactor.model.text import escaping_logger
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.queues import (
    ClaimsWaiting,
    PurgesDeadLetters,
    PutsMany,
    QueuePrimitive,
    RequeuesDeadLetters,
    WaitsForMessages,
)
from reactor.ports.router import DeadLetter, Delivery, Job

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_VISIBILITY_TIMEOUT",
    "GenericRouter",
    "check_seconds",
    "decode_receipt",
    "new_message_id",
    "requeue_message_id",
]

#: Job ids and reasons come from messages: logged escaped (one line each, whatever they hold).
logger = escaping_logger(__name__)

#: Seconds a delivery stays invisible before it comes back (docs/protocol.md#routers).
DEFAULT_VISIBILITY_TIMEOUT = 30.0

#: The longest pause, in real seconds, between two claims of a waiting ``receive``.
DEFAULT_POLL_INTERVAL = 0.05

#: Dead letters read per page by ``purge_dead_letters()`` (all).
_PURGE_PAGE = 100


def check_seconds(value: float, name: str = "delay_seconds") -> float:
    """``value`` as a float when it is a finite number of seconds >= 0.

    Raises:
        ValueError: it is negative, infinite or NaN.
    """
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return seconds


def _encode_receipt(message_id: str, receipt: str) -> str:
    """One opaque :attr:`Delivery.receipt` naming the message and the primitive's receipt."""
    return f"{len(message_id)}:{message_id}{receipt}"


def decode_receipt(text: str) -> tuple[str, str] | None:
    """The primitive's ``(message_id, receipt)`` a :attr:`Delivery.receipt` of a
    :class:`GenericRouter` names, else ``None`` (a receipt no generic router wrote).

    Args:
        text: the delivery's receipt.
    """
    size, sep, rest = text.partition(":")
    if not sep or not size.isascii() or not size.isdigit() or int(size) > len(rest):
        return None
    return rest[: int(size)], rest[int(size):]


def new_message_id() -> str:
    """A fresh message id: ``<wall-clock ns, 20 digits>-<12 random hex digits>``.

    Ids sort in the order they were made (across processes, as far as their clocks agree),
    so a primitive that breaks ties of ``visible_at`` by id hands out jobs due at the same
    time in put order; the random part keeps two ids of one nanosecond apart.
    """
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"


def requeue_message_id(letter_id: str) -> str:
    """The message id a requeue of dead letter ``letter_id`` puts the job under.

    Derived from the letter id (never random), so every requeue of one letter puts the same
    message and the primitive's insert-if-absent lets only one of them add it.
    """
    return "dl-" + hashlib.sha256(letter_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


class GenericRouter:
    """A :class:`~reactor.ports.router.Router` and
    :class:`~reactor.ports.router.DeadLetterAdmin` over a queue primitive (docs/protocol.md,
    "Building a router").

    Args:
        primitive: the queue (:class:`~reactor.ports.queues.QueuePrimitive`); closed by
            :meth:`close`. When it also offers
            :class:`~reactor.ports.queues.WaitsForMessages`, a waiting ``receive`` blocks on it
            instead of polling.
        visibility_timeout: seconds a delivery stays invisible before it comes back
            (default 30).
        clock: epoch seconds for delays and leases: a callable or a
            :class:`~reactor.ports.Clock` (default ``None``: the system clock, read at call
            time).
        poll_interval: the first pause, in real seconds, between two claims of a ``receive``
            that waits (default 0.05).
        max_poll_interval: the longest pause, in real seconds: each pause of one waiting
            ``receive`` doubles, up to this (default ``None``: ``poll_interval``, a fixed
            pause). A primitive that offers
            :class:`~reactor.ports.queues.WaitsForMessages` is waited on for each pause.

    Attributes:
        primitive: the queue primitive.
        visibility_timeout: the lease of a delivery, in seconds (a worker's heartbeat renews
            it every third of it).

    Raises:
        ValueError: ``visibility_timeout``, ``poll_interval`` or ``max_poll_interval`` is not a
            positive finite number, or ``max_poll_interval`` is below ``poll_interval``.
    """

    def __init__(
        self,
        primitive: QueuePrimitive,
        *,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        clock: Callable[[], float] | Clock | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        max_poll_interval: float | None = None,
    ) -> None:
        ceiling = poll_interval if max_poll_interval is None else max_poll_interval
        for name, value in (("visibility_timeout", visibility_timeout),
                            ("poll_interval", poll_interval),
                            ("max_poll_interval", ceiling)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if ceiling < poll_interval:
            raise ValueError(
                f"max_poll_interval ({ceiling!r}) must be >= poll_interval ({poll_interval!r})"
            )
        self.primitive = primitive
        self.visibility_timeout = float(visibility_timeout)
        self._clock = wall_reader(clock)
        self._poll_interval = float(poll_interval)
        self._max_poll_interval = float(ceiling)
        self._waiter = primitive if isinstance(primitive, WaitsForMessages) else None
        self._long_poller = primitive if isinstance(primitive, ClaimsWaiting) else None
        self._closed = threading.Event()

    # -- producer side ---------------------------------------------------------------------

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds`` (any finite delay >= 0).

        A delayed job is stored with ``not_before = now + delay_seconds``.

        Args:
            job: the envelope.
            delay_seconds: seconds before it may be received.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            EncodeError: the envelope cannot be encoded (:meth:`Job.to_json`).
            RouterError: the primitive failed, or the router is closed.
        """
        delay = check_seconds(delay_seconds)
        now = self._clock()
        if delay > 0:
            job = replace(job, not_before=now + delay)
        self._put(new_message_id(), job.to_json(), now + delay)
        return job.id

    def enqueue_many(self, jobs: Sequence[Job]) -> list[str]:
        """Queue every job of ``jobs``, due now: one request over a primitive that
        :class:`~reactor.ports.queues.PutsMany`, else one :meth:`enqueue` per job (the
        :class:`~reactor.ports.capabilities.EnqueuesMany` fast path, docs/protocol.md,
        "Optional fast paths"). Every envelope is encoded before anything is sent.

        Args:
            jobs: the envelopes, in order.

        Returns:
            Their ids, in order.

        Raises:
            EncodeError: an envelope cannot be encoded (nothing is queued).
            RouterError: the primitive failed (any subset may be queued), or the router is
                closed (nothing is queued).
        """
        bodies = [job.to_json() for job in jobs]
        if not bodies:
            return []
        if self._closed.is_set():
            raise RouterError("the router is closed")
        if not isinstance(self.primitive, PutsMany):
            return [self.enqueue(job) for job in jobs]  # a subclass's enqueue hooks run
        with self._backend("put_many"):
            self.primitive.put_many([new_message_id() for _ in bodies], bodies, self._clock())
        return [job.id for job in jobs]

    def _put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Put one message (insert-if-absent); ``False`` when the id was already queued.

        Raises:
            RouterError: the router is closed, or the primitive failed.
        """
        if self._closed.is_set():
            raise RouterError("the router is closed")
        with self._backend("put"):
            return self.primitive.put(message_id, body, visible_at)

    # -- consumer side ---------------------------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` (real seconds).

        Undecodable messages are dead-lettered with the reason and their raw body and not
        returned; the same call goes on claiming the messages behind them. A closed router
        returns no deliveries.

        Args:
            max_jobs: the most deliveries returned (``<= 0``: none).
            wait_seconds: the longest this call blocks when nothing is due.

        Returns:
            The deliveries, each leased for :attr:`visibility_timeout` seconds.

        Raises:
            ValueError: ``wait_seconds`` is NaN.
            RouterError: the primitive failed.
        """
        if math.isnan(wait_seconds):
            raise ValueError("wait_seconds must be a number of seconds, got nan")
        if max_jobs <= 0:
            return []
        deadline = time.monotonic() + max(float(wait_seconds), 0.0)
        pause = self._poll_interval
        while True:
            if self._stopped():
                return []
            wait = deadline - time.monotonic() if self._long_poller is not None else 0.0
            out = self._claim(max_jobs, wait)
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            if self._long_poller is None:
                self._pause(min(remaining, pause))
                pause = min(pause * 2, self._max_poll_interval)

    def _stopped(self) -> bool:
        """Whether ``receive`` returns nothing now (the router is closed)."""
        return self._closed.is_set()

    def _pause(self, seconds: float) -> None:
        """Wait between two claims: on the primitive when it can signal, else a plain sleep
        that :meth:`close` cuts short."""
        if self._waiter is not None:
            self._waiter.wait_for_messages(seconds)
        else:
            self._closed.wait(seconds)

    def _claim(self, max_jobs: int, wait: float = 0.0) -> list[Delivery]:
        """Claim and decode until ``max_jobs`` deliveries or nothing is visible; poison is
        dead-lettered on the way. A failure after some deliveries were claimed hands those
        out (logged) instead of stranding them, leased, for a visibility timeout; the next
        receive meets the failure again if it lasts. ``wait``: the real seconds the first
        claim may block (a :class:`~reactor.ports.queues.ClaimsWaiting` primitive only)."""
        out: list[Delivery] = []
        try:
            self._claim_into(out, max_jobs, wait)
        except RouterError:
            if not out:
                raise
            logger.warning("receive failed after %d deliveries: returning them", len(out),
                           exc_info=True)
        return out

    def _claim_into(self, out: list[Delivery], max_jobs: int, wait: float) -> None:
        """:meth:`_claim`'s loop, appending to ``out``."""
        failure: RouterError | None = None
        while len(out) < max_jobs and failure is None:
            now = self._clock()
            asked = max_jobs - len(out)
            with self._backend("claim"):
                if wait > 0 and self._long_poller is not None:
                    claimed = self._long_poller.claim_waiting(
                        asked, now, now + self.visibility_timeout, wait
                    )
                else:
                    claimed = self.primitive.claim(asked, now, now + self.visibility_timeout)
            wait = 0.0  # only the first claim waits
            if not claimed:
                return
            for message in claimed:
                try:
                    if message.problem is not None:
                        raise DeserializationError(message.problem)
                    job = Job.from_json(message.body)
                except DeserializationError as exc:
                    reason = f"undecodable message: {exc}"
                    try:
                        with self._backend("dead_letter"):
                            moved = self.primitive.dead_letter(
                                message.message_id, message.receipt, reason, now
                            )
                    except RouterError as err:
                        # the rest of this claim is still decoded and handed out (the poison
                        # comes back after its lease); the error is raised at its end
                        failure = failure or err
                        continue
                    if moved:
                        logger.warning("dead-lettered message: %s", reason)
                    continue  # the next message of this receive
                out.append(
                    Delivery(
                        job=job,
                        receipt=_encode_receipt(message.message_id, message.receipt),
                        delivery_count=message.receive_count,
                    )
                )
            if len(claimed) < asked:
                break  # fewer than asked: nothing more is visible now (one claim saved)
        if failure is not None:
            raise failure

    def _leased(self, delivery: Delivery, action: str) -> tuple[str, str] | None:
        """The primitive's ``(message_id, receipt)`` of a delivery; ``None`` (logged) when the
        receipt is not one of this router's."""
        parts = decode_receipt(delivery.receipt)
        if parts is None:
            self._stale(delivery, action)
        return parts

    @staticmethod
    def _stale(delivery: Delivery, action: str) -> None:
        logger.warning(
            "stale receipt %r for job %s: %s ignored", delivery.receipt, delivery.job.id, action
        )

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good; a stale receipt is logged and changes nothing.

        Raises:
            RouterError: the primitive failed.
        """
        parts = self._leased(delivery, "ack")
        if parts is None:
            return
        with self._backend("delete"):
            done = self.primitive.delete(*parts)
        if not done:
            self._stale(delivery, "ack")

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Make the job visible again after ``delay_seconds``, keeping its delivery count; the
        receipt stops being current. A stale receipt is logged and re-queues nothing.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the primitive failed.
        """
        delay = check_seconds(delay_seconds)
        parts = self._leased(delivery, "retry")
        if parts is None:
            return
        with self._backend("release"):
            done = self.primitive.release(*parts, self._clock() + delay)
        if not done:
            self._stale(delivery, "retry")

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job invisible for ``seconds`` from now; the receipt stays current. A stale
        receipt is logged and changes nothing.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
            RouterError: the primitive failed.
        """
        extra = check_seconds(seconds, "seconds")
        parts = self._leased(delivery, "extend")
        if parts is None:
            return
        with self._backend("change_visibility"):
            done = self.primitive.change_visibility(*parts, self._clock() + extra)
        if not done:
            self._stale(delivery, "extend")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move a delivered job to the dead letters with ``reason`` (its body kept as
        received); a stale receipt is logged and dead-letters nothing.

        Raises:
            RouterError: the primitive failed.
        """
        parts = self._leased(delivery, "dead_letter")
        if parts is None:
            return
        with self._backend("dead_letter"):
            done = self.primitive.dead_letter(*parts, reason, self._clock())
        if done:
            logger.warning("dead-lettered job %s: %s", delivery.job.id, reason)
        else:
            self._stale(delivery, "dead_letter")

    # -- dead-letter administration ----------------------------------------------------------

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Dead letters, oldest first, each with its id, reason and raw body
        (docs/workers.md, "Dead letters").

        Args:
            limit: the most letters returned (``<= 0``: none).
            cursor: the id of the last letter of the previous page (``None``: the oldest).

        Raises:
            ValueError: the primitive cannot place ``cursor``.
            RouterError: the primitive failed.
        """
        if limit <= 0:
            return []
        with self._backend("dead_letters"):
            return self.primitive.dead_letters(cursor, limit)

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter with id ``letter_id``, else ``None``.

        Raises:
            RouterError: the primitive failed.
        """
        with self._backend("get_dead_letter"):
            return self.primitive.get_dead_letter(letter_id)

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Put a dead letter's job back on the queue, due now, with a fresh delivery count,
        and remove the letter.

        The job is put under :func:`requeue_message_id` of the letter (insert-if-absent), then
        the letter is removed; only the caller whose removal succeeds reports the job id, so
        concurrent requeues of one id enqueue it once and return it once.

        Returns:
            The job id, or ``None`` when there is no such letter or another caller requeued it.

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept.
            RouterError: the primitive failed, or the router is closed (the letter is kept).
        """
        letter = self.get_dead_letter(letter_id)
        if letter is None:
            return None
        job = letter.to_job()
        if isinstance(self.primitive, RequeuesDeadLetters):  # its own claim (an SQS queue)
            if self._closed.is_set():
                raise RouterError("the router is closed")
            with self._backend("requeue_dead_letter"):
                done = self.primitive.requeue_dead_letter(letter_id, self._clock())
            return job.id if done else None
        body = letter.raw_body().decode("utf-8")  # to_job decoded it: UTF-8
        self._put(requeue_message_id(letter_id), body, self._clock())
        with self._backend("remove_dead_letter"):
            removed = self.primitive.remove_dead_letter(letter_id)
        return job.id if removed else None

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: every one); returns how many
        this call deleted.

        Raises:
            RouterError: the primitive failed.
        """
        if isinstance(self.primitive, PurgesDeadLetters):
            with self._backend("purge_dead_letters"):
                return self.primitive.purge_dead_letters(None if ids is None else list(ids))
        removed = 0
        if ids is not None:
            for letter_id in dict.fromkeys(ids):
                with self._backend("remove_dead_letter"):
                    removed += self.primitive.remove_dead_letter(letter_id)
            return removed
        seen: set[str] = set()
        while True:  # always the oldest page: the letters of the previous one are gone
            page = [letter for letter in self.dead_letters(_PURGE_PAGE) if letter.id not in seen]
            if not page:
                return removed
            for letter in page:
                seen.add(letter.id)
                with self._backend("remove_dead_letter"):
                    removed += self.primitive.remove_dead_letter(letter.id)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Refuse new jobs, end waiting receives and close the primitive; idempotent.

        Raises:
            RouterError: the primitive failed to close.
        """
        if self._closed.is_set():
            return
        self._closed.set()
        with self._backend("close"):
            self.primitive.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed.is_set()

    @contextmanager
    def _backend(self, operation: str) -> Iterator[None]:
        """Let reactor errors and ``ValueError`` through; wrap anything else the primitive
        raised in :class:`RouterError` (docs/protocol.md, "Conventions": errors)."""
        try:
            yield
        except (ReactorError, ValueError):
            raise
        except Exception as exc:
            raise RouterError(
                f"queue primitive {type(self.primitive).__name__}.{operation} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
