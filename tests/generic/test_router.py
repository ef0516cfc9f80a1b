"""``GenericRouter`` over a queue primitive (docs/protocol.md, "Building a router").

Two halves:

* the shared contract (``reactor_contract``'s routers and dead-letter classes) against a
  ``GenericRouter`` over :class:`reactor.memory.MemoryQueue`, built directly here so the run
  does not depend on the ``memqueue://`` entry point being installed (the contract's
  ``open_router`` helper, which builds from a URL, is pointed at the same constructor);
* behaviour on a manual clock, over a :class:`PlainQueue` (a ``MemoryQueue`` seen only through
  the nine primitive operations: no ``wait_for_messages``), with faults injected where a test
  needs a failing or crashing primitive;
* the worked SQLite primitive of docs/protocol.md ("Building a router"), run as written.
"""

from __future__ import annotations

import logging
import re
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from reactor_contract import test_routers as routers_contract
from reactor_contract.probes import GenericRouterProbe
from reactor_contract.test_dead_letters import DeadLettersContract
from reactor_contract.test_routers import RoutersContract

from reactor.errors import DeserializationError, RouterError
from reactor.generic.router import GenericRouter, new_message_id, requeue_message_id
from reactor.memory import ManualClock, MemoryQueue
from reactor.ports.queues import (
    ClaimedMessage,
    ClaimsWaiting,
    QueuePrimitive,
    RequeuesDeadLetters,
    WaitsForMessages,
)
from reactor.ports.router import DeadLetter, DeadLetterAdmin, Job, JobSink, JobSource, Router

URL = "memqueue://"


def _contract_router(url: str = URL, token: str | None = None) -> GenericRouter:
    """A fresh router with its own queue, as the suite's ``open_router`` builds one."""
    return GenericRouter(MemoryQueue(), visibility_timeout=1.0)


@pytest.fixture
def reactor_router_url(monkeypatch: pytest.MonkeyPatch) -> str:
    """The contract's URL; its ``open_router`` builds this module's router (no entry point)."""
    monkeypatch.setattr(routers_contract, "open_router", _contract_router)
    return URL


@pytest.fixture
def router(reactor_router_url: str) -> Iterator[GenericRouter]:
    built = _contract_router()
    yield built
    built.close()


@pytest.fixture
def router_probe(router: GenericRouter) -> GenericRouterProbe:
    return GenericRouterProbe(router)


class TestGenericRouterContract(RoutersContract):
    """The routers contract against ``GenericRouter`` over ``MemoryQueue``."""


class TestGenericRouterDeadLetters(DeadLettersContract):
    """The dead-letter administration contract against ``GenericRouter`` over ``MemoryQueue``."""


# -- behaviour on a manual clock ----------------------------------------------------------------


class PlainQueue:
    """A :class:`MemoryQueue` seen only through :class:`QueuePrimitive` (so the router polls),
    with injectable faults.

    Attributes:
        fail: operation name -> exception raised by the next call of it (then forgotten).
        calls: operation names in call order.
    """

    def __init__(self) -> None:
        self.inner = MemoryQueue()
        self.fail: dict[str, BaseException] = {}
        self.calls: list[str] = []
        self.closed = False

    def _enter(self, name: str) -> None:
        self.calls.append(name)
        fault = self.fail.pop(name, None)
        if fault is not None:
            raise fault

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        self._enter("put")
        return self.inner.put(message_id, body, visible_at)

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        self._enter("claim")
        return self.inner.claim(limit, now, visible_at)

    def delete(self, message_id: str, receipt: str) -> bool:
        self._enter("delete")
        return self.inner.delete(message_id, receipt)

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        self._enter("change_visibility")
        return self.inner.change_visibility(message_id, receipt, visible_at)

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        self._enter("release")
        return self.inner.release(message_id, receipt, visible_at)

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        self._enter("dead_letter")
        return self.inner.dead_letter(message_id, receipt, reason, at)

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        self._enter("dead_letters")
        return self.inner.dead_letters(after, limit)

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        self._enter("get_dead_letter")
        return self.inner.get_dead_letter(letter_id)

    def remove_dead_letter(self, letter_id: str) -> bool:
        self._enter("remove_dead_letter")
        return self.inner.remove_dead_letter(letter_id)

    def close(self) -> None:
        self._enter("close")
        self.closed = True
        self.inner.close()


def job(**payload: object) -> Job:
    return Job(kind="run", payload={"context_id": "c1", **payload})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def queue() -> PlainQueue:
    return PlainQueue()


@pytest.fixture
def generic(queue: PlainQueue, clock: ManualClock) -> GenericRouter:
    return GenericRouter(queue, visibility_timeout=30, clock=clock)


def test_the_generic_router_is_a_whole_router_with_dead_letter_admin(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    assert isinstance(queue, QueuePrimitive) and not isinstance(queue, WaitsForMessages)
    for protocol in (Router, JobSink, JobSource, DeadLetterAdmin):
        assert isinstance(generic, protocol)


@pytest.mark.parametrize(
    "kwargs", [{"visibility_timeout": 0}, {"visibility_timeout": float("inf")},
               {"poll_interval": -1}],
)
def test_settings_out_of_range_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        GenericRouter(MemoryQueue(), **kwargs)  # type: ignore[arg-type]


def test_a_job_round_trips_and_ack_removes_it(generic: GenericRouter, clock: ManualClock) -> None:
    j = job(note="caf\u00e9")
    assert generic.enqueue(j) == j.id
    (delivery,) = generic.receive(max_jobs=5)
    assert delivery.job == j and delivery.delivery_count == 1
    generic.ack(delivery)
    clock.advance(3600)
    assert generic.receive() == [] and generic.receive(max_jobs=0) == []


def test_a_delayed_job_waits_and_carries_its_due_time(
    generic: GenericRouter, clock: ManualClock
) -> None:
    generic.enqueue(job(), delay_seconds=7 * 86400)
    clock.advance(7 * 86400 - 0.001)
    assert generic.receive() == []
    clock.advance(0.001)
    (delivery,) = generic.receive()
    assert delivery.job.not_before == clock()


@pytest.mark.parametrize("delay", [-1, float("inf"), float("nan")])
def test_bad_delays_are_refused(generic: GenericRouter, delay: float) -> None:
    with pytest.raises(ValueError):
        generic.enqueue(job(), delay)
    generic.enqueue(job())
    (delivery,) = generic.receive()
    with pytest.raises(ValueError):
        generic.retry(delivery, delay)
    with pytest.raises(ValueError):
        generic.extend(delivery, delay)


def test_a_lapsed_lease_redelivers_with_a_new_receipt_and_count(
    generic: GenericRouter, clock: ManualClock
) -> None:
    generic.enqueue(job())
    (first,) = generic.receive()
    clock.advance(29.999)
    assert generic.receive() == []
    clock.advance(0.001)
    (second,) = generic.receive()
    assert second.job.id == first.job.id and second.delivery_count == 2
    assert second.receipt != first.receipt


def test_every_stale_call_is_logged_and_changes_nothing(
    generic: GenericRouter, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    generic.enqueue(job())
    (first,) = generic.receive()
    clock.advance(30)
    (second,) = generic.receive()
    assert second.job.id == first.job.id
    with caplog.at_level(logging.WARNING, logger="reactor.generic.router"):
        generic.ack(first)
        generic.retry(first, 0)
        generic.extend(first, 3600)
        generic.dead_letter(first, "late")
    assert caplog.text.count("stale receipt") == 4
    assert generic.receive() == [] and generic.dead_letters() == []
    clock.advance(30)  # the second lease lapses as if the stale calls never happened
    (third,) = generic.receive()
    assert third.delivery_count == 3
    generic.ack(third)


def test_a_receipt_of_another_router_is_stale(
    generic: GenericRouter, caplog: pytest.LogCaptureFixture
) -> None:
    generic.enqueue(job())
    (delivery,) = generic.receive()
    foreign = type(delivery)(job=delivery.job, receipt="inline:7")
    with caplog.at_level(logging.WARNING, logger="reactor.generic.router"):
        generic.ack(foreign)
    assert "stale receipt" in caplog.text
    generic.ack(delivery)


def test_retry_keeps_the_count_and_revokes_the_receipt(
    generic: GenericRouter, clock: ManualClock
) -> None:
    j = job()
    generic.enqueue(j)
    (first,) = generic.receive()
    generic.retry(first, 5)
    generic.ack(first)  # stale since the retry: must not remove the job
    clock.advance(4.999)
    assert generic.receive() == []
    clock.advance(0.001)
    (second,) = generic.receive()
    assert second.job == j and second.delivery_count == 2


def test_extend_keeps_the_receipt(generic: GenericRouter, clock: ManualClock) -> None:
    generic.enqueue(job())
    (delivery,) = generic.receive()
    clock.advance(25)
    generic.extend(delivery, 60)
    clock.advance(59)
    assert generic.receive() == []  # past the first 30 s lease
    generic.ack(delivery)
    clock.advance(3600)
    assert generic.receive() == []


def test_dead_letter_keeps_the_body_reason_and_time(
    generic: GenericRouter, clock: ManualClock
) -> None:
    j = job()
    generic.enqueue(j)
    (delivery,) = generic.receive()
    generic.dead_letter(delivery, "unknown reactor 'ghost'")
    (letter,) = generic.dead_letters()
    assert (letter.reason, letter.at, letter.id) == ("unknown reactor 'ghost'", clock(), "1")
    assert Job.from_json(letter.body) == j
    clock.advance(3600)
    assert generic.receive() == []


def test_poison_is_dead_lettered_raw_by_the_receive_that_meets_it(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    latin1 = '{"id": "caf\xe9", "kind": "run", "payload": {}}'.encode("latin-1")
    for n, body in enumerate([latin1, "[" * 5000 + "]" * 5000, "x" * (256 * 1024 + 1),
                              '{"kind": "run", "payload": {}}']):
        queue.put(f"poison-{n}", body, 0.0)
    good = job()
    generic.enqueue(good)
    assert [d.job.id for d in generic.receive(max_jobs=1)] == [good.id]  # one receive
    letters = generic.dead_letters()
    assert [letter.body_encoding for letter in letters] == ["base64", "text", "text", "text"]
    assert letters[0].raw_body() == latin1
    assert all(letter.reason.startswith("undecodable message: ") for letter in letters)
    assert "UTF-8" in letters[0].reason and "deeper than" in letters[1].reason
    assert "MAX_ENVELOPE_BYTES" in letters[2].reason and "'id'" in letters[3].reason


def test_dead_letters_page_show_and_purge(generic: GenericRouter, queue: PlainQueue) -> None:
    for n in range(5):
        queue.put(f"m{n}", f"poison {n}", 0.0)
    assert generic.receive() == []
    first = generic.dead_letters(limit=2)
    rest = generic.dead_letters(limit=10, cursor=first[-1].id)
    assert [d.body for d in first + rest] == [f"poison {n}" for n in range(5)]
    assert generic.dead_letters(limit=0) == []
    assert generic.get_dead_letter(first[0].id) == first[0]
    assert generic.get_dead_letter("no-such-letter") is None
    with pytest.raises(ValueError):
        generic.dead_letters(cursor="not-an-id")
    assert generic.purge_dead_letters([first[0].id, first[0].id, "no-such-letter"]) == 1
    assert generic.purge_dead_letters([]) == 0
    assert generic.purge_dead_letters() == 4 and generic.dead_letters() == []


def test_purging_everything_pages_through_many_letters(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    for n in range(250):
        queue.put(f"m{n}", "poison", 0.0)
    assert generic.receive(max_jobs=1) == []
    assert len(generic.dead_letters(limit=1000)) == 250
    assert generic.purge_dead_letters() == 250
    assert generic.dead_letters(limit=1000) == []


def _dead_lettered(generic: GenericRouter, j: Job) -> DeadLetter:
    generic.enqueue(j)
    (delivery,) = generic.receive()
    generic.retry(delivery, 0)
    (again,) = generic.receive()
    assert again.delivery_count == 2
    generic.dead_letter(again, "handler failed on 2 deliveries: boom")
    (letter,) = generic.dead_letters()
    return letter


def test_a_requeue_puts_the_job_back_due_now_with_a_fresh_count(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    j = job(order=42)
    letter = _dead_lettered(generic, j)
    assert generic.requeue_dead_letter(letter.id) == j.id
    assert generic.get_dead_letter(letter.id) is None
    assert generic.requeue_dead_letter(letter.id) is None  # gone: requeued once
    (delivery,) = generic.receive(max_jobs=5)
    assert delivery.job == j and delivery.delivery_count == 1
    assert queue.inner.size() == 1


def test_a_crash_between_the_put_and_the_removal_never_loses_nor_doubles_the_job(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    j = job()
    letter = _dead_lettered(generic, j)
    queue.fail["remove_dead_letter"] = RuntimeError("process died")
    with pytest.raises(RouterError):
        generic.requeue_dead_letter(letter.id)
    assert generic.get_dead_letter(letter.id) == letter  # kept
    assert generic.requeue_dead_letter(letter.id) == j.id  # the same message id: put once
    assert queue.inner.size() == 1
    assert [d.job.id for d in generic.receive(max_jobs=5)] == [j.id]
    assert requeue_message_id(letter.id) == requeue_message_id(letter.id)
    assert requeue_message_id(letter.id) != requeue_message_id(f"{letter.id}0")


def test_an_undecodable_letter_is_refused_and_kept(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    queue.put("m", b"\xff not json", 0.0)
    assert generic.receive() == []
    (letter,) = generic.dead_letters()
    with pytest.raises(DeserializationError, match="cannot be requeued"):
        generic.requeue_dead_letter(letter.id)
    assert generic.dead_letters() == [letter] and queue.inner.size() == 0


def test_primitive_failures_surface_as_router_errors(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    queue.fail["claim"] = ConnectionError("backend down")
    with pytest.raises(RouterError, match="claim failed: ConnectionError") as raised:
        generic.receive()
    assert isinstance(raised.value.__cause__, ConnectionError)
    queue.fail["put"] = RouterError("already typed")
    with pytest.raises(RouterError, match="already typed"):
        generic.enqueue(job())


def test_a_closed_router_refuses_jobs_and_receives_nothing(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    generic.enqueue(job())
    generic.close()
    generic.close()
    assert generic.closed and queue.calls.count("close") == 1
    with pytest.raises(RouterError):
        generic.enqueue(job())
    assert generic.receive(wait_seconds=30) == []  # at once


def test_a_waiting_receive_polls_a_plain_primitive(queue: PlainQueue) -> None:
    router = GenericRouter(queue, poll_interval=0.01)
    claims_before_put = threading.Event()

    def produce() -> None:
        for _ in range(1000):  # bounded: until the receive has claimed and found nothing
            if queue.calls.count("claim") >= 2:
                break
            threading.Event().wait(0.01)
        claims_before_put.set()
        router.enqueue(job())

    producer = threading.Thread(target=produce)
    producer.start()
    deliveries = router.receive(wait_seconds=30)
    producer.join(10)
    assert claims_before_put.is_set() and len(deliveries) == 1


class _CountingQueue(MemoryQueue):
    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait_for_messages(self, timeout: float) -> None:
        self.waits.append(timeout)
        super().wait_for_messages(timeout)


def test_a_waiting_receive_blocks_on_a_primitive_that_can_wait() -> None:
    queue = _CountingQueue()
    router = GenericRouter(queue, poll_interval=0.2)
    waited = threading.Event()

    def produce() -> None:
        for _ in range(1000):
            if queue.waits:
                break
            threading.Event().wait(0.01)
        waited.set()
        router.enqueue(job())

    producer = threading.Thread(target=produce)
    producer.start()
    deliveries = router.receive(wait_seconds=30)
    producer.join(10)
    assert waited.is_set() and len(deliveries) == 1
    assert queue.waits and all(0 < t <= 0.2 for t in queue.waits)



def test_a_receipt_without_its_separator_never_reaches_the_primitive(
    generic: GenericRouter, queue: PlainQueue, caplog: pytest.LogCaptureFixture
) -> None:
    """A receipt with no ``:`` is not one this router wrote, even when it is all digits (a
    length prefix of 0 naming an empty message id): every call on it is logged as stale and
    no primitive operation runs."""
    generic.enqueue(job())
    (delivery,) = generic.receive()
    queue.calls.clear()
    for receipt in ("0", "00"):
        foreign = type(delivery)(job=delivery.job, receipt=receipt)
        with caplog.at_level(logging.WARNING, logger="reactor.generic.router"):
            generic.ack(foreign)
            generic.retry(foreign, 0)
            generic.extend(foreign, 60)
            generic.dead_letter(foreign, "no")
    assert queue.calls == []
    assert caplog.text.count("stale receipt") == 8
    generic.ack(delivery)
    assert queue.calls == ["delete"] and queue.inner.size() == 0


class _EnqueueOnWait(MemoryQueue):
    """A queue that can wait, recording each wait's timeout and, instead of blocking, having
    a job enqueued through ``router`` (so the receive's next claim finds it)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.router: GenericRouter | None = None

    def wait_for_messages(self, timeout: float) -> None:
        self.waits.append(timeout)
        assert self.router is not None
        self.router.enqueue(job())


def test_a_waiting_receive_pauses_at_most_the_default_poll_interval_between_claims() -> None:
    """The default ``poll_interval`` is 0.05 s (docs/protocol.md, "Building a router"): a
    receive with 30 s left waits at most that long before claiming again."""
    queue = _EnqueueOnWait()
    queue.router = router = GenericRouter(queue)
    deliveries = router.receive(wait_seconds=30)
    assert len(deliveries) == 1 and queue.waits == [0.05]



class _EnqueueOnFifthWait(_EnqueueOnWait):
    """Records each wait's timeout; the fifth has a job enqueued instead of returning empty."""

    def wait_for_messages(self, timeout: float) -> None:
        self.waits.append(timeout)
        if len(self.waits) == 5:
            assert self.router is not None
            self.router.enqueue(job())


def test_a_waiting_receive_doubles_its_pause_up_to_max_poll_interval() -> None:
    """Each pause of one waiting receive doubles from ``poll_interval`` up to
    ``max_poll_interval`` (docs/protocol.md, "Building a router": waiting)."""
    queue = _EnqueueOnFifthWait()
    queue.router = router = GenericRouter(queue, poll_interval=0.05, max_poll_interval=0.3)
    deliveries = router.receive(wait_seconds=30)
    assert len(deliveries) == 1
    assert queue.waits == pytest.approx([0.05, 0.1, 0.2, 0.3, 0.3])


@pytest.mark.parametrize("options", [{"max_poll_interval": 0.01},
                                     {"max_poll_interval": float("nan")},
                                     {"max_poll_interval": 0.0}])
def test_a_poll_ceiling_below_the_first_pause_or_not_a_number_is_refused(
    options: dict[str, float]
) -> None:
    with pytest.raises(ValueError, match="max_poll_interval"):
        GenericRouter(MemoryQueue(), poll_interval=0.05, **options)


def test_new_message_ids_sort_in_the_order_they_were_made() -> None:
    """``new_message_id`` is time-ordered (nanoseconds first), so a primitive that breaks
    ties of ``visible_at`` by id keeps put order, and never repeats."""
    ids = [new_message_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"\d{20}-[0-9a-f]{12}", i) for i in ids)


def test_extend_moves_the_lease_end_to_now_plus_the_seconds(
    generic: GenericRouter, clock: ManualClock
) -> None:
    """``extend(delivery, seconds)`` keeps the job invisible for ``seconds`` from now, no
    longer (docs/protocol.md, "Building a router": ``extend`` is ``change_visibility``)."""
    generic.enqueue(job())
    (delivery,) = generic.receive()
    clock.advance(25)
    generic.extend(delivery, 60)
    clock.advance(59.999)
    assert generic.receive() == []
    clock.advance(0.001)
    (again,) = generic.receive()
    assert again.job.id == delivery.job.id and again.delivery_count == 2


def test_a_receive_that_meets_poison_still_returns_at_most_max_jobs(
    generic: GenericRouter, queue: PlainQueue, clock: ManualClock
) -> None:
    """Poison dead-lettered on the way makes the receive claim on, for the deliveries still
    missing only (docs/protocol.md, "Building a router"): the jobs behind stay queued."""
    first = job(n=1)
    generic.enqueue(first)
    queue.put("poison", "not a job", clock())
    rest = [job(n=2), job(n=3), job(n=4)]
    for j in rest:
        generic.enqueue(j)
    assert [d.job.id for d in generic.receive(max_jobs=2)] == [first.id, rest[0].id]
    assert [letter.body for letter in generic.dead_letters()] == ["not a job"]
    assert [d.job.id for d in generic.receive(max_jobs=5)] == [rest[1].id, rest[2].id]


class _CloseOnWait(MemoryQueue):
    """A queue that can wait, recording each wait and closing ``router`` instead of blocking
    (so a receive that waits ends at its next check)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.router: GenericRouter | None = None

    def wait_for_messages(self, timeout: float) -> None:
        self.waits.append(timeout)
        assert self.router is not None
        self.router.close()


@pytest.mark.parametrize("max_jobs", [0, -1])
def test_a_receive_of_no_jobs_returns_at_once_whatever_its_wait(max_jobs: int) -> None:
    """``receive(max_jobs <= 0)`` returns none (docs/protocol.md, "Building a router"), at
    once: it never waits for jobs it would not take."""
    queue = _CloseOnWait()
    queue.router = router = GenericRouter(queue)
    router.enqueue(job())
    assert router.receive(max_jobs=max_jobs, wait_seconds=30) == []
    assert queue.waits == [] and not router.closed
    assert len(router.receive()) == 1


def test_dead_letters_lists_100_letters_by_default(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    """``dead_letters(limit=100, cursor=None)`` (docs/protocol.md, "Dead-letter
    administration"): without a limit, a page holds 100 letters."""
    for n in range(101):
        queue.put(f"m{n}", f"poison {n}", 0.0)
    assert generic.receive() == []
    page = generic.dead_letters()
    assert [letter.body for letter in page] == [f"poison {n}" for n in range(100)]
    assert [letter.body for letter in generic.dead_letters(cursor=page[-1].id)] == ["poison 100"]


def test_the_requeue_message_id_is_fixed_by_the_letter_id() -> None:
    """A requeue puts the job under a message id derived from the letter id, so a requeue
    retried after a crash between the put and the removal finds the job queued
    (docs/protocol.md, "Building a router"). A durable queue (PostgreSQL) keeps that id
    across processes and releases, so the derivation never changes: ``"dl-"`` and the first
    40 hex digits of the SHA-256 of the id's UTF-8."""
    assert requeue_message_id("1") == "dl-6b86b273ff34fce19d6b804eff5a3f5747ada4ea"
    assert requeue_message_id("42") == "dl-73475cb40a568e8da8a045ced110137e159f890a"


class _ClaimRecorder(MemoryQueue):
    """A queue recording the ``limit`` of every claim."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int] = []

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        self.limits.append(limit)
        return super().claim(limit, now, visible_at)


def test_a_receive_that_got_its_max_jobs_claims_no_more() -> None:
    """A receive claims only for the deliveries still missing, and the primitive's ``claim``
    takes ``limit >= 1`` (reactor/ports/queues.py): one that got all 300 (above the small
    ints CPython shares) asks for none more."""
    queue = _ClaimRecorder()
    router = GenericRouter(queue)
    for n in range(300):
        router.enqueue(job(n=n))
    assert len(router.receive(max_jobs=300)) == 300
    assert queue.limits == [300]


def test_dead_letters_of_a_limit_of_zero_or_less_never_reach_the_primitive(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    """``dead_letters(limit <= 0)`` returns none without asking the primitive, whose
    ``dead_letters`` takes ``limit >= 1`` (reactor/ports/queues.py)."""
    queue.put("m", "poison", 0.0)
    assert generic.receive() == [] and len(generic.dead_letters()) == 1
    queue.calls.clear()
    assert generic.dead_letters(limit=-1) == [] and generic.dead_letters(limit=0) == []
    assert queue.calls == []


@pytest.mark.parametrize("receipt", ["4:abc", "99:abc"])
def test_a_receipt_whose_length_prefix_overruns_it_never_reaches_the_primitive(
    generic: GenericRouter, queue: PlainQueue, caplog: pytest.LogCaptureFixture, receipt: str
) -> None:
    """A receipt whose length prefix names more characters than follow it is not one this
    router wrote: every call on it is logged as stale and no primitive operation runs."""
    generic.enqueue(job())
    (delivery,) = generic.receive()
    queue.calls.clear()
    foreign = type(delivery)(job=delivery.job, receipt=receipt)
    with caplog.at_level(logging.WARNING, logger="reactor.generic.router"):
        generic.ack(foreign)
        generic.retry(foreign, 0)
        generic.extend(foreign, 60)
        generic.dead_letter(foreign, "no")
    assert queue.calls == []
    assert caplog.text.count("stale receipt") == 4


def test_a_delay_under_a_second_sets_the_jobs_due_time(
    generic: GenericRouter, clock: ManualClock
) -> None:
    """Any delay above 0 stores ``not_before = now + delay`` in the envelope, half a second
    as well as a week."""
    generic.enqueue(job(), delay_seconds=0.5)
    clock.advance(0.25)
    assert generic.receive() == []
    clock.advance(0.25)
    (delivery,) = generic.receive()
    assert delivery.job.not_before == clock()


def test_a_receive_without_wait_seconds_does_not_wait() -> None:
    """``wait_seconds`` defaults to 0: with nothing due, ``receive()`` claims once and
    returns none without pausing for a job."""
    queue = _EnqueueOnWait()
    queue.router = router = GenericRouter(queue)
    assert router.receive() == []
    assert queue.waits == []


# -- the worked example of docs/protocol.md ------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _sqlite_example() -> types.ModuleType:
    """The ``SQLiteQueue`` code block of "Building a router", loaded as a module."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Building a router"):]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/protocol.md has no worked example under 'Building a router'"
    module = types.ModuleType("sqlite_queue_example")
    exec(compile(match.group(1), str(DOC), "exec"), module.__dict__)  # our own doc
    return module


def test_the_sqlite_example_is_a_queue_primitive_and_a_working_router(
    tmp_path: Path, clock: ManualClock
) -> None:
    example = _sqlite_example()
    primitive = example.SQLiteQueue(str(tmp_path / "jobs.db"))
    assert isinstance(primitive, QueuePrimitive)
    sqlite = GenericRouter(primitive, visibility_timeout=30, clock=clock)
    j = job()
    sqlite.enqueue(j, delay_seconds=5)
    primitive.put("poison", b"\xff\xfe", 0.0)
    assert sqlite.receive(max_jobs=5) == []  # the poison went to the dead letters
    clock.advance(5)
    (first,) = sqlite.receive()
    clock.advance(30)
    (second,) = sqlite.receive()
    assert second.delivery_count == 2
    sqlite.ack(first)  # stale: the job stays
    sqlite.dead_letter(second, "boom")
    poison, dead = sqlite.dead_letters()
    assert poison.raw_body() == b"\xff\xfe" and poison.body_encoding == "base64"
    assert dead.reason == "boom" and sqlite.dead_letters(cursor=poison.id) == [dead]
    assert sqlite.requeue_dead_letter(dead.id) == j.id
    (again,) = sqlite.receive()
    assert again.job.id == j.id and again.delivery_count == 1
    sqlite.ack(again)
    assert sqlite.purge_dead_letters() == 1 and sqlite.dead_letters() == []
    sqlite.close()
    url = f"sqlitequeue://{tmp_path / 'other.db'}?visibility_timeout=2&prefix=p"
    built = example.router_from_url(url)
    assert isinstance(built, Router) and built.visibility_timeout == 2.0
    built.close()


def test_a_poison_message_that_cannot_be_dead_lettered_does_not_strand_the_jobs_claimed_with_it(
    generic: GenericRouter, queue: PlainQueue, clock: ManualClock
) -> None:
    """The jobs of one claim are handed out even when dead-lettering the poison among them
    fails (the poison comes back after its lease); with nothing to hand out, the failure is
    raised (docs/protocol.md, "Building a router")."""
    queue.put("0-poison", "not a job", clock())
    jobs = [job(n=1), job(n=2)]
    for j in jobs:
        generic.enqueue(j)
    queue.fail["dead_letter"] = ConnectionError("down")
    assert [d.job.id for d in generic.receive(max_jobs=3)] == [j.id for j in jobs]
    assert generic.dead_letters() == []
    clock.advance(generic.visibility_timeout)
    queue.fail["dead_letter"] = ConnectionError("down")
    with pytest.raises(RouterError, match="dead_letter"):
        generic.receive(max_jobs=1)
    clock.advance(generic.visibility_timeout)
    generic.receive(max_jobs=3)
    assert [letter.body for letter in generic.dead_letters()] == ["not a job"]


def test_a_claim_that_returns_fewer_than_asked_ends_the_receive(
    generic: GenericRouter, queue: PlainQueue
) -> None:
    """Fewer messages than asked means nothing more is visible now: one claim, not a second
    that finds nothing (docs/protocol.md, "Building a router")."""
    generic.enqueue(job(n=1))
    generic.enqueue(job(n=2))
    queue.calls.clear()
    assert len(generic.receive(max_jobs=5)) == 2
    assert queue.calls == ["claim"]


class _OwnRequeue(MemoryQueue):
    """A queue that requeues dead letters itself (as an SQS queue does), recording calls."""

    def __init__(self) -> None:
        super().__init__()
        self.requeued: list[tuple[str, float]] = []

    def requeue_dead_letter(self, letter_id: str, visible_at: float) -> bool:
        self.requeued.append((letter_id, visible_at))
        letter = self.get_dead_letter(letter_id)
        if letter is None or not self.remove_dead_letter(letter_id):
            return False
        self.put(f"own-{letter_id}", letter.raw_body().decode(), visible_at)
        return True


def test_a_primitive_that_requeues_itself_is_asked_to_after_the_body_is_checked(
    clock: ManualClock,
) -> None:
    """:class:`~reactor.ports.queues.RequeuesDeadLetters`: the router checks the body (a
    letter that is not a job is refused and kept), then lets the primitive requeue."""
    queue = _OwnRequeue()
    assert isinstance(queue, RequeuesDeadLetters)
    router = GenericRouter(queue, clock=clock)
    queued = job(n=7)
    router.enqueue(queued)
    (delivery,) = router.receive()
    router.dead_letter(delivery, "boom")
    queue.put("0-poison", "not a job", clock())
    router.receive()  # dead-letters the poison
    good, bad = router.dead_letters()
    with pytest.raises(DeserializationError):
        router.requeue_dead_letter(bad.id)
    assert queue.requeued == []
    assert router.requeue_dead_letter(good.id) == queued.id
    assert queue.requeued == [(good.id, clock())]
    assert router.requeue_dead_letter(good.id) is None
    assert [d.job.id for d in router.receive()] == [queued.id]
    assert [letter.id for letter in router.dead_letters()] == [bad.id]


class _LongPolling(MemoryQueue):
    """A queue whose claim can block (as SQS long polling), recording each wait; it never
    blocks, and puts a job on the second wait."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.router: GenericRouter | None = None

    def claim_waiting(
        self, limit: int, now: float, visible_at: float, wait_seconds: float
    ) -> list[ClaimedMessage]:
        self.waits.append(wait_seconds)
        if len(self.waits) == 2:
            assert self.router is not None
            self.router.enqueue(job())
        return self.claim(limit, now, visible_at)


def test_a_waiting_receive_over_a_long_polling_primitive_claims_with_the_time_left() -> None:
    """:class:`~reactor.ports.queues.ClaimsWaiting`: each claim of a waiting receive blocks in
    the primitive with the time left; no pause in between, and a receive that does not wait
    never blocks (docs/protocol.md, "Building a router")."""
    queue = _LongPolling()
    assert isinstance(queue, ClaimsWaiting)
    queue.router = router = GenericRouter(queue, clock=ManualClock(1_800_000_000.0))
    assert router.receive(wait_seconds=0) == [] and queue.waits == []
    deliveries = router.receive(wait_seconds=30)
    assert len(deliveries) == 1 and len(queue.waits) == 2
    assert 29 < queue.waits[0] <= 30 and queue.waits[1] <= queue.waits[0]
