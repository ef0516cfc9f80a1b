"""The Redis router: a Streams consumer group plus a delayed sorted set (ARCHITECTURE §3).

Keys (one hash tag ``{q:<queue>}``, so every script runs in one slot): the stream, the delayed
sorted set (job JSON -> due time in ms), the dead-letter stream and a hash of extended leases.

* ``enqueue(job, 0)`` is ``XADD``; a positive delay is ``ZADD`` with the due time on the server
  clock, moved to the stream by the ``promote`` script at the start of every ``receive``.
* ``receive`` first re-claims entries idle longer than the visibility timeout (a dead
  consumer's jobs; the delivery count comes from ``XPENDING``), then ``XREADGROUP``\\ s new
  ones, blocking in slices of at most 1 s up to ``wait_seconds``.
* ``ack`` is ``XACK`` + ``XDEL``; ``retry`` acks and re-enqueues ``attempt + 1`` with a delay;
  ``extend`` re-claims the entry to reset its idle time and records the extension;
  ``dead_letter`` acks and appends ``{body, reason, at}`` to the dead-letter stream. A message
  that is not a job envelope is dead-lettered inside ``receive``.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import replace

import redis

from reactor.model.errors import DeserializationError, RouterError
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor_redis._base import Client, RedisScripts, close_client, router_errors
from reactor_redis.keys import Keys

__all__ = ["GROUP", "RedisRouter"]

logger = logging.getLogger(__name__)

#: The consumer group every worker of a queue joins.
GROUP = "reactor"


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
    ) -> None:
        if not (visibility_timeout > 0 and math.isfinite(visibility_timeout)):
            raise ValueError(f"visibility_timeout must be > 0, got {visibility_timeout!r}")
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

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one.

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
        if True:
            self._ensure_group()
            while True:
                promoted = self._script("promote")
                assert isinstance(promoted, list)
                next_due_ms = int(promoted[1])
                idle = max(math.ceil(self.visibility_timeout * 1000), 1)
                claimed = self._script("reclaim", GROUP, self.consumer, idle, max_jobs - len(out))
                assert isinstance(claimed, list)
                for i in range(0, len(claimed), 3):
                    self._deliver(out, str(claimed[i]), int(claimed[i + 1]), str(claimed[i + 2]))
                if len(out) < max_jobs:
                    remaining = deadline - time.monotonic()
                    block = 0.0 if out else max(min(remaining, 1.0), 0.0)
                    if next_due_ms >= 0:
                        block = min(block, next_due_ms / 1000)
                    block_ms = int(block * 1000)
                    found = self.client.xreadgroup(
                        GROUP,
                        self.consumer,
                        {self._keys[0]: ">"},
                        count=max_jobs - len(out),
                        block=block_ms if block_ms > 0 else None,
                    )
                    for _stream, entries in found or []:
                        for entry_id, fields in entries:
                            if not fields:
                                continue
                            self._deliver(out, str(entry_id), 1, str(fields.get("body", "")))
                if out or time.monotonic() >= deadline:
                    return out[:max_jobs]

    def _deliver(self, out: list[Delivery], entry_id: str, count: int, body: str) -> None:
        try:
            job = Job.from_json(body)
        except DeserializationError as exc:
            logger.warning("dead-lettering undecodable message %s: %s", entry_id, exc)
            self._script("dead", GROUP, entry_id, body, f"undecodable message: {exc}")
            return
        out.append(Delivery(job=job, receipt=entry_id, delivery_count=count))

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good (a stale receipt is logged, never raised)."""
        with router_errors("ack"):
            if not self._script("ack", GROUP, delivery.receipt):
                logger.info("ack of a stale receipt %s ignored", delivery.receipt)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Ack and re-enqueue the job with ``attempt + 1`` after ``delay_seconds``.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
        """
        delay = _delay_ms(delay_seconds)
        again = replace(delivery.job, attempt=delivery.job.attempt + 1)
        with router_errors("retry"):
            self._script("retry", GROUP, delivery.receipt, again.to_json(), delay)

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job leased for another ``seconds`` (at least the visibility timeout)."""
        with router_errors("extend"):
            if not self._script(
                "extend", GROUP, self.consumer, delivery.receipt, math.ceil(seconds * 1000)
            ):
                logger.info("extend of a stale receipt %s ignored", delivery.receipt)

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Ack the job and append it with ``reason`` to the dead-letter stream."""
        with router_errors("dead letter"):
            self._script("dead", GROUP, delivery.receipt, delivery.job.to_json(), reason)

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Dead-lettered messages, oldest first."""
        if limit <= 0:
            return []
        with router_errors("dead letters"):
            entries = self.client.xrange(self._keys[2], count=limit)
        return [
            DeadLetter(
                body=str(fields.get("body", "")),
                reason=str(fields.get("reason", "")),
                at=int(fields.get("at", 0)) / 1000,
            )
            for _id, fields in entries
        ]

    def inject_raw(self, body: str) -> None:
        """Append ``body`` to the stream unvalidated (the router probe's backdoor)."""
        with router_errors("inject"):
            self._ensure_group()
            self.client.xadd(self._keys[0], {"body": body})

    def close(self) -> None:
        """Close the client (when owned); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            close_client(self.client)
