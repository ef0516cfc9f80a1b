"""The MongoDB router: a jobs collection claimed with one ``find_one_and_update`` per message
(docs/adapters/mongodb.md, "Router").

:class:`MongoQueue` is the queue (a :class:`reactor.ports.queues.QueuePrimitive`), every
operation on single documents, each write atomic on its own. One collection ``<prefix>jobs``
holds every queue's messages, one document each::

    {_id: <message id>, queue, body: <text | binary>, due_at: <epoch s>,
     lease_until: <epoch s | null>, lease: <token | null>, deliveries: <int>}

(documents written before the router moved onto the queue toolkit also carry ``job_id`` and
``enqueued_at``, which nothing reads.) A message is visible when ``due_at <= now`` and its
lease is absent or lapsed (``lease_until <= now``): ``put`` writes ``due_at``, ``claim`` writes
the lease, ``release`` writes a new ``due_at`` and clears the lease.

* ``claim``: ``find_one_and_update`` on ``{queue, due_at <= now, lease free}`` sorted
  ``due_at, _id``, setting a fresh ``lease`` token, ``lease_until`` and ``$inc deliveries``. A
  single-document update is atomic, so two claimers never hold one message.
* A claimed message's id is its ``_id`` as canonical MongoDB Extended JSON (``"0000...-4f3a..."``,
  ``{"$oid": "..."}``, ``{"$numberInt": "7"}``): a message a foreign producer inserted with any
  ``_id`` (an ObjectId, a number, a string holding ``:``) is acked like ours.
  ``delete``/``change_visibility``/``release``/``dead_letter`` filter on ``_id`` and ``lease``,
  so a stale receipt changes nothing.
* ``dead_letter`` writes the letter to ``<prefix>dead_letters``, upserted under the delivery
  (message id and lease), then deletes the message: a crash between the two leaves the
  message to be claimed again (its next dead-lettering is a new delivery), and a retry after a
  lost reply finds the letter it wrote instead of adding a second. Letter ids are
  ``<wall ns>-<random>`` and page in id order.
* A body that is neither text nor binary (another producer's BSON value) is dead-lettered by
  the claim itself, kept as its Extended JSON text. A document whose ``deliveries`` is neither
  absent nor a number is never claimed (``$inc`` would refuse it on every claim); one whose
  count is NaN, infinite or a fraction is read as a count of at least 1.

:class:`MongoRouter` is :class:`reactor.generic.router.GenericRouter` over it (job envelopes,
delays, the stale-receipt rule, poison messages, retries that keep the delivery count,
dead-letter administration: docs/protocol.md, "Building a router"), on the server's
calibrated clock (``reactor_mongodb._clock``), plus ``queue_stats``
(:class:`reactor.ports.inspection.QueueInspector`) and ``enqueue_raw`` for probes. A waiting
``receive`` polls: 50 ms, doubling to ``max_poll_interval``.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from typing import Any

from bson import Decimal128, json_util
from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from reactor.errors import RouterError, StorageError
from reactor.generic.router import GenericRouter, check_seconds, new_message_id
from reactor.model.text import escaping_logger
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.driver_errors import translate_errors
from reactor.ports.inspection import QueueStats
from reactor.ports.queues import ClaimedMessage
from reactor.ports.router import DeadLetter
from reactor_mongodb._clock import ServerClock

__all__ = ["MongoQueue", "MongoRouter"]

#: Message ids and reasons come from stored documents: logged escaped, one line each.
logger = escaping_logger(__name__)

#: The first pause, in seconds, of a waiting ``receive`` (it doubles up to the ceiling).
_FIRST_POLL = 0.05

#: The claim's filter on ``deliveries``: absent or a number (``$inc`` refuses anything else,
#: so a foreign document holding text or null there is never claimed: docs/adapters/mongodb.md).
_COUNTABLE = {"$or": [{"deliveries": {"$exists": False}}, {"deliveries": {"$type": "number"}}]}


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


def _encode_id(value: Any) -> str:
    """A message ``_id`` as canonical Extended JSON text (keeps its BSON type)."""
    return str(json_util.dumps(value, json_options=json_util.CANONICAL_JSON_OPTIONS))


def _decode_id(text: str) -> tuple[bool, Any]:
    """``(True, _id)`` of an :func:`_encode_id` text, ``(False, None)`` when it is not one:
    unparsable (whatever ``json_util`` raises: a bad ObjectId, a bad decimal, nesting too
    deep) or an operator document (a ``$``-key that would match more than one ``_id``).

    No length is refused: another producer's ``_id`` may be as long as a document (16 MiB),
    and its receipt must name it like any other (a parse is linear in the text)."""
    try:
        value = json_util.loads(text, json_options=json_util.CANONICAL_JSON_OPTIONS)
    except (Exception, RecursionError):
        return False, None
    if isinstance(value, dict) and any(str(key).startswith("$") for key in value):
        return False, None
    return True, value


def _count(value: object) -> int:
    """A stored ``deliveries`` as the claim's receive count: a foreign document's NaN,
    infinity or fraction is read as the nearest sane count (at least 1), a BSON decimal (a
    number to the claim's filter, kept decimal by ``$inc``) like a double of its value."""
    if isinstance(value, Decimal128):
        decimal = value.to_decimal()
        value = int(decimal) if decimal.is_finite() else math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1
    if isinstance(value, float):
        if not math.isfinite(value):
            return 1
        value = int(value)
    return max(int(value), 1)


def _letter_id_ok(letter_id: str) -> bool:
    """Whether ``letter_id`` has the form of this router's letter ids (``<20 digits>-<hex>``)."""
    stamp, sep, tail = letter_id.partition("-")
    return (bool(sep) and len(stamp) == 20 and stamp.isascii() and stamp.isdigit()
            and 0 < len(tail) <= 32 and tail.isascii() and tail.isalnum())


class MongoQueue:
    """A :class:`reactor.ports.queues.QueuePrimitive` on a MongoDB jobs collection (module
    docstring).

    Args:
        database: the pymongo (or API-compatible) database.
        queue: the queue name stored in every document (several queues share a collection).
        prefix: collection-name prefix (``<prefix>jobs``, ``<prefix>dead_letters``).
        owns_client: close the database's client in :meth:`close`.

    Attributes:
        database: the database.
        queue: the queue name.
        jobs: the ``<prefix>jobs`` collection.
        dead: the ``<prefix>dead_letters`` collection.
    """

    def __init__(
        self, database: Database[Any], *, queue: str, prefix: str, owns_client: bool = False
    ) -> None:
        self.database = database
        self.queue = queue
        self.jobs: Collection[Any] = database[prefix + "jobs"]
        self.dead: Collection[Any] = database[prefix + "dead_letters"]
        self._owns_client = owns_client
        self._indexed = False
        self._index_lock = threading.Lock()
        self._closed = False

    def _errors(self, operation: str) -> translate_errors:
        """Driver errors of ``operation`` as :class:`RouterError`."""
        return translate_errors(PyMongoError, what=f"MongoDB {operation}", into=RouterError)

    def _leased(self, message_id: str, receipt: str) -> dict[str, Any] | None:
        """The filter matching the message only while ``receipt`` is its lease; ``None`` when
        ``message_id`` is not an id :meth:`claim` handed out."""
        ok, value = _decode_id(message_id)
        if not ok or not receipt:
            return None
        return {"_id": value, "queue": self.queue, "lease": receipt}

    # -- messages ------------------------------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Insert the message unless ``message_id`` is queued (the ``_id`` is the key).

        Raises:
            RouterError: the server failed, or the queue is closed.
        """
        if self._closed:
            raise RouterError("the MongoDB router is closed")
        self._ensure_indexes()
        document = {"_id": message_id, "queue": self.queue, "body": body, "due_at": visible_at,
                    "lease_until": None, "lease": None, "deliveries": 0}
        with self._errors("enqueue"):
            try:
                self.jobs.insert_one(document)
            except DuplicateKeyError:
                return False
        return True

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """Lease up to ``limit`` visible messages, earliest ``due_at`` (then ``_id``) first,
        one ``find_one_and_update`` each.

        Raises:
            RouterError: the server failed.
        """
        self._ensure_indexes()
        out: list[ClaimedMessage] = []
        while len(out) < limit:
            try:
                found = self._claim_one(now, visible_at)
            except RouterError:
                if not out:
                    raise
                # the messages already leased by this call are handed out, not stranded for
                # a lease; the next claim meets the failure again if it lasts
                logger.warning("MongoDB claim failed after %d message(s): returning them",
                               len(out), exc_info=True)
                return out
            if found is None:
                break
            message_id, lease = _encode_id(found["_id"]), str(found["lease"])
            body = found.get("body")
            if not isinstance(body, str | bytes):
                # another producer's BSON value: poison whatever it holds, kept as its text
                reason = (f"undecodable message: the body is {type(body).__name__},"
                          " not text or binary")
                if self.dead_letter(message_id, lease, reason, now):
                    logger.warning("dead-lettered message %s: %s", message_id, reason)
                continue
            out.append(ClaimedMessage(message_id, body, _count(found.get("deliveries")), lease))
        return out

    def _claim_one(self, now: float, visible_at: float) -> dict[str, Any] | None:
        """Lease the earliest visible message (one ``find_one_and_update``), or ``None``."""
        with self._errors("receive"):
            found: dict[str, Any] | None = self.jobs.find_one_and_update(
                {"queue": self.queue, "due_at": {"$lte": now},
                 "$and": [{"$or": [{"lease_until": None}, {"lease_until": {"$lte": now}}]},
                          _COUNTABLE]},
                {"$set": {"lease": uuid.uuid4().hex, "lease_until": visible_at},
                 "$inc": {"deliveries": 1}},
                sort=[("due_at", ASCENDING), ("_id", ASCENDING)],
                return_document=ReturnDocument.AFTER,
            )
        return found

    def delete(self, message_id: str, receipt: str) -> bool:
        """Delete the message while ``receipt`` is its lease.

        Raises:
            RouterError: the server failed.
        """
        query = self._leased(message_id, receipt)
        if query is None:
            return False
        with self._errors("ack"):
            return bool(self.jobs.delete_one(query).deleted_count)

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Move ``lease_until`` while ``receipt`` is the lease (it stays the lease).

        Raises:
            RouterError: the server failed.
        """
        query = self._leased(message_id, receipt)
        if query is None:
            return False
        with self._errors("extend"):
            return bool(self.jobs.update_one(
                query, {"$set": {"lease_until": visible_at}}).matched_count)

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Clear the lease and set ``due_at`` while ``receipt`` is the lease (deliveries kept).

        Raises:
            RouterError: the server failed.
        """
        query = self._leased(message_id, receipt)
        if query is None:
            return False
        with self._errors("retry"):
            return bool(self.jobs.update_one(
                query, {"$set": {"due_at": visible_at, "lease": None, "lease_until": None}},
            ).matched_count)

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Write the letter (upserted under the delivery), then delete the message, while
        ``receipt`` is its lease.

        The letter is keyed by the message's id and lease: a retry after a failure between
        the two writes, or after a write whose reply was lost, finds the letter it wrote
        instead of writing a second one (docs/contract-suite.md, "Faults injected at the
        driver").

        Raises:
            RouterError: the server failed.
        """
        query = self._leased(message_id, receipt)
        if query is None:
            return False
        with self._errors("dead_letter"):
            doc = self.jobs.find_one(query)
            if doc is None:
                return False
            delivery = {"message_id": doc["_id"], "lease": receipt}
            self.dead.update_one(
                delivery,
                {"$setOnInsert": {
                    "_id": new_message_id(),  # wall-clock ns first: ids page in arrival order
                    "queue": self.queue,
                    "body": _raw_body(doc.get("body")),
                    "reason": reason,
                    "at": at,
                }},
                upsert=True,
            )
            if self.jobs.delete_one(query).deleted_count:
                return True
            # the lease lapsed and the message was claimed again between the read and the
            # delete: the receipt is stale, so the letter this delivery wrote is withdrawn
            self.dead.delete_one({**delivery, "queue": self.queue})
        return False

    # -- dead letters ----------------------------------------------------------------------------

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """This queue's letters in id order (arrival order) after the letter id ``after``.

        Raises:
            ValueError: ``after`` is not a letter id of this router's form.
            RouterError: the server failed.
        """
        if limit <= 0:
            return []
        query: dict[str, Any] = {"queue": self.queue}
        if after is not None:
            if not _letter_id_ok(after):
                raise ValueError(f"bad dead-letter cursor {after!r}: not a letter id")
            query["_id"] = {"$gt": after}
        self._ensure_indexes()
        with self._errors("dead_letters"):
            found = self.dead.find(query).sort([("_id", ASCENDING)]).limit(int(limit))
            return [self._letter(doc) for doc in found]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """This queue's letter ``letter_id``; ``None`` when there is none.

        Raises:
            RouterError: the server failed.
        """
        with self._errors("get_dead_letter"):
            doc = self.dead.find_one({"_id": letter_id, "queue": self.queue})
        return None if doc is None else self._letter(doc)

    def remove_dead_letter(self, letter_id: str) -> bool:
        """Delete this queue's letter ``letter_id``; one of concurrent removals gets ``True``.

        Raises:
            RouterError: the server failed.
        """
        with self._errors("remove_dead_letter"):
            return bool(self.dead.delete_one({"_id": letter_id, "queue": self.queue})
                        .deleted_count)

    @staticmethod
    def _letter(doc: dict[str, Any]) -> DeadLetter:
        """A ``<prefix>dead_letters`` document as a :class:`DeadLetter`."""
        at = doc.get("at")
        when = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else 0.0
        return DeadLetter.from_raw(
            _raw_body(doc.get("body")), str(doc.get("reason", "")),
            when if math.isfinite(when) else 0.0, str(doc["_id"]),
        )

    # -- inspection and lifecycle ----------------------------------------------------------------

    def stats(self, now: float) -> QueueStats:
        """This queue's counts at ``now`` (epoch seconds), from four ``count_documents``.

        Returns:
            ``ready`` (due, no running lease), ``delayed`` (not yet due, no running lease),
            ``in_flight`` (a running lease), ``dead_letters``; ``consumers`` unknown.

        Raises:
            RouterError: the server failed.
        """
        queue = self.queue
        free = {"$or": [{"lease_until": None}, {"lease_until": {"$lte": now}}]}
        with self._errors("queue stats"):
            ready = self.jobs.count_documents({"queue": queue, "due_at": {"$lte": now}, **free})
            delayed = self.jobs.count_documents({"queue": queue, "due_at": {"$gt": now}, **free})
            in_flight = self.jobs.count_documents({"queue": queue, "lease_until": {"$gt": now}})
            dead = self.dead.count_documents({"queue": queue})
        return QueueStats(ready=ready, delayed=delayed, in_flight=in_flight, dead_letters=dead)

    def close(self) -> None:
        """Stop using the queue (closes the client when owned); idempotent."""
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
            with self._errors("index creation"):
                self.jobs.create_index(
                    [("queue", ASCENDING), ("due_at", ASCENDING), ("_id", ASCENDING)],
                    name="reactor_due",
                )
                self.dead.create_index([("queue", ASCENDING), ("_id", ASCENDING)],
                                       name="reactor_dead_id")
                self.dead.create_index(
                    [("message_id", ASCENDING), ("lease", ASCENDING)],
                    name="reactor_dead_delivery",
                )
            self._indexed = True


class MongoRouter(GenericRouter):
    """A :class:`reactor.ports.Router` (and ``DeadLetterAdmin``, ``QueueInspector``) on a
    MongoDB jobs collection: :class:`GenericRouter` over a :class:`MongoQueue`.

    Args:
        database: the pymongo (or API-compatible) database.
        queue: the queue name (several queues share one collection).
        prefix: collection-name prefix (``<prefix>jobs``, ``<prefix>dead_letters``).
        visibility_timeout: seconds a delivery stays leased before it is redelivered.
        clock: ``"server"`` (calibrated server clock), ``"application"``, a callable
            returning epoch seconds, or a :class:`reactor.ports.Clock` (its ``now``).
        owns_client: close the database's client on :meth:`close`.
        max_poll_interval: the longest pause between two claims of a waiting ``receive``, in
            seconds (the first is 50 ms; each next doubles).

    Attributes:
        primitive: the :class:`MongoQueue`.

    Raises:
        ValueError: a non-positive ``visibility_timeout`` or ``max_poll_interval`` below
            50 ms.
    """

    primitive: MongoQueue

    def __init__(
        self,
        database: Database[Any],
        *,
        queue: str = "default",
        prefix: str = "reactor_",
        visibility_timeout: float = 30.0,
        clock: str | Callable[[], float] | Clock = "server",
        owns_client: bool = False,
        max_poll_interval: float = 0.5,
    ) -> None:
        if isinstance(clock, str):
            read = ServerClock(lambda name: database.client.admin.command(name), mode=clock).now
        else:
            read = wall_reader(clock)

        def now() -> float:
            try:
                return read()
            except StorageError as exc:  # the calibration's own error, as the router's
                raise RouterError(f"MongoDB router clock failed: {exc}") from exc

        super().__init__(
            MongoQueue(database, queue=queue, prefix=prefix, owns_client=owns_client),
            visibility_timeout=visibility_timeout,
            clock=now,
            poll_interval=_FIRST_POLL,
            max_poll_interval=max_poll_interval,
        )

    @property
    def database(self) -> Database[Any]:
        """The database the collections live in."""
        return self.primitive.database

    @property
    def queue(self) -> str:
        """The queue name."""
        return self.primitive.queue

    @property
    def jobs(self) -> Collection[Any]:
        """The ``<prefix>jobs`` collection."""
        return self.primitive.jobs

    @property
    def dead(self) -> Collection[Any]:
        """The ``<prefix>dead_letters`` collection."""
        return self.primitive.dead

    def now(self) -> float:
        """The router clock in epoch seconds.

        Raises:
            RouterError: calibrating the server clock failed (e.g. the server is unreachable:
                after ``serverSelectionTimeoutMS``).
        """
        return self._clock()

    def enqueue_raw(self, body: str | bytes, delay_seconds: float = 0) -> None:
        """Queue a raw body as a foreign producer would (the router probe's ``inject_raw``).

        Args:
            body: the body, unvalidated: text, or bytes (stored as BSON binary) that need not
                be UTF-8.
            delay_seconds: seconds before it is due.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the server failed, or the router is closed.
        """
        delay = check_seconds(delay_seconds)
        self._put(new_message_id(), body, self.now() + delay)

    def queue_stats(self) -> QueueStats:
        """This queue's counts now (``reactor info``, the sweep chain's back-pressure;
        :class:`reactor.ports.inspection.QueueInspector`): see :meth:`MongoQueue.stats`.

        Raises:
            RouterError: the server failed.
        """
        return self.primitive.stats(self.now())
