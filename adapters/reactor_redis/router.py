"""The Redis router: a Streams consumer group plus a delayed sorted set (docs/protocol.md#routers).

Keys (one hash tag ``{q:<queue>}``, so every script runs in one slot): the stream, the delayed
sorted set (job JSON -> due time in ms), the dead-letter stream and a hash of extended leases.

* ``enqueue(job, 0)`` is ``XADD``; a positive delay is ``ZADD`` with the due time on the server
  clock, moved to the stream at the start of every ``receive``. ``enqueue_many`` (the
  :class:`~reactor.ports.capabilities.EnqueuesMany` fast path, docs/protocol.md, "Optional fast
  paths") ``XADD``\\ s every body in one script call: one round trip for the whole batch.
* ``receive`` is one ``receive`` script call per pass (one round trip): it promotes the due
  delayed jobs, re-claims entries idle longer than the visibility timeout (a dead consumer's
  jobs; the delivery count comes from ``XPENDING``) and, when that leaves room, reads new ones
  with a non-blocking ``XREADGROUP``. Only when the pass found nothing and the caller wants to
  wait does the router send a blocking ``XREADGROUP`` of its own (scripts cannot block), in
  slices of at most 1 s up to ``wait_seconds``.
* ``ack`` is ``XACK`` + ``XDEL``; ``retry`` acks the entry and re-adds its body unchanged
  (after the delay, through the sorted set) with a field ``n`` = the deliveries so far, so the
  next ``delivery_count`` is ``n + 1`` and the worker's backoff and ``max_deliveries`` work as
  on every router; ``extend`` re-claims the entry to reset its idle time (``JUSTID``: the
  delivery counter is untouched) and records the extension; ``dead_letter`` acks and appends
  ``{body, reason, at}`` to the dead-letter stream.
* **Receipts** are ``"<entry id>:<nonce>"``, the nonce being the entry's pending delivery
  counter at delivery (``XREADGROUP`` sets 1, every re-claim adds 1). ``ack``, ``retry``,
  ``extend`` and ``dead_letter`` act only while the entry is still pending with that counter:
  once a lapsed lease was re-claimed by another receive, the old receipt is stale and its
  calls are logged no-ops (the stale-receipt rule, docs/writing-an-adapter.md, routers).
* **Poison entries** (docs/workers.md, "Hostile input"): replies holding bodies are read
  undecoded (redis-py's ``NEVER_DECODE``, whatever the client's ``decode_responses``), and each
  body goes through :meth:`reactor.ports.Job.from_json` on its own. An entry it refuses (not
  UTF-8, too large, too deep, not an envelope, no ``body`` field) is dead-lettered inside
  ``receive`` with the reason and its raw bytes, and the receive goes on reading without
  waiting: a poison entry never fails a receive and never blocks the jobs behind it.
* **Dead-letter administration** (:class:`reactor.ports.router.DeadLetterAdmin`; docs/workers.md,
  "Dead letters"): a dead letter's id is its entry id in the dead-letter stream
  (``"<ms>-<seq>"``). Pages are ``XRANGE`` with an exclusive start after the cursor;
  ``requeue_dead_letter`` checks the body in Python, then one script re-adds the body to the
  stream (a new entry: a fresh delivery count) and deletes the dead entry, atomically, so two
  concurrent requeues of one id enqueue it once and a crash cannot lose it; ``purge`` is
  ``XDEL`` (or ``DEL`` of the whole dead-letter stream). Every key involved shares the queue's
  hash tag, so all of it is cluster-safe.
"""

from __future__ import annotations

import logging
import math
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any, cast

import redis
from redis.client import NEVER_DECODE
from redis.exceptions import NoScriptError

from reactor.errors import DeserializationError, RouterError
from reactor.ports.inspection import QueueStats
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor_redis._base import Client, RedisScripts, _source, close_client, router_errors
from reactor_redis.keys import Keys

__all__ = [
    "CONSUMER_IDLE_TIMEOUT",
    "CONSUMER_PRUNE_INTERVAL",
    "GROUP",
    "LIVE_CONSUMER_IDLE",
    "RedisRouter",
]

logger = logging.getLogger(__name__)

#: The consumer group every worker of a queue joins.
GROUP = "reactor"

#: Seconds a consumer of the group must have been idle (no read, claim or extend) before the
#: prune deletes it; only consumers with no pending entry are ever deleted (10 minutes).
CONSUMER_IDLE_TIMEOUT = 600.0

#: Seconds between two consumer prunes run by one router's :meth:`RedisRouter.receive`.
CONSUMER_PRUNE_INTERVAL = 60.0

#: Seconds since a consumer's last read, claim or extend under which ``queue_stats`` counts it
#: as a live worker (a worker blocks in reads of at most 1 s while idle).
LIVE_CONSUMER_IDLE = 60.0

#: redis-py option: return this command's reply as raw bytes (message bodies may be any bytes).
_RAW: dict[str, Any] = {NEVER_DECODE: True}

#: A stream entry id as Redis writes it (``"<ms>-<seq>"``, no leading zeros): the form of a
#: dead letter's id. Only the canonical spelling names a letter (Redis would read ``"5-00"`` as
#: ``"5-0"``).
_ENTRY_ID = re.compile(r"\A(?:0|[1-9][0-9]{0,19})-(?:0|[1-9][0-9]{0,19})\Z")

#: Dead-letter ids one ``purge`` script call deletes at most (larger purges take several calls).
_PURGE_CHUNK = 500


def _text(value: object) -> str:
    """A reply item (bytes from a raw reply) as text; undecodable bytes are escaped."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def _split_receipt(receipt: str) -> tuple[str, str]:
    """``(entry id, nonce)`` of a ``"<entry id>:<nonce>"`` receipt; a bare entry id (no
    ``:``) gives an empty nonce, which the script does not check."""
    entry_id, _, nonce = receipt.partition(":")
    return entry_id, nonce


def _field_map(fields: object) -> dict[bytes, bytes]:
    """A stream entry's fields (a dict, or a flat ``[k, v, ...]`` list) as ``{bytes: bytes}``."""
    def raw(x: object) -> bytes:
        return bytes(x) if isinstance(x, bytes | bytearray) else str(x).encode("utf-8")

    if isinstance(fields, dict):
        return {raw(k): raw(v) for k, v in fields.items()}
    if isinstance(fields, list | tuple):
        return {raw(fields[i]): raw(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}
    return {}


def _stream_entries(reply: Any) -> list[tuple[str, dict[bytes, bytes]]]:
    """``(entry id, fields)`` of an ``XREADGROUP`` reply, in either RESP shape."""
    if not reply:
        return []
    streams = list(reply.values()) if isinstance(reply, dict) else [s[1] for s in reply]
    out: list[tuple[str, dict[bytes, bytes]]] = []
    for entries in streams:
        if entries and isinstance(entries[0], list | tuple) and entries[0] and isinstance(
            entries[0][0], list | tuple
        ):
            entries = entries[0]  # RESP3 may wrap the entry list once more
        for entry in entries or []:
            if entry is None:
                continue
            entry_id, fields = entry[0], entry[1]
            if fields is None:
                continue  # deleted between the read and now
            out.append((_text(entry_id), _field_map(fields)))
    return out


def _delay_ms(delay_seconds: float) -> int:
    if isinstance(delay_seconds, bool) or not math.isfinite(delay_seconds) or delay_seconds < 0:
        raise ValueError(f"delay_seconds must be a finite number >= 0, got {delay_seconds!r}")
    return math.ceil(delay_seconds * 1000)


class RedisRouter:
    """:class:`reactor.ports.Router` on Redis Streams.

    Args:
        client: a redis-py client (``decode_responses=True``).
        prefix: the key namespace.
        queue: the queue name (workers of one queue share a consumer group).
        visibility_timeout: seconds a delivery stays leased before it is redelivered.
        consumer: this router's consumer name (default: a random one).
        owns_client: close the client in :meth:`close`.
        consumer_idle_timeout: seconds after which a consumer of the group that holds no
            pending entry is deleted by the prune that :meth:`receive` runs at most every
            :data:`CONSUMER_PRUNE_INTERVAL` seconds (default :data:`CONSUMER_IDLE_TIMEOUT`;
            docs/adapters/redis.md, "Bounded keys").
        consumer_prune_interval: seconds between two prunes run by this router's
            :meth:`receive` (default :data:`CONSUMER_PRUNE_INTERVAL`; ``0``: every receive).

    Raises:
        ValueError: ``visibility_timeout`` or ``consumer_idle_timeout`` is not > 0.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "reactor",
        queue: str = "jobs",
        visibility_timeout: float = 30.0,
        consumer: str | None = None,
        owns_client: bool = True,
        consumer_idle_timeout: float = CONSUMER_IDLE_TIMEOUT,
        consumer_prune_interval: float = CONSUMER_PRUNE_INTERVAL,
    ) -> None:
        if not (visibility_timeout > 0 and math.isfinite(visibility_timeout)):
            raise ValueError(f"visibility_timeout must be > 0, got {visibility_timeout!r}")
        idle_timeout = consumer_idle_timeout
        if not (idle_timeout > 0 and math.isfinite(idle_timeout)):
            raise ValueError(f"consumer_idle_timeout must be > 0, got {consumer_idle_timeout!r}")
        self.consumer_idle_timeout = float(idle_timeout)
        self.consumer_prune_interval = max(float(consumer_prune_interval), 0.0)
        self._pruned_at: float | None = None
        self.client = client
        self.visibility_timeout = visibility_timeout
        self.consumer = consumer or f"c-{uuid.uuid4().hex[:12]}"
        stream, delayed, dead = Keys(prefix).queue(queue)
        self._keys = [stream, delayed, dead, f"{stream}:leases"]
        self._scripts = RedisScripts(client)
        self._owns = owns_client
        self._closed = False
        self._group_ready = False

    def _script(self, op: str, *args: object) -> object:
        return self._scripts("router", self._keys, [op, *args])

    def _raw_script(self, op: str, *args: object) -> Any:
        """Run a router script op whose reply holds message bodies, left undecoded (bytes)."""
        script = self._scripts.get("router")
        command = ("EVALSHA", script.sha, len(self._keys), *self._keys, op, *args)
        try:
            return self.client.execute_command(*command, **_RAW)
        except NoScriptError:
            script.sha = self.client.script_load(_source("router"))
            return self.client.execute_command(
                "EVALSHA", script.sha, len(self._keys), *self._keys, op, *args, **_RAW
            )

    def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self.client.xgroup_create(self._keys[0], GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds``; returns the job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: Redis failed.
        """
        delay = _delay_ms(delay_seconds)
        with router_errors("enqueue"):
            self._ensure_group()
            self._script("enqueue", job.to_json(), delay)
        return job.id

    def enqueue_many(self, jobs: Sequence[Job]) -> list[str]:
        """Queue every job of ``jobs``, due now, in one script call (one round trip).

        The :class:`~reactor.ports.capabilities.EnqueuesMany` fast path (docs/protocol.md,
        "Optional fast paths"): the same stream entries as :meth:`enqueue` with no delay, in
        order, added atomically. Every envelope is encoded before anything is sent.

        Args:
            jobs: the envelopes, in order.

        Returns:
            Their ids, in order.

        Raises:
            EncodeError: an envelope cannot be encoded (nothing is queued).
            RouterError: Redis failed.
        """
        bodies = [job.to_json() for job in jobs]
        if not bodies:
            return []
        with router_errors("enqueue"):
            self._ensure_group()
            self._script("enqueue_many", *bodies)
        return [job.id for job in jobs]

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one.

        Poison entries met on the way are dead-lettered (with the reason and their raw bytes)
        and skipped without waiting, so the jobs behind them are received by this same call
        (docs/workers.md, "Hostile input"). ``delivery_count`` counts the deliveries before
        any :meth:`retry` too. A receive that finds a job costs one round trip (the
        ``receive`` script); one that waits adds a blocking ``XREADGROUP`` per slice of at most
        1 s, and one prune of idle consumers runs every ``consumer_prune_interval`` seconds.

        Raises:
            RouterError: Redis failed.
        """
        if max_jobs <= 0:
            return []
        try:
            with router_errors("receive"):
                return self._receive(max_jobs, wait_seconds)
        except RouterError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The server lost the group (a restart without persistence): recreate it once.
            self._group_ready = False
            with router_errors("receive"):
                return self._receive(max_jobs, wait_seconds)

    def _receive(self, max_jobs: int, wait_seconds: float) -> list[Delivery]:
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        out: list[Delivery] = []
        self._ensure_group()
        if self._pruned_at is None or deadline - self._pruned_at >= self.consumer_prune_interval:
            self._pruned_at = deadline
            self.prune_consumers()
        idle = max(math.ceil(self.visibility_timeout * 1000), 1)
        while True:
            # One pass, one round trip: promote, reclaim and a non-blocking read.
            reply = self._raw_script("receive", GROUP, self.consumer, idle, max_jobs - len(out))
            next_due_ms = int(reply[0])
            poisoned = False  # a poison entry was dead-lettered in this pass: read on at once
            for i in range(1, len(reply) - 3, 4):
                has_body = int(reply[i + 2]) == 1
                body = bytes(reply[i + 3])
                problem = None if has_body else f"stream entry has no 'body' field ({_text(body)})"
                poisoned |= not self._deliver(
                    out, _text(reply[i]), int(reply[i + 1]), body, problem
                )  # reply[i] is a receipt: '<entry id>:<nonce>'
            if not out and not poisoned:
                # Nothing is due: wait for a new entry (scripts cannot block), at most 1 s at a
                # time and never past the next delayed job's due time.
                block = max(min(deadline - time.monotonic(), 1.0), 0.0)
                if next_due_ms >= 0:
                    block = min(block, next_due_ms / 1000)
                if int(block * 1000) > 0:
                    for entry_id, fields in self._read(max_jobs, int(block * 1000)):
                        found = fields.get(b"body")
                        problem = None
                        if found is None:
                            found = b"\n".join(k + b"=" + v for k, v in fields.items())
                            problem = f"stream entry has no 'body' field ({_text(found)})"
                        try:
                            before = int(fields.get(b"n", b"0"))
                        except ValueError:
                            before = 0
                        poisoned |= not self._deliver(
                            out, f"{entry_id}:1", before + 1, found, problem
                        )
            if out or (not poisoned and time.monotonic() >= deadline):
                return out[:max_jobs]

    def _read(self, count: int, block_ms: int) -> list[tuple[str, dict[bytes, bytes]]]:
        """A blocking ``XREADGROUP`` of new entries for this consumer (``block_ms`` > 0), the
        reply left undecoded."""
        args: list[object] = ["XREADGROUP", "GROUP", GROUP, self.consumer, "COUNT", count]
        args += ["BLOCK", block_ms, "STREAMS", self._keys[0], ">"]
        return _stream_entries(self.client.execute_command(*args, **_RAW))

    def _deliver(
        self, out: list[Delivery], receipt: str, count: int, body: bytes, problem: str | None
    ) -> bool:
        """Decode one entry into ``out``; a poison entry is dead-lettered (``False``)."""
        try:
            if problem is not None:
                raise DeserializationError(problem)
            job = Job.from_json(body)
        except DeserializationError as exc:
            logger.warning("dead-lettering undecodable message %s: %s", receipt, exc)
            entry_id, nonce = _split_receipt(receipt)
            self._script("dead", GROUP, entry_id, body, f"undecodable message: {exc}", nonce)
            return False
        out.append(Delivery(job=job, receipt=receipt, delivery_count=count))
        return True

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good.

        A stale receipt (the entry was acked, retried, dead-lettered or re-claimed by another
        receive since) is logged and changes nothing, never raised.

        Raises:
            RouterError: Redis failed.
        """
        entry_id, nonce = _split_receipt(delivery.receipt)
        with router_errors("ack"):
            if not self._script("ack", GROUP, entry_id, nonce):
                logger.warning("ack of a stale receipt %s ignored", delivery.receipt)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Ack the entry and re-add its body unchanged after ``delay_seconds``, keeping the
        delivery count (the next delivery has ``delivery.delivery_count + 1``).

        A stale receipt (the entry was acked, dead-lettered or re-claimed by another receive
        since) is logged; nothing changes.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: Redis failed.
        """
        delay = _delay_ms(delay_seconds)
        entry_id, nonce = _split_receipt(delivery.receipt)
        with router_errors("retry"):
            if not self._script(
                "retry", GROUP, entry_id, delay, max(delivery.delivery_count, 1), nonce
            ):
                logger.warning("retry of a stale receipt %s ignored", delivery.receipt)

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job leased for another ``seconds`` (at least the visibility timeout).

        A stale receipt (see :meth:`ack`) is logged and changes nothing, never raised.

        Raises:
            RouterError: Redis failed.
        """
        entry_id, nonce = _split_receipt(delivery.receipt)
        with router_errors("extend"):
            if not self._script(
                "extend", GROUP, self.consumer, entry_id, math.ceil(seconds * 1000), nonce
            ):
                logger.warning("extend of a stale receipt %s ignored", delivery.receipt)

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Ack the job and append its stored body with ``reason`` to the dead-letter stream.

        A stale receipt (see :meth:`ack`) is logged and dead-letters nothing, never raised.

        Raises:
            RouterError: Redis failed.
        """
        entry_id, nonce = _split_receipt(delivery.receipt)
        with router_errors("dead letter"):
            if not self._script(
                "dead", GROUP, entry_id, delivery.job.to_json(), reason, nonce
            ):
                logger.warning("dead_letter of a stale receipt %s ignored", delivery.receipt)

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Dead-lettered messages, oldest first (bodies exactly as stored: text, or base64 when
        not UTF-8, :meth:`reactor.ports.DeadLetter.from_raw`), each with its entry id as ``id``
        (docs/workers.md, "Dead letters").

        Args:
            limit: the most letters returned.
            cursor: the id of the last letter of the previous page (``None``: the oldest); it
                need not be a dead letter any more.

        Raises:
            ValueError: ``cursor`` is not a stream entry id.
            RouterError: Redis failed.
        """
        if cursor is not None and not _ENTRY_ID.match(cursor):
            raise ValueError(f"bad dead-letter cursor {cursor!r}: not a stream entry id")
        if limit <= 0:
            return []
        start = "-" if cursor is None else f"({cursor}"
        with router_errors("dead letters"):
            reply = self.client.execute_command(
                "XRANGE", self._keys[2], start, "+", "COUNT", int(limit), **_RAW
            )
        return [self._letter(entry) for entry in reply or []]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter whose entry id is ``letter_id``, else ``None`` (a malformed id
        included; docs/workers.md, "Dead letters").

        Raises:
            RouterError: Redis failed.
        """
        if not _ENTRY_ID.match(letter_id):
            return None
        with router_errors("dead letter"):
            reply = self.client.execute_command(
                "XRANGE", self._keys[2], letter_id, letter_id, "COUNT", 1, **_RAW
            )
        return self._letter(reply[0]) if reply else None

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Move a dead letter back to the stream, due now, with a fresh delivery count.

        The body is checked first (:meth:`reactor.ports.DeadLetter.to_job`); then one script
        re-adds it as a new stream entry and deletes the dead entry, atomically: concurrent
        requeues of one id enqueue it once, and nothing is lost in between (docs/workers.md,
        "Dead letters").

        Returns:
            The job id (the original job's), or ``None`` when there is no such dead letter (or
            a concurrent requeue moved it first).

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept.
            RouterError: Redis failed.
        """
        letter = self.get_dead_letter(letter_id)
        if letter is None:
            return None
        job = letter.to_job()
        with router_errors("requeue"):
            self._ensure_group()
            if not self._script("requeue", letter_id):
                return None
        return job.id

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete the dead letters named by ``ids`` (``None``: the whole dead-letter stream);
        returns how many were deleted (docs/workers.md, "Dead letters").

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("purge dead letters"):
            if ids is None:
                return int(cast(int, self._script("purge")))
            wanted = sorted({i for i in ids if _ENTRY_ID.match(i)})
            deleted = 0
            for start in range(0, len(wanted), _PURGE_CHUNK):
                chunk = wanted[start : start + _PURGE_CHUNK]
                deleted += int(cast(int, self._script("purge", *chunk)))
            return deleted

    @staticmethod
    def _letter(entry: Any) -> DeadLetter:
        """A dead-letter stream entry (read undecoded) as a :class:`DeadLetter`."""
        fields = _field_map(entry[1])
        try:
            at = int(fields.get(b"at", b"0")) / 1000
        except ValueError:
            at = 0.0
        return DeadLetter.from_raw(
            fields.get(b"body", b""), _text(fields.get(b"reason", b"")), at, _text(entry[0])
        )

    def inject_raw(self, body: str | bytes) -> None:
        """Append ``body`` (text or any bytes) to the stream unvalidated (the router probe's
        backdoor for poison messages).

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("inject"):
            self._ensure_group()
            self.client.xadd(self._keys[0], {"body": body})

    def prune_consumers(self) -> int:
        """Delete the group's consumers idle at least ``consumer_idle_timeout`` seconds that
        hold no pending entry (workers that died or left without :meth:`close`).

        A dead consumer's pending entries are re-claimed by the live consumers' receives once
        their lease lapses; after that it holds none and goes at the next prune. Deleting a
        consumer that is in fact alive loses nothing: its next read re-creates it.
        :meth:`receive` runs this at most every ``consumer_prune_interval`` seconds.

        Returns:
            How many consumers were deleted.

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("prune consumers"):
            self._ensure_group()
            idle = math.ceil(self.consumer_idle_timeout * 1000)
            return int(cast(int, self._script("prune", GROUP, idle)))

    def ping(self) -> None:
        """One ``PING`` round trip (``reactor ping``; :class:`reactor.ports.inspection.Pingable`).

        Raises:
            RouterError: Redis cannot be reached.
        """
        with router_errors("ping"):
            self.client.ping()

    def queue_stats(self) -> QueueStats:
        """The queue's counts from ``XLEN``, ``XPENDING``, ``ZCARD`` and ``XINFO CONSUMERS``
        (``reactor info``; :class:`reactor.ports.inspection.QueueInspector`). Reads only:
        a queue no worker has read yet reports 0 in flight and 0 consumers.

        Returns:
            ``ready`` (stream entries not leased), ``delayed`` (the delayed sorted set),
            ``in_flight`` (leased entries), ``dead_letters`` (the dead-letter stream) and
            ``consumers`` (consumers of the group active in the last
            :data:`LIVE_CONSUMER_IDLE` seconds).

        Raises:
            RouterError: Redis failed.
        """
        stream, delayed, dead = self._keys[0], self._keys[1], self._keys[2]
        with router_errors("queue stats"):
            length = int(self.client.xlen(stream))
            waiting = int(self.client.zcard(delayed))
            dead_count = int(self.client.xlen(dead))
            try:
                pending = self.client.xpending(stream, GROUP)
                consumers = self.client.xinfo_consumers(stream, GROUP)
            except redis.ResponseError as exc:  # no group yet (NOGROUP) or no stream
                if "NOGROUP" not in str(exc) and "no such key" not in str(exc):
                    raise
                pending, consumers = {"pending": 0}, []
        leased = int(pending.get("pending", 0)) if isinstance(pending, dict) else 0
        live_ms = LIVE_CONSUMER_IDLE * 1000
        live = sum(1 for c in consumers if float(c.get("idle", live_ms)) < live_ms)
        return QueueStats(
            ready=max(length - leased, 0), delayed=waiting, in_flight=leased,
            dead_letters=dead_count, consumers=live,
        )

    def close(self) -> None:
        """Leave the consumer group and close the client (when owned); idempotent.

        The consumer is deleted only when it holds no pending entry (else the entries would be
        lost to redelivery); one left behind is deleted later by :meth:`prune_consumers`. A
        failure to leave (the server is down) is logged at DEBUG, never raised: the operation
        that met the outage has already reported it, and closing adds no second line.
        """
        if self._closed:
            return
        self._closed = True
        try:
            with router_errors("leave"):
                self._script("leave", GROUP, self.consumer)
        except RouterError as exc:
            logger.debug("consumer %s could not leave the group: %s", self.consumer, exc)
        if self._owns:
            close_client(self.client)
