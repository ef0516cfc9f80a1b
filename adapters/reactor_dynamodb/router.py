"""``SQSRouter``: jobs on an Amazon SQS standard queue (boto3).

Implements :class:`reactor.ports.Router` (docs/protocol.md#routers) on a queue ``<prefix><name>``
and its dead-letter queue ``<prefix><name>-dlq`` (both created when missing, unless
``create=false``).

* **Any delay.** SQS delays at most 900 s. A longer delay is sent with ``DelaySeconds=900``
  and a ``not_before`` message attribute (epoch seconds); :meth:`SQSRouter.receive` re-sends a
  message whose ``not_before`` is still in the future with ``min(remaining, 900)`` of delay and
  deletes the received copy. A message is never parked invisible to hide a delay
  (docs/protocol.md#routers). Delays are whole seconds on SQS: they are rounded *up*.
* **Leases.** A receive leases messages for ``visibility_timeout`` seconds; :meth:`extend` is
  ``ChangeMessageVisibility`` (bounded to SQS's 12 h); :meth:`retry` sets the visibility to the
  retry delay (keeping ``ApproximateReceiveCount``) or, beyond 900 s, re-sends with
  ``not_before`` and deletes the original. A re-sent message carries a ``deliveries`` attribute
  (the deliveries so far), added to its own receive count, so ``delivery_count`` survives the
  re-send.
* **Acks.** ``DeleteMessage``; :meth:`ack_many` deletes in batches of 10.
* **Stale receipts** (docs/writing-an-adapter.md, routers: the stale-receipt rule). SQS gives a
  new receipt handle per receive but cannot refuse an old one: AWS documents that a
  ``DeleteMessage`` with a handle that is not the most recent one "succeeds, but the message
  might not be deleted", and moto deletes it, and ``ChangeMessageVisibility`` accepts old
  handles too. So the router guards in-process: it remembers, per ``MessageId``, the newest
  receipt it received (the last 10,000), and ``ack``, ``retry``, ``extend`` and
  ``dead_letter`` with an older receipt of a message it received again are logged no-ops. A
  receipt superseded by a receive in *another* process cannot be told apart: there the rule
  holds only as far as SQS honours it (best effort). A handle SQS itself refuses as invalid
  is logged, never raised.
* **Dead letters.** An undecodable message (:meth:`reactor.ports.Job.from_json` refuses it:
  too large, too deep, not an envelope) is sent to the DLQ with its body unchanged and
  ``reason`` and ``at`` attributes, and deleted from the queue by :meth:`receive`, never
  returned; the other messages of the batch are delivered (docs/workers.md, "Hostile input").
  SQS bodies are Unicode text, so a non-UTF-8 body cannot reach this router. :meth:`dead_letters`
  reads the DLQ without deleting: it receives in pages and makes each page visible again at
  once (``ChangeMessageVisibility`` 0). Each DLQ message carries a ``delivery`` attribute
  naming the delivery it dead-letters: a standard queue cannot refuse a second send, so a
  ``dead_letter`` retried after its send went through (the reply lost, or the delete after it
  failed) adds a copy, and the copies of one delivery are one dead letter: listed once, under
  the smallest ``MessageId`` among them, requeued once and deleted together
  (docs/contract-suite.md, "Faults injected at the driver").
* **Dead-letter administration** (:class:`reactor.ports.router.DeadLetterAdmin`;
  docs/workers.md, "Dead letters"). A dead letter's id is its DLQ ``MessageId`` (stable while it
  stays in the DLQ). SQS has no get-by-id and no peek, so every operation *scans* the DLQ:
  receive pages of 10, each message leased for :data:`DLQ_LEASE` seconds, until a page brings
  nothing new (at most :data:`DLQ_SCAN_MAX` messages), then makes every message it does not
  consume visible again. :meth:`SQSRouter.requeue_dead_letter` is *claim, enqueue, remove*: the
  scan's lease on the dead letter is the claim (a concurrent requeue cannot receive it), the
  body is sent to the queue unchanged with no ``deliveries`` attribute (a fresh delivery count),
  then the DLQ copy is deleted with its receipt. Limits, honestly: (1) a scan costs one request
  per 10 dead letters, and short polling on AWS samples a subset of servers, so a scan may miss
  messages; (2) a message leased by a concurrent reader (a listing, another requeue's scan) is
  invisible, so a listing may show fewer letters and ``get``, ``requeue`` or ``purge`` may not
  find one (``None``/not counted: try again); (3) standard queues deliver at least once, so in
  rare cases two concurrent requeues may both receive the same dead letter and enqueue it
  twice, and a requeue that stalls longer than :data:`DLQ_LEASE` between its receive and its
  delete may see it requeued again; (4) a crash between the send and the delete leaves the dead
  letter, visible again after the lease: it is never lost, but a later requeue enqueues it a
  second time; (5) a ``cursor`` is placed by its letter, so one requeued or purged since is
  refused (``ValueError``).
* **Receive batches.** Up to 10 messages per request (SQS's limit); ``wait_seconds`` uses long
  polling in whole seconds (rounded up, at most 20 per request).

Clock: the application clock (``not_before`` and dead-letter times are epoch seconds).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from reactor.errors import DeserializationError, RouterError
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.inspection import QueueStats
from reactor.ports.router import DeadLetter, Delivery, Job

__all__ = ["DLQ_LEASE", "DLQ_SCAN_MAX", "MAX_SQS_DELAY", "MAX_VISIBILITY", "SQSRouter"]

logger = logging.getLogger(__name__)

#: SQS's largest ``DelaySeconds``.
MAX_SQS_DELAY = 900
#: SQS's largest visibility timeout (12 hours).
MAX_VISIBILITY = 43200
_BATCH = 10
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
#: Receipts remembered to dead-letter a message with its raw body.
_BODY_CACHE = 10_000
#: Message attribute of a re-sent message: its deliveries before the re-send.
_DELIVERIES = "deliveries"
#: Seconds a DLQ scan leases each dead letter it receives (the claim of a requeue).
DLQ_LEASE = 30
#: The most DLQ messages one scan reads (listing with a cursor, get, requeue, purge).
DLQ_SCAN_MAX = 10_000


@dataclass(slots=True)
class _Leased:
    """A dead letter found by a scan: the letter (its id: the smallest ``MessageId`` of its
    copies), every receipt the scan got for its copies (to release them), and the latest
    receipt of each copy (to delete them all)."""

    letter: DeadLetter
    receipts: list[str]
    copies: dict[str, str]


#: The DLQ message attribute naming the delivery a dead letter was sent for: copies sent
#: twice for one delivery (a retried ``dead_letter`` after its send's reply was lost, or its
#: delete failed) are one dead letter.
_DELIVERY = "delivery"


def _delivery_key(receipt: str) -> str:
    """The delivery a receipt names, as a short stable key (SHA-1 of the receipt handle)."""
    return hashlib.sha1(receipt.encode("utf-8")).hexdigest()


def _holds(found: dict[str, _Leased], letter_id: str) -> bool:
    """Whether a scan found the dead letter ``letter_id`` (any of its copies' ids)."""
    return _find(found, letter_id) is not None


def _find(found: dict[str, _Leased], letter_id: str) -> str | None:
    """The key in ``found`` of the dead letter one of whose copies is ``letter_id``."""
    if letter_id in found:
        return letter_id
    return next((key for key, item in found.items() if letter_id in item.copies), None)


def _check_delay(seconds: float, name: str = "delay_seconds") -> float:
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {seconds!r}")
    return value


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _stale_code(code: str) -> bool:
    return code in (
        "ReceiptHandleIsInvalid",
        "AWS.SimpleQueueService.ReceiptHandleIsInvalid",
        "InvalidParameterValue",
        "MessageNotInflight",
        "AWS.SimpleQueueService.MessageNotInflight",
    )


def queue_name(prefix: str, name: str) -> str:
    """The SQS queue name for ``prefix + name`` (invalid characters become ``-``).

    Raises:
        ValueError: the name (plus ``-dlq``) would exceed SQS's 80 characters.
    """
    full = _NAME_OK.sub("-", prefix + name)
    if len(full) > 76:
        raise ValueError(f"SQS queue name {full!r} is too long (76 characters + '-dlq' max)")
    return full


class SQSRouter:
    """A :class:`reactor.ports.Router` on an SQS standard queue.

    Args:
        client: a boto3 SQS client.
        queue: the queue name (``prefix`` is prepended).
        prefix: namespace prepended to the queue names.
        visibility_timeout: seconds a delivery stays leased (whole seconds on SQS, rounded up).
        create: create the queue and its DLQ when missing.
        clock: the application clock in epoch seconds: a callable or a
            :class:`reactor.ports.Clock` (injectable for tests); default ``None``: the system
            clock, read at call time.
        owns_client: close ``client`` on :meth:`close`.

    Raises:
        ValueError: a bad ``visibility_timeout`` or queue name.
        RouterError: looking up or creating the queues failed.
    """

    def __init__(
        self,
        client: Any,
        queue: str,
        *,
        prefix: str = "",
        visibility_timeout: float = 30.0,
        create: bool = True,
        clock: Callable[[], float] | Clock | None = None,
        owns_client: bool = False,
    ) -> None:
        if not 0 < visibility_timeout <= MAX_VISIBILITY:
            raise ValueError(
                f"visibility_timeout must be in (0, {MAX_VISIBILITY}], got {visibility_timeout!r}"
            )
        self.client = client
        self.name = queue_name(prefix, queue)
        self.dlq_name = self.name + "-dlq"
        self.visibility_timeout = float(visibility_timeout)
        self._clock = wall_reader(clock)
        self._owns_client = owns_client
        self._bodies: OrderedDict[str, tuple[str, str]] = OrderedDict()  # receipt -> body, id
        self._newest: OrderedDict[str, str] = OrderedDict()  # MessageId -> newest receipt
        self._bodies_lock = threading.Lock()
        self._closed = False
        self._native_delay_limit = MAX_SQS_DELAY
        self.queue_url = self._queue_url(self.name, create)
        self.dlq_url = self._queue_url(self.dlq_name, create)

    def _queue_url(self, name: str, create: bool) -> str:
        try:
            if create:
                url = self.client.create_queue(QueueName=name)["QueueUrl"]
            else:
                url = self.client.get_queue_url(QueueName=name)["QueueUrl"]
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS queue {name!r} is not available: {exc}") from exc
        return str(url)

    def now(self) -> float:
        """The application clock in epoch seconds."""
        return self._clock()

    @property
    def native_delay_limit(self) -> float:
        """The longest delay one SQS message leg is sent with, seconds (900 unless lowered;
        :class:`reactor.ports.capabilities.BoundedNativeDelay`)."""
        return float(self._native_delay_limit)

    def limit_native_delay(self, seconds: float) -> None:
        """Send delayed messages with at most ``seconds`` of ``DelaySeconds`` per leg (rounded
        up to whole seconds), re-deferring the rest on receive, as beyond SQS's own 900 s. The
        contract suite lowers it to see re-deferral in seconds (docs/contract-suite.md,
        "Declarations are checked").

        Args:
            seconds: 1 to 900.

        Raises:
            ValueError: ``seconds`` is outside 1..900 or not finite.
        """
        if not (math.isfinite(seconds) and 1 <= seconds <= MAX_SQS_DELAY):
            raise ValueError(
                f"native delay limit must be in [1, {MAX_SQS_DELAY}] s, got {seconds!r}"
            )
        self._native_delay_limit = math.ceil(seconds)

    # -- producer side -----------------------------------------------------------------------

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Send ``job``, visible after ``delay_seconds`` (any finite delay >= 0).

        A delayed job's envelope gets ``not_before = now + delay``; beyond 900 s the message
        also carries a ``not_before`` attribute and is re-deferred on receive.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the request failed or the router is closed.
        """
        delay = _check_delay(delay_seconds)
        now = self.now()
        if delay > 0:
            job = replace(job, not_before=now + delay)
        self._send(self.queue_url, job.to_json(), now + delay if delay > 0 else None)
        return job.id

    def enqueue_raw(self, body: str) -> None:
        """Send a raw body as a foreign producer would (the router probe's ``inject_raw``).

        Raises:
            RouterError: the request failed.
        """
        self._send(self.queue_url, body, None)

    def _send(
        self,
        queue_url: str,
        body: str,
        not_before: float | None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        if self._closed:
            raise RouterError("the SQS router is closed")
        request: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
        attrs = dict(attributes or {})
        if not_before is not None:
            remaining = not_before - self.now()
            limit = self._native_delay_limit
            delay = min(max(math.ceil(remaining), 0), limit)
            request["DelaySeconds"] = delay
            if remaining > limit:
                attrs["not_before"] = {"DataType": "Number", "StringValue": repr(not_before)}
        if attrs:
            request["MessageAttributes"] = attrs
        try:
            self.client.send_message(**request)
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS send to {queue_url} failed: {exc}") from exc

    # -- consumer side -----------------------------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, long-polling up to ``wait_seconds``.

        Messages whose ``not_before`` is in the future are re-deferred (re-sent and deleted);
        undecodable ones are dead-lettered with the reason. Neither is returned.

        Raises:
            RouterError: the request failed.
        """
        if max_jobs <= 0:
            return []
        deadline = time.monotonic() + max(float(wait_seconds), 0.0)
        out: list[Delivery] = []
        while True:
            remaining = deadline - time.monotonic()
            wait = min(max(math.ceil(remaining), 0), 20) if not out else 0
            messages = self._receive(
                self.queue_url, min(max_jobs - len(out), _BATCH), wait, self.visibility_timeout
            )
            self._sort(messages, out)
            if len(out) >= max_jobs:
                return out
            if out and len(messages) < _BATCH:
                return out
            if not messages and (out or deadline - time.monotonic() <= 0 or self._closed):
                return out

    def _receive(
        self, queue_url: str, count: int, wait: int, visibility: float
    ) -> list[dict[str, Any]]:
        try:
            reply = self.client.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=count,
                WaitTimeSeconds=wait,
                VisibilityTimeout=min(math.ceil(visibility), MAX_VISIBILITY),
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS receive from {queue_url} failed: {exc}") from exc
        messages: list[dict[str, Any]] = reply.get("Messages", [])
        return messages

    def _sort(self, messages: Sequence[dict[str, Any]], out: list[Delivery]) -> None:
        """Split received messages into deliveries, re-deferrals and dead letters."""
        done: list[str] = []
        now = self.now()
        for message in messages:
            body = str(message.get("Body", ""))
            receipt = str(message["ReceiptHandle"])
            attrs = message.get("MessageAttributes") or {}
            not_before = _number_attribute(attrs.get("not_before"))
            if not_before is not None and not_before > now:
                self._send(
                    self.queue_url,
                    body,
                    not_before,
                    {k: v for k, v in attrs.items() if k != "not_before"},
                )
                done.append(receipt)
                continue
            try:
                job = Job.from_json(body)
            except DeserializationError as exc:
                self._to_dlq(body, f"undecodable message: {exc}", receipt)
                done.append(receipt)
                continue  # the next message of the batch
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            count += int(_number_attribute(attrs.get(_DELIVERIES)) or 0)
            self._remember(receipt, body, str(message.get("MessageId", "")))
            out.append(Delivery(job=job, receipt=receipt, delivery_count=count))
        self._delete_batch(done)

    def _remember(self, receipt: str, body: str, message_id: str) -> None:
        with self._bodies_lock:
            self._bodies[receipt] = (body, message_id)
            while len(self._bodies) > _BODY_CACHE:
                self._bodies.popitem(last=False)
            if message_id:
                self._newest[message_id] = receipt
                self._newest.move_to_end(message_id)
                while len(self._newest) > _BODY_CACHE:
                    self._newest.popitem(last=False)

    def _forget(self, receipt: str) -> str | None:
        with self._bodies_lock:
            found = self._bodies.pop(receipt, None)
            if found is None:
                return None
            body, message_id = found
            if self._newest.get(message_id) == receipt:
                del self._newest[message_id]
            return body

    def _superseded(self, delivery: Delivery, action: str) -> bool:
        """Whether this router received ``delivery``'s message again since (its receipt is
        stale); logs the ignored ``action`` when so."""
        with self._bodies_lock:
            found = self._bodies.get(delivery.receipt)
            newest = self._newest.get(found[1]) if found is not None else None
            stale = newest is not None and newest != delivery.receipt
            if stale:
                self._bodies.pop(delivery.receipt, None)
        if stale:
            logger.warning(
                "stale receipt on %s of job %s ignored: the message was received again",
                action, delivery.job.id,
            )
        return stale

    def ack(self, delivery: Delivery) -> None:
        """Delete a delivered message; a stale receipt is logged, never raised.

        Stale: this router received the message again since (a logged no-op), or SQS refuses
        the handle; a handle superseded by another process's receive is best effort (module
        docstring).

        Raises:
            RouterError: the request failed for another reason (network, permissions).
        """
        if self._superseded(delivery, "ack"):
            return
        self._forget(delivery.receipt)
        try:
            self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=delivery.receipt)
        except ClientError as exc:
            if _stale_code(_code(exc)):
                logger.warning("stale receipt on ack of job %s: %s", delivery.job.id, exc)
                return
            raise RouterError(f"SQS ack failed: {exc}") from exc
        except BotoCoreError as exc:
            raise RouterError(f"SQS ack failed: {exc}") from exc

    def ack_many(self, deliveries: Iterable[Delivery]) -> None:
        """Delete several delivered messages with ``DeleteMessageBatch`` (10 per request).

        Entries with a stale receipt (see :meth:`ack`) are skipped and logged; entries SQS
        refuses are logged; neither raises.

        Raises:
            RouterError: a request failed.
        """
        receipts = [d.receipt for d in deliveries if not self._superseded(d, "ack")]
        for receipt in receipts:
            self._forget(receipt)
        self._delete_batch(receipts)

    def _delete_batch(self, receipts: Sequence[str], queue_url: str | None = None) -> int:
        """Delete by receipt in batches of 10; returns how many SQS deleted (failures are
        logged, never raised)."""
        url = queue_url or self.queue_url
        deleted = 0
        for start in range(0, len(receipts), _BATCH):
            chunk = receipts[start : start + _BATCH]
            try:
                reply = self.client.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)],
                )
            except (ClientError, BotoCoreError) as exc:
                raise RouterError(f"SQS batch delete failed: {exc}") from exc
            for failed in reply.get("Failed", []):
                logger.warning("SQS batch delete entry failed (stale receipt?): %s", failed)
            deleted += len(reply.get("Successful", []))
        return deleted

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Make the job visible again after ``delay_seconds``.

        Up to 900 s: ``ChangeMessageVisibility`` (the receive count is kept). Longer, or when
        the visibility cannot be changed any more: a re-send with ``not_before`` and a delete;
        the re-sent message carries the deliveries so far (``deliveries`` attribute), so the
        next delivery still has ``delivery.delivery_count + 1``. A stale receipt is logged.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: a request failed.
        """
        delay = _check_delay(delay_seconds)
        if self._superseded(delivery, "retry"):
            return
        if delay <= self._native_delay_limit:
            try:
                self.client.change_message_visibility(
                    QueueUrl=self.queue_url,
                    ReceiptHandle=delivery.receipt,
                    VisibilityTimeout=math.ceil(delay),
                )
                self._forget(delivery.receipt)
                return
            except ClientError as exc:
                message = str(exc).lower()
                if not _stale_code(_code(exc)):
                    raise RouterError(f"SQS retry failed: {exc}") from exc
                if "maximum" not in message and "exceed" not in message:
                    logger.warning("stale receipt on retry of job %s: %s", delivery.job.id, exc)
                    return
                # the 12 h visibility budget of this receipt is spent: fall back to a re-send
            except BotoCoreError as exc:
                raise RouterError(f"SQS retry failed: {exc}") from exc
        body = self._forget(delivery.receipt) or delivery.job.to_json()
        deliveries = {"DataType": "Number", "StringValue": str(max(delivery.delivery_count, 1))}
        self._send(self.queue_url, body, self.now() + delay, {_DELIVERIES: deliveries})
        self._delete_batch([delivery.receipt])

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the message invisible for ``seconds`` from now (bounded to 12 h, whole seconds).

        A stale receipt is logged, never raised.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
            RouterError: the request failed for another reason.
        """
        extra = _check_delay(seconds, "seconds")
        if self._superseded(delivery, "extend"):
            return
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=delivery.receipt,
                VisibilityTimeout=min(math.ceil(extra), MAX_VISIBILITY),
            )
        except ClientError as exc:
            if _stale_code(_code(exc)):
                logger.warning("stale receipt on extend of job %s: %s", delivery.job.id, exc)
                return
            raise RouterError(f"SQS extend failed: {exc}") from exc
        except BotoCoreError as exc:
            raise RouterError(f"SQS extend failed: {exc}") from exc

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Send the job to ``<queue>-dlq`` with ``reason`` and delete it from the queue.

        A stale receipt (this router received the message again since) is logged and
        dead-letters nothing (see the module docstring for what SQS itself guarantees).

        Raises:
            RouterError: a request failed.
        """
        if self._superseded(delivery, "dead_letter"):
            return
        body = self._forget(delivery.receipt) or delivery.job.to_json()
        self._to_dlq(body, reason, delivery.receipt)
        self._delete_batch([delivery.receipt])

    def _to_dlq(self, body: str, reason: str, receipt: str) -> None:
        """Send ``body`` to the DLQ, tagged with the delivery (``receipt``) it dead-letters:
        a retry that sends it again adds a copy the scans merge into the same dead letter
        (SQS standard queues cannot refuse a duplicate send; docs/contract-suite.md, "Faults
        injected at the driver")."""
        logger.warning("dead-lettered message on %s: %s", self.name, reason)
        self._send(
            self.dlq_url,
            body,
            None,
            {
                "reason": {"DataType": "String", "StringValue": reason[:4096] or "-"},
                "at": {"DataType": "Number", "StringValue": repr(self.now())},
                _DELIVERY: {"DataType": "String", "StringValue": _delivery_key(receipt)},
            },
        )

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Read dead-lettered messages without deleting them, oldest first (at most ``limit``),
        each with its DLQ ``MessageId`` as ``id`` (docs/workers.md, "Dead letters").

        Scans the DLQ with short leases and makes every message visible again at once (module
        docstring: the limits). Without ``cursor`` the scan stops after ``limit`` letters, so
        "oldest first" orders what it read; with one, the whole DLQ is read (up to
        :data:`DLQ_SCAN_MAX`) to place the cursor.

        Args:
            limit: the most letters returned.
            cursor: the id of the last letter of the previous page (``None``: the oldest).

        Raises:
            ValueError: ``cursor`` names no dead letter the scan found.
            RouterError: a request failed.
        """
        if limit <= 0:
            return []
        if cursor is None:
            leased = self._scan_dlq(lambda found: len(found) >= limit)
        else:
            leased = self._scan_dlq(lambda found: False)
        self._release([r for item in leased.values() for r in item.receipts])
        letters = sorted((item.letter for item in leased.values()), key=lambda d: (d.at, d.id))
        if cursor is None:
            return letters[:limit]
        position = next((i for i, d in enumerate(letters) if d.id == cursor), None)
        if position is None:
            raise ValueError(f"bad dead-letter cursor {cursor!r}: no such dead letter")
        return letters[position + 1 : position + 1 + limit]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter whose DLQ ``MessageId`` is ``letter_id``, else ``None`` (a scan of
        the DLQ; a letter leased by a concurrent reader is not found: module docstring).

        Raises:
            RouterError: a request failed.
        """
        leased = self._scan_dlq(lambda found: _holds(found, letter_id))
        self._release([r for item in leased.values() for r in item.receipts])
        key = _find(leased, letter_id)
        return None if key is None else leased[key].letter

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Move a dead letter back to the queue, due now, with a fresh delivery count.

        Claim (the scan's lease), enqueue (send the body unchanged), remove (delete from the
        DLQ): see the module docstring for what SQS guarantees (docs/workers.md, "Dead
        letters").

        Returns:
            The job id (the original job's), or ``None`` when the scan did not find the dead
            letter (no such id, requeued or purged, or leased by a concurrent reader).

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept (made
                visible again).
            RouterError: a request failed (the letter is kept; when the send succeeded and
                the delete failed, it shows again after :data:`DLQ_LEASE` seconds).
        """
        leased = self._scan_dlq(lambda found: _holds(found, letter_id))
        key = _find(leased, letter_id)
        item = leased.pop(key) if key is not None else None
        self._release([r for other in leased.values() for r in other.receipts])
        if item is None:
            return None
        try:
            job = item.letter.to_job()
            self._send(self.queue_url, item.letter.body, None)
        except BaseException:
            self._release(item.receipts)
            raise
        self._delete_batch(list(item.copies.values()), self.dlq_url)
        return job.id

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: every one the scans find);
        returns how many were deleted (docs/workers.md, "Dead letters").

        ``None`` scans and deletes until a scan finds nothing (``PurgeQueue`` is not used: it
        returns no count and runs at most once a minute). Letters leased by a concurrent
        reader are not found (module docstring).

        Raises:
            RouterError: a request failed.
        """
        if ids is None:
            deleted = 0
            while True:
                leased = self._scan_dlq(lambda found: False)
                if not leased:
                    return deleted
                removed = self._delete_batch(
                    [r for item in leased.values() for r in item.copies.values()], self.dlq_url
                )
                deleted += min(removed, len(leased))
        wanted = set(ids)
        if not wanted:
            return 0
        leased = self._scan_dlq(lambda found: all(_holds(found, w) for w in wanted))
        keys = {key for w in wanted if (key := _find(leased, w)) is not None}
        doomed = [r for key in keys for r in leased[key].copies.values()]
        self._release([r for key, i in leased.items() if key not in keys for r in i.receipts])
        return min(self._delete_batch(doomed, self.dlq_url), len(keys))

    def _scan_dlq(self, enough: Callable[[dict[str, _Leased]], bool]) -> dict[str, _Leased]:
        """Receive DLQ pages (each message leased :data:`DLQ_LEASE` s) until ``enough`` holds,
        a page brings no new message, or :data:`DLQ_SCAN_MAX` messages were read.

        Returns:
            ``{MessageId: leased}`` of every message received, still leased: the caller
            releases (:meth:`_release`) or deletes each one.

        Raises:
            RouterError: a request failed (what was leased so far is released first).
        """
        by_delivery: dict[str, _Leased] = {}
        seen: set[str] = set()
        try:
            while len(seen) < DLQ_SCAN_MAX and not enough(self._by_id(by_delivery)):
                batch = self._receive(self.dlq_url, _BATCH, 0, DLQ_LEASE)
                fresh = False
                for message in batch:
                    message_id = str(message["MessageId"])
                    receipt = str(message["ReceiptHandle"])
                    attrs = message.get("MessageAttributes") or {}
                    delivery = attrs.get(_DELIVERY, {}).get("StringValue") or message_id
                    fresh = fresh or message_id not in seen
                    seen.add(message_id)
                    item = by_delivery.get(str(delivery))
                    if item is None:
                        by_delivery[str(delivery)] = _Leased(
                            self._letter(message), [receipt], {message_id: receipt}
                        )
                        continue
                    item.receipts.append(receipt)
                    item.copies[message_id] = receipt
                    if message_id < item.letter.id:  # one id whatever the order of the copies
                        item.letter = self._letter(message)
                if not fresh:
                    break
        except RouterError:
            self._release([r for item in by_delivery.values() for r in item.receipts])
            raise
        return self._by_id(by_delivery)

    @staticmethod
    def _by_id(by_delivery: dict[str, _Leased]) -> dict[str, _Leased]:
        """The scan's dead letters keyed by their ids."""
        return {item.letter.id: item for item in by_delivery.values()}

    @staticmethod
    def _letter(message: dict[str, Any]) -> DeadLetter:
        """A received DLQ message as a :class:`DeadLetter` (its ``MessageId`` as ``id``)."""
        attrs = message.get("MessageAttributes") or {}
        reason = attrs.get("reason", {}).get("StringValue", "")
        return DeadLetter(
            body=str(message.get("Body", "")),
            reason=str(reason),
            at=_number_attribute(attrs.get("at")) or 0.0,
            id=str(message["MessageId"]),
        )

    def _release(self, receipts: Sequence[str]) -> None:
        for start in range(0, len(receipts), _BATCH):
            chunk = receipts[start : start + _BATCH]
            try:
                self.client.change_message_visibility_batch(
                    QueueUrl=self.dlq_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": 0}
                        for i, r in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as exc:
                raise RouterError(f"SQS DLQ release failed: {exc}") from exc

    def _attributes(self, url: str) -> dict[str, str]:
        try:
            reply = self.client.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesDelayed",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS GetQueueAttributes failed: {exc}") from exc
        return dict(reply.get("Attributes") or {})

    def ping(self) -> None:
        """One ``GetQueueAttributes`` call on the queue (``reactor ping``;
        :class:`reactor.ports.inspection.Pingable`).

        Raises:
            RouterError: SQS cannot be reached or refused the call.
        """
        self._attributes(self.queue_url)

    def queue_stats(self) -> QueueStats:
        """SQS's approximate counts of the queue and its DLQ (``reactor info``;
        :class:`reactor.ports.inspection.QueueInspector`).

        Returns:
            ``ready`` (``ApproximateNumberOfMessages``), ``delayed``
            (``ApproximateNumberOfMessagesDelayed``; a delay beyond 900 s shows there only
            while its current 900 s leg runs), ``in_flight``
            (``ApproximateNumberOfMessagesNotVisible``), ``dead_letters`` (the DLQ's visible
            and in-flight messages); ``consumers`` is unknown.

        Raises:
            RouterError: SQS failed.
        """
        queue = self._attributes(self.queue_url)
        dlq = self._attributes(self.dlq_url)

        def count(attrs: dict[str, str], name: str) -> int | None:
            raw = attrs.get(name)
            return int(raw) if raw is not None and raw.isdigit() else None

        dead = count(dlq, "ApproximateNumberOfMessages")
        dead_leased = count(dlq, "ApproximateNumberOfMessagesNotVisible")
        return QueueStats(
            ready=count(queue, "ApproximateNumberOfMessages"),
            delayed=count(queue, "ApproximateNumberOfMessagesDelayed"),
            in_flight=count(queue, "ApproximateNumberOfMessagesNotVisible"),
            dead_letters=None if dead is None else dead + (dead_leased or 0),
        )

    def close(self) -> None:
        """Stop using the router (closes the client when owned); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.client.close()


def _number_attribute(attr: Any) -> float | None:
    if not isinstance(attr, dict):
        return None
    raw = attr.get("StringValue")
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None
