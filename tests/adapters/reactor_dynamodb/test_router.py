"""SQSRouter on moto's server: long delays, leases, acks, dead letters."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from reactor_dynamodb import router_from_url
from reactor_dynamodb.router import DLQ_LEASE, MAX_SQS_DELAY, SQSRouter

from reactor.errors import RouterError
from reactor.memory.clock import ManualClock
from reactor.ports.capabilities import BoundedNativeDelay
from reactor.ports.router import Job


class Recording:
    """Forwards to a real boto3 client and records ``send_message`` and ``receive_message``
    requests."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    def send_message(self, **request: Any) -> Any:
        self.sent.append(request)
        return self.client.send_message(**request)

    def receive_message(self, **request: Any) -> Any:
        self.received.append(request)
        return self.client.receive_message(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture
def recording(sqs_client: Any) -> Recording:
    return Recording(sqs_client)


@pytest.fixture
def router(recording: Recording, unique: str) -> SQSRouter:
    return SQSRouter(recording, "jobs", prefix=f"t{unique}-", visibility_timeout=1)


def job(n: int = 0) -> Job:
    return Job(kind="run", payload={"n": n})


def counts(router: SQSRouter) -> dict[str, int]:
    attrs = router.client.get_queue_attributes(QueueUrl=router.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    return {
        "visible": int(attrs["ApproximateNumberOfMessages"]),
        "delayed": int(attrs["ApproximateNumberOfMessagesDelayed"]),
        "in_flight": int(attrs["ApproximateNumberOfMessagesNotVisible"]),
    }


def test_delays_beyond_900_seconds_carry_not_before(
    router: SQSRouter, recording: Recording
) -> None:
    router.enqueue(job(), delay_seconds=5000)
    request = recording.sent[-1]
    assert request["DelaySeconds"] == MAX_SQS_DELAY
    not_before = float(request["MessageAttributes"]["not_before"]["StringValue"])
    assert not_before == pytest.approx(time.time() + 5000, abs=5)
    assert json.loads(request["MessageBody"])["not_before"] == pytest.approx(not_before)
    router.enqueue(job(), delay_seconds=2.2)
    assert recording.sent[-1]["DelaySeconds"] == 3
    assert "MessageAttributes" not in recording.sent[-1]


def test_a_lowered_native_delay_limit_splits_delays_into_legs(
    router: SQSRouter, recording: Recording
) -> None:
    assert isinstance(router, BoundedNativeDelay)
    assert router.native_delay_limit == MAX_SQS_DELAY
    router.limit_native_delay(4.2)
    assert router.native_delay_limit == 5
    router.enqueue(job(), delay_seconds=12)
    request = recording.sent[-1]
    assert request["DelaySeconds"] == 5
    assert float(request["MessageAttributes"]["not_before"]["StringValue"]) == pytest.approx(
        time.time() + 12, abs=2
    )
    router.enqueue(job(), delay_seconds=5)
    assert recording.sent[-1]["DelaySeconds"] == 5
    assert "MessageAttributes" not in recording.sent[-1]


@pytest.mark.parametrize("seconds", [0, 0.5, 901, float("nan"), float("inf"), -1])
def test_a_native_delay_limit_outside_sqs_bounds_is_refused(
    router: SQSRouter, seconds: float
) -> None:
    with pytest.raises(ValueError, match="native delay limit must be in"):
        router.limit_native_delay(seconds)
    assert router.native_delay_limit == MAX_SQS_DELAY


def test_a_message_not_yet_due_is_re_deferred_not_held(
    router: SQSRouter, recording: Recording
) -> None:
    # As if its 900 s delay had elapsed with 1000 s still to go.
    due = time.time() + 1000
    recording.client.send_message(
        QueueUrl=router.queue_url,
        MessageBody=job(1).to_json(),
        MessageAttributes={"not_before": {"DataType": "Number", "StringValue": repr(due)}},
    )
    assert router.receive(max_jobs=10) == []
    resent = recording.sent[-1]
    assert resent["DelaySeconds"] == MAX_SQS_DELAY
    assert float(resent["MessageAttributes"]["not_before"]["StringValue"]) == due
    assert counts(router) == {"visible": 0, "delayed": 1, "in_flight": 0}


def test_a_message_whose_not_before_passed_is_delivered(
    router: SQSRouter, recording: Recording
) -> None:
    recording.client.send_message(
        QueueUrl=router.queue_url,
        MessageBody=job(2).to_json(),
        MessageAttributes={
            "not_before": {"DataType": "Number", "StringValue": repr(time.time() - 1)}
        },
    )
    got = router.receive(max_jobs=10)
    assert [d.job.payload["n"] for d in got] == [2]
    router.ack(got[0])
    assert counts(router) == {"visible": 0, "delayed": 0, "in_flight": 0}


def test_a_message_due_this_very_moment_is_delivered_and_one_due_later_re_sent_plain(
    recording: Recording, unique: str
) -> None:
    """A ``not_before`` equal to the clock is due: delivered, not re-deferred. One still
    ahead, within the native delay limit, is re-sent with that delay alone: the copy carries
    no ``not_before`` of its own, which only a delay beyond the limit needs (a manual clock
    makes both exact)."""
    clock = ManualClock(float(int(time.time())))
    router = SQSRouter(recording, "jobs", prefix=f"t{unique}-", visibility_timeout=1,
                       clock=clock)
    for n, due in [(1, clock()), (2, clock() + 500)]:
        recording.client.send_message(
            QueueUrl=router.queue_url, MessageBody=job(n).to_json(),
            MessageAttributes={"not_before": {"DataType": "Number", "StringValue": repr(due)}},
        )
    got = router.receive(max_jobs=10)
    assert [d.job.payload["n"] for d in got] == [1]
    (resent,) = recording.sent
    assert resent["DelaySeconds"] == 500 and "MessageAttributes" not in resent
    assert json.loads(resent["MessageBody"])["payload"] == {"n": 2}
    router.ack(got[0])


def test_batch_receive_and_ack_many(router: SQSRouter) -> None:
    for n in range(12):
        router.enqueue(job(n))
    got = router.receive(max_jobs=12, wait_seconds=1)
    while len(got) < 12:
        more = router.receive(max_jobs=12 - len(got), wait_seconds=1)
        assert more, "messages went missing"
        got += more
    assert sorted(d.job.payload["n"] for d in got) == list(range(12))
    router.ack_many(got)
    assert counts(router)["in_flight"] == 0


def test_extend_keeps_a_delivery_hidden_and_retry_brings_it_back(router: SQSRouter) -> None:
    router.enqueue(job())
    delivery = router.receive(wait_seconds=1)[0]
    router.extend(delivery, 60)
    # A long poll wakes as soon as a message becomes visible: without the extension the
    # 1 s visibility would lapse inside this 2 s wait and the message would come back.
    assert router.receive(wait_seconds=2) == []
    router.retry(delivery, 0)
    again = router.receive(wait_seconds=1)
    assert [d.job.id for d in again] == [delivery.job.id]
    assert again[0].delivery_count == 2
    router.ack(again[0])


def test_stale_receipts_are_logged_not_raised(
    router: SQSRouter, caplog: pytest.LogCaptureFixture
) -> None:
    router.enqueue(job())
    delivery = router.receive(wait_seconds=1)[0]
    router.ack(delivery)
    with caplog.at_level(logging.WARNING):
        router.extend(delivery, 5)  # the message is gone: the receipt is stale
        router.retry(delivery, 1)
        router.ack(delivery)
    assert "extend ignored" in caplog.text
    assert counts(router) == {"visible": 0, "delayed": 0, "in_flight": 0}


def test_undecodable_messages_go_to_the_dlq_with_a_reason(router: SQSRouter) -> None:
    router.enqueue_raw("{garbage")
    router.enqueue(job(5))
    got = router.receive(max_jobs=10, wait_seconds=1)
    assert [d.job.payload["n"] for d in got] == [5]
    router.dead_letter(got[0], "unknown reactor 'nope'")
    first = router.dead_letters()
    assert [d.body for d in first] == ["{garbage", got[0].job.to_json()]
    assert "undecodable" in first[0].reason
    assert first[1].reason == "unknown reactor 'nope'"
    assert first[0].at <= first[1].at
    assert router.dead_letters() == first  # reading does not delete
    assert router.receive(wait_seconds=0) == []


def test_factory_reads_options_and_ignores_unknown_settings(moto_url: str, unique: str) -> None:
    built = router_from_url(
        f"sqs://q?region=us-east-1&endpoint_url={moto_url}&prefix=f{unique}-&visibility_timeout=7",
        visibility_timeout=30,
        context_ttl=5,
    )
    try:
        assert isinstance(built, SQSRouter)
        assert built.name == f"f{unique}-q"
        assert built.dlq_name == f"f{unique}-q-dlq"
        assert built.visibility_timeout == 7
    finally:
        built.close()


def test_bad_delays_are_rejected(router: SQSRouter) -> None:
    with pytest.raises(ValueError):
        router.enqueue(job(), delay_seconds=-1)
    with pytest.raises(ValueError):
        router.enqueue(job(), delay_seconds=float("nan"))


def test_dead_letters_sent_by_the_previous_release_are_listed_requeued_and_purged(
    router: SQSRouter, recording: Recording
) -> None:
    """A DLQ message sent before copies were tagged with their delivery (no ``delivery``
    attribute) is a dead letter of its own: listed, requeued once and purged."""
    old = job(7)
    recording.client.send_message(
        QueueUrl=router.dlq_url, MessageBody=old.to_json(),
        MessageAttributes={
            "reason": {"DataType": "String", "StringValue": "poison (previous release)"},
            "at": {"DataType": "Number", "StringValue": repr(time.time() - 60)},
        },
    )
    router.enqueue(job(8))
    delivery = router.receive(max_jobs=1, wait_seconds=1)[0]
    router.dead_letter(delivery, "poison (this release)")
    letters = router.dead_letters()
    assert sorted(d.reason for d in letters) == ["poison (previous release)",
                                                 "poison (this release)"]
    previous = next(d for d in letters if d.reason == "poison (previous release)")
    assert router.requeue_dead_letter(previous.id) is not None
    assert [d.reason for d in router.dead_letters()] == ["poison (this release)"]
    got = router.receive(max_jobs=1, wait_seconds=1)
    assert [d.job.payload["n"] for d in got] == [7]
    assert router.purge_dead_letters() == 1
    assert router.dead_letters() == []


def test_a_page_of_dead_letters_reads_the_dlq_only_until_it_has_enough(
    router: SQSRouter, recording: Recording
) -> None:
    """Without a cursor, a page of dead letters stops scanning the DLQ once it has read as
    many letters as it lists (module docstring, the limits): a page of 2 out of 15 takes one
    receive of 10, which does not wait and leases what it read for ``DLQ_LEASE`` seconds;
    those are made visible again at once, so the next page sees all 15."""
    for n in range(15):
        recording.client.send_message(
            QueueUrl=router.dlq_url, MessageBody=job(n).to_json(),
            MessageAttributes={
                "reason": {"DataType": "String", "StringValue": f"poison {n}"},
                "at": {"DataType": "Number", "StringValue": repr(1_000.0 + n)},
            },
        )
    assert len(router.dead_letters(limit=2)) == 2
    scans = [r for r in recording.received if r["QueueUrl"] == router.dlq_url]
    assert [(r["MaxNumberOfMessages"], r["WaitTimeSeconds"], r["VisibilityTimeout"])
            for r in scans] == [(10, 0, DLQ_LEASE)]
    assert len(router.dead_letters(limit=100)) == 15


def test_an_older_receipt_stays_stale_after_the_newer_delivery_settled(
    router: SQSRouter, caplog: pytest.LogCaptureFixture
) -> None:
    """The stale-receipt rule holds after the redelivery was retried or acked, and a receipt
    given back by ``retry`` is revoked (docs/adapters/dynamodb.md, "Router"): neither loses
    or moves the job (an outside attack lost the job this way)."""
    router.enqueue(job(1))
    (first,) = router.receive(wait_seconds=2)
    (second,) = router.receive(wait_seconds=5)  # the long poll ends when the 1 s lease lapses
    router.retry(second, 3)
    with caplog.at_level(logging.WARNING):
        router.ack(first)
        router.dead_letter(first, "stale")
        router.ack(second)  # revoked by its own retry
    assert caplog.text.count("stale receipt") == 3
    assert router.dead_letters() == []
    again = router.receive(wait_seconds=6)
    assert [d.job.payload["n"] for d in again] == [1] and again[0].delivery_count == 3
    router.ack(again[0])


def test_a_retry_through_a_receipt_received_again_since_is_logged_and_changes_nothing(
    router: SQSRouter, recording: Recording, caplog: pytest.LogCaptureFixture
) -> None:
    """A retry through a receipt whose message was received again since (its lease lapsed)
    is a stale receipt (docs/adapters/dynamodb.md, "Router"): logged, nothing re-sent, and
    the newer delivery still settles the job."""
    router.enqueue(job(9))
    (first,) = router.receive(wait_seconds=2)
    (second,) = router.receive(wait_seconds=5)  # the long poll ends when the 1 s lease lapses
    sent = len(recording.sent)
    with caplog.at_level(logging.WARNING):
        router.retry(first, 0)
    assert f"for job {first.job.id}: retry ignored" in caplog.text
    assert len(recording.sent) == sent
    router.ack(second)
    assert f"for job {second.job.id}: ack ignored" not in caplog.text


def test_a_receive_of_more_than_ten_takes_several_batches(router: SQSRouter) -> None:
    """SQS hands out 10 messages per request; a receive of more asks again until a batch
    comes back short."""
    for n in range(15):
        router.enqueue(job(n))
    got = router.receive(max_jobs=15)  # moto hands out every visible message (SQS samples)
    assert sorted(d.job.payload["n"] for d in got) == list(range(15))
    router.ack_many(got)


def test_a_foreign_deliveries_attribute_is_bounded(
    router: SQSRouter, recording: Recording
) -> None:
    for value in ("-5", "1e30"):
        recording.client.send_message(
            QueueUrl=router.queue_url, MessageBody=job(1).to_json(),
            MessageAttributes={"deliveries": {"DataType": "Number", "StringValue": value}},
        )
    counts_seen = sorted(d.delivery_count for d in router.receive(max_jobs=10, wait_seconds=1))
    assert counts_seen[0] == 1 and counts_seen[-1] <= 1_000_001


def test_a_foreign_deliveries_attribute_that_is_no_finite_number_is_ignored(
    router: SQSRouter, recording: Recording
) -> None:
    """A ``deliveries`` attribute that does not read as a finite number (a foreign producer's
    text, NaN, an infinity) adds nothing to the receive count."""
    for value in ("many", "NaN", "-inf"):
        recording.client.send_message(
            QueueUrl=router.queue_url, MessageBody=job(1).to_json(),
            MessageAttributes={"deliveries": {"DataType": "String", "StringValue": value}},
        )
    got = router.receive(max_jobs=10, wait_seconds=1)
    assert [d.delivery_count for d in got] == [1, 1, 1]
    router.ack_many(got)


def test_a_retry_sqs_refuses_as_stale_is_logged_and_changes_nothing(
    router: SQSRouter, caplog: pytest.LogCaptureFixture
) -> None:
    """A retry whose ``ChangeMessageVisibility`` SQS refuses (the message was deleted: here
    acked, as another holder of the receipt would) is a stale receipt: logged, not raised,
    nothing re-sent (docs/adapters/dynamodb.md, "Router")."""
    router.enqueue(job(3))
    (delivery,) = router.receive(wait_seconds=1)
    router.ack(delivery)
    sent = len(router.client.sent)
    with caplog.at_level(logging.WARNING):
        router.retry(delivery, 1)
    assert f"for job {delivery.job.id}: retry ignored" in caplog.text
    assert len(router.client.sent) == sent
    assert router.queue_stats().in_flight == 0


def test_a_retry_of_exactly_the_native_delay_limit_keeps_the_message(
    recording: Recording, unique: str
) -> None:
    """A retry of up to the native delay limit (900 s, the limit included) sets the message's
    visibility: the same message, in flight, with its receive count; only a longer delay is
    re-sent (docs/adapters/dynamodb.md, "Router", Extend/Retry). A manual clock makes the
    delay exactly the limit."""
    clock = ManualClock(float(int(time.time())))
    router = SQSRouter(recording, "jobs", prefix=f"t{unique}-", visibility_timeout=1,
                       clock=clock)
    router.enqueue(job(4))
    (delivery,) = router.receive(wait_seconds=1)
    sent = len(recording.sent)
    router.retry(delivery, MAX_SQS_DELAY)
    assert len(recording.sent) == sent  # nothing re-sent
    stats = router.queue_stats()
    assert (stats.in_flight, stats.delayed) == (1, 0)


def test_a_short_retry_keeps_the_message_in_flight(
    router: SQSRouter, recording: Recording
) -> None:
    """A retry shorter than the native delay limit sets the message's visibility: nothing is
    re-sent, and the message stays in flight until its delay is over."""
    router.enqueue(job(6))
    (delivery,) = router.receive(wait_seconds=1)
    sent = len(recording.sent)
    router.retry(delivery, 3)
    assert len(recording.sent) == sent
    stats = router.queue_stats()
    assert (stats.in_flight, stats.delayed, stats.ready) == (1, 0, 0)


def test_a_stats_or_ping_failure_is_a_router_error(router: SQSRouter) -> None:
    """``reactor ping`` and ``reactor info`` get a :class:`RouterError` naming the failed
    call when SQS refuses ``GetQueueAttributes`` (here: the queue was deleted)."""
    router.client.delete_queue(QueueUrl=router.queue_url)
    with pytest.raises(RouterError, match="SQS GetQueueAttributes failed"):
        router.ping()
    with pytest.raises(RouterError, match="SQS GetQueueAttributes failed"):
        router.queue_stats()


class _EndlessQueue:
    """An SQS client stand-in whose queue always has fresh messages (``m<n>``), and which
    delivers ``again`` a second time, under a new receipt, on the next receive."""

    def __init__(self) -> None:
        self.received = 0
        self.again: str | None = None
        self.bodies: dict[str, str] = {}
        self.deleted: list[str] = []
        self.sent: list[dict[str, Any]] = []
        self.closed = 0
        self.changed: list[str] = []

    def create_queue(self, QueueName: str) -> dict[str, str]:  # noqa: N803 - boto3's names
        return {"QueueUrl": f"https://sqs.invalid/{QueueName}"}

    def receive_message(self, MaxNumberOfMessages: int, **_: Any) -> dict[str, Any]:  # noqa: N803
        messages = []
        for _n in range(MaxNumberOfMessages):
            self.received += 1
            message_id, count = f"m{self.received}", 1
            if self.again is not None:
                message_id, count, self.again = self.again, 2, None
            body = self.bodies.setdefault(message_id, job(self.received).to_json())
            messages.append({
                "MessageId": message_id, "ReceiptHandle": f"r{self.received}", "Body": body,
                "Attributes": {"ApproximateReceiveCount": str(count)},
            })
        return {"Messages": messages}

    def delete_message(self, ReceiptHandle: str, **_: Any) -> None:  # noqa: N803
        self.deleted.append(ReceiptHandle)

    def delete_message_batch(
        self, Entries: list[dict[str, str]], **_: Any  # noqa: N803 - boto3's names
    ) -> dict[str, Any]:
        self.deleted += [entry["ReceiptHandle"] for entry in Entries]
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries]}

    def send_message(self, **request: Any) -> None:
        self.sent.append(request)

    def change_message_visibility(self, ReceiptHandle: str, **_: Any) -> None:  # noqa: N803
        self.changed.append(ReceiptHandle)

    def close(self) -> None:
        self.closed += 1


def test_the_newest_messages_keep_the_stale_receipt_rule_however_many_came_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The queue remembers the newest receipt of the last 10,000 messages it received
    (docs/adapters/dynamodb.md, "Router"): past that many, the oldest are forgotten, never the
    one just received, so a lapsed lease of a recent message stays stale."""
    sqs = _EndlessQueue()
    router = SQSRouter(sqs, "jobs")
    for _batch in range(1_001):  # 10,010 messages
        router.receive(max_jobs=10)
    (first,) = router.receive(max_jobs=1)
    sqs.again = f"m{sqs.received}"
    (second,) = router.receive(max_jobs=1)  # the lease lapsed: delivered again
    assert (second.job.id, second.delivery_count) == (first.job.id, 2)
    with caplog.at_level(logging.WARNING):
        router.ack(first)
    assert sqs.deleted == []
    assert f"for job {first.job.id}: ack ignored" in caplog.text
    router.ack(second)
    assert sqs.deleted == [f"r{sqs.received}"]


def test_a_stale_receipt_never_dead_letters_its_job_once_the_message_is_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A settle refused as stale forgets that receipt's body at once. After 10,000 later
    messages the queue no longer remembers the message's newest receipt, so it cannot tell
    the old receipt stale any more (docs/adapters/dynamodb.md, "Router"); but with no body to
    send, a late ``dead_letter`` through it fails instead of putting a job another delivery
    acked long ago among the dead letters."""
    sqs = _EndlessQueue()
    router = SQSRouter(sqs, "jobs")
    (first,) = router.receive(max_jobs=1)
    sqs.again = f"m{sqs.received}"
    (second,) = router.receive(max_jobs=1)  # the lease lapsed: delivered again
    with caplog.at_level(logging.WARNING):
        router.ack(first)
    assert f"for job {first.job.id}: ack ignored" in caplog.text
    router.ack(second)
    for _batch in range(1_000):  # 10,000 later messages, each acked
        router.ack_many(router.receive(max_jobs=10))
    with pytest.raises(RouterError, match="body is not remembered"):
        router.dead_letter(first, "late")
    assert sqs.sent == []


def test_a_router_closes_only_a_client_it_owns_once_and_its_queue_sends_nothing_after() -> None:
    """``close`` leaves a client the caller lent open and closes one the router owns (a router
    built from a URL) once; the queue refuses to send once closed."""
    lent, owned = _EndlessQueue(), _EndlessQueue()
    SQSRouter(lent, "jobs").close()
    router = SQSRouter(owned, "jobs", owns_client=True)
    router.close()
    router.primitive.close()  # the queue's own close is idempotent too
    assert (lent.closed, owned.closed) == (0, 1)
    with pytest.raises(RouterError, match="closed"):
        router.primitive.send(router.queue_url, job().to_json(), None)
    assert owned.sent == []


def test_the_queue_remembers_the_bodies_of_its_last_10000_receipts_only() -> None:
    """The bodies of claimed messages are kept for the last 10,000 receipts, so a long-lived
    router's memory stays bounded. Past them the queue can no longer dead-letter (or re-send)
    a delivery by itself (the router passes its own copy of the job, ``keep_body``), while a
    release within the native delay limit, which sends no body, still goes through."""
    sqs = _EndlessQueue()
    queue = SQSRouter(sqs, "jobs").primitive
    first, second = queue.claim(2, 0.0, 30.0)
    for _batch in range(999):
        queue.claim(10, 0.0, 30.0)
    queue.claim(8, 0.0, 30.0)  # 10,000 receipts held: every body remembered
    assert queue.dead_letter(first.message_id, first.receipt, "poison", 0.0)
    assert len(sqs.sent) == 1
    queue.claim(2, 0.0, 30.0)  # 10,001 held: the oldest body, the second's, is forgotten
    with pytest.raises(RouterError, match="body is not remembered"):
        queue.dead_letter(second.message_id, second.receipt, "late", 0.0)
    assert len(sqs.sent) == 1
    assert queue.release(second.message_id, second.receipt, 0.0)
    assert sqs.changed == [second.receipt]
