"""The Redis router's own behaviour outside the contract: the stream reply decoding, the
blocking read of a waiting receive, ``max_jobs=0`` and a dead letter's malformed time.

Runs on the scripts/test standalone Redis (the decoding helpers need no server).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor.generic.router import decode_receipt
from reactor.ports.router import Job
from tests.adapters.redis.round_trips import RoundTrips

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis.router import RedisRouter, _field_map, _stream_entries  # noqa: E402


@pytest.fixture
def router(service_url: Callable[[str], str]) -> Iterator[RedisRouter]:
    """A router on a fresh queue of the standalone server (visibility 1 s)."""
    url = service_url("redis")
    built = reactor_redis.router_from_url(
        f"{url}{'&' if '?' in url else '?'}prefix=rt{uuid.uuid4().hex[:10]}&visibility_timeout=1"
    )
    try:
        yield built
    finally:
        built.close()


def _warm(router: RedisRouter) -> None:
    """One enqueue and receive: the group exists, the script is loaded, the prune ran."""
    router.enqueue(Job(kind="run", payload={}))
    for delivery in router.receive(max_jobs=1, wait_seconds=1):
        router.ack(delivery)


# ------------------------------------------------------------------ reply decoding


def test_a_flat_field_list_pairs_each_name_with_the_value_after_it() -> None:
    """RESP2 gives a stream entry's fields as ``[k, v, k, v]``."""
    assert _field_map([b"body", b"{}", "n", 2]) == {b"body": b"{}", b"n": b"2"}
    assert _field_map({"body": b"{}"}) == {b"body": b"{}"}
    assert _field_map(None) == {}


def test_an_entry_deleted_before_the_read_is_skipped_and_the_others_kept() -> None:
    reply = [[b"stream", [(b"1-0", None), (b"2-0", [b"body", b"x"])]]]
    assert _stream_entries(reply) == [("2-0", {b"body": b"x"})]


# ------------------------------------------------------------------------ receive


def test_receiving_zero_jobs_leases_nothing_and_costs_no_round_trip(
    router: RedisRouter, trips: RoundTrips
) -> None:
    _warm(router)
    job = Job(kind="run", payload={"left": True})
    router.enqueue(job)
    got: list[Any] = []
    assert trips.of(lambda: got.extend(router.receive(max_jobs=0, wait_seconds=0))) == 0
    assert got == []
    assert [(d.job, d.delivery_count) for d in router.receive(max_jobs=5)] == [(job, 1)]


def test_a_waiting_receive_blocks_in_reads_instead_of_polling(
    router: RedisRouter, trips: RoundTrips
) -> None:
    """With nothing queued (no delayed job either), the wait is one blocking ``XREADGROUP``
    per slice, not a script call after another until the deadline."""
    _warm(router)
    assert trips.of(lambda: router.receive(max_jobs=1, wait_seconds=0.2)) <= 10


def test_an_entry_without_a_body_read_while_waiting_is_dead_lettered_with_its_fields(
    router: RedisRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry that arrives during the wait is met by the blocking read, not the script:
    that path dead-letters a body-less entry too, with a dump of its fields."""
    _warm(router)
    script = router.primitive._raw_script
    job = Job(kind="run", payload={"behind": True})
    calls = 0

    def raw_script(op: str, *args: object) -> Any:
        nonlocal calls
        if op != "receive":
            return script(op, *args)
        calls += 1
        if calls == 2:  # the job behind the poison entry: the receive returns at once
            router.enqueue(job)
        reply = script(op, *args)
        if calls == 1:  # after the non-blocking pass: only the blocking read can see it
            router.client.xadd(router.primitive._keys[0], {"junk": "x", "more": "y"})
        return reply

    monkeypatch.setattr(router.primitive, "_raw_script", raw_script)
    got = router.receive(max_jobs=1, wait_seconds=5)
    assert [d.job for d in got] == [job]
    letters = router.dead_letters()
    assert len(letters) == 1
    assert letters[0].reason.endswith("stream entry has no 'body' field (junk=x\nmore=y)")


def test_a_dead_letter_with_a_malformed_time_reads_as_epoch_zero(router: RedisRouter) -> None:
    _warm(router)
    router.client.xadd(router.primitive._keys[2], {"body": "{}", "reason": "r", "at": "soon"})
    letters = router.dead_letters()
    assert [(letter.reason, letter.at) for letter in letters] == [("r", 0.0)]


def test_a_resp3_entry_list_wrapped_once_more_is_unwrapped() -> None:
    """RESP3 may wrap a stream's entry list in one more list; an empty stream reads as none."""
    wrapped = {b"stream": [[(b"1-0", [b"body", b"x"]), (b"2-0", [b"body", b"y"])]]}
    assert _stream_entries(wrapped) == [("1-0", {b"body": b"x"}), ("2-0", {b"body": b"y"})]
    assert _stream_entries([[b"stream", []]]) == []
    assert _stream_entries({b"stream": []}) == []


def test_a_receive_without_a_wait_returns_at_once(
    router: RedisRouter, trips: RoundTrips
) -> None:
    """``receive()``'s default ``wait_seconds`` is 0: on an empty queue it costs the one
    ``receive`` script call and makes no blocking read."""
    _warm(router)
    got: list[Any] = []
    assert trips.of(lambda: got.extend(router.receive())) == 1
    assert got == []


def _server_ms(router: RedisRouter) -> int:
    seconds, micros = router.client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_an_extend_leases_the_job_for_exactly_the_seconds_asked(router: RedisRouter) -> None:
    """The lease is extended to the server's now plus ``seconds`` (in ms), no more: the
    script starts from ``TIME`` rounded up to the ms, so at most 1 ms past ``after``."""
    _warm(router)
    router.enqueue(Job(kind="run", payload={}))
    [delivery] = router.receive(max_jobs=1)
    before = _server_ms(router)
    router.extend(delivery, 1000)
    after = _server_ms(router)
    entry_id = decode_receipt(delivery.receipt)[0]  # type: ignore[index]
    until = int(router.client.hget(router.primitive._keys[3], entry_id))
    assert before + 1_000_000 <= until <= after + 1_000_000 + 1


def test_queue_stats_count_a_consumer_that_just_read_as_live(router: RedisRouter) -> None:
    _warm(router)
    assert router.queue_stats().consumers == 1


@pytest.mark.parametrize(("seconds", "idle_ms"), [(1.0, 1000), (0.0025, 3)])
def test_the_prune_deletes_consumers_idle_for_the_timeout_in_ms_rounded_up(
    router: RedisRouter, monkeypatch: pytest.MonkeyPatch, seconds: float, idle_ms: int
) -> None:
    """``consumer_idle_timeout`` reaches the prune script as its minimum idle time in ms
    (rounded up: a consumer is deleted once idle at least that long, never sooner)."""
    _warm(router)
    router.primitive.consumer_idle_timeout = seconds
    script = router.primitive._script
    asked: list[tuple[object, ...]] = []

    def spy(op: str, *args: object) -> object:
        if op == "prune":
            asked.append(args)
        return script(op, *args)

    monkeypatch.setattr(router.primitive, "_script", spy)
    router.prune_consumers()
    assert asked == [("reactor", idle_ms)]


# ------------------------------------- the router on the queue toolkit, attacked from outside
# Each test below fails on the router of 82ba9ef (a hostile review's findings, fixed since).


def _own_router(service_url: Callable[[str], str], **options: Any) -> RedisRouter:
    """A router on a fresh queue of the standalone server, built with ``options``."""
    import redis

    url = service_url("redis").split("?")[0]
    options.setdefault("visibility_timeout", 1)
    return RedisRouter(
        redis.Redis.from_url(url), prefix=f"rt{uuid.uuid4().hex[:10]}", **options
    )


def test_a_receive_recreates_a_lost_group_even_when_its_prune_runs_first(
    service_url: Callable[[str], str],
) -> None:
    """A restart without persistence (or ``XGROUP DESTROY``) loses the consumer group; the
    next receive recreates it (the NOGROUP recovery). The prune a receive runs first must not
    turn that into a ``RouterError``: with ``consumer_prune_interval=0`` every receive prunes
    first, and the native router recovered there too."""
    router = _own_router(service_url, consumer_prune_interval=0)
    try:
        _warm(router)
        router.client.xgroup_destroy(router.primitive._keys[0], "reactor")
        job = Job(kind="run", payload={"after": "the loss"})
        router.enqueue(job)
        assert [d.job for d in router.receive(max_jobs=1)] == [job]
    finally:
        router.close()


@pytest.mark.parametrize("hostile", ["inf", "1e400", "99999999999999999999"])
def test_a_hostile_delivery_counter_never_keeps_a_job_below_max_deliveries(
    router: RedisRouter, hostile: str
) -> None:
    """A foreign producer's entry whose ``n`` field is not a small count must not pin the
    delivery count: every delivery counts at least 1 and each retry adds one, so a failing
    job reaches ``max_deliveries`` (docs/workers.md, "Hostile input": dead-lettered on its 5th
    failed delivery). Today Lua reads ``n`` as a float (inf), the count comes back as
    -2**63 and the retry stores ``n = inf`` again: retried forever."""
    _warm(router)
    job = Job(kind="run", payload={"foreign": True})
    router.client.xadd(router.primitive._keys[0], {"body": job.to_json(), "n": hostile})
    counts = []
    for _ in range(4):
        [delivery] = router.receive(max_jobs=1)
        counts.append(delivery.delivery_count)
        router.retry(delivery, 0)
    assert all(count >= 1 for count in counts), counts
    assert counts == sorted(set(counts)), counts


@pytest.mark.parametrize("receipt", ["5:abcde", "3:é-0", "0:", "22:99999999999999999999-01"])
def test_a_forged_receipt_is_a_logged_no_op(router: RedisRouter, receipt: str) -> None:
    """A receipt no router wrote changes nothing and raises nothing (docs/protocol.md,
    routers, "Stale receipts"): no error for a message id that is not a stream id, and no
    dead letter made out of nothing for an empty one."""
    _warm(router)
    job = Job(kind="run", payload={"live": True})
    router.enqueue(job)
    [live] = router.receive(max_jobs=1)
    forged = type(live)(job=job, receipt=receipt, delivery_count=1)
    router.ack(forged)
    router.retry(forged, 0)
    router.extend(forged, 5)
    router.dead_letter(forged, "forged")
    stats = router.queue_stats()
    assert (stats.in_flight, stats.ready, stats.delayed, stats.dead_letters) == (1, 0, 0, 0)
    router.ack(live)
    assert router.queue_stats().in_flight == 0


def test_a_receipt_stripped_of_its_nonce_cannot_ack_the_current_delivery(
    router: RedisRouter,
) -> None:
    """The entry id alone (an empty nonce) skips the receipt check in the script; no receipt
    the router writes has an empty nonce, so such a receipt is stale, never a master key."""
    _warm(router)
    job = Job(kind="run", payload={"leased": True})
    router.enqueue(job)
    [first] = router.receive(max_jobs=1)
    [second] = router.receive(max_jobs=1, wait_seconds=3)  # the lease lapsed: re-claimed
    message_id, _ = decode_receipt(first.receipt)  # type: ignore[misc]
    bare = type(first)(job=job, receipt=f"{len(message_id)}:{message_id}", delivery_count=1)
    router.ack(bare)
    assert router.queue_stats().in_flight == 1  # the current delivery is still leased
    router.ack(second)
    assert router.queue_stats().in_flight == 0


def test_a_delayed_job_that_falls_due_during_a_wait_is_delivered_within_it(
    router: RedisRouter,
) -> None:
    """A job delayed by another producer while a receive waits, due well before the wait
    ends, is received by that wait (docs/protocol.md: "waiting up to wait_seconds"); the
    blocking read does not see the delayed set, and nothing looks at it again."""
    import threading

    _warm(router)
    job = Job(kind="run", payload={"delayed": True})
    timer = threading.Timer(0.05, lambda: router.enqueue(job, delay_seconds=0.1))
    timer.start()
    try:
        got = router.receive(max_jobs=1, wait_seconds=1.0)
    finally:
        timer.join()
    assert [d.job.payload for d in got] == [job.payload]


def test_an_abandoned_delivery_comes_back_behind_leases_extended_past_the_timeout(
    router: RedisRouter,
) -> None:
    """Entries whose lease was extended beyond the visibility timeout are idle past it but
    not due; the re-claim scans only ``4 * max_jobs`` idle entries, so four of them hide an
    abandoned delivery behind them for as long as their extensions last."""
    import time

    _warm(router)
    for i in range(5):
        router.enqueue(Job(kind="run", payload={"i": i}))
    deliveries = router.receive(max_jobs=5)
    assert len(deliveries) == 5
    for delivery in deliveries[:4]:
        router.extend(delivery, 1000)  # long handlers, leases extended once
    time.sleep(1.3)  # deliveries[4]'s worker died: its 1 s lease lapsed
    got = router.receive(max_jobs=1, wait_seconds=1)
    assert [d.job.payload for d in got] == [deliveries[4].job.payload]


def test_a_receive_with_a_nan_wait_is_refused_instead_of_spinning(router: RedisRouter) -> None:
    """``wait_seconds=nan`` made the native router raise ``ValueError``; the generic receive
    loop compares against a NaN deadline that never passes and calls the script thousands of
    times a second until a job arrives."""
    import threading

    _warm(router)
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(router.receive(max_jobs=1, wait_seconds=float("nan")))
        except ValueError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(2)
    try:
        assert not thread.is_alive(), "receive(wait_seconds=nan) is still spinning"
        assert isinstance(outcome[0], ValueError)
    finally:
        router.enqueue(Job(kind="run", payload={"unblock": True}))  # end a spinning call
        thread.join(2)


def test_a_dead_letter_id_beyond_the_stream_id_range_names_no_letter(router: RedisRouter) -> None:
    """``"99999999999999999999-0"`` has the letter-id form but is past 2**64-1: it names no
    letter (``get`` gives ``None``, a purge skips it and counts the rest, a cursor of it is
    refused with ``ValueError``), instead of a ``RouterError`` after a partial purge."""
    _warm(router)
    router.enqueue(Job(kind="run", payload={}))
    [delivery] = router.receive(max_jobs=1)
    router.dead_letter(delivery, "kept for the test")
    [letter] = router.dead_letters()
    huge = "99999999999999999999-0"
    assert router.get_dead_letter(huge) is None
    with pytest.raises(ValueError):
        router.dead_letters(cursor=huge)
    assert router.purge_dead_letters([letter.id, huge]) == 1
