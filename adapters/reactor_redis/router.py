"""The Redis router: a Streams consumer group plus a delayed sorted set (docs/protocol.md#routers).

:class:`RedisQueue` is the queue (a :class:`reactor.ports.queues.QueuePrimitive`, every
operation one Lua script call, atomic on the server); :class:`RedisRouter` is
:class:`reactor.generic.router.GenericRouter` over it, so job envelopes, the receive loop, the
stale-receipt rule, poison handling and dead-letter administration are the ones every router
of the queue toolkit shares (docs/protocol.md, "Building a router").

Keys (one hash tag ``{q:<queue>}``, so every script runs in one slot): the stream, the delayed
sorted set (job JSON -> due time in ms), the dead-letter stream and a hash of extended leases.
Times are judged on the server's clock: the queue turns the router's absolute times into
durations (ms, rounded up) the moment it sends them, and the script adds them to ``TIME``.

* ``put`` of a message due now is ``XADD``; a later one is ``ZADD`` with its due time, moved to
  the stream at the start of every claim. ``put_many`` (the
  :class:`~reactor.ports.queues.PutsMany` capability behind ``enqueue_many``, docs/protocol.md,
  "Optional fast paths") ``XADD``\\ s every body in one script call. Message ids are not
  kept: a message's id is its stream entry id, and requeue has its own atomic script
  (:class:`~reactor.ports.queues.RequeuesDeadLetters`).
* ``claim`` is one ``receive`` script call: it promotes the due delayed jobs, re-claims
  entries idle longer than the lease (a dead consumer's jobs; the delivery count comes from
  ``XPENDING``) and, when that leaves room, reads new ones with a non-blocking ``XREADGROUP``.
  ``claim_waiting`` (:class:`~reactor.ports.queues.ClaimsWaiting`) adds, only when that pass
  found nothing, one blocking ``XREADGROUP`` of at most 1 s (scripts cannot block), never past
  the next delayed job's due time.
* ``delete`` is ``XACK`` + ``XDEL``; ``release`` acks the entry and re-adds its body unchanged
  (after the delay, through the sorted set) with a field ``n`` = the deliveries so far, so the
  next ``receive_count`` is ``n + 1``; ``change_visibility`` re-claims the entry to reset its
  idle time (``JUSTID``: the delivery counter is untouched) and records the extension;
  ``dead_letter`` acks and appends ``{body, reason, at}`` to the dead-letter stream.
* **Receipts** are the entry's pending delivery counter at delivery (``XREADGROUP`` sets 1,
  every re-claim adds 1). ``delete``, ``release``, ``change_visibility`` and ``dead_letter`` act
  only while the entry is still pending with that counter: once a lapsed lease was re-claimed
  by another receive, the old receipt is stale.
* **Poison entries** (docs/workers.md, "Hostile input"): replies holding bodies are read
  undecoded (redis-py's ``NEVER_DECODE``, whatever the client's ``decode_responses``); an
  entry without a ``body`` field is claimed with that problem and a dump of its fields as its
  body, and the generic router dead-letters it with the reason.
* **Dead letters**: a letter's id is its entry id in the dead-letter stream (``"<ms>-<seq>"``).
  Pages are ``XRANGE`` with an exclusive start after the cursor; a requeue re-adds the body to
  the stream (a new entry: a fresh delivery count) and deletes the letter in one script, so
  two concurrent requeues of one id enqueue it once and a crash cannot lose it; a purge is
  ``XDEL`` (or ``DEL`` of the whole dead-letter stream,
  :class:`~reactor.ports.queues.PurgesDeadLetters`).
"""

from __future__ import annotations

import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis
from redis.client import NEVER_DECODE
from redis.exceptions import NoScriptError

from reactor.errors import RouterError
from reactor.generic.router import GenericRouter
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.inspection import QueueStats
from reactor.ports.queues import ClaimedMessage
from reactor.ports.router import DeadLetter
from reactor_redis._base import Client, RedisScripts, _source, close_client, router_errors
from reactor_redis.keys import Keys

__all__ = [
    "CONSUMER_IDLE_TIMEOUT",
    "CONSUMER_PRUNE_INTERVAL",
    "GROUP",
    "LIVE_CONSUMER_IDLE",
    "RedisQueue",
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

#: The largest part of a stream entry id (each of ``<ms>-<seq>`` is an unsigned 64-bit number).
_MAX_PART = 2**64 - 1

#: A receipt's nonce as the script writes it: a pending delivery counter, ``>= 1``.
_NONCE = re.compile(r"\A[1-9][0-9]{0,18}\Z")

#: The longest delay or lease sent to the script, in ms (about 31,700 years): a longer finite
#: one is the same for any clock that will ever read it, and stays a finite script argument.
_MAX_MS = 10**15


def _text(value: object) -> str:
    """A reply item (bytes from a raw reply) as text; undecodable bytes are escaped."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


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


def _ms(seconds: float) -> int:
    """A duration in whole milliseconds, rounded up (a delay or a lease never shortens), at
    most :data:`_MAX_MS`."""
    if not seconds > 0:
        return 0
    return min(math.ceil(min(seconds, _MAX_MS / 1000) * 1000), _MAX_MS)


def _entry_id(text: str) -> bool:
    """Whether ``text`` is a stream entry id Redis accepts (canonical, each part < 2**64)."""
    if not _ENTRY_ID.match(text):
        return False
    ms, _, seq = text.partition("-")
    return int(ms) <= _MAX_PART and int(seq) <= _MAX_PART


def _receipt(message_id: str, receipt: str) -> bool:
    """Whether ``(message_id, receipt)`` can name a delivery of this queue: anything else is
    stale without a round trip (a forged receipt never reaches the script)."""
    return _entry_id(message_id) and bool(_NONCE.match(receipt))


def _count(raw: bytes | None) -> int:
    """A delivery count read from a stored ``n`` field, as the script reads it (a whole number
    of at most 15 digits, else 0)."""
    if raw is None or not 0 < len(raw) <= 15 or not raw.isdigit():
        return 0
    return int(raw)


def _no_group(exc: redis.ResponseError) -> bool:
    return "NOGROUP" in str(exc)


class RedisQueue:
    """A :class:`reactor.ports.queues.QueuePrimitive` on a Redis stream and consumer group
    (see the module docstring), with the capabilities ``ClaimsWaiting``,
    ``RequeuesDeadLetters``, ``PutsMany`` and ``PurgesDeadLetters``.

    Args:
        client: a redis-py client (``Redis`` or ``RedisCluster``).
        prefix: the key namespace.
        queue: the queue name (workers of one queue share a consumer group).
        consumer: this queue's consumer name (default: a random one).
        owns_client: close the client in :meth:`close`.
        consumer_idle_timeout: seconds after which a consumer of the group that holds no
            pending entry is deleted by the prune a claim runs at most every
            ``consumer_prune_interval`` seconds (docs/adapters/redis.md, "Bounded keys").
        consumer_prune_interval: seconds between two prunes (``0``: every claim).

    Raises:
        ValueError: ``consumer_idle_timeout`` is not a positive finite number.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "reactor",
        queue: str = "jobs",
        consumer: str | None = None,
        owns_client: bool = True,
        consumer_idle_timeout: float = CONSUMER_IDLE_TIMEOUT,
        consumer_prune_interval: float = CONSUMER_PRUNE_INTERVAL,
    ) -> None:
        idle_timeout = consumer_idle_timeout
        if not (idle_timeout > 0 and math.isfinite(idle_timeout)):
            raise ValueError(f"consumer_idle_timeout must be > 0, got {consumer_idle_timeout!r}")
        self.consumer_idle_timeout = float(idle_timeout)
        self.consumer_prune_interval = max(float(consumer_prune_interval), 0.0)
        self._pruned_at: float | None = None
        self.client = client
        self.consumer = consumer or f"c-{uuid.uuid4().hex[:12]}"
        stream, delayed, dead = Keys(prefix).queue(queue)
        self._keys = [stream, delayed, dead, f"{stream}:leases"]
        self._scripts = RedisScripts(client)
        self._owns = owns_client
        self._closed = False
        self._group_ready = False
        self._clock: Callable[[], float] = wall_reader(None)

    def bind_clock(self, clock: Callable[[], float]) -> None:
        """Turn absolute times into durations by ``clock`` (epoch seconds), the router's."""
        self._clock = clock

    def _until(self, visible_at: float) -> int:
        """Milliseconds from now (the bound clock) to ``visible_at``, rounded up; 0 if past."""
        return _ms(visible_at - self._clock())

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

    # -- messages ------------------------------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Add the body as a stream entry (due now) or a delayed member (due later). Stream
        entries cannot refuse a second put of one id, so ``message_id`` is not kept (``True``
        always; a requeue uses :meth:`requeue_dead_letter`).

        Raises:
            RouterError: Redis failed, or the queue is closed.
        """
        if self._closed:
            raise RouterError("the Redis router is closed")
        with router_errors("enqueue"):
            self._ensure_group()
            self._script("enqueue", body, self._until(visible_at))
        return True

    def put_many(
        self, message_ids: Sequence[str], bodies: Sequence[str | bytes], visible_at: float
    ) -> None:
        """Add every body, in order: one script call when they are due now (the
        ``enqueue_many`` fast path), else one :meth:`put` each.

        Raises:
            RouterError: Redis failed, or the queue is closed.
        """
        if self._until(visible_at) > 0:
            for message_id, body in zip(message_ids, bodies, strict=True):
                self.put(message_id, body, visible_at)
            return
        if self._closed:
            raise RouterError("the Redis router is closed")
        with router_errors("enqueue"):
            self._ensure_group()
            self._script("enqueue_many", *bodies)

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """One ``receive`` script pass: promote due delayed jobs, re-claim entries whose lease
        (``visible_at - now``) lapsed, read new ones; up to ``limit`` messages.

        Raises:
            RouterError: Redis failed.
        """
        return self.claim_waiting(limit, now, visible_at, 0.0)

    def claim_waiting(
        self, limit: int, now: float, visible_at: float, wait_seconds: float
    ) -> list[ClaimedMessage]:
        """:meth:`claim`; when it finds nothing and ``wait_seconds > 0``, one blocking
        ``XREADGROUP`` of at most 1 s (never past the next delayed job's due time).

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("receive"):
            try:
                return self._claim(limit, now, visible_at, wait_seconds)
            except redis.ResponseError as exc:
                if not _no_group(exc):
                    raise
                # The server lost the group (a restart without persistence): recreate it once.
                self._group_ready = False
                return self._claim(limit, now, visible_at, wait_seconds)

    def _claim(
        self, limit: int, now: float, visible_at: float, wait_seconds: float
    ) -> list[ClaimedMessage]:
        started = time.monotonic()
        self._ensure_group()
        if self._pruned_at is None or started - self._pruned_at >= self.consumer_prune_interval:
            self._pruned_at = started
            self._prune()  # raw errors: a NOGROUP is recovered above
        lease = max(_ms(visible_at - now), 1)
        out, next_due_ms = self._pass(limit, lease)
        block = min(wait_seconds, 1.0)
        if next_due_ms >= 0:
            block = min(block, next_due_ms / 1000)
        if out or int(block * 1000) <= 0:
            return out
        args: list[object] = ["XREADGROUP", "GROUP", GROUP, self.consumer, "COUNT", limit]
        args += ["BLOCK", int(block * 1000), "STREAMS", self._keys[0], ">"]
        for entry_id, fields in _stream_entries(self.client.execute_command(*args, **_RAW)):
            found = fields.get(b"body")
            before = _count(fields.get(b"n"))
            if found is None:
                dump = b"\n".join(k + b"=" + v for k, v in fields.items())
                out.append(_claimed(entry_id, "1", before + 1, dump, False))
            else:
                out.append(_claimed(entry_id, "1", before + 1, found, True))
        if not out:
            # The blocking read sees new entries only: a delayed job that fell due or a lease
            # that lapsed during the wait is found by one more pass.
            out, _ = self._pass(limit, lease)
        return out

    def _pass(self, limit: int, lease_ms: int) -> tuple[list[ClaimedMessage], int]:
        """One ``receive`` script call: the claimed messages and the ms until the next delayed
        job is due (``-1``: none)."""
        reply = self._raw_script("receive", GROUP, self.consumer, lease_ms, limit)
        out: list[ClaimedMessage] = []
        for i in range(1, len(reply) - 3, 4):  # receipt '<entry id>:<nonce>', count, flag, body
            entry_id, _, nonce = _text(reply[i]).partition(":")
            body = bytes(reply[i + 3])
            out.append(_claimed(entry_id, nonce, int(reply[i + 1]), body, int(reply[i + 2]) == 1))
        return out, int(reply[0])

    def delete(self, message_id: str, receipt: str) -> bool:
        """``XACK`` + ``XDEL`` of the entry, only while its pending counter is ``receipt``.

        Raises:
            RouterError: Redis failed.
        """
        if not _receipt(message_id, receipt):
            return False
        with router_errors("ack"):
            return bool(self._script("ack", GROUP, message_id, receipt))

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Reset the entry's idle time and record its lease until ``visible_at`` (on the
        server's clock), only while ``receipt`` is current; the entry stays leased for at
        least the visibility timeout from now.

        Raises:
            RouterError: Redis failed.
        """
        if not _receipt(message_id, receipt):
            return False
        with router_errors("extend"):
            return bool(self._script(
                "extend", GROUP, self.consumer, message_id, self._until(visible_at), receipt
            ))

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Ack the entry and re-add its body unchanged, due at ``visible_at``, carrying its
        deliveries so far; only while ``receipt`` is current.

        Raises:
            RouterError: Redis failed.
        """
        if not _receipt(message_id, receipt):
            return False
        with router_errors("retry"):
            return bool(self._script(
                "retry", GROUP, message_id, self._until(visible_at), receipt
            ))

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Ack the entry and append its stored body (a dump of its fields when it has none)
        with ``reason`` and ``at`` to the dead-letter stream; only while ``receipt`` is current.

        Raises:
            RouterError: Redis failed.
        """
        if not _receipt(message_id, receipt):
            return False
        with router_errors("dead letter"):
            return bool(self._script(
                "dead", GROUP, message_id, "", reason, receipt, _ms(max(at, 0.0))
            ))

    # -- dead letters --------------------------------------------------------------------------

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """Dead letters, oldest first, after the letter ``after`` (``XRANGE`` with an
        exclusive start; bodies as stored: text, or base64 when not UTF-8).

        Raises:
            ValueError: ``after`` is not a stream entry id.
            RouterError: Redis failed.
        """
        if after is not None and not _entry_id(after):
            raise ValueError(f"bad dead-letter cursor {after!r}: not a stream entry id")
        if after == f"{_MAX_PART}-{_MAX_PART}":
            return []  # nothing can come after the largest id
        start = "-" if after is None else f"({after}"
        with router_errors("dead letters"):
            reply = self.client.execute_command(
                "XRANGE", self._keys[2], start, "+", "COUNT", int(limit), **_RAW
            )
        return [_letter(entry) for entry in reply or []]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter whose entry id is ``letter_id``, else ``None`` (a malformed id
        included).

        Raises:
            RouterError: Redis failed.
        """
        if not _entry_id(letter_id):
            return None
        with router_errors("dead letter"):
            reply = self.client.execute_command(
                "XRANGE", self._keys[2], letter_id, letter_id, "COUNT", 1, **_RAW
            )
        return _letter(reply[0]) if reply else None

    def remove_dead_letter(self, letter_id: str) -> bool:
        """``XDEL`` of one letter; ``True`` when this call deleted it.

        Raises:
            RouterError: Redis failed.
        """
        return self.purge_dead_letters([letter_id]) == 1

    def requeue_dead_letter(self, letter_id: str, visible_at: float) -> bool:
        """Re-add the letter's body to the stream, due now (a new entry: a fresh delivery
        count), and delete the letter, in one script: of concurrent requeues, one moves it.

        Raises:
            RouterError: Redis failed, or the queue is closed.
        """
        if self._closed:
            raise RouterError("the Redis router is closed")
        if not _entry_id(letter_id):
            return False
        with router_errors("requeue"):
            self._ensure_group()
            return bool(self._script("requeue", letter_id))

    def purge_dead_letters(self, ids: Sequence[str] | None) -> int:
        """Delete the letters named by ``ids`` (``None``: ``DEL`` of the whole dead-letter
        stream); returns how many were deleted.

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("purge dead letters"):
            if ids is None:
                return int(cast(int, self._script("purge")))
            wanted = sorted({i for i in ids if _entry_id(i)})
            deleted = 0
            for start in range(0, len(wanted), _PURGE_CHUNK):
                chunk = wanted[start : start + _PURGE_CHUNK]
                deleted += int(cast(int, self._script("purge", *chunk)))
            return deleted

    # -- the rest ------------------------------------------------------------------------------

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
        hold no pending entry (workers that died or left without closing).

        A dead consumer's pending entries are re-claimed by the live consumers' claims once
        their lease lapses; after that it holds none and goes at the next prune. Deleting a
        consumer that is in fact alive loses nothing: its next read re-creates it.

        Returns:
            How many consumers were deleted.

        Raises:
            RouterError: Redis failed.
        """
        with router_errors("prune consumers"):
            self._ensure_group()
            return self._prune()

    def _prune(self) -> int:
        """One ``prune`` script call (redis-py errors raised as they are)."""
        idle = math.ceil(self.consumer_idle_timeout * 1000)
        return int(cast(int, self._script("prune", GROUP, idle)))

    def ping(self) -> None:
        """One ``PING`` round trip.

        Raises:
            RouterError: Redis cannot be reached.
        """
        with router_errors("ping"):
            self.client.ping()

    def stats(self) -> QueueStats:
        """The queue's counts from ``XLEN``, ``XPENDING``, ``ZCARD`` and ``XINFO CONSUMERS``
        (reads only: a queue no worker has read yet reports 0 in flight and 0 consumers).

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
                if not _no_group(exc) and "no such key" not in str(exc):
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


def _claimed(
    entry_id: str, nonce: str, count: int, body: bytes, has_body: bool
) -> ClaimedMessage:
    """A claimed stream entry; one without a ``body`` field carries that problem and a dump
    of its fields."""
    problem = None if has_body else f"stream entry has no 'body' field ({_text(body)})"
    return ClaimedMessage(entry_id, body, count, nonce, problem)


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


class RedisRouter(GenericRouter):
    """:class:`reactor.ports.Router` (and ``DeadLetterAdmin``, ``QueueInspector``,
    ``EnqueuesMany``) on Redis Streams: :class:`GenericRouter` over a :class:`RedisQueue`.

    Args:
        client: a redis-py client.
        prefix: the key namespace.
        queue: the queue name (workers of one queue share a consumer group).
        visibility_timeout: seconds a delivery stays leased before it is redelivered.
        consumer: this router's consumer name (default: a random one).
        owns_client: close the client in :meth:`close`.
        consumer_idle_timeout: seconds after which an idle consumer holding no pending entry
            is deleted (default :data:`CONSUMER_IDLE_TIMEOUT`; docs/adapters/redis.md,
            "Bounded keys").
        consumer_prune_interval: seconds between two prunes run by this router's claims
            (default :data:`CONSUMER_PRUNE_INTERVAL`; ``0``: every claim).
        clock: the application clock in epoch seconds (a callable or a
            :class:`reactor.ports.Clock`; default the system clock): delays and leases are
            durations measured from it, judged on the server's clock.

    Attributes:
        primitive: the :class:`RedisQueue`.

    Raises:
        ValueError: ``visibility_timeout`` or ``consumer_idle_timeout`` is not > 0.
    """

    primitive: RedisQueue

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
        clock: Callable[[], float] | Clock | None = None,
    ) -> None:
        primitive = RedisQueue(
            client, prefix=prefix, queue=queue, consumer=consumer, owns_client=owns_client,
            consumer_idle_timeout=consumer_idle_timeout,
            consumer_prune_interval=consumer_prune_interval,
        )
        read = wall_reader(clock)
        primitive.bind_clock(read)
        super().__init__(primitive, visibility_timeout=visibility_timeout, clock=read)

    @property
    def client(self) -> Client:
        """The redis-py client."""
        return self.primitive.client

    @property
    def consumer(self) -> str:
        """This router's consumer name in the group."""
        return self.primitive.consumer

    def inject_raw(self, body: str | bytes) -> None:
        """Append ``body`` to the stream unvalidated (:meth:`RedisQueue.inject_raw`).

        Raises:
            RouterError: Redis failed.
        """
        self.primitive.inject_raw(body)

    def prune_consumers(self) -> int:
        """Delete idle consumers holding no pending entry (:meth:`RedisQueue.prune_consumers`).

        Returns:
            How many consumers were deleted.

        Raises:
            RouterError: Redis failed.
        """
        return self.primitive.prune_consumers()

    def ping(self) -> None:
        """One ``PING`` round trip (``reactor ping``; :class:`reactor.ports.inspection.Pingable`).

        Raises:
            RouterError: Redis cannot be reached.
        """
        self.primitive.ping()

    def queue_stats(self) -> QueueStats:
        """``ready`` (stream entries not leased), ``delayed`` (the delayed sorted set),
        ``in_flight`` (leased entries), ``dead_letters`` and ``consumers`` (consumers of the
        group active in the last :data:`LIVE_CONSUMER_IDLE` seconds) (``reactor info``;
        :class:`reactor.ports.inspection.QueueInspector`).

        Raises:
            RouterError: Redis failed.
        """
        return self.primitive.stats()
