"""Router messages written by the previous release are delivered by this one (docs/adapters/
mongodb.md, "Router"): a MongoDB job document still carrying ``job_id`` and ``enqueued_at``, and
a dead letter an earlier requeue claimed (``requeue``, ``requeue_until``)."""

from __future__ import annotations

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
