"""What the PostgreSQL router adds to the contract suite's checks (docs/adapters/postgres.md,
"Router"): ``SKIP LOCKED`` claims deliver each job once across racing threads, an idle
``receive`` is woken by ``NOTIFY`` (not by polling), receipts are per delivery, and the
queue counts and namespaces hold."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as psycopg_sql
from reactor_postgres import PostgresClient, PostgresQueue, PostgresRouter, router_from_url

from reactor.errors import RouterError
from reactor.ports.router import Delivery, Job
from tests.fake_clock import FakeClock

pytestmark = pytest.mark.postgres


@pytest.fixture
def router(schema_url: str) -> Iterator[PostgresRouter]:
    built = router_from_url(f"{schema_url}&prefix=r&visibility_timeout=30")
    yield built
    built.close()


def _clocked_router(schema_url: str, clock: FakeClock) -> PostgresRouter:
    from reactor_postgres._url import parse_url

    parsed = parse_url(schema_url)
    queue = PostgresQueue(PostgresClient(parsed.conninfo, schema=parsed.schema, error=RouterError),
                          "clocked")
    return PostgresRouter(queue, visibility_timeout=30, clock=clock)


def test_racing_receivers_get_every_job_exactly_once(router: PostgresRouter) -> None:
    """Eight threads drain 240 jobs with ``receive(max_jobs=5)``: ``FOR UPDATE SKIP LOCKED``
    gives each job to one claimer, so no job is delivered twice and none is lost."""
    ids = {router.enqueue(Job(kind="run", payload={"i": i})) for i in range(240)}
    got: list[str] = []
    counts: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def drain() -> None:
        start.wait(10)
        while True:
            deliveries = router.receive(max_jobs=5)
            if not deliveries:
                return
            for delivery in deliveries:
                router.ack(delivery)
            with lock:
                got.extend(d.job.id for d in deliveries)
                counts.extend(d.delivery_count for d in deliveries)

    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [n for n in Counter(got).values() if n > 1] == []
    assert set(got) == ids
    assert set(counts) == {1}
    assert router.queue_stats().ready == 0


def test_an_idle_receive_is_woken_by_notify_not_by_polling(schema_url: str) -> None:
    """The receiver blocks with a 30 s poll ceiling; the job enqueued while it waits reaches
    it well within a second, so only the ``NOTIFY`` of the enqueue can have woken it."""
    router = router_from_url(f"{schema_url}&prefix=n&poll_ceiling=30")
    primitive = router.primitive
    waiting = threading.Event()
    real_wait = primitive.wait_for_messages

    def wait_for_messages(timeout: float) -> None:
        waiting.set()
        real_wait(timeout)

    primitive.wait_for_messages = wait_for_messages  # type: ignore[method-assign]
    received: list[Delivery] = []
    done = threading.Event()

    def consume() -> None:
        received.extend(router.receive(wait_seconds=20))
        done.set()

    try:
        consumer = threading.Thread(target=consume)
        consumer.start()
        assert waiting.wait(10), "the receiver never went idle"
        started = time.monotonic()
        job_id = router.enqueue(Job(kind="run", payload={}))
        assert done.wait(15)
        latency = time.monotonic() - started
        consumer.join(5)
        assert [d.job.id for d in received] == [job_id]
        assert latency < 5.0, f"pickup took {latency:.3f} s: no NOTIFY wake-up"
    finally:
        router.close()


def test_a_delayed_job_wakes_an_idle_receive_when_it_falls_due(schema_url: str) -> None:
    """No notification is sent when a delay ends: the wait is bounded by the earliest
    ``visible_at`` in the queue, so the job arrives at its time, not at the poll ceiling."""
    router = router_from_url(f"{schema_url}&prefix=d&poll_ceiling=30")
    try:
        job_id = router.enqueue(Job(kind="run", payload={}), delay_seconds=0.5)
        started = time.monotonic()
        deliveries = router.receive(wait_seconds=20)
        elapsed = time.monotonic() - started
        assert [d.job.id for d in deliveries] == [job_id]
        assert elapsed < 10.0, f"a 0.5 s delay took {elapsed:.3f} s"
    finally:
        router.close()


def test_a_stale_receipt_never_acks_the_current_delivery(schema_url: str) -> None:
    clock = FakeClock(1_000_000.0)
    router = _clocked_router(schema_url, clock)
    try:
        job_id = router.enqueue(Job(kind="run", payload={}))
        [first] = router.receive()
        clock.sleep(31)  # the lease lapsed: the job is delivered again, with a new receipt
        [second] = router.receive()
        assert (second.job.id, second.delivery_count) == (job_id, 2)
        assert second.receipt != first.receipt
        router.ack(first)  # stale: a logged no-op
        router.extend(first, 60)
        router.retry(first, 0)
        router.dead_letter(first, "stale")
        assert router.dead_letters() == []
        assert router.queue_stats().in_flight == 1
        router.ack(second)
        assert router.queue_stats().in_flight == 0
        clock.sleep(120)
        assert router.receive() == []
    finally:
        router.close()


def test_retry_keeps_the_delivery_count_and_waits_out_its_delay(schema_url: str) -> None:
    clock = FakeClock(1_000_000.0)
    router = _clocked_router(schema_url, clock)
    try:
        router.enqueue(Job(kind="run", payload={}))
        [first] = router.receive()
        router.retry(first, 10)
        assert router.receive() == []
        clock.sleep(10)
        [again] = router.receive()
        assert again.delivery_count == first.delivery_count + 1
        assert again.job == first.job
    finally:
        router.close()


def test_dead_letters_keep_the_reason_and_the_raw_body(router: PostgresRouter) -> None:
    router.enqueue_raw(b"\xff\xfe not utf-8")
    assert router.receive() == []  # the poison message is dead-lettered inside receive
    router.enqueue(Job(kind="run", payload={"x": 1}))
    [delivery] = router.receive()
    router.dead_letter(delivery, "handler exploded")
    poison, letter = router.dead_letters()
    assert poison.body_encoding == "base64" and poison.raw_body() == b"\xff\xfe not utf-8"
    assert poison.reason.startswith("undecodable message")
    assert letter.reason == "handler exploded" and letter.to_job() == delivery.job
    assert int(letter.id) > int(poison.id)
    assert router.queue_stats().dead_letters == 2
    assert router.requeue_dead_letter(letter.id) == delivery.job.id
    assert [d.job.id for d in router.receive()] == [delivery.job.id]


def test_queue_counts(schema_url: str) -> None:
    clock = FakeClock(1_000_000.0)
    router = _clocked_router(schema_url, clock)
    try:
        for _ in range(3):
            router.enqueue(Job(kind="run", payload={}))
        router.enqueue(Job(kind="run", payload={}), delay_seconds=3600)
        router.receive()
        stats = router.queue_stats()
        assert (stats.ready, stats.delayed, stats.in_flight, stats.dead_letters) == (2, 1, 1, 0)
    finally:
        router.close()


def test_prefixes_and_queues_are_separate_namespaces(schema_url: str) -> None:
    a = router_from_url(f"{schema_url}&prefix=a")
    b = router_from_url(f"{schema_url}&prefix=b")
    c = router_from_url(f"{schema_url}&prefix=a&queue=other")
    try:
        job_id = a.enqueue(Job(kind="run", payload={}))
        assert b.receive() == [] and c.receive() == []
        assert [d.job.id for d in a.receive()] == [job_id]
    finally:
        for router in (a, b, c):
            router.close()


def test_a_claim_picks_its_rows_once_whatever_the_plan(schema_url: str) -> None:
    """The ``SKIP LOCKED`` pick runs once per claim (``LockRows`` loops=1): re-run per row
    of a nested loop, it skipped the rows its own statement had updated and locked the next
    ones, so one claim could take more than its limit (a contract run received 3 jobs for
    ``max_jobs=2``). Checked on the plan the planner picks for a freshly analyzed empty
    table, which put the pick on the inner side of a nested loop."""
    router = router_from_url(f"{schema_url}&prefix=plan")
    primitive = router.primitive
    try:
        router.queue_stats()  # the schema exists
        for _ in range(5):
            router.enqueue(Job(kind="run", payload={}))
        with primitive.client.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL enable_hashjoin = off")
            conn.execute("SET LOCAL enable_mergejoin = off")
            explained = conn.execute(
                psycopg_sql.SQL("EXPLAIN (ANALYZE, FORMAT TEXT) ") + primitive._sql["claim"],
                (primitive.queue, time.time() + 3600, 2, time.time() + 7200),
            ).fetchall()
            raise psycopg.Rollback  # leave the jobs unclaimed
        plan = "\n".join(row[0] for row in explained)
        lock_rows = [line for line in plan.splitlines() if "LockRows" in line]
        assert lock_rows and all("loops=1)" in line for line in lock_rows), plan
        assert len(router.receive(max_jobs=2)) == 2
        assert len(router.receive(max_jobs=1)) == 1
    finally:
        router.close()


def test_enqueue_many_queues_a_batch_in_one_statement_in_order(
    router: PostgresRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``EnqueuesMany`` fast path: one statement (one notification) for the batch, the
    jobs received in the order given."""
    from reactor.ports.capabilities import EnqueuesMany

    assert isinstance(router, EnqueuesMany)
    router.queue_stats()  # migrated, clock calibrated
    sent = [0]
    real = psycopg.Connection.execute

    def counting(self: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    jobs = [Job(kind="map_element", payload={"i": i}) for i in range(50)]
    assert router.enqueue_many(jobs) == [job.id for job in jobs]
    assert sent[0] == 1
    monkeypatch.setattr(psycopg.Connection, "execute", real)
    received = router.receive(max_jobs=100)
    assert [d.job for d in received] == jobs
    assert router.enqueue_many([]) == []


def test_the_listener_reconnects_after_the_server_drops_it(schema_url: str, pg_url: str) -> None:
    """The server terminates the listener's connection (a restart, an idle-connection
    killer): the listener connects and ``LISTEN``\\ s again, and the next enqueue still wakes
    an idle receive long before the 30 s poll ceiling."""
    router = router_from_url(f"{schema_url}&prefix=reconnect&poll_ceiling=30")
    try:
        assert router.receive() == []  # the listener is up
        listener = router.primitive._listener
        assert listener is not None
        before = listener.generation
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query = %s AND pid <> pg_backend_pid()",
                (f'LISTEN "{router.primitive.channel}"',),
            ).fetchall()
        assert killed == [(True,)]
        # the failure and the new LISTEN each bump the generation (waiters re-claim)
        with listener.cond:
            assert listener.cond.wait_for(lambda: listener.generation >= before + 2, 15)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            listening = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query = %s",
                (f'LISTEN "{router.primitive.channel}"',),
            ).fetchone()
        assert listening == (1,)
        waiting = threading.Event()
        real_wait = router.primitive.wait_for_messages

        def wait_for_messages(timeout: float) -> None:
            waiting.set()
            real_wait(timeout)

        router.primitive.wait_for_messages = wait_for_messages  # type: ignore[method-assign]
        received: list[Delivery] = []
        done = threading.Event()

        def consume() -> None:
            received.extend(router.receive(wait_seconds=20))
            done.set()

        consumer = threading.Thread(target=consume)
        consumer.start()
        assert waiting.wait(10), "the receiver never went idle"
        job_id = router.enqueue(Job(kind="run", payload={}))
        started = time.monotonic()
        assert done.wait(15)
        consumer.join(5)
        assert [d.job.id for d in received] == [job_id]
        assert time.monotonic() - started < 10
    finally:
        router.close()
