"""MongoRouter: leases judged by an injected clock, receipts, retries and dead letters."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

import pytest
import reactor_mongodb.router
from bson import Decimal128, ObjectId
from reactor_mongodb.router import MongoQueue, MongoRouter

from reactor.memory.clock import ManualClock
from reactor.ports.router import Job


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000.0)


@pytest.fixture
def router(mongo_db: tuple[str, Any], clock: ManualClock) -> MongoRouter:
    return MongoRouter(
        mongo_db[1], queue="q", visibility_timeout=10, clock=clock
    )


def job(n: int = 0) -> Job:
    return Job(kind="run", payload={"n": n})


def test_delivers_due_jobs_oldest_first_and_respects_delays(
    router: MongoRouter, clock: ManualClock
) -> None:
    router.enqueue(job(1), delay_seconds=5)
    router.enqueue(job(2))
    router.enqueue(job(3))
    got = router.receive(max_jobs=5)
    assert [d.job.payload["n"] for d in got] == [2, 3]
    clock.advance(5)
    later = router.receive(max_jobs=5)
    assert [d.job.payload["n"] for d in later] == [1]
    assert later[0].job.not_before == pytest.approx(clock())


def test_unacked_delivery_comes_back_after_the_visibility_timeout(
    router: MongoRouter, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    router.enqueue(job())
    first = router.receive()[0]
    assert router.receive() == []
    clock.advance(10)
    second = router.receive()[0]
    assert second.delivery_count == 2
    assert second.receipt != first.receipt
    with caplog.at_level(logging.WARNING):
        router.ack(first)  # stale: the lease moved on
        router.extend(first, 100)
    assert "stale receipt" in caplog.text
    clock.advance(10)
    assert router.receive()[0].job.id == second.job.id  # the stale extend did nothing


def test_ack_extend_and_retry(router: MongoRouter, clock: ManualClock) -> None:
    router.enqueue(job())
    delivery = router.receive()[0]
    router.extend(delivery, 30)
    clock.advance(20)
    assert router.receive() == []
    router.retry(delivery, 5)
    assert router.receive() == []
    clock.advance(5)
    again = router.receive()[0]
    assert again.delivery_count == 2
    router.ack(again)
    clock.advance(100)
    assert router.receive() == []


def test_undecodable_messages_are_dead_lettered_not_returned(
    router: MongoRouter, clock: ManualClock
) -> None:
    router.enqueue_raw("{not json")
    router.enqueue(job(7))
    got = router.receive(max_jobs=5)
    assert [d.job.payload["n"] for d in got] == [7]
    dead = router.dead_letters()
    assert [d.body for d in dead] == ["{not json"]
    assert "undecodable" in dead[0].reason
    router.dead_letter(got[0], "unknown reactor 'x'")
    assert [d.reason for d in router.dead_letters()][-1] == "unknown reactor 'x'"
    clock.advance(60)
    assert router.receive() == []


def test_queues_are_isolated(mongo_db: tuple[str, Any], clock: ManualClock) -> None:
    a = MongoRouter(mongo_db[1], queue="a", clock=clock)
    b = MongoRouter(mongo_db[1], queue="b", clock=clock)
    a.enqueue(job(1))
    assert b.receive() == []
    assert len(a.receive()) == 1


def test_bad_delays_are_rejected(router: MongoRouter) -> None:
    with pytest.raises(ValueError):
        router.enqueue(job(), delay_seconds=-1)
    with pytest.raises(ValueError):
        router.enqueue(job(), delay_seconds=float("inf"))


def _foreign(router: MongoRouter, message_id: Any, n: int) -> None:
    """Insert a due job the way another producer might: its own ``_id``, any BSON type."""
    router.jobs.insert_one({
        "_id": message_id, "queue": router.queue, "job_id": None, "body": job(n).to_json(),
        "due_at": router.now(), "lease_until": None, "lease": None, "deliveries": 0,
        "enqueued_at": router.now(),
    })


FOREIGN_IDS = [ObjectId("65f0c0ffee0000000000beef"), "with:colons:in:it", 7, {"k": "v:1"}]


@pytest.mark.parametrize("message_id", FOREIGN_IDS, ids=repr)
def test_any_message_id_can_be_acked_retried_extended_and_dead_lettered(
    router: MongoRouter, clock: ManualClock, message_id: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _foreign(router, message_id, 1)
    [first] = router.receive()
    router.extend(first, 30)
    clock.advance(20)
    assert router.receive() == []  # the extend held the lease
    router.retry(first, 0)
    [second] = router.receive()
    assert second.delivery_count == 2 and second.job.payload == {"n": 1}
    with caplog.at_level(logging.WARNING):
        router.ack(second)
    assert "stale receipt" not in caplog.text
    assert router.jobs.count_documents({}) == 0

    _foreign(router, message_id, 2)
    [third] = router.receive()
    # A receipt this router did not issue (mangled, another router's) is stale, never an error.
    forged = [replace(third, receipt=r) for r in ("no-separator", "lease:{not json", ':"x"')]
    with caplog.at_level(logging.WARNING):
        for bad in forged:
            router.ack(bad)
            router.retry(bad, 0)
            router.extend(bad, 5)
            router.dead_letter(bad, "x")
    assert caplog.text.count("stale receipt") == 4 * len(forged)
    router.dead_letter(third, "poison")
    assert router.jobs.count_documents({}) == 0
    assert [d.reason for d in router.dead_letters()] == ["poison"]


def test_dead_letters_stored_by_the_previous_release_are_listed_requeued_and_purged(
    router: MongoRouter, clock: ManualClock
) -> None:
    """A dead letter written before letters were keyed by their delivery (no ``lease`` field)
    is listed, requeued once and purged like any other, and a new dead letter of the same
    message id is a letter of its own."""
    old = job(7)
    router.dead.insert_one({
        "_id": f"{1:020d}-0123456789ab", "queue": "q", "message_id": "m-old",
        "body": old.to_json(), "reason": "poison (previous release)", "at": clock() - 60,
    })
    listed = router.dead_letters()
    assert [(d.id, d.reason) for d in listed] == [(f"{1:020d}-0123456789ab",
                                                    "poison (previous release)")]
    router.enqueue(job(8))
    delivery = router.receive()[0]
    router.dead_letter(delivery, "poison (this release)")
    assert [d.reason for d in router.dead_letters()] == [
        "poison (previous release)", "poison (this release)"]
    assert router.requeue_dead_letter(listed[0].id) is not None
    assert router.requeue_dead_letter(listed[0].id) is None  # once
    assert [d.job.payload["n"] for d in router.receive(max_jobs=5)] == [7]
    assert router.purge_dead_letters() == 1
    assert router.dead_letters() == []


def test_a_new_message_is_stored_in_the_documented_shape(
    router: MongoRouter, clock: ManualClock
) -> None:
    """docs/adapters/mongodb.md, "Router": ``{_id, queue, body, due_at, lease_until, lease,
    deliveries}``; a claim writes the lease and counts the delivery."""
    queued = job(1)
    router.enqueue(queued, delay_seconds=2)
    (doc,) = router.jobs.find({})
    assert set(doc) == {"_id", "queue", "body", "due_at", "lease_until", "lease", "deliveries"}
    assert (doc["queue"], doc["due_at"], doc["lease"], doc["lease_until"], doc["deliveries"]) \
        == ("q", clock() + 2, None, None, 0)
    assert Job.from_json(doc["body"]).id == queued.id
    clock.advance(2)
    (delivery,) = router.receive()
    (doc,) = router.jobs.find({})
    assert doc["lease_until"] == clock() + 10 and doc["deliveries"] == 1 and doc["lease"]
    assert delivery.job.id == queued.id and delivery.delivery_count == 1


def test_a_letter_an_earlier_release_claimed_for_requeue_is_requeued_at_least_once(
    router: MongoRouter, clock: ManualClock
) -> None:
    """An earlier release requeued *claim, insert ``<letter id>-requeued``, delete*; one that
    crashed after its insert left the letter claimed (``requeue``, ``requeue_until``) and its
    copy queued. This release requeues the letter like any other: the job is delivered, at
    least once (docs/adapters/mongodb.md, "Router")."""
    old = job(5)
    letter_id = f"{2:020d}-0123456789ab"
    router.dead.insert_one({
        "_id": letter_id, "queue": "q", "message_id": "m-old", "body": old.to_json(),
        "reason": "poison", "at": clock() - 60, "requeue": "0" * 32,
        "requeue_until": clock() + 30,
    })
    _foreign(router, f"{letter_id}-requeued", 5)
    assert router.requeue_dead_letter(letter_id) == old.id
    assert router.dead_letters() == []
    delivered = router.receive(max_jobs=5)
    assert [d.job.payload for d in delivered] == [{"n": 5}, {"n": 5}]


def test_a_page_after_a_letter_that_is_gone_starts_after_its_id(
    router: MongoRouter, clock: ManualClock
) -> None:
    """Letter ids are time-ordered, so a cursor whose letter was requeued or purged since still
    places; a cursor not of that form is refused (docs/protocol.md, "Building a router")."""
    for n in range(3):
        router.enqueue(job(n))
    for delivery in router.receive(max_jobs=3):
        router.dead_letter(delivery, f"dead {delivery.job.payload['n']}")
    first, second, third = router.dead_letters()
    assert router.purge_dead_letters([first.id, second.id]) == 2
    assert router.dead_letters(cursor=first.id) == [third]
    with pytest.raises(ValueError, match="cursor"):
        router.dead_letters(cursor="no-such-dead-letter")


def test_a_dead_letter_whose_lease_moved_on_mid_way_files_nothing(
    router: MongoRouter, clock: ManualClock, mongo_db: tuple[str, Any],
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The receipt is checked again by the delete: a lease that lapsed, and was claimed by
    another worker, between the read and the delete leaves the message live under the new
    lease and withdraws the letter (docs/protocol.md, "Building a router": dead_letter only
    while the receipt is current)."""
    other = MongoRouter(mongo_db[1], queue="q", visibility_timeout=10, clock=clock)
    router.enqueue(job(1))
    (slow,) = router.receive()
    stolen: list[Any] = []
    letters = router.dead

    class Paused:
        """The dead-letter collection, with a pause before the letter is written."""

        def __getattr__(self, name: str) -> Any:
            return getattr(letters, name)

        def update_one(self, *args: Any, **kwargs: Any) -> Any:
            clock.advance(11)  # the slow worker pauses here; its lease lapses
            stolen.extend(other.receive())
            return letters.update_one(*args, **kwargs)

    monkeypatch.setattr(router.primitive, "dead", Paused())
    with caplog.at_level(logging.WARNING):
        router.dead_letter(slow, "boom")
    assert "stale receipt" in caplog.text
    assert other.dead_letters() == [] and len(stolen) == 1
    other.ack(stolen[0])
    assert router.jobs.count_documents({}) == 0


def test_a_receipt_of_another_queue_is_stale(
    mongo_db: tuple[str, Any], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Queues sharing a collection: a router acts only on its own queue's messages."""
    a = MongoRouter(mongo_db[1], queue="a", clock=clock, visibility_timeout=10)
    b = MongoRouter(mongo_db[1], queue="b", clock=clock, visibility_timeout=10)
    b.enqueue(job(1))
    (delivery,) = b.receive()
    with caplog.at_level(logging.WARNING):
        a.ack(delivery)
        a.extend(delivery, 1000)
        a.dead_letter(delivery, "not yours")
    assert caplog.text.count("stale receipt") == 3
    assert b.jobs.count_documents({"queue": "b"}) == 1 and a.dead_letters() == []
    b.ack(delivery)
    assert b.jobs.count_documents({}) == 0


@pytest.mark.parametrize("message_id", ['{"$exists": true}', '{"$where": "1"}',
                                        '{"$oid": "zz"}', '{"$numberDecimal": "abc"}',
                                        "[" * 100_000, "x" * 10_000])
def test_a_forged_message_id_in_a_receipt_is_stale_never_a_query(
    router: MongoRouter, message_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An id text that does not parse, or parses to an operator document, names no message:
    the calls are logged no-ops, and the genuine delivery is untouched."""
    router.enqueue(job(1))
    (delivery,) = router.receive()
    lease = str(router.jobs.find_one({})["lease"])
    forged = replace(delivery, receipt=f"{len(message_id)}:{message_id}{lease}")
    with caplog.at_level(logging.WARNING):
        router.ack(forged)
        router.retry(forged, 0)
        router.extend(forged, 5)
        router.dead_letter(forged, "x")
    assert caplog.text.count("stale receipt") == 4
    assert router.jobs.count_documents({}) == 1
    router.ack(delivery)
    assert router.jobs.count_documents({}) == 0


def test_a_body_that_is_neither_text_nor_binary_is_dead_lettered_even_if_it_looks_like_a_job(
    router: MongoRouter,
) -> None:
    """A foreign producer's BSON document body is poison (docs/adapters/mongodb.md,
    "Router"), kept as its Extended JSON text; the job behind it is delivered."""
    router.jobs.insert_one({
        "_id": "foreign", "queue": "q", "body": {"id": "j", "kind": "run", "payload": {}},
        "due_at": router.now(), "lease_until": None, "lease": None, "deliveries": 0,
    })
    router.enqueue(job(2))
    assert [d.job.payload for d in router.receive(max_jobs=5)] == [{"n": 2}]
    (letter,) = router.dead_letters()
    assert "not text or binary" in letter.reason and '"kind": "run"' in str(letter.body)


@pytest.mark.parametrize("deliveries", [float("nan"), float("inf"), 2.5, None, "3"])
def test_a_foreign_delivery_count_never_wedges_the_queue(
    router: MongoRouter, deliveries: Any
) -> None:
    """A document whose ``deliveries`` is not a count is read as a sane count (a number) or
    never claimed (anything else, which ``$inc`` refuses); the jobs behind it are delivered
    (docs/adapters/mongodb.md, "Router")."""
    router.jobs.insert_one({
        "_id": "0-foreign", "queue": "q", "body": job(1).to_json(), "due_at": router.now(),
        "lease_until": None, "lease": None, "deliveries": deliveries,
    })
    router.enqueue(job(2))
    got = router.receive(max_jobs=5)
    numeric = isinstance(deliveries, float)
    assert [d.job.payload["n"] for d in got] == ([1, 2] if numeric else [2])
    assert all(d.delivery_count >= 1 for d in got)


def test_a_raw_message_becomes_due_after_its_delay(router: MongoRouter, clock: ManualClock) -> None:
    """``enqueue_raw``'s ``delay_seconds`` counts from the router clock, like ``enqueue``'s:
    the message is not delivered before the delay and is delivered once it has passed."""
    router.enqueue_raw(job(1).to_json(), delay_seconds=5)
    assert router.receive() == []
    clock.advance(4.9)
    assert router.receive() == []
    clock.advance(0.1)
    assert [d.job.payload for d in router.receive()] == [{"n": 1}]


def test_an_operator_id_text_names_no_message_not_even_one_whose_id_is_null(
    router: MongoRouter, caplog: pytest.LogCaptureFixture
) -> None:
    """A receipt whose id text parses to an operator document (``{"$where": "1"}``) is stale
    even when its lease is the genuine one: it must not fall back to some ``_id`` such as
    ``null``, which another producer may have used (docs/adapters/mongodb.md, "Router")."""
    _foreign(router, None, 1)
    (delivery,) = router.receive()
    stored = router.jobs.find_one({})
    assert stored is not None and stored["_id"] is None
    lease = str(stored["lease"])
    for text in ('{"$where": "1"}', '{"$exists": true}'):
        forged = replace(delivery, receipt=f"{len(text)}:{text}{lease}")
        with caplog.at_level(logging.WARNING):
            router.ack(forged)
            router.dead_letter(forged, "x")
    assert caplog.text.count("stale receipt") == 4
    assert router.jobs.count_documents({}) == 1 and router.dead_letters() == []
    router.ack(delivery)  # the genuine receipt names the null id
    assert router.jobs.count_documents({}) == 0


#: The backends holding a real server (mongomock cannot ``$inc`` a BSON decimal).
SERVERS = ["wire"] + (["real"] if os.environ.get("REACTOR_TEST_MONGODB_URL", "").strip() else [])


@pytest.mark.parametrize("mongo_db", SERVERS, indirect=True)
def test_a_decimal_delivery_count_is_read_as_its_value(router: MongoRouter) -> None:
    """A foreign document may count ``deliveries`` as a BSON decimal (a number to the claim's
    filter, kept decimal by ``$inc``): the delivery count is its value, so a worker's
    ``max_deliveries`` still dead-letters a job that keeps failing (it was read as 1 on every
    delivery); a decimal NaN or infinity is read as 1, like a double's."""
    router.jobs.insert_one({
        "_id": "0-decimal", "queue": "q", "body": job(1).to_json(), "due_at": router.now(),
        "lease_until": None, "lease": None, "deliveries": Decimal128("4"),
    })
    (delivery,) = router.receive()
    assert delivery.delivery_count == 5
    router.retry(delivery, 0)
    assert router.receive()[0].delivery_count == 6
    for n, special in enumerate(("NaN", "Infinity", "-Infinity")):
        router.jobs.insert_one({
            "_id": f"1-{n}", "queue": "q", "body": job(2).to_json(), "due_at": router.now(),
            "lease_until": None, "lease": None, "deliveries": Decimal128(special),
        })
    assert [d.delivery_count for d in router.receive(max_jobs=5)] == [1, 1, 1]


def test_a_waiting_receive_pauses_at_most_half_a_second_by_default(
    mongo_db: tuple[str, Any], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adapters/mongodb.md, "Router": a waiting ``receive`` polls after 50 ms, doubling
    to ``max_poll_interval``, 500 ms by default. The queue records each pause instead of
    sleeping (a queue that can wait is asked to wait the pause), and the sixth pause has a
    job enqueued."""
    pauses: list[float] = []
    routers: list[MongoRouter] = []

    class RecordingQueue(MongoQueue):
        def wait_for_messages(self, timeout: float) -> None:
            pauses.append(timeout)
            if len(pauses) == 6:
                routers[0].enqueue(job(1))

    monkeypatch.setattr(reactor_mongodb.router, "MongoQueue", RecordingQueue)
    routers.append(MongoRouter(mongo_db[1], queue="q", clock=clock))
    assert len(routers[0].receive(wait_seconds=60)) == 1
    assert pauses == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.5, 0.5])


def test_the_router_collections_are_indexed_on_first_use(router: MongoRouter) -> None:
    """The claim's filter and sort (``queue, due_at, _id``), a page of letters (``queue,
    _id``) and a letter's delivery (``message_id, lease``) each have an index from the first
    enqueue on, so no claim or dead-lettering scans a collection."""
    router.enqueue(job(1))

    def keys(collection: Any) -> set[tuple[tuple[str, int], ...]]:
        return {tuple((field, int(order)) for field, order in index["key"])
                for index in collection.index_information().values()}

    assert (("queue", 1), ("due_at", 1), ("_id", 1)) in keys(router.jobs)
    assert {(("queue", 1), ("_id", 1)), (("message_id", 1), ("lease", 1))} <= keys(router.dead)


@pytest.mark.parametrize("cursor", ["7", "letter-7", "12345-abcdef", f"{1:020d}-",
                                    f"{1:020d}-{'a' * 33}", f"{1:020d}-ab_cd",
                                    f"{'x' * 20}-abcdef"])
def test_a_cursor_not_of_the_letter_id_form_is_refused(router: MongoRouter, cursor: str) -> None:
    """A letter id is ``<20 digits>-<1 to 32 letters or digits>``; a dead-letter cursor of
    any other form is refused with ``ValueError`` naming it, whatever part of it is wrong,
    rather than paging from some arbitrary place (docs/protocol.md, "Building a router")."""
    router.enqueue(job(1))
    router.dead_letter(router.receive()[0], "poison")
    with pytest.raises(ValueError, match="bad dead-letter cursor"):
        router.dead_letters(cursor=cursor)
    assert len(router.dead_letters(cursor=f"{0:020d}-0")) == 1  # the form itself pages


def test_a_delivery_is_leased_for_30_seconds_by_default(
    mongo_db: tuple[str, Any], clock: ManualClock
) -> None:
    """Without ``visibility_timeout`` a delivery stays leased for 30 s of the router clock
    (the documented default): not redelivered before, redelivered at 30 s."""
    router = MongoRouter(mongo_db[1], queue="q", clock=clock)
    router.enqueue(job(1))
    (first,) = router.receive()
    clock.advance(29.9)
    assert router.receive() == []
    clock.advance(0.1)
    (second,) = router.receive()
    assert (second.job.id, second.delivery_count) == (first.job.id, 2)


@pytest.mark.parametrize("at", [None, "yesterday", True, float("nan"), float("inf")],
                         ids=["missing", "text", "bool", "nan", "inf"])
def test_a_letter_without_a_readable_time_lists_at_time_0(
    router: MongoRouter, at: Any
) -> None:
    """A letter document another writer left without a usable ``at`` (absent, not a number,
    not finite) or without a reason still lists, gets and requeues; its time reads as 0
    (unknown) and its reason as empty, never as an error or a made-up time."""
    letter_id = f"{3:020d}-0123456789ab"
    document = {"_id": letter_id, "queue": "q", "message_id": "m", "body": job(9).to_json()}
    if at is not None:
        document["at"] = at
    router.dead.insert_one(document)
    (letter,) = router.dead_letters()
    assert (letter.id, letter.reason, letter.at) == (letter_id, "", 0.0)
    assert router.get_dead_letter(letter_id) == letter
    assert router.requeue_dead_letter(letter_id) is not None
    assert [d.job.payload for d in router.receive()] == [{"n": 9}]


def test_a_foreign_message_with_a_long_id_is_acked_and_dead_lettered_like_any_other(
    router: MongoRouter, caplog: pytest.LogCaptureFixture
) -> None:
    """Another producer's ``_id`` may be long (up to the 16 MiB of a document): the receipt
    of such a message names it like any other, so it is retried, acked and dead-lettered
    (docs/adapters/mongodb.md, "Router": any ``_id``). A length cap on the id text of a
    receipt made every call on it a stale no-op: the message came back after every visibility
    timeout, and not even ``max_deliveries`` could dead-letter it."""
    _foreign(router, "k" * 5000, 1)
    (first,) = router.receive()
    with caplog.at_level(logging.WARNING):
        router.retry(first, 0)
        (second,) = router.receive()
        router.ack(second)
    assert second.delivery_count == 2 and router.jobs.count_documents({}) == 0
    _foreign(router, {"key": "v" * 5000}, 2)
    (third,) = router.receive()
    with caplog.at_level(logging.WARNING):
        router.dead_letter(third, "poison")
    assert router.jobs.count_documents({}) == 0
    assert [d.reason for d in router.dead_letters()] == ["poison"]
    assert "stale receipt" not in caplog.text
