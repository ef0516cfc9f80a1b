"""``MongoRouter``: a job queue in a MongoDB collection with visibility leases.

Implements :class:`reactor.ports.Router` (docs/protocol.md#routers). One collection
``<prefix>jobs`` holds every queue's messages, one document each::

    {_id: <wall ns>-<random>, queue, job_id, body: <JSON envelope text>, due_at: <epoch s>,
     lease_until: <epoch s | null>, lease: <token | null>, deliveries: <int>, enqueued_at}

* :meth:`MongoRouter.receive` claims the oldest due message with one ``find_one_and_update``
  (filter ``due_at <= now`` and the lease absent or lapsed, sort ``due_at, _id``; set a fresh
  lease token and ``lease_until = now + visibility_timeout``; ``$inc deliveries``). A single
  document update is atomic, so two workers never hold the same lease.
* The receipt is ``"<lease token>:<message id>"``, the id written as canonical MongoDB
  Extended JSON (``"0000...-4f3a..."``, ``{"$oid": "..."}``, ``{"$numberInt": "7"}``), so a
  message inserted by a foreign producer with any ``_id`` (an ObjectId, a number, a string
  holding ``:``) is acked like ours. :meth:`ack` deletes, :meth:`retry` re-dues and
  :meth:`extend` pushes ``lease_until`` only while that token still holds the lease, so a
  worker whose lease lapsed (and was re-leased by another) cannot touch the message. A stale
  (or unreadable) receipt is logged, never raised.
* Dead letters go to ``<prefix>dead_letters`` with the reason (undecodable messages are
  dead-lettered by :meth:`receive` itself and never returned). The dead letter is written
  before the message is deleted: a crash in between leaves a duplicate, never a loss.
* **Poison messages** (docs/workers.md, "Hostile input"): a body :meth:`reactor.ports.Job.
  from_json` refuses (not UTF-8 bytes, too large, too deep, not an envelope) or that is not
  text or binary at all is dead-lettered by :meth:`receive` with the reason and kept as stored
  (text, or BSON binary; another BSON value as its Extended JSON text), and the receive goes on
  claiming the messages behind it.
* **Dead-letter administration** (:class:`reactor.ports.router.DeadLetterAdmin`;
  docs/workers.md, "Dead letters"): a dead letter's id is its ``_id`` in ``<prefix>dead_letters``.
  :meth:`MongoRouter.requeue_dead_letter` is *claim, enqueue, remove*: it claims the dead letter
  with one conditional update (a ``requeue`` token and a deadline
  :data:`REQUEUE_CLAIM_SECONDS` ahead, only where no live claim is set), inserts the job with a
  deterministic ``_id`` derived from the dead letter's id (the idempotency key), then deletes
  the dead letter. Two concurrent requeues: one wins the claim, the other gets ``None``. A
  crash after the insert leaves the dead letter claimed; once the claim lapses a later requeue
  takes it over, its insert finds the job already queued (duplicate key: nothing added) and the
  removal completes. The job is never lost, and enqueued twice only if the first copy was
  already run and acked before the retry (at-least-once).

Times are on the adapter clock (``reactor_mongodb._clock``: the server's, calibrated), so every
worker judges due times and leases by the same clock. Waiting in :meth:`receive` polls with a
growing interval (50 ms up to ``max_poll_interval``); change streams are a possible fast path.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from bson import json_util
from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from reactor.errors import DeserializationError, RouterError, StorageError
from reactor.ports.clock import Clock, sleeper, wall_reader
from reactor.ports.inspection import QueueStats
from reactor.ports.router import DeadLetter, Delivery, Job
from reactor_mongodb._clock import ServerClock

__all__ = ["REQUEUE_CLAIM_SECONDS", "MongoRouter"]

logger = logging.getLogger(__name__)

#: Seconds a requeue's claim on a dead letter holds before another requeue may take it over
#: (only a requeue that crashed between its enqueue and its removal leaves one behind).
REQUEUE_CLAIM_SECONDS = 30.0


def _raw_body(body: object) -> str | bytes:
    """A stored body as text or bytes (BSON binary is ``bytes``); any other BSON value as its
    Extended JSON text."""
    if isinstance(body, bytes):
        return bytes(body)  # bson.Binary is a bytes subclass
    if isinstance(body, str):
        return str(body)
    try:
        return str(json_util.dumps(body))
    except Exception:  # not even BSON-like: its repr is the best we can keep
        return repr(body)


def _make_receipt(doc: dict[str, Any]) -> str:
    """``"<lease token>:<message id as canonical Extended JSON>"`` of a claimed message.

    The lease token (a UUID's hex) never holds ``:``, so the first ``:`` ends it; the id keeps
    its BSON type through the Extended JSON round trip, whatever a producer chose as ``_id``.
    """
    encoded = json_util.dumps(doc["_id"], json_options=json_util.CANONICAL_JSON_OPTIONS)
    return f"{doc['lease']}:{encoded}"


def _parse_receipt(receipt: str) -> dict[str, Any] | None:
    """The ``{"_id", "lease"}`` filter of a :func:`_make_receipt` receipt; ``None`` when
    ``receipt`` is not one (a receipt of another router, or mangled)."""
    lease, sep, encoded = receipt.partition(":")
    if not sep or not lease:
        return None
    try:
        message_id = json_util.loads(encoded, json_options=json_util.CANONICAL_JSON_OPTIONS)
    except (ValueError, TypeError):
        return None
    return {"_id": message_id, "lease": lease}


def _check_delay(seconds: float, name: str = "delay_seconds") -> float:
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {seconds!r}")
    return value


class MongoRouter:
    """A :class:`reactor.ports.Router` on a MongoDB jobs collection.

    Args:
        database: the pymongo (or API-compatible) database.
        queue: the queue name (several queues share one collection).
        prefix: collection-name prefix (``<prefix>jobs``, ``<prefix>dead_letters``).
        visibility_timeout: seconds a delivery stays leased before it is redelivered.
        clock: ``"server"`` (calibrated server clock), ``"application"``, a callable
            returning epoch seconds, or a :class:`reactor.ports.Clock` (its ``now``).
        owns_client: close the database's client on :meth:`close`.
        sleep: how :meth:`receive` waits between polls (injectable for tests); default
            ``None``: the system's sleep, looked up at call time.
        max_poll_interval: the longest pause between polls while waiting, in seconds.

    Raises:
        ValueError: a non-positive ``visibility_timeout``.
    """

    def __init__(
        self,
        database: Database[Any],
        *,
        queue: str = "default",
        prefix: str = "reactor_",
        visibility_timeout: float = 30.0,
        clock: str | Callable[[], float] | Clock = "server",
        owns_client: bool = False,
        sleep: Callable[[float], None] | None = None,
        max_poll_interval: float = 0.5,
    ) -> None:
        if not visibility_timeout > 0:
            raise ValueError(f"visibility_timeout must be > 0, got {visibility_timeout!r}")
        self.database = database
        self.queue = queue
        self.visibility_timeout = float(visibility_timeout)
        self.jobs: Collection[Any] = database[prefix + "jobs"]
        self.dead: Collection[Any] = database[prefix + "dead_letters"]
        if isinstance(clock, str):
            self._clock: Callable[[], float] = ServerClock(
                lambda name: database.client.admin.command(name), mode=clock
            ).now
        else:
            self._clock = wall_reader(clock)
        self._owns_client = owns_client
        self._sleep = sleeper(sleep)
        self._max_poll = max_poll_interval
        self._indexed = False
        self._index_lock = threading.Lock()
        self._closed = False

    # -- producer side -----------------------------------------------------------------------

    def now(self) -> float:
        """The router clock in epoch seconds.

        Raises:
            RouterError: calibrating the server clock failed (e.g. the server is unreachable:
                after ``serverSelectionTimeoutMS``).
        """
        try:
            return self._clock()
        except StorageError as exc:
            raise RouterError(f"MongoDB router clock failed: {exc}") from exc

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become due after ``delay_seconds`` (any finite delay >= 0).

        A delayed job's envelope gets ``not_before = now + delay``.

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the server failed or the router is closed.
        """
        delay = _check_delay(delay_seconds)
        now = self.now()
        if delay > 0:
            job = replace(job, not_before=now + delay)
        self._insert(job.to_json(), now + delay, job.id)
        return job.id

    def enqueue_raw(self, body: str | bytes, delay_seconds: float = 0) -> None:
        """Queue a raw body as a foreign producer would (the router probe's ``inject_raw``).

        Args:
            body: the body, unvalidated: text, or bytes (stored as BSON binary) that need not
                be UTF-8.
            delay_seconds: seconds before it is due.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the server failed.
        """
        delay = _check_delay(delay_seconds)
        self._insert(body, self.now() + delay, None)

    def _insert(
        self, body: str | bytes, due_at: float, job_id: str | None, message_id: str | None = None
    ) -> bool:
        """Insert a message (``message_id``: its ``_id``, an idempotency key); ``False`` when a
        message with that ``_id`` is already queued (nothing inserted)."""
        if self._closed:
            raise RouterError("the MongoDB router is closed")
        self._ensure_indexes()
        try:
            self.jobs.insert_one(
                {
                    # wall-clock nanoseconds first: jobs due at the same time go out FIFO
                    "_id": message_id or f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}",
                    "queue": self.queue,
                    "job_id": job_id,
                    "body": body,
                    "due_at": due_at,
                    "lease_until": None,
                    "lease": None,
                    "deliveries": 0,
                    "enqueued_at": self.now(),
                }
            )
        except DuplicateKeyError:
            if message_id is None:
                raise RouterError("MongoDB enqueue failed: duplicate message id") from None
            return False
        except PyMongoError as exc:
            raise RouterError(f"MongoDB enqueue failed: {exc}") from exc
        return True

    # -- consumer side -----------------------------------------------------------------------

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one.

        Undecodable messages are dead-lettered with the reason and their raw body and not
        returned; the receive goes on with the messages behind them.

        Raises:
            RouterError: the server failed.
        """
        self._ensure_indexes()
        deadline = time.monotonic() + max(float(wait_seconds), 0.0)
        pause = 0.05
        out: list[Delivery] = []
        while True:
            while len(out) < max_jobs:
                claimed = self._claim()
                if claimed is None:
                    break
                delivery = self._decode(claimed)
                if delivery is not None:
                    out.append(delivery)
            remaining = deadline - time.monotonic()
            if out or remaining <= 0 or self._closed:
                return out
            self._sleep(min(pause, remaining))
            pause = min(pause * 2, self._max_poll)

    def _claim(self) -> dict[str, Any] | None:
        now = self.now()
        try:
            found: dict[str, Any] | None = self.jobs.find_one_and_update(
                {
                    "queue": self.queue,
                    "due_at": {"$lte": now},
                    "$or": [{"lease_until": None}, {"lease_until": {"$lte": now}}],
                },
                {
                    "$set": {
                        "lease": uuid.uuid4().hex,
                        "lease_until": now + self.visibility_timeout,
                    },
                    "$inc": {"deliveries": 1},
                },
                sort=[("due_at", ASCENDING), ("_id", ASCENDING)],
                return_document=ReturnDocument.AFTER,
            )
        except PyMongoError as exc:
            raise RouterError(f"MongoDB receive failed: {exc}") from exc
        return found

    def _decode(self, doc: dict[str, Any]) -> Delivery | None:
        body = doc.get("body")
        try:
            if not isinstance(body, str | bytes):
                raise DeserializationError(
                    f"message body is {type(body).__name__}, not text or binary"
                )
            job = Job.from_json(body)
        except DeserializationError as exc:
            self._move_to_dead(doc, _raw_body(body), f"undecodable message: {exc}")
            return None
        return Delivery(
            job=job,
            receipt=_make_receipt(doc),
            delivery_count=int(doc.get("deliveries", 1)),
        )

    @staticmethod
    def _receipt(delivery: Delivery) -> dict[str, Any] | None:
        """The filter matching the message only while this delivery's lease holds it;
        ``None`` for a receipt this router did not issue."""
        return _parse_receipt(delivery.receipt)

    def _stale(self, delivery: Delivery, action: str) -> None:
        logger.warning(
            "stale receipt on %s: job %s (receipt %s) is no longer leased by this delivery",
            action,
            delivery.job.id,
            delivery.receipt,
        )

    def ack(self, delivery: Delivery) -> None:
        """Delete a delivered job; a stale receipt is logged, never raised.

        Raises:
            RouterError: the server failed.
        """
        query = self._receipt(delivery)
        if query is None:
            self._stale(delivery, "ack")
            return
        try:
            deleted = self.jobs.delete_one(query).deleted_count
        except PyMongoError as exc:
            raise RouterError(f"MongoDB ack failed: {exc}") from exc
        if not deleted:
            self._stale(delivery, "ack")

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Release the lease and make the job due after ``delay_seconds``.

        The receipt becomes stale; the delivery count is kept.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the server failed.
        """
        delay = _check_delay(delay_seconds)
        query = self._receipt(delivery)
        if query is None:
            self._stale(delivery, "retry")
            return
        try:
            matched = self.jobs.update_one(
                query,
                {"$set": {"due_at": self.now() + delay, "lease": None, "lease_until": None}},
            ).matched_count
        except PyMongoError as exc:
            raise RouterError(f"MongoDB retry failed: {exc}") from exc
        if not matched:
            self._stale(delivery, "retry")

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job leased for ``seconds`` from now, only while this receipt holds it.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
            RouterError: the server failed.
        """
        extra = _check_delay(seconds, "seconds")
        query = self._receipt(delivery)
        if query is None:
            self._stale(delivery, "extend")
            return
        try:
            matched = self.jobs.update_one(
                query, {"$set": {"lease_until": self.now() + extra}}
            ).matched_count
        except PyMongoError as exc:
            raise RouterError(f"MongoDB extend failed: {exc}") from exc
        if not matched:
            self._stale(delivery, "extend")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move a delivered job to the dead letters with ``reason`` (and delete it).

        A stale receipt is logged and nothing moves (the current lease holder decides).

        Raises:
            RouterError: the server failed.
        """
        query = self._receipt(delivery)
        if query is None:
            self._stale(delivery, "dead_letter")
            return
        try:
            doc = self.jobs.find_one(query)
        except PyMongoError as exc:
            raise RouterError(f"MongoDB dead_letter failed: {exc}") from exc
        if doc is None:
            self._stale(delivery, "dead_letter")
            return
        self._move_to_dead(doc, _raw_body(doc.get("body")), reason)

    def _move_to_dead(self, doc: dict[str, Any], body: str | bytes, reason: str) -> None:
        """Record the leased message ``doc`` as a dead letter, then delete it from the queue.

        The letter is keyed by the delivery (the message's id and its lease): a retry after a
        failure between the two writes, or after a write whose reply was lost, finds the
        letter it wrote instead of writing a second one (docs/contract-suite.md, "Faults
        injected at the driver").
        """
        logger.warning("dead-lettered message %s: %s", doc["_id"], reason)
        try:
            self.dead.update_one(
                {"message_id": doc["_id"], "lease": doc.get("lease")},
                {
                    "$setOnInsert": {
                        # wall-clock nanoseconds first: ties on ``at`` keep insertion order
                        "_id": f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}",
                        "queue": self.queue,
                        "body": body,
                        "reason": reason,
                        "at": self.now(),
                    }
                },
                upsert=True,
            )
            self.jobs.delete_one({"_id": doc["_id"], "lease": doc.get("lease")})
        except PyMongoError as exc:
            raise RouterError(f"MongoDB dead-lettering failed: {exc}") from exc

    def queue_stats(self) -> QueueStats:
        """This queue's counts now, from four ``count_documents`` (``reactor info``, the sweep
        chain's back-pressure; :class:`reactor.ports.inspection.QueueInspector`).

        Returns:
            ``ready`` (due, no running lease: never delivered, retried and due, or a lapsed
            lease), ``delayed`` (not yet due, no running lease), ``in_flight`` (a running
            lease), ``dead_letters`` (this queue's); ``consumers`` unknown (``None``).

        Raises:
            RouterError: the server failed.
        """
        now = self.now()
        queue = self.queue
        free = {"$or": [{"lease_until": None}, {"lease_until": {"$lte": now}}]}
        try:
            ready = self.jobs.count_documents({"queue": queue, "due_at": {"$lte": now}, **free})
            delayed = self.jobs.count_documents({"queue": queue, "due_at": {"$gt": now}, **free})
            in_flight = self.jobs.count_documents({"queue": queue, "lease_until": {"$gt": now}})
            dead = self.dead.count_documents({"queue": queue})
        except PyMongoError as exc:
            raise RouterError(f"MongoDB queue stats failed: {exc}") from exc
        return QueueStats(ready=ready, delayed=delayed, in_flight=in_flight, dead_letters=dead)

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Dead-lettered messages of this queue, oldest first (at most ``limit``), each with its
        ``_id`` as ``id``; a binary body that is not UTF-8 comes back base64
        (:meth:`reactor.ports.DeadLetter.from_raw`; docs/workers.md, "Dead letters").

        Args:
            limit: the most letters returned.
            cursor: the id of the last letter of the previous page (``None``: the oldest).

        Raises:
            ValueError: ``cursor`` names no dead letter of this queue (requeued or purged
                since: start again from the oldest).
            RouterError: the server failed.
        """
        if limit <= 0:
            return []
        query: dict[str, Any] = {"queue": self.queue}
        try:
            if cursor is not None:
                last = self.dead.find_one({"_id": cursor, "queue": self.queue})
                if last is None:
                    raise ValueError(f"bad dead-letter cursor {cursor!r}: no such dead letter")
                query["$or"] = [
                    {"at": {"$gt": last["at"]}},
                    {"at": last["at"], "_id": {"$gt": last["_id"]}},
                ]
            found = (
                self.dead.find(query)
                .sort([("at", ASCENDING), ("_id", ASCENDING)])
                .limit(int(limit))
            )
            return [self._letter(doc) for doc in found]
        except PyMongoError as exc:
            raise RouterError(f"MongoDB dead_letters failed: {exc}") from exc

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The dead letter of this queue whose ``_id`` is ``letter_id``, else ``None``
        (docs/workers.md, "Dead letters").

        Raises:
            RouterError: the server failed.
        """
        try:
            doc = self.dead.find_one({"_id": letter_id, "queue": self.queue})
        except PyMongoError as exc:
            raise RouterError(f"MongoDB get_dead_letter failed: {exc}") from exc
        return None if doc is None else self._letter(doc)

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Move a dead letter back to the queue, due now, with a fresh delivery count.

        Claim, enqueue, remove (module docstring): concurrent requeues of one id enqueue it
        once, and a crash between the steps never loses it (docs/workers.md, "Dead letters").

        Returns:
            The job id (the original job's), or ``None`` when there is no such dead letter or
            another requeue holds its claim.

        Raises:
            DeserializationError: the body is not a job envelope; the letter is kept
                (unclaimed).
            RouterError: the server failed or the router is closed (the letter is kept; a
                claim already taken lapses after :data:`REQUEUE_CLAIM_SECONDS`).
        """
        letter = self.get_dead_letter(letter_id)
        if letter is None:
            return None
        job = letter.to_job()
        token, now = uuid.uuid4().hex, self.now()
        try:
            claimed = self.dead.find_one_and_update(
                {
                    "_id": letter_id,
                    "queue": self.queue,
                    "$or": [{"requeue_until": None}, {"requeue_until": {"$lte": now}}],
                },
                {"$set": {"requeue": token, "requeue_until": now + REQUEUE_CLAIM_SECONDS}},
                return_document=ReturnDocument.AFTER,
            )
        except PyMongoError as exc:
            raise RouterError(f"MongoDB requeue failed: {exc}") from exc
        if claimed is None:
            return None
        body = letter.raw_body().decode("utf-8")  # to_job decoded it: UTF-8
        try:
            # the deterministic _id is the idempotency key: a retried requeue adds no copy
            self._insert(body, self.now(), job.id, f"{letter_id}-requeued")
        except RouterError:
            self._release_claim(letter_id, token)
            raise
        try:
            self.dead.delete_one({"_id": letter_id, "requeue": token})
        except PyMongoError as exc:
            raise RouterError(f"MongoDB requeue failed: {exc}") from exc
        return job.id

    def _release_claim(self, letter_id: str, token: str) -> None:
        """Drop a requeue's claim after its enqueue failed (best effort: it lapses anyway)."""
        try:
            self.dead.update_one(
                {"_id": letter_id, "requeue": token},
                {"$set": {"requeue": None, "requeue_until": None}},
            )
        except PyMongoError as exc:
            logger.warning("could not release the requeue claim on %s: %s", letter_id, exc)

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete this queue's dead letters named by ``ids`` (``None``: all of them); returns
        how many were deleted (docs/workers.md, "Dead letters").

        Raises:
            RouterError: the server failed.
        """
        query: dict[str, Any] = {"queue": self.queue}
        if ids is not None:
            wanted = sorted(set(ids))
            if not wanted:
                return 0
            query["_id"] = {"$in": wanted}
        try:
            return int(self.dead.delete_many(query).deleted_count)
        except PyMongoError as exc:
            raise RouterError(f"MongoDB purge_dead_letters failed: {exc}") from exc

    @staticmethod
    def _letter(doc: dict[str, Any]) -> DeadLetter:
        """A ``<prefix>dead_letters`` document as a :class:`DeadLetter`."""
        return DeadLetter.from_raw(
            _raw_body(doc.get("body")), str(doc["reason"]), float(doc["at"]), str(doc["_id"])
        )

    def close(self) -> None:
        """Stop using the router (closes the client when owned); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.database.client.close()

    def _ensure_indexes(self) -> None:
        if self._indexed:
            return
        with self._index_lock:
            if self._indexed:
                return
            try:
                self.jobs.create_index(
                    [("queue", ASCENDING), ("due_at", ASCENDING), ("_id", ASCENDING)],
                    name="reactor_due",
                )
                self.dead.create_index(
                    [("queue", ASCENDING), ("at", ASCENDING), ("_id", ASCENDING)],
                    name="reactor_dead_at",
                )
                self.dead.create_index(
                    [("message_id", ASCENDING), ("lease", ASCENDING)],
                    name="reactor_dead_delivery",
                )
            except PyMongoError as exc:
                raise RouterError(f"MongoDB index creation failed: {exc}") from exc
            self._indexed = True
