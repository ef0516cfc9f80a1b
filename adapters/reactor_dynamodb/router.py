"""The SQS router: jobs on an Amazon SQS standard queue (boto3; docs/adapters/dynamodb.md).

:class:`SQSQueue` is the queue (a :class:`reactor.ports.queues.QueuePrimitive` that also
:class:`~reactor.ports.queues.ClaimsWaiting` and
:class:`~reactor.ports.queues.RequeuesDeadLetters`) on ``<prefix><name>`` and its dead-letter
queue ``<prefix><name>-dlq`` (both created when missing, unless ``create=false``).
:class:`SQSRouter` is :class:`reactor.generic.router.GenericRouter` over it (job envelopes,
delays, the stale-receipt rule, poison messages dead-lettered with their bodies, retries that
keep the delivery count, dead-letter administration: docs/protocol.md, "Building a router"),
plus SQS's fast paths (``ack_many``, a purge by scans) and ``queue_stats``/``ping``.

* **Any delay.** SQS delays at most 900 s. A longer delay is sent with ``DelaySeconds=900``
  and a ``not_before`` message attribute (epoch seconds); a claim re-sends a message whose
  ``not_before`` is still in the future with ``min(remaining, 900)`` of delay and deletes the
  received copy. A message is never parked invisible to hide a delay
  (docs/protocol.md#routers). Delays are whole seconds on SQS: they are rounded *up*.
* **Leases.** A claim leases messages for the visibility timeout (whole seconds, rounded up);
  ``change_visibility`` is ``ChangeMessageVisibility`` (bounded to SQS's 12 h); ``release``
  sets the visibility to the delay (keeping ``ApproximateReceiveCount``) or, beyond the native
  delay limit or once the 12 h budget of a receipt is spent, re-sends with ``not_before`` and
  deletes the original. A re-sent message carries a ``deliveries`` attribute (the deliveries
  so far), added to its own receive count, so the receive count survives the re-send.
* **Stale receipts** (docs/writing-an-adapter.md, routers: the stale-receipt rule). SQS gives a
  new receipt handle per receive but cannot refuse an old one: AWS documents that a
  ``DeleteMessage`` with a handle that is not the most recent one "succeeds, but the message
  might not be deleted", and moto deletes it, and ``ChangeMessageVisibility`` accepts old
  handles too. So the queue guards in-process: it remembers, per ``MessageId``, the newest
  receipt it received (the last 10,000 messages), also after that delivery settled, and
  revokes a receipt it released (``retry``); an operation with an older or a revoked receipt
  changes nothing (``False``: the router logs it). A receipt superseded by a
  receive in *another* process cannot be told apart: there the rule holds only as far as SQS
  honours it (best effort). A handle SQS itself refuses as invalid is stale too.
* **Bodies.** SQS bodies are Unicode text. The queue remembers the body of each receipt (the
  last 10,000) to dead-letter or re-send it; for a delivery older than that, the router passes
  the job it decoded (:meth:`SQSQueue.keep_body`).
* **Dead letters.** ``dead_letter`` sends the body to the DLQ with ``reason`` and ``at``
  attributes, then deletes the message. Each DLQ message carries a ``delivery`` attribute
  naming the delivery it dead-letters: a standard queue cannot refuse a second send, so a
  ``dead_letter`` retried after its send went through (the reply lost, or the delete after it
  failed) adds a copy, and the copies of one delivery are one dead letter: listed once, under
  the smallest ``MessageId`` among them, requeued once and deleted together
  (docs/contract-suite.md, "Faults injected at the driver").
* **Dead-letter administration** (docs/workers.md, "Dead letters"). A dead letter's id is its
  DLQ ``MessageId`` (stable while it stays in the DLQ). SQS has no get-by-id and no peek, so
  every operation *scans* the DLQ: receive pages of 10, each message leased for
  :data:`DLQ_LEASE` seconds, until a page brings nothing new (at most :data:`DLQ_SCAN_MAX`
  messages), then makes every message it does not consume visible again. A requeue is *claim,
  enqueue, remove*: the scan's lease on the dead letter is the claim (a concurrent requeue
  cannot receive it), the body is sent to the queue unchanged with no ``deliveries`` attribute
  (a fresh delivery count), then the DLQ copies are deleted. Limits, honestly: (1) a scan costs
  one request per 10 dead letters, and short polling on AWS samples a subset of servers, so a
  scan may miss messages; (2) a message leased by a concurrent reader (a listing, another
  requeue's scan) is invisible, so a listing may show fewer letters and ``get``, ``requeue`` or
  ``purge`` may not find one (``None``/not counted: try again); (3) standard queues deliver at
  least once, so in rare cases two concurrent requeues may both receive the same dead letter
  and enqueue it twice, and a requeue that stalls longer than :data:`DLQ_LEASE` between its
  receive and its delete may see it requeued again; (4) a crash between the send and the
  delete leaves the dead letter, visible again after the lease: it is never lost, but a later
  requeue enqueues it a second time; (5) a ``cursor`` is placed by its letter, so one requeued
  or purged since is refused (``ValueError``).
* **Receive batches.** Up to 10 messages per request (SQS's limit). A waiting receive
  long-polls (:meth:`SQSQueue.claim_waiting`: whole seconds, rounded up, at most 20 per
  request): one request per wait.

Clock: the application clock (``not_before`` and dead-letter times are epoch seconds).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from reactor.errors import RouterError
from reactor.generic.router import GenericRouter, decode_receipt
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.inspection import QueueStats
from reactor.ports.queues import ClaimedMessage
from reactor.ports.router import DeadLetter, Delivery

__all__ = [
    "DLQ_LEASE",
    "DLQ_SCAN_MAX",
    "MAX_SQS_DELAY",
    "MAX_VISIBILITY",
    "SQSQueue",
    "SQSRouter",
    "queue_name",
]

logger = logging.getLogger(__name__)

#: SQS's largest ``DelaySeconds``.
MAX_SQS_DELAY = 900
#: SQS's largest visibility timeout (12 hours).
MAX_VISIBILITY = 43200
_BATCH = 10
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
#: Receipts remembered to dead-letter a message with its raw body.
_BODY_CACHE = 10_000
#: A receipt the queue revoked (a release): stale, and never a receipt SQS hands out.
_REVOKED = "\x00revoked"
#: The largest ``deliveries`` attribute believed (a foreign message may carry any number).
_MAX_DELIVERIES = 1_000_000.0
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



class SQSQueue:
    """A :class:`reactor.ports.queues.QueuePrimitive` on an SQS standard queue and its DLQ
    (module docstring).

    Args:
        client: a boto3 SQS client.
        name: the queue's full name (:func:`queue_name`); the DLQ is ``<name>-dlq``.
        create: create the queue and its DLQ when missing.
        owns_client: close ``client`` in :meth:`close`.

    Attributes:
        client: the boto3 client.
        name: the queue name.
        dlq_name: the DLQ's name.
        queue_url: the queue's URL.
        dlq_url: the DLQ's URL.

    Raises:
        RouterError: looking up or creating the queues failed.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        create: bool = True,
        owns_client: bool = False,
    ) -> None:
        self.client = client
        self.name = name
        self.dlq_name = name + "-dlq"
        self._owns_client = owns_client
        self._clock: Callable[[], float] = wall_reader(None)
        # receipt -> (body, MessageId, receive count) of each claimed message
        self._bodies: OrderedDict[str, tuple[str, str, int]] = OrderedDict()
        self._newest: OrderedDict[str, str] = OrderedDict()  # MessageId -> newest receipt
        self._lock = threading.Lock()
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

    def bind_clock(self, clock: Callable[[], float]) -> None:
        """Judge delays and leases by ``clock`` (epoch seconds), the router's clock."""
        self._clock = clock

    @property
    def native_delay_limit(self) -> int:
        """The longest ``DelaySeconds`` one message leg is sent with (900 unless lowered)."""
        return self._native_delay_limit

    def limit_native_delay(self, seconds: float) -> None:
        """Send delayed messages with at most ``seconds`` of ``DelaySeconds`` per leg (rounded
        up), re-deferring the rest on claim.

        Raises:
            ValueError: ``seconds`` is outside 1..900 or not finite.
        """
        if not (math.isfinite(seconds) and 1 <= seconds <= MAX_SQS_DELAY):
            raise ValueError(
                f"native delay limit must be in [1, {MAX_SQS_DELAY}] s, got {seconds!r}"
            )
        self._native_delay_limit = math.ceil(seconds)

    # -- sending ---------------------------------------------------------------------------

    def send(
        self,
        queue_url: str,
        body: str,
        not_before: float | None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        """Send one message, delayed until ``not_before`` (legs of at most the native delay
        limit, the rest carried as a ``not_before`` attribute).

        Raises:
            RouterError: the request failed, or the queue is closed.
        """
        if self._closed:
            raise RouterError("the SQS router is closed")
        request: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
        attrs = dict(attributes or {})
        if not_before is not None:
            remaining = not_before - self._clock()
            limit = self._native_delay_limit
            request["DelaySeconds"] = min(max(math.ceil(remaining), 0), limit)
            if remaining > limit:
                attrs["not_before"] = {"DataType": "Number", "StringValue": repr(not_before)}
        if attrs:
            request["MessageAttributes"] = attrs
        try:
            self.client.send_message(**request)
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS send to {queue_url} failed: {exc}") from exc

    # -- QueuePrimitive: messages ----------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Send the body, visible from ``visible_at``. SQS cannot refuse a second put of one
        id, so ``message_id`` is not kept (``True`` always; a requeue uses
        :meth:`requeue_dead_letter`).

        Raises:
            UnicodeDecodeError: ``body`` is bytes that are not UTF-8 (SQS bodies are text).
            RouterError: the request failed, or the queue is closed.
        """
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        self.send(self.queue_url, text, visible_at if visible_at > self._clock() else None)
        return True

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """Receive up to ``limit`` messages (10 per request) leased until ``visible_at``; a
        message whose ``not_before`` is still ahead is re-sent and deleted instead.

        Raises:
            RouterError: a request failed.
        """
        return self.claim_waiting(limit, now, visible_at, 0.0)

    def claim_waiting(
        self, limit: int, now: float, visible_at: float, wait_seconds: float
    ) -> list[ClaimedMessage]:
        """:meth:`claim` with a long poll of ``wait_seconds`` (whole seconds, rounded up, at
        most 20), which SQS ends as soon as messages arrive.

        Raises:
            RouterError: a request failed.
        """
        wait = min(max(math.ceil(wait_seconds), 0), 20)
        messages: list[dict[str, Any]] = []
        while len(messages) < limit:  # batches of 10 until one comes back short
            asked = min(limit - len(messages), _BATCH)
            batch = self._receive(self.queue_url, asked, wait, visible_at - now)
            messages += batch
            wait = 0
            if len(batch) < asked:
                break
        now = self._clock() if messages and wait_seconds > 0 else now  # the poll took time
        out: list[ClaimedMessage] = []
        done: list[str] = []
        for message in messages:
            body = str(message.get("Body", ""))
            receipt = str(message["ReceiptHandle"])
            message_id = str(message.get("MessageId", ""))
            attrs = message.get("MessageAttributes") or {}
            not_before = _number_attribute(attrs.get("not_before"))
            if not_before is not None and not_before > now:
                self.send(self.queue_url, body, not_before,
                          {k: v for k, v in attrs.items() if k != "not_before"})
                done.append(receipt)
                continue
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            before = _number_attribute(attrs.get(_DELIVERIES)) or 0.0
            count += int(min(max(before, 0.0), _MAX_DELIVERIES))  # a foreign value, bounded
            self._remember(receipt, body, message_id, count)
            out.append(ClaimedMessage(message_id, body, count, receipt))
        try:
            self.delete_batch(done)
        except RouterError:
            if not out:
                raise
            # the jobs claimed are handed out; the re-sent copies' originals come back after
            # their lease and are re-deferred again (a duplicate, never a loss)
            logger.warning("SQS delete of re-deferred messages failed", exc_info=True)
        return out

    def _receive(
        self, queue_url: str, count: int, wait: int, visibility: float
    ) -> list[dict[str, Any]]:
        try:
            reply = self.client.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=count,
                WaitTimeSeconds=wait,
                VisibilityTimeout=min(max(math.ceil(visibility), 0), MAX_VISIBILITY),
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
        except (ClientError, BotoCoreError) as exc:
            raise RouterError(f"SQS receive from {queue_url} failed: {exc}") from exc
        messages: list[dict[str, Any]] = reply.get("Messages", [])
        return messages

    def _remember(self, receipt: str, body: str, message_id: str, count: int) -> None:
        with self._lock:
            self._bodies[receipt] = (body, message_id, count)
            while len(self._bodies) > _BODY_CACHE:
                self._bodies.popitem(last=False)
            if message_id:
                self._newest[message_id] = receipt
                self._newest.move_to_end(message_id)
                while len(self._newest) > _BODY_CACHE:
                    self._newest.popitem(last=False)

    def _forget(self, receipt: str, *, revoke: bool = False) -> None:
        """Drop the remembered body of a settled delivery. The newest receipt of its message
        stays remembered, so an older receipt is still stale after this one settled;
        ``revoke`` (a release) makes this receipt stale too (docs/protocol.md, "Building a
        router": a release revokes the receipt)."""
        with self._lock:
            found = self._bodies.pop(receipt, None)
            if found is not None and revoke and self._newest.get(found[1]) == receipt:
                self._newest[found[1]] = _REVOKED

    def keep_body(self, message_id: str, receipt: str, body: str, count: int) -> None:
        """Remember ``body`` for a delivery whose own body is no longer remembered (more than
        10,000 receipts since it was claimed): the router passes the job it decoded, so a
        dead letter or a re-send still carries it. A remembered body is kept as it is."""
        with self._lock:
            if receipt not in self._bodies and self._newest.get(message_id) == receipt:
                self._bodies[receipt] = (body, message_id, count)

    def _superseded(self, message_id: str, receipt: str) -> bool:
        """Whether this queue received the message again since ``receipt``, or revoked it
        (stale)."""
        with self._lock:
            newest = self._newest.get(message_id)
            stale = newest is not None and newest != receipt
            found = self._bodies.get(receipt)
            if stale and found is not None and found[1] == message_id:
                del self._bodies[receipt]
        return stale

    def _change(self, receipt: str, seconds: float) -> bool:
        """``ChangeMessageVisibility`` to ``seconds`` from now; ``False`` on a handle SQS
        refuses as stale.

        Raises:
            ClientError: SQS refused the change for the 12 h budget (the caller decides).
            RouterError: the request failed otherwise.
        """
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt,
                VisibilityTimeout=min(max(math.ceil(seconds), 0), MAX_VISIBILITY),
            )
        except ClientError as exc:
            if not _stale_code(_code(exc)):
                raise RouterError(f"SQS ChangeMessageVisibility failed: {exc}") from exc
            text = str(exc).lower()
            if "maximum" in text or "exceed" in text or "beyond the limit" in text:
                raise  # the receipt's 12 h visibility budget is spent
            return False
        except BotoCoreError as exc:
            raise RouterError(f"SQS ChangeMessageVisibility failed: {exc}") from exc
        return True

    def delete(self, message_id: str, receipt: str) -> bool:
        """``DeleteMessage`` unless the receipt was superseded here or SQS refuses it.

        Raises:
            RouterError: the request failed for another reason (network, permissions).
        """
        if self._superseded(message_id, receipt):
            return False
        try:
            self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)
        except ClientError as exc:
            if _stale_code(_code(exc)):
                self._forget(receipt)
                return False
            raise RouterError(f"SQS ack failed: {exc}") from exc
        except BotoCoreError as exc:
            raise RouterError(f"SQS ack failed: {exc}") from exc
        self._forget(receipt)
        return True

    def delete_many(self, leases: Iterable[tuple[str, str]]) -> None:
        """Delete several ``(message_id, receipt)`` with ``DeleteMessageBatch`` (10 per
        request), skipping receipts superseded here; entries SQS refuses are logged.

        Raises:
            RouterError: a request failed.
        """
        receipts = [r for m, r in leases if not self._superseded(m, r)]
        self.delete_batch(receipts)
        for receipt in receipts:
            self._forget(receipt)

    def delete_batch(self, receipts: Sequence[str], queue_url: str | None = None) -> int:
        """Delete by receipt in batches of 10; returns how many SQS deleted (entries it
        refuses are logged, never raised).

        Raises:
            RouterError: a request failed.
        """
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

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Keep the message invisible until ``visible_at`` (at most 12 h from now).

        Raises:
            RouterError: the request failed.
        """
        if self._superseded(message_id, receipt):
            return False
        try:
            return self._change(receipt, visible_at - self._clock())
        except ClientError as exc:  # the receipt's 12 h budget is spent: it cannot be held
            logger.warning("SQS extend of message %s refused: %s", message_id, exc)
            return False

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Make the message visible at ``visible_at``: ``ChangeMessageVisibility`` up to the
        native delay limit (the receive count kept); beyond it, or once the receipt's 12 h
        budget is spent, a re-send with ``not_before`` and the deliveries so far, then a
        delete.

        Raises:
            RouterError: a request failed.
        """
        if self._superseded(message_id, receipt):
            return False
        delay = max(visible_at - self._clock(), 0.0)
        if delay <= self._native_delay_limit:
            try:
                if not self._change(receipt, delay):
                    return False
                self._forget(receipt, revoke=True)
                return True
            except ClientError:
                pass  # the 12 h budget of this receipt is spent: re-send
        with self._lock:
            found = self._bodies.get(receipt)
        if found is None:
            raise RouterError(f"SQS retry of message {message_id} cannot re-send it: its body"
                              " is not remembered here")
        self.send(self.queue_url, found[0], visible_at,
                  {_DELIVERIES: {"DataType": "Number", "StringValue": str(max(found[2], 1))}})
        self.delete_batch([receipt])
        self._forget(receipt)  # only now: a retry after a failure above still has the body
        return True

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Send the remembered body to the DLQ with ``reason`` and ``at``, then delete the
        message (a body no longer remembered: the message is made visible again).

        Raises:
            RouterError: a request failed.
        """
        if self._superseded(message_id, receipt):
            return False
        with self._lock:
            found = self._bodies.get(receipt)
        if found is None:
            raise RouterError(f"SQS dead_letter of message {message_id} cannot send it: its"
                              " body is not remembered here")
        self._to_dlq(found[0], reason, receipt, at)
        self.delete_batch([receipt])
        self._forget(receipt)  # only now: a retry after a failure above still has the body
        return True

    def _to_dlq(self, body: str, reason: str, receipt: str, at: float) -> None:
        """Send ``body`` to the DLQ, tagged with the delivery (``receipt``) it dead-letters:
        a retry that sends it again adds a copy the scans merge into the same dead letter
        (SQS standard queues cannot refuse a duplicate send; docs/contract-suite.md, "Faults
        injected at the driver")."""
        logger.warning("dead-lettered message on %s: %s", self.name, reason)
        self.send(
            self.dlq_url,
            body,
            None,
            {
                "reason": {"DataType": "String", "StringValue": reason[:4096] or "-"},
                "at": {"DataType": "Number", "StringValue": repr(at)},
                _DELIVERY: {"DataType": "String", "StringValue": _delivery_key(receipt)},
            },
        )

    # -- QueuePrimitive: dead letters ------------------------------------------------------

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """Dead letters oldest first (by ``at``, then id), after the letter ``after``.

        Scans the DLQ with short leases and makes every message visible again at once (module
        docstring: the limits). Without ``after`` the scan stops after ``limit`` letters, so
        "oldest first" orders what it read; with one, the whole DLQ is read (up to
        :data:`DLQ_SCAN_MAX`) to place it.

        Raises:
            ValueError: ``after`` names no dead letter the scan found.
            RouterError: a request failed.
        """
        if limit <= 0:
            return []
        if after is None:
            leased = self._scan_dlq(lambda found: len(found) >= limit)
        else:
            leased = self._scan_dlq(lambda found: False)
        self._release([r for item in leased.values() for r in item.receipts])
        letters = sorted((item.letter for item in leased.values()), key=lambda d: (d.at, d.id))
        if after is None:
            return letters[:limit]
        position = next((i for i, d in enumerate(letters) if d.id == after), None)
        if position is None:
            raise ValueError(f"bad dead-letter cursor {after!r}: no such dead letter")
        return letters[position + 1 : position + 1 + limit]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter whose DLQ ``MessageId`` is ``letter_id`` (any of its copies'),
        else ``None`` (a scan; a letter leased by a concurrent reader is not found).

        Raises:
            RouterError: a request failed.
        """
        leased = self._scan_dlq(lambda found: _holds(found, letter_id))
        self._release([r for item in leased.values() for r in item.receipts])
        key = _find(leased, letter_id)
        return None if key is None else leased[key].letter

    def remove_dead_letter(self, letter_id: str) -> bool:
        """Delete the dead letter ``letter_id`` (every copy); ``False`` when the scan did not
        find it.

        Raises:
            RouterError: a request failed.
        """
        return self.purge([letter_id]) == 1

    def requeue_dead_letter(self, letter_id: str, visible_at: float) -> bool:
        """Claim (the scan's lease), enqueue (the body sent unchanged: a fresh delivery
        count), remove (every DLQ copy deleted): module docstring, "Dead-letter
        administration".

        Raises:
            RouterError: a request failed (the letter is kept; when the send succeeded and
                the delete failed, it shows again after :data:`DLQ_LEASE` seconds).
        """
        leased = self._scan_dlq(lambda found: _holds(found, letter_id))
        key = _find(leased, letter_id)
        item = leased.pop(key) if key is not None else None
        self._release([r for other in leased.values() for r in other.receipts])
        if item is None:
            return False
        try:
            self.send(self.queue_url, item.letter.body,
                      visible_at if visible_at > self._clock() else None)
        except BaseException:
            self._release(item.receipts)
            raise
        self.delete_batch(list(item.copies.values()), self.dlq_url)
        return True

    def purge(self, ids: Sequence[str] | None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: every one the scans find);
        returns how many were deleted.

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
                removed = self.delete_batch(
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
        return min(self.delete_batch(doomed, self.dlq_url), len(keys))

    def _scan_dlq(self, enough: Callable[[dict[str, _Leased]], bool]) -> dict[str, _Leased]:
        """Receive DLQ pages (each message leased :data:`DLQ_LEASE` s) until ``enough`` holds,
        a page brings no new message, or :data:`DLQ_SCAN_MAX` messages were read.

        Returns:
            ``{letter id: leased}`` of every letter received, still leased: the caller
            releases (:meth:`_release`) or deletes each one.

        Raises:
            RouterError: a request failed (what was leased so far is released first).
        """
        by_delivery: dict[str, _Leased] = {}
        seen: set[str] = set()
        try:
            while len(seen) < DLQ_SCAN_MAX and not enough(_by_id(by_delivery)):
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
                            _letter(message), [receipt], {message_id: receipt}
                        )
                        continue
                    item.receipts.append(receipt)
                    item.copies[message_id] = receipt
                    if message_id < item.letter.id:  # one id whatever the order of the copies
                        item.letter = _letter(message)
                if not fresh:
                    break
        except RouterError:
            self._release([r for item in by_delivery.values() for r in item.receipts])
            raise
        return _by_id(by_delivery)

    def _release(self, receipts: Sequence[str]) -> None:
        """Make DLQ messages a scan leased visible again (10 per request).

        Raises:
            RouterError: a request failed.
        """
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

    # -- inspection and lifecycle ----------------------------------------------------------

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
        """One ``GetQueueAttributes`` call on the queue.

        Raises:
            RouterError: SQS cannot be reached or refused the call.
        """
        self._attributes(self.queue_url)

    def stats(self) -> QueueStats:
        """SQS's approximate counts of the queue and its DLQ: ``ready``
        (``ApproximateNumberOfMessages``), ``delayed`` (``...Delayed``; a delay beyond 900 s
        shows there only while its current 900 s leg runs), ``in_flight`` (``...NotVisible``),
        ``dead_letters`` (the DLQ's visible and in-flight messages); ``consumers`` unknown.

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
        """Stop using the queue (closes the client when owned); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.client.close()


class SQSRouter(GenericRouter):
    """A :class:`reactor.ports.Router` (and ``DeadLetterAdmin``, ``QueueInspector``,
    ``Pingable``, ``BoundedNativeDelay``) on an SQS standard queue: :class:`GenericRouter`
    over an :class:`SQSQueue`.

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

    Attributes:
        primitive: the :class:`SQSQueue`.

    Raises:
        ValueError: a bad ``visibility_timeout`` or queue name.
        RouterError: looking up or creating the queues failed.
    """

    primitive: SQSQueue

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
        primitive = SQSQueue(client, queue_name(prefix, queue), create=create,
                             owns_client=owns_client)
        read = wall_reader(clock)
        primitive.bind_clock(read)
        # a waiting receive long-polls (SQSQueue.claim_waiting): no pauses between claims
        super().__init__(primitive, visibility_timeout=visibility_timeout, clock=read)

    @property
    def client(self) -> Any:
        """The boto3 SQS client."""
        return self.primitive.client

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.primitive.name

    @property
    def dlq_name(self) -> str:
        """The dead-letter queue's name."""
        return self.primitive.dlq_name

    @property
    def queue_url(self) -> str:
        """The queue's URL."""
        return self.primitive.queue_url

    @property
    def dlq_url(self) -> str:
        """The dead-letter queue's URL."""
        return self.primitive.dlq_url

    def now(self) -> float:
        """The application clock in epoch seconds."""
        return self._clock()

    @property
    def native_delay_limit(self) -> float:
        """The longest delay one SQS message leg is sent with, seconds (900 unless lowered;
        :class:`reactor.ports.capabilities.BoundedNativeDelay`)."""
        return float(self.primitive.native_delay_limit)

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
        self.primitive.limit_native_delay(seconds)

    def enqueue_raw(self, body: str) -> None:
        """Send a raw body as a foreign producer would (the router probe's ``inject_raw``).

        Raises:
            RouterError: the request failed, or the router is closed.
        """
        self._put("raw", body, self._clock())

    def ack_many(self, deliveries: Iterable[Delivery]) -> None:
        """Delete several delivered messages with ``DeleteMessageBatch`` (10 per request).

        Entries with a stale receipt are skipped and logged; entries SQS refuses are logged;
        neither raises.

        Raises:
            RouterError: a request failed.
        """
        leases = []
        for delivery in deliveries:
            parts = self._leased(delivery, "ack")
            if parts is not None:
                leases.append(parts)
        with self._backend("delete_many"):
            self.primitive.delete_many(leases)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """:meth:`GenericRouter.retry`, with the delivered job kept as the body to re-send
        should the queue no longer remember the message's own (:meth:`SQSQueue.keep_body`).

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: a request failed.
        """
        self._keep_body(delivery)
        super().retry(delivery, delay_seconds)

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """:meth:`GenericRouter.dead_letter`, with the delivered job kept as the body to send
        should the queue no longer remember the message's own (:meth:`SQSQueue.keep_body`).

        Raises:
            RouterError: a request failed.
        """
        self._keep_body(delivery)
        super().dead_letter(delivery, reason)

    def _keep_body(self, delivery: Delivery) -> None:
        parts = decode_receipt(delivery.receipt)
        if parts is not None:
            self.primitive.keep_body(*parts, delivery.job.to_json(), delivery.delivery_count)

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: every one the scans find) in
        one scan per pass (:meth:`SQSQueue.purge`); returns how many were deleted
        (docs/workers.md, "Dead letters").

        Raises:
            RouterError: a request failed.
        """
        with self._backend("purge"):
            return self.primitive.purge(None if ids is None else list(ids))

    def ping(self) -> None:
        """One ``GetQueueAttributes`` call on the queue (``reactor ping``;
        :class:`reactor.ports.inspection.Pingable`).

        Raises:
            RouterError: SQS cannot be reached or refused the call.
        """
        self.primitive.ping()

    def queue_stats(self) -> QueueStats:
        """SQS's approximate counts of the queue and its DLQ (``reactor info``;
        :class:`reactor.ports.inspection.QueueInspector`; :meth:`SQSQueue.stats`).

        Raises:
            RouterError: SQS failed.
        """
        return self.primitive.stats()


def _by_id(by_delivery: dict[str, _Leased]) -> dict[str, _Leased]:
    """A scan's dead letters keyed by their ids."""
    return {item.letter.id: item for item in by_delivery.values()}


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


def _number_attribute(attr: Any) -> float | None:
    if not isinstance(attr, dict):
        return None
    raw = attr.get("StringValue")
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None
