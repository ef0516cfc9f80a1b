"""Router messages written by the previous release are delivered by this one (docs/adapters/
mongodb.md, "Router"; docs/adapters/redis.md): a MongoDB job document still carrying ``job_id``
and ``enqueued_at``, a dead letter an earlier requeue claimed (``requeue``, ``requeue_until``),
and the Redis router's stream entries, delayed members and dead letters."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import mongomock
from reactor_mongodb.router import MongoRouter

from reactor.memory.clock import ManualClock
from reactor.ports.router import Job


def test_a_previous_release_job_document_and_claimed_letter_are_delivered() -> None:
    clock = ManualClock(1_800_000_000.0)
    router = MongoRouter(mongomock.MongoClient()["compat"], queue="q", clock=clock)
    old, lettered = Job(kind="run", payload={"n": 1}), Job(kind="run", payload={"n": 2})
    router.jobs.insert_one({
        "_id": f"{1:020d}-0123456789ab", "queue": "q", "job_id": old.id, "body": old.to_json(),
        "due_at": clock(), "lease_until": None, "lease": None, "deliveries": 0,
        "enqueued_at": clock(),
    })
    router.dead.insert_one({
        "_id": f"{2:020d}-0123456789ab", "queue": "q", "message_id": "m", "lease": "x",
        "body": lettered.to_json(), "reason": "poison", "at": clock(), "requeue": "t",
        "requeue_until": clock() + 30,
    })
    assert router.requeue_dead_letter(f"{2:020d}-0123456789ab") == lettered.id
    got = router.receive(max_jobs=5)
    assert [d.job.id for d in got] == [old.id, lettered.id]
    for delivery in got:
        router.ack(delivery)
    assert router.jobs.count_documents({}) == 0 and router.dead_letters() == []


def test_a_previous_release_redis_stream_entry_delayed_member_and_letter_are_read(
    service_url: Callable[[str], str],
) -> None:
    """Redis keeps its stored shapes across the move onto the queue toolkit (docs/adapters/
    redis.md): a stream entry a retry wrote (``body`` + ``n``), a delayed member of a retried
    job (``#<n>#<body>``), and a dead letter (``body``, ``reason``, ``at`` in ms) are read."""
    import reactor_redis  # installed by scripts/test: fail, never skip

    url = service_url("redis")
    router = reactor_redis.router_from_url(
        f"{url}{'&' if '?' in url else '?'}prefix=compat{uuid.uuid4().hex[:8]}")
    try:
        stream, delayed, dead, _ = router.primitive._keys
        retried, waiting = Job(kind="run", payload={"n": 1}), Job(kind="run", payload={"n": 2})
        lettered = Job(kind="run", payload={"n": 3})
        router.client.xadd(stream, {"body": retried.to_json(), "n": "2"})
        router.client.zadd(delayed, {f"#4#{waiting.to_json()}": 0})
        router.client.xadd(dead, {"body": lettered.to_json(), "reason": "poison", "at": "1500"})
        got = router.receive(max_jobs=5)
        assert sorted((d.job.id, d.delivery_count) for d in got) == sorted(
            [(retried.id, 3), (waiting.id, 5)])
        [letter] = router.dead_letters()
        assert (letter.reason, letter.at, letter.to_job().id) == ("poison", 1.5, lettered.id)
        for delivery in got:
            router.ack(delivery)
        assert router.requeue_dead_letter(letter.id) == lettered.id
        assert [(d.job.id, d.delivery_count) for d in router.receive(max_jobs=5)] == [
            (lettered.id, 1)]
    finally:
        router.client.delete(*router.primitive._keys)
        router.close()
