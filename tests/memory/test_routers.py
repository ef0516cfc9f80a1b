"""InlineRouter and LocalRouter (docs/protocol.md#routers)."""

from __future__ import annotations

import logging
import threading

import pytest

from reactor.memory import InlineRouter, LocalRouter, ManualClock, router_from_url
from reactor.model.errors import ConfigurationError, DeserializationError, RouterError
from reactor.ports import Job, Router


def job(kind: str = "run", **payload: object) -> Job:
    return Job(kind=kind, payload=payload or {"context_id": "c1"})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def router(clock: ManualClock) -> LocalRouter:
    return LocalRouter(clock=clock, visibility_timeout=30)


# -- LocalRouter: queue semantics ---------------------------------------------------------------


def test_local_router_is_a_router(router: LocalRouter) -> None:
    assert isinstance(router, Router)
    assert isinstance(InlineRouter(), Router)


def test_enqueue_then_receive_and_ack(router: LocalRouter) -> None:
    j = job()
    assert router.enqueue(j) == j.id
    (delivery,) = router.receive(max_jobs=5)
    assert delivery.job == j and delivery.delivery_count == 1
    router.ack(delivery)
    assert router.receive() == [] and router.size() == 0


def test_never_delivers_before_the_delay(router: LocalRouter, clock: ManualClock) -> None:
    j = job()
    router.enqueue(j, delay_seconds=10)
    assert router.receive() == []
    clock.advance(9.99)
    assert router.receive() == []
    clock.advance(0.01)
    (delivery,) = router.receive()
    assert delivery.job.id == j.id
    assert delivery.job.not_before == clock()  # enqueued at clock() - 10 with a 10 s delay


def test_any_delay_works(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue(job(), delay_seconds=7 * 86400)  # far past SQS's 900 s cap
    clock.advance(7 * 86400 - 1)
    assert router.receive() == []
    clock.advance(1)
    assert len(router.receive()) == 1


@pytest.mark.parametrize("delay", [-1, float("inf"), float("nan")])
def test_bad_delays_are_refused(router: LocalRouter, delay: float) -> None:
    with pytest.raises(ValueError):
        router.enqueue(job(), delay)


def test_due_jobs_come_out_in_due_order(router: LocalRouter, clock: ManualClock) -> None:
    late, early = job(name="late"), job(name="early")
    router.enqueue(late, 5)
    router.enqueue(early, 1)
    clock.advance(5)
    assert [d.job.id for d in router.receive(max_jobs=10)] == [early.id, late.id]


def test_redelivers_after_the_visibility_lapses(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue(job())
    (first,) = router.receive()
    clock.advance(29)
    assert router.receive() == []
    clock.advance(1)
    (second,) = router.receive()
    assert second.job.id == first.job.id and second.delivery_count == 2
    assert second.receipt != first.receipt


def test_no_redelivery_after_ack(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue(job())
    (delivery,) = router.receive()
    router.ack(delivery)
    clock.advance(3600)
    assert router.receive() == []


def test_a_stale_receipt_is_logged_not_raised(
    router: LocalRouter, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    router.enqueue(job())
    (first,) = router.receive()
    clock.advance(30)
    (second,) = router.receive()
    with caplog.at_level(logging.WARNING, logger="reactor.memory.routers"):
        router.ack(first)  # the lease lapsed: the second delivery owns the job now
    assert "stale receipt" in caplog.text
    clock.advance(30)
    (third,) = router.receive()  # the stale ack removed nothing
    router.ack(third)
    router.ack(second)  # stale again: nothing raised
    assert router.size() == 0


def test_retry_makes_the_job_visible_after_the_delay(
    router: LocalRouter, clock: ManualClock
) -> None:
    router.enqueue(job())
    (delivery,) = router.receive()
    router.retry(delivery, 5)
    assert router.receive() == []
    clock.advance(5)
    (again,) = router.receive()
    assert again.job.id == delivery.job.id and again.delivery_count == 2
    with pytest.raises(ValueError):
        router.retry(again, -1)


def test_extend_keeps_the_job_invisible(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue(job())
    (delivery,) = router.receive()
    clock.advance(25)
    router.extend(delivery, 60)
    clock.advance(59)
    assert router.receive() == []  # past the original 30 s lease
    router.ack(delivery)  # the receipt survived the extension
    clock.advance(10)
    assert router.receive() == []


def test_dead_letters_keep_the_body_and_reason(router: LocalRouter, clock: ManualClock) -> None:
    j = job()
    router.enqueue(j)
    (delivery,) = router.receive()
    router.dead_letter(delivery, "unknown reactor 'Nope'")
    (dead,) = router.dead_letters()
    assert dead.reason == "unknown reactor 'Nope'"
    assert Job.from_json(dead.body) == j and dead.at == clock()
    clock.advance(3600)
    assert router.receive() == []


def test_undecodable_messages_are_dead_lettered_by_receive(router: LocalRouter) -> None:
    router.enqueue_raw("{not json")
    router.enqueue_raw('{"id": "x", "kind": "run", "payload": []}')
    good = job()
    router.enqueue(good)
    assert [d.job.id for d in router.receive(max_jobs=10)] == [good.id]
    reasons = [d.reason for d in router.dead_letters()]
    assert len(reasons) == 2 and all("undecodable" in r for r in reasons)
    assert [d.body for d in router.dead_letters(limit=1)] == ["{not json"]


def test_poison_bytes_and_deep_json_are_dead_lettered_raw_by_receive(
    router: LocalRouter,
) -> None:
    latin1 = '{"id": "café", "kind": "run", "payload": {}}'.encode("latin-1")
    router.enqueue_raw(latin1)
    router.enqueue_raw("[" * 5000 + "]" * 5000)
    router.enqueue_raw("x" * (256 * 1024 + 1))
    good = job()
    router.enqueue(good)
    assert [d.job.id for d in router.receive(max_jobs=1)] == [good.id]  # one receive
    letters = router.dead_letters()
    assert [letter.body_encoding for letter in letters] == ["base64", "text", "text"]
    assert letters[0].raw_body() == latin1 and "UTF-8" in letters[0].reason
    assert "deeper than" in letters[1].reason
    assert "MAX_ENVELOPE_BYTES" in letters[2].reason


def test_receive_waits_for_a_job_from_another_thread(router: LocalRouter) -> None:
    started = threading.Event()

    def produce() -> None:
        started.wait()
        router.enqueue(job())

    producer = threading.Thread(target=produce)
    producer.start()
    started.set()
    deliveries = router.receive(wait_seconds=5)
    producer.join()
    assert len(deliveries) == 1


def test_closed_router_refuses_jobs(router: LocalRouter) -> None:
    router.close()
    router.close()
    with pytest.raises(RouterError):
        router.enqueue(job())


# -- LocalRouter: worker policy (driven without threads through ``process``) ----------------


def test_worker_acks_after_success(router: LocalRouter) -> None:
    ran: list[Job] = []
    router.enqueue(job())
    (delivery,) = router.receive()
    router.process(delivery, ran.append)
    assert len(ran) == 1 and router.size() == 0


def test_worker_retries_with_backoff(router: LocalRouter, clock: ManualClock) -> None:
    def boom(_: Job) -> None:
        raise RuntimeError("flaky")

    router.enqueue(job())
    (delivery,) = router.receive()
    router.process(delivery, boom)
    clock.advance(0.99)
    assert router.receive() == []  # default backoff: 1 s after the first delivery
    clock.advance(0.01)
    (again,) = router.receive()
    router.process(again, boom)
    clock.advance(1.99)
    assert router.receive() == []  # then 2 s
    clock.advance(0.01)
    assert len(router.receive()) == 1


def test_worker_dead_letters_poison(router: LocalRouter) -> None:
    def poison(_: Job) -> None:
        raise DeserializationError("bad payload")

    router.enqueue(job())
    router.enqueue(job(kind="teleport"))
    first, second = router.receive(max_jobs=2)
    router.process(first, poison)
    router.process(second, lambda _: None)
    reasons = [d.reason for d in router.dead_letters()]
    assert reasons == ["undecodable job payload: bad payload", "unknown job kind 'teleport'"]
    assert router.size() == 0


def test_worker_gives_up_after_max_deliveries(clock: ManualClock) -> None:
    router = LocalRouter(clock=clock, max_deliveries=2, backoff=lambda n: 0.0)

    def boom(_: Job) -> None:
        raise RuntimeError("always")

    router.enqueue(job())
    router.process(router.receive()[0], boom)
    router.process(router.receive()[0], boom)
    (dead,) = router.dead_letters()
    assert "2 deliveries" in dead.reason and "RuntimeError: always" in dead.reason
    assert router.receive() == []


def test_worker_threads_survive_poison_and_run_good_jobs() -> None:
    router = LocalRouter(backoff=lambda n: 0.0)
    done = threading.Event()
    seen: list[str] = []

    def handler(j: Job) -> None:
        if j.payload.get("poison"):
            raise DeserializationError("poison")
        seen.append(j.id)
        if len(seen) == 3:
            done.set()

    router.enqueue_raw("garbage")
    router.enqueue(job(kind="nope"))
    router.enqueue(job(poison=True))
    good = [job(n=i) for i in range(3)]
    for j in good:
        router.enqueue(j)
    router.start_workers(2, handler, poll_seconds=0.01)
    try:
        assert done.wait(10)
    finally:
        router.stop()
    assert sorted(seen) == sorted(j.id for j in good)
    assert len(router.dead_letters()) == 3
    assert router.size() == 0


def test_a_job_held_by_a_worker_is_not_redelivered(
    router: LocalRouter, clock: ManualClock
) -> None:
    router.enqueue(job())
    (delivery,) = router.receive()
    redelivered: list[int] = []

    def slow(_: Job) -> None:
        clock.advance(120)  # far past the 30 s visibility
        redelivered.append(len(router.receive()))

    router.process(delivery, slow)
    assert redelivered == [0] and router.size() == 0


# -- InlineRouter ------------------------------------------------------------------------------


def test_inline_runs_at_once_in_the_caller() -> None:
    ran: list[tuple[str, str]] = []
    router = InlineRouter()
    router.bind(lambda j: ran.append((j.id, threading.current_thread().name)))
    j = job()
    assert router.enqueue(j) == j.id
    assert ran == [(j.id, threading.current_thread().name)]


def test_inline_nested_enqueues_run_after_the_current_job() -> None:
    order: list[str] = []
    router = InlineRouter()

    def handler(j: Job) -> None:
        name = str(j.payload["name"])
        order.append(f"start {name}")
        if name == "parent":
            router.enqueue(job(name="child1"))
            router.enqueue(job(name="child2"))
        order.append(f"end {name}")

    router.bind(handler)
    router.enqueue(job(name="parent"))
    assert order == [
        "start parent", "end parent", "start child1", "end child1", "start child2", "end child2",
    ]


def test_inline_long_chains_do_not_recurse() -> None:
    router = InlineRouter()
    count = [0]

    def handler(j: Job) -> None:
        count[0] += 1
        if count[0] < 5000:
            router.enqueue(job(n=count[0]))

    router.bind(handler)
    router.enqueue(job())
    assert count[0] == 5000


def test_inline_delays_wait_for_run_due(clock: ManualClock) -> None:
    ran: list[Job] = []
    router = InlineRouter(ran.append, clock=clock)
    j = job()
    router.enqueue(j, delay_seconds=10)
    assert ran == []
    (pending,) = router.pending()
    assert pending.not_before == clock() + 10
    clock.advance(9)
    assert router.run_due() == 0
    clock.advance(1)
    assert router.run_due() == 1 and [r.id for r in ran] == [j.id]
    assert router.pending() == []


def test_inline_drain_ignores_delays(clock: ManualClock) -> None:
    ran: list[str] = []
    router = InlineRouter(lambda j: ran.append(str(j.payload["name"])), clock=clock)
    router.enqueue(job(name="b"), 20)
    router.enqueue(job(name="a"), 10)
    assert router.drain() == 2 and ran == ["a", "b"]


def test_inline_drain_is_bounded() -> None:
    router = InlineRouter()
    router.bind(lambda j: router.enqueue(j, 1))  # re-parks itself forever
    router.enqueue(job(), 1)
    assert router.drain(max_jobs=50) == 50


def test_inline_dead_letters_unknown_kinds_and_poison() -> None:
    def handler(j: Job) -> None:
        raise DeserializationError("cannot read payload")

    router = InlineRouter(handler)
    router.enqueue(job(kind="nope"))
    router.enqueue(job())
    assert [d.reason for d in router.dead_letters()] == [
        "unknown job kind 'nope'", "undecodable job payload: cannot read payload",
    ]


def test_inline_handler_errors_propagate() -> None:
    def handler(j: Job) -> None:
        raise RuntimeError("step blew up")

    router = InlineRouter(handler)
    with pytest.raises(RuntimeError, match="blew up"):
        router.enqueue(job())


def test_inline_without_handler_keeps_jobs_for_receive(clock: ManualClock) -> None:
    router = InlineRouter(clock=clock)
    j = job()
    router.enqueue(j)
    (delivery,) = router.receive()
    assert delivery.job.id == j.id
    router.retry(delivery, 5)
    assert router.receive() == []
    clock.advance(5)
    (again,) = router.receive()
    router.dead_letter(again, "testing")
    assert [d.reason for d in router.dead_letters()] == ["testing"]


def test_inline_retry_keeps_the_delivery_count(clock: ManualClock) -> None:
    router = InlineRouter(clock=clock)
    j = job()
    router.enqueue(j)
    (first,) = router.receive()
    router.retry(first, 1)
    clock.advance(1)
    (second,) = router.receive()
    router.retry(second, 0)
    (third,) = router.receive()
    assert [first.delivery_count, second.delivery_count, third.delivery_count] == [1, 2, 3]
    router.ack(third)
    router.enqueue(j)  # a new message with the same job: counted afresh
    assert [d.delivery_count for d in router.receive()] == [1]


# -- URLs ------------------------------------------------------------------------------------------


def test_router_from_url() -> None:
    assert isinstance(router_from_url("inline://?prefix=p"), InlineRouter)
    local = router_from_url(
        "local://?workers=4&visibility_timeout=12.5&prefix=p", visibility_timeout=99
    )
    assert isinstance(local, LocalRouter)
    assert (local.workers, local.visibility_timeout) == (4, 12.5)
    defaulted = router_from_url("local://", visibility_timeout=45.0, context_ttl=5)
    assert isinstance(defaulted, LocalRouter) and defaulted.visibility_timeout == 45.0


@pytest.mark.parametrize(
    "url",
    ["redis://x", "local://?workers=-1", "local://?visibility_timeout=0", "local://?bogus=1",
     "inline://?workers=1", "local://host"],
)
def test_router_from_url_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        router_from_url(url)
