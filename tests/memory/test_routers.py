"""InlineRouter and LocalRouter, and the ``memqueue://`` URL (docs/protocol.md#routers)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.errors import ConfigurationError, DeserializationError, RouterError
from reactor.generic.router import GenericRouter
from reactor.jobs import handlers
from reactor.jobs.worker import Worker
from reactor.memory import (
    InlineRouter,
    LocalRouter,
    ManualClock,
    MemoryQueue,
    MemoryStorage,
    router_from_url,
)
from reactor.ports import Delivery, Job, Router
from reactor.ports.capabilities import (
    HostsEmbeddedWorkers,
    InProcess,
    KnowsConsumers,
    RunsJobsInline,
    in_process,
)
from reactor.ports.payloads import SweepPayload
from reactor.ports.payloads import job as payload_job
from reactor.ports.router import DeadLetterAdmin, JobSink, JobSource


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


def test_the_in_process_routers_declare_their_capabilities(router: LocalRouter) -> None:
    inline = InlineRouter()
    for each in (router, inline):
        assert isinstance(each, JobSink) and isinstance(each, JobSource)
        assert isinstance(each, DeadLetterAdmin) and isinstance(each, InProcess)
    assert isinstance(router, HostsEmbeddedWorkers) and isinstance(router, KnowsConsumers)
    assert not isinstance(router, RunsJobsInline)
    assert isinstance(inline, RunsJobsInline)
    assert not isinstance(inline, HostsEmbeddedWorkers | KnowsConsumers)
    assert isinstance(router, GenericRouter) and isinstance(router.primitive, MemoryQueue)


def test_receive_count_and_consumers(router: LocalRouter) -> None:
    started: list[str] = []
    assert (router.receive_count, router.has_consumers) == (0, False)
    router.receive()
    router.receive()
    assert router.receive_count == 2
    router.attach_consumers(lambda: started.append("start"), lambda: started.append("stop"))
    assert started == [] and not router.has_consumers  # nothing queued: not started yet
    router.enqueue(job())
    router.enqueue(job())
    assert started == ["start"] and router.has_consumers  # started once, by the first enqueue
    router.close()
    assert started == ["start", "stop"] and not router.has_consumers
    with pytest.raises(RouterError):
        router.attach_consumers(lambda: None, lambda: None)


def test_consumers_attached_after_jobs_were_queued_start_at_once(router: LocalRouter) -> None:
    started: list[str] = []
    router.enqueue(job())
    router.attach_consumers(lambda: started.append("start"), lambda: None)
    assert started == ["start"]


def test_a_closing_router_ends_a_waiting_receive() -> None:
    router = LocalRouter(workers=0)
    waiting = threading.Event()
    got: list[list[Delivery]] = []

    def consume() -> None:
        waiting.set()
        got.append(router.receive(wait_seconds=30))

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert waiting.wait(10)
    router.close()
    consumer.join(10)
    assert not consumer.is_alive() and got == [[]]


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
    with caplog.at_level(logging.WARNING, logger="reactor.generic.router"):
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


# -- LocalRouter under the real Worker (the router runs no jobs itself) ------------------------
#
# The worker policy (ack, retry with backoff, dead-letter poison, give up after max_deliveries,
# keep a running job leased) belongs to reactor.jobs.worker.Worker, which drives any router
# through its consumer side; these tests run it over LocalRouter with a stub ``sweep`` handler.


def _sweep(window: int = 0) -> Job:
    return payload_job(SweepPayload(window=window))


@pytest.fixture
def runtime(router: LocalRouter, clock: ManualClock) -> Iterator[Runtime]:
    rt = config.configure(storage=MemoryStorage(clock=clock), router=router)
    yield rt
    config.reset()


def _stub(monkeypatch: pytest.MonkeyPatch, handler: Callable[[Job], None]) -> None:
    """Make the worker run ``handler(job)`` for every ``sweep`` job."""

    def run(jc: handlers.JobContext, payload: object) -> None:
        handler(jc.job)

    monkeypatch.setitem(handlers.HANDLERS, "sweep", run)


def test_a_worker_acks_after_success(
    router: LocalRouter, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Job] = []
    _stub(monkeypatch, ran.append)
    router.enqueue(_sweep())
    assert Worker(runtime).run_pending() == 1
    assert len(ran) == 1 and router.size() == 0


def test_a_worker_retries_with_backoff(
    router: LocalRouter, runtime: Runtime, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(_: Job) -> None:
        raise RuntimeError("flaky")

    _stub(monkeypatch, boom)
    worker = Worker(runtime)
    router.enqueue(_sweep())
    assert worker.run_pending() == 1
    clock.advance(0.99)
    assert router.receive() == []  # default backoff: 1 s after the first delivery
    clock.advance(0.01)
    (again,) = router.receive()
    assert again.delivery_count == 2
    worker.process(again)
    clock.advance(1.99)
    assert router.receive() == []  # then 2 s
    clock.advance(0.01)
    assert [d.delivery_count for d in router.receive()] == [3]
    assert worker.retried == 2


def test_a_worker_dead_letters_poison_and_unknown_kinds(
    router: LocalRouter, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def poison(_: Job) -> None:
        raise DeserializationError("bad payload")

    _stub(monkeypatch, poison)
    router.enqueue(_sweep())
    router.enqueue(job(kind="teleport"))
    assert Worker(runtime).run_pending() == 2
    reasons = [d.reason for d in router.dead_letters()]
    assert reasons == [
        "DeserializationError: bad payload",
        "DeserializationError: unknown job kind 'teleport'",
    ]
    assert router.size() == 0


def test_a_worker_gives_up_after_max_deliveries(
    router: LocalRouter, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(_: Job) -> None:
        raise RuntimeError("always")

    _stub(monkeypatch, boom)
    router.enqueue(_sweep())
    worker = Worker(runtime, max_deliveries=2, backoff=lambda n: 0.0)
    assert worker.run_pending() == 2
    (dead,) = router.dead_letters()
    assert dead.reason == "handler failed on 2 deliveries: RuntimeError: always"
    assert router.receive() == [] and router.size() == 0


def test_worker_threads_survive_poison_and_run_good_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    router = LocalRouter(workers=0)
    done = threading.Event()
    seen: list[int] = []

    def handler(j: Job) -> None:
        window = int(j.payload["window"])
        if window == 99:
            raise DeserializationError("poison")
        seen.append(window)
        if len(seen) == 3:
            done.set()

    _stub(monkeypatch, handler)
    router.enqueue_raw("garbage")
    router.enqueue(job(kind="nope"))
    router.enqueue(_sweep(99))
    for window in range(3):
        router.enqueue(_sweep(window))
    runtime = config.configure(storage=MemoryStorage(), router=router)
    worker = Worker(runtime, threads=2, poll_seconds=0.01, liveness_wait=0.0)
    worker.start()
    try:
        assert done.wait(10)
    finally:
        assert worker.stop(timeout=10)
        config.reset()
    assert sorted(seen) == [0, 1, 2]
    assert len(router.dead_letters()) == 3
    assert router.size() == 0


class _ExtendRecorder(LocalRouter):
    """Counts the extends of the worker's heartbeat."""

    # 3 s: extended every second, so an extend may come 2 s late on a loaded machine before the
    # lease lapses and another receive would see the job
    def __init__(self, extends_wanted: int) -> None:
        super().__init__(visibility_timeout=3.0, workers=0)
        self.extended = threading.Semaphore(0)
        self.extends_wanted = extends_wanted

    def extend(self, delivery: Delivery, seconds: float) -> None:
        super().extend(delivery, seconds)
        self.extended.release()


def test_a_job_a_worker_runs_is_kept_leased_by_its_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The router keeps no lease for a running job: the worker's heartbeat extends it every
    third of the visibility, so nobody else receives the job while it runs, however long."""
    router = _ExtendRecorder(extends_wanted=4)  # 4 x 1 s: past the 3 s first lease
    seen_by_other: list[list[Delivery]] = []

    def slow(_: Job) -> None:
        for _ in range(router.extends_wanted):
            assert router.extended.acquire(timeout=10), "the heartbeat never extended"
        seen_by_other.append(router.receive())  # right after an extend: leased for 3 s

    _stub(monkeypatch, slow)
    router.enqueue(_sweep())
    runtime = config.configure(storage=MemoryStorage(), router=router)
    try:
        assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    finally:
        config.reset()
    assert seen_by_other == [[]] and router.size() == 0


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


def test_inline_bound_tells_whether_a_handler_is_bound() -> None:
    router = InlineRouter()
    assert router.bound is False
    router.bind(lambda j: None)
    assert router.bound is True


def test_inline_run_due_runs_jobs_overdue_by_any_amount(clock: ManualClock) -> None:
    ran: list[str] = []
    router = InlineRouter(lambda j: ran.append(str(j.payload["name"])), clock=clock)
    router.enqueue(job(name="a"), 1)
    router.enqueue(job(name="b"), 2)
    clock.advance(50)  # long past both
    assert router.run_due() == 2 and ran == ["a", "b"]


def test_inline_run_due_runs_the_due_jobs_before_later_ones(clock: ManualClock) -> None:
    ran: list[str] = []
    router = InlineRouter(lambda j: ran.append(str(j.payload["name"])), clock=clock)
    router.enqueue(job(name="soon"), 1)
    router.enqueue(job(name="later"), 100)
    clock.advance(5)
    assert router.run_due() == 1 and ran == ["soon"]


def test_inline_without_handler_run_due_and_drain_leave_jobs_for_receive(
    clock: ManualClock,
) -> None:
    router = InlineRouter(clock=clock)
    router.enqueue(job(name="a"))
    router.enqueue(job(name="b"), 5)
    clock.advance(10)
    assert router.run_due() == 0 and router.drain() == 0
    assert sorted(str(d.job.payload["name"]) for d in router.receive(max_jobs=5)) == ["a", "b"]


def test_inline_enqueue_without_handler_keeps_the_jobs_own_not_before(clock: ManualClock) -> None:
    router = InlineRouter(clock=clock)
    later = Job(kind="run", payload={"context_id": "c1"}, not_before=clock() + 30)
    router.enqueue(later)
    (pending,) = router.pending()
    assert pending.not_before == clock() + 30


def test_inline_receive_leases_at_most_max_jobs_of_the_due_ones(clock: ManualClock) -> None:
    router = InlineRouter(clock=clock)
    for name in ("a", "b", "c"):
        router.enqueue(job(name=name), 1)
    router.enqueue(job(name="late"), 100)
    assert router.receive(max_jobs=5) == []  # none due yet
    clock.advance(10)  # "a".."c" overdue, "late" not
    first = router.receive(max_jobs=2)
    assert [d.job.payload["name"] for d in first] == ["a", "b"]
    assert router.receive(max_jobs=0) == [] and router.receive(max_jobs=-1) == []
    assert [d.job.payload["name"] for d in router.receive(max_jobs=1)] == ["c"]
    assert router.receive(max_jobs=5) == []


def test_inline_drain_stops_at_its_bound_when_a_job_runs_several_at_once() -> None:
    router = InlineRouter()
    runs = [0]

    def handler(j: Job) -> None:  # each run of "a" runs "b" too, and re-parks "a"
        runs[0] += 1
        assert runs[0] < 100, "drain ran past its bound"
        if j.payload["name"] == "a":
            router.enqueue(job(name="b"))
            router.enqueue(job(name="a"), 1)

    router.bind(handler)
    router.enqueue(job(name="a"), 1)
    assert router.drain(max_jobs=3) == 4  # 2 + 2: the bound is checked between due jobs


def test_inline_a_dead_lettered_unknown_kind_does_not_stop_the_jobs_queued_behind_it() -> None:
    ran: list[str] = []
    router = InlineRouter()

    def handler(j: Job) -> None:
        ran.append(str(j.payload.get("name")))
        if j.payload.get("name") == "first":
            router.enqueue(job(kind="nope"))
            router.enqueue(job(name="behind"))

    router.bind(handler)
    router.enqueue(job(name="first"))
    assert ran == ["first", "behind"]
    assert [d.reason for d in router.dead_letters()] == ["unknown job kind 'nope'"]


def test_inline_dead_letter_admin(clock: ManualClock) -> None:
    router = InlineRouter(clock=clock)
    for name in ("a", "b", "c"):
        router.enqueue(job(name=name))
    for delivery in router.receive(max_jobs=3):
        router.dead_letter(delivery, "testing")
    letters = router.dead_letters()
    assert router.requeue_dead_letter("999999") is None
    assert router.get_dead_letter(letters[0].id) == letters[0]
    assert router.purge_dead_letters([letters[0].id, letters[0].id, letters[1].id, "999999"]) == 2
    assert router.purge_dead_letters() == 1 and router.dead_letters() == []


def test_local_enqueue_raw_honours_its_delay(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue_raw("{}", delay_seconds=7)
    assert router.queued() == [(clock() + 7, "{}")]
    assert router.receive() == []


def test_local_queued_lists_earliest_first(router: LocalRouter, clock: ManualClock) -> None:
    router.enqueue_raw("late", delay_seconds=9)
    router.enqueue_raw("soon", delay_seconds=1)
    router.enqueue_raw("mid", delay_seconds=4)
    assert [body for _, body in router.queued()] == ["soon", "mid", "late"]


def test_local_attach_while_closing_is_refused(router: LocalRouter) -> None:
    refused: list[Exception] = []

    def stop() -> None:  # runs inside close(), before the router is marked closed
        try:
            router.attach_consumers(lambda: None, lambda: None)
        except RouterError as exc:
            refused.append(exc)

    router.attach_consumers(lambda: None, stop)
    router.enqueue(job())  # starts the consumers, so close() calls stop
    router.close()
    assert len(refused) == 1 and "closed" in str(refused[0])


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
    generic = router_from_url("memqueue://?visibility_timeout=2&prefix=p", visibility_timeout=9)
    assert type(generic) is GenericRouter and isinstance(generic.primitive, MemoryQueue)
    assert generic.visibility_timeout == 2.0 and not isinstance(generic, InProcess)
    assert router_from_url("memqueue://", visibility_timeout=7).visibility_timeout == 7.0


@pytest.mark.parametrize(
    "url",
    ["redis://x", "local://?workers=-1", "local://?visibility_timeout=0", "local://?bogus=1",
     "inline://?workers=1", "local://host", "memqueue://?workers=1", "memqueue://host"],
)
def test_router_from_url_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        router_from_url(url)


def test_inline_dead_letters_of_a_limit_of_zero_or_less_are_none(clock: ManualClock) -> None:
    """``dead_letters(limit)`` returns none when ``limit <= 0`` (docs/protocol.md,
    "Dead-letter administration"), however many letters there are."""
    router = InlineRouter(clock=clock)
    for name in ("a", "b"):
        router.enqueue(job(name=name))
    for delivery in router.receive(max_jobs=2):
        router.dead_letter(delivery, "testing")
    assert len(router.dead_letters(limit=1)) == 1
    assert router.dead_letters(limit=0) == []
    assert router.dead_letters(limit=-1) == []
    assert router.dead_letters(limit=0, cursor="1") == []
    assert len(router.dead_letters()) == 2


def test_inline_receive_leases_one_job_by_default(clock: ManualClock) -> None:
    """``receive()`` without ``max_jobs`` leases one job (docs/protocol.md#routers)."""
    router = InlineRouter(clock=clock)
    for name in ("a", "b"):
        router.enqueue(job(name=name))
    assert [d.job.payload["name"] for d in router.receive()] == ["a"]
    assert [d.job.payload["name"] for d in router.receive()] == ["b"]


@pytest.mark.parametrize("workers", [-1, -2])
def test_local_router_refuses_a_negative_worker_count(workers: int) -> None:
    with pytest.raises(ValueError, match="workers must be >= 0"):
        LocalRouter(workers=workers)
    assert LocalRouter(workers=0).workers == 0


def test_the_in_process_routers_declare_keeps_data_in_process_true() -> None:
    """``inline://`` and ``local://`` set ``keeps_data_in_process = True``, the value
    :func:`reactor.ports.capabilities.in_process` reads (an attribute set to anything else
    does not declare the capability)."""
    assert in_process(InlineRouter()) and in_process(LocalRouter())


def test_close_stops_no_consumers_that_were_never_started(router: LocalRouter) -> None:
    """``stop`` is called by ``close()`` only when the consumers were started: attached but
    never started (nothing was enqueued), they are not stopped."""
    calls: list[str] = []
    router.attach_consumers(lambda: calls.append("start"), lambda: calls.append("stop"))
    router.close()
    assert calls == []


def test_a_receive_while_the_router_closes_returns_nothing(router: LocalRouter) -> None:
    """A closing router returns no deliveries: a receive made while ``close()`` stops the
    consumers (before the router is marked closed) gets none, and the job stays queued."""
    got: list[list[Delivery]] = []
    router.attach_consumers(lambda: None, lambda: got.append(router.receive(max_jobs=5)))
    router.enqueue(job())  # starts the consumers, so close() calls stop
    router.close()
    assert got == [[]] and router.size() == 1


def test_a_local_router_built_directly_declares_one_worker() -> None:
    """``LocalRouter()`` without ``workers`` declares one embedded worker
    (:class:`~reactor.ports.capabilities.HostsEmbeddedWorkers`)."""
    assert LocalRouter().workers == 1
