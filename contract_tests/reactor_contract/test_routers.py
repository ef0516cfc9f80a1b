"""Routers (docs/protocol.md#routers): delays, visibility leases, redelivery, dead letters.

The ``router`` fixture asks for ``visibility_timeout=1`` so redelivery shows within about a
second; waits are bounded polls that return as soon as the job shows up, never blind sleeps.

Poison messages (docs/workers.md, "Hostile input"): bodies a foreign producer may put on the
queue are injected through the router probe; every router must dead-letter each one inside
``receive`` with the reason and its raw body, and keep delivering the jobs around it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from reactor.engine import fast_paths
from reactor.errors import EncodeError, RouterError
from reactor.ports.capabilities import EnqueuesMany
from reactor.ports.router import MAX_ENVELOPE_BYTES, DeadLetter, Delivery, Job, Router
from reactor_contract._support import SUITE_DOC, eventually, teach, uid
from reactor_contract.plugin import UNCARRIABLE_BODY, open_router
from reactor_contract.probe import RouterProbe, UnsupportedBody
from reactor_contract.test_concurrency import race

__all__ = ["RoutersContract"]

#: Upper bound of a wait for a job that should show up (visibility 1 s + generous slack).
SHOW_UP = 10.0
#: The visibility timeout the ``router`` fixture asks for, in seconds.
VISIBILITY = 1.0
#: How long the suite watches for a job that must *not* show up after its lease lapses.
QUIET = 2.5
#: Jobs the racing receivers share, and how many receivers race for them.
RECEIVE_RACE_JOBS = 40
RECEIVERS = 8
#: Upper bound of the race's drain (it stops once every job was seen): generous, so a loaded
#: machine (two suites at once on a Python wire server or moto) only slows a pass down.
RACE_DRAIN = 60.0


def _job(**payload: object) -> Job:
    return Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders", **payload})


def _receive_one(router: Router, timeout: float = SHOW_UP) -> Delivery | None:
    found = eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=timeout)
    return found[0] if found else None


#: The consumer calls a stale receipt must not act on (the stale-receipt rule).
STALE_ACTIONS = ["ack", "retry", "extend", "dead_letter"]


def _redelivered(router: Router) -> tuple[Delivery, Delivery]:
    """Enqueue a job, receive it, let that lease lapse and receive it again (visibility 1 s:
    bounded polls, no blind sleep); returns ``(first, second)`` delivery."""
    router.enqueue(_job())
    first = _receive_one(router)
    assert first is not None
    second = _receive_one(router)
    assert second is not None and second.job.id == first.job.id
    assert second.delivery_count == 2
    return first, second


def _collect(
    router: Router, ids: set[str], timeout: float = SHOW_UP,
    asked_at: dict[str, float] | None = None, extend: float | None = None,
    seen: Counter[str] | None = None,
) -> dict[str, Delivery]:
    """Receive until each job of ``ids`` was delivered once more (bounded poll); returns
    ``{job id: delivery}`` (possibly incomplete when the time ran out). ``asked_at`` gets,
    per job, the monotonic time the receive that delivered it was called: its lease began
    no earlier. ``extend``: extend each new delivery's lease to that many seconds at once
    (so what the test does next happens inside the lease, however slow the machine).
    ``seen`` counts every delivery received, kept or not: on a slow machine a 1 s lease can
    lapse while the others are collected, and that job comes back once more unkept."""
    got: dict[str, Delivery] = {}

    def step() -> bool:
        asked = time.monotonic()
        for delivery in router.receive(max_jobs=len(ids), wait_seconds=0.2):
            if seen is not None:
                seen[delivery.job.id] += 1
            if delivery.job.id not in got:
                got[delivery.job.id] = delivery
                if asked_at is not None:
                    asked_at[delivery.job.id] = asked
                if extend is not None:
                    router.extend(delivery, extend)
        return ids <= set(got)

    eventually(step, timeout=timeout)
    return got


def _redelivered_many(
    router: Router, n: int, asked_at: dict[str, float] | None = None,
    extend: float | None = None, seen: Counter[str] | None = None,
) -> list[tuple[Delivery, Delivery]]:
    """:func:`_redelivered` for ``n`` jobs at once (their leases lapse together, so the
    suite waits one visibility window, not ``n``); ``[(first, second)]`` in enqueue order.
    ``asked_at``, ``extend``, ``seen``: see :func:`_collect` (``seen`` counts both rounds).
    Each kept delivery's ``delivery_count`` is the deliveries received of its job so far."""
    seen = Counter() if seen is None else seen
    jobs = [_job() for _ in range(n)]
    for job in jobs:
        router.enqueue(job)
    ids = {job.id for job in jobs}
    firsts = _collect(router, ids, seen=seen)
    assert set(firsts) == ids, f"only {len(firsts)} of {n} jobs were delivered"
    assert all(d.delivery_count == 1 for d in firsts.values())
    before = Counter(seen)
    seconds = _collect(router, ids, asked_at=asked_at, extend=extend, seen=seen)
    assert set(seconds) == ids, "every job comes back after its visibility window"
    # the first delivery kept in this round is the one after every delivery of the last
    assert all(d.delivery_count == before[d.job.id] + 1 for d in seconds.values())
    return [(firsts[job.id], seconds[job.id]) for job in jobs]


def _stale_call(router: Router, action: str, delivery: Delivery, delay: float) -> None:
    """Call ``action`` with ``delivery`` (a stale receipt); ``delay`` is retry's delay."""
    if action == "ack":
        router.ack(delivery)
    elif action == "retry":
        router.retry(delivery, delay)
    elif action == "extend":
        router.extend(delivery, 60)
    else:
        router.dead_letter(delivery, "late dead letter from a lapsed lease")


#: JSON nested this deep makes a naive decoder raise ``RecursionError``.
_DEEP_JSON = "[" * 5000 + "]" * 5000

#: Poison bodies a foreign producer may send: (id, body, a word the reason must contain).
POISON: list[tuple[str, str | bytes, str]] = [
    # Latin-1 text sent as bytes: not UTF-8.
    ("non-utf8", b'{"id": "caf\xe9", "kind": "run", "payload": {}}', "UTF-8"),
    ("5000-deep-json", _DEEP_JSON, "deeper than"),
    ("not-an-object", '["id", "kind", "payload"]', "object"),
    ("missing-fields", '{"kind": "run", "payload": {}}', "'id'"),
]


def _inject(probe: RouterProbe, body: str | bytes) -> None:
    try:
        probe.inject_raw(body)
    except UnsupportedBody as exc:
        pytest.skip(f"{UNCARRIABLE_BODY} {exc}")


def _raw(body: str | bytes) -> bytes:
    return body if isinstance(body, bytes) else body.encode("utf-8")


def _assert_kept(letter: DeadLetter, body: str | bytes, word: str) -> None:
    """``letter`` holds ``body`` exactly (text, or base64 when not UTF-8) and a reason."""
    assert word in letter.reason, letter.reason
    assert letter.raw_body() == _raw(body)
    if isinstance(body, str):
        assert letter.body_encoding == "text" and letter.body == body
    else:
        assert letter.body_encoding == "base64"


class RoutersContract:
    """:class:`reactor.ports.Router` behaviour every router must show."""

    reactor_concern = "routers"

    @pytest.mark.obligations("O-routers-1", "O-routers-2")
    def test_a_job_round_trips(self, router: Router) -> None:
        job = _job(note="caf\u00e9")
        assert router.enqueue(job) == job.id
        delivery = _receive_one(router)
        assert delivery is not None
        assert delivery.job.id == job.id and delivery.job.kind == "run"
        assert dict(delivery.job.payload) == dict(job.payload)
        assert delivery.delivery_count == 1
        router.ack(delivery)

    @pytest.mark.obligations("O-routers-3")
    def test_receive_on_an_empty_queue_returns_nothing(self, router: Router) -> None:
        assert router.receive(max_jobs=5, wait_seconds=0) == []

    @pytest.mark.obligations("O-routers-4")
    def test_receive_respects_max_jobs(self, router: Router) -> None:
        ids = {router.enqueue(_job()) for _ in range(3)}
        first = router.receive(max_jobs=2, wait_seconds=2)
        assert 1 <= len(first) <= 2
        seen = [d.job.id for d in first]
        while len(seen) < 3:
            more = router.receive(max_jobs=2, wait_seconds=2)
            assert more, "a queued job never came"
            seen += [d.job.id for d in more]
            first += more
        assert set(seen) == ids and len(seen) == 3
        for delivery in first:
            router.ack(delivery)

    @pytest.mark.obligations("O-routers-6")
    def test_never_delivers_before_the_delay(self, router: Router) -> None:
        router.enqueue(_job(), delay_seconds=3)
        assert router.receive(max_jobs=1, wait_seconds=0) == []

    @pytest.mark.obligations("O-routers-1", "O-routers-7")
    def test_any_delay_is_accepted(self, router: Router) -> None:
        job = _job()
        assert router.enqueue(job, delay_seconds=7200) == job.id
        assert router.receive(max_jobs=1, wait_seconds=0.2) == []

    @pytest.mark.obligations("O-routers-8")
    def test_negative_or_non_finite_delays_are_refused(self, router: Router) -> None:
        for delay in (-1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                router.enqueue(_job(), delay_seconds=delay)

    @pytest.mark.obligations("O-routers-9")
    def test_an_unacked_job_comes_back_after_its_visibility_window(self, router: Router) -> None:
        job = _job()
        router.enqueue(job)
        first = _receive_one(router)
        assert first is not None
        assert router.receive(max_jobs=1, wait_seconds=0) == []
        again = _receive_one(router)
        assert again is not None and again.job.id == job.id
        assert again.delivery_count == 2
        router.ack(again)

    @pytest.mark.obligations("O-routers-11")
    def test_an_acked_job_never_comes_back(self, router: Router) -> None:
        router.enqueue(_job())
        delivery = _receive_one(router)
        assert delivery is not None
        router.ack(delivery)
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET) == []

    @pytest.mark.obligations("O-routers-20")
    def test_a_stale_receipt_is_harmless(self, router: Router) -> None:
        router.enqueue(_job())
        first = _receive_one(router)
        assert first is not None
        second = _receive_one(router)
        assert second is not None and second.job.id == first.job.id
        router.ack(first)  # stale: the job was redelivered since
        router.ack(second)
        router.ack(second)

    @pytest.mark.obligations("O-routers-9", "O-routers-19")
    def test_a_stale_receipt_never_touches_the_redelivered_job(self, router: Router) -> None:
        """The stale-receipt rule (reactor.ports.router; docs/writing-an-adapter.md): once the
        lease lapsed and the job was received again, the first receipt's call is a no-op, so
        the job is still there when the second delivery's lease lapses in turn. One job per
        stale call (:data:`STALE_ACTIONS`), all lapsing together: one wait, not four."""
        asked_at: dict[str, float] = {}
        seen: Counter[str] = Counter()
        pairs = _redelivered_many(router, len(STALE_ACTIONS), asked_at, seen=seen)
        for action, (first, _second) in zip(STALE_ACTIONS, pairs, strict=True):
            _stale_call(router, action, first, delay=3600)
        before = Counter(seen)  # on a slow machine a lease lapsed unkept: more than 2
        early = router.receive(max_jobs=len(pairs), wait_seconds=0)
        checked = time.monotonic()
        # a job back this soon came back while its second lease (visibility 1 s, begun no
        # earlier than the receive was called) still held: a stale call re-queued it. One
        # back later lapsed on a slow machine, as it should: it is its third delivery.
        held = [d.job.id for d in early if checked - asked_at[d.job.id] < VISIBILITY]
        assert held == [], "the second leases must hold"
        thirds = {d.job.id: d for d in early}
        thirds.update(_collect(router, {first.job.id for first, _ in pairs} - set(thirds)))
        for action, (first, _second) in zip(STALE_ACTIONS, pairs, strict=True):
            third = thirds.get(first.job.id)
            assert third is not None, teach(
                "routers",
                f"a stale {action} is a no-op: the job another worker holds comes back when "
                "that worker's lease lapses",
                f"{action} keyed by job id only, not by the delivery's receipt",
                f'{SUITE_DOC}, "Rules: routers"',
            )
            assert third.delivery_count == before[first.job.id] + 1
        assert router.dead_letters() == []
        for third in thirds.values():
            router.ack(third)

    @pytest.mark.obligations("O-routers-19", "O-routers-20")
    def test_after_a_stale_receipt_the_current_delivery_can_be_acked(
        self, router: Router
    ) -> None:
        """A stale call (even a retry with no delay) neither re-queues the job nor spoils the
        current receipt: acking the second delivery removes the job for good (one job per
        stale call, all lapsing together; each second lease extended to 30 s as it is
        received, so the acks come inside it however slow the machine)."""
        pairs = _redelivered_many(router, len(STALE_ACTIONS), extend=30)
        for action, (first, _second) in zip(STALE_ACTIONS, pairs, strict=True):
            _stale_call(router, action, first, delay=0)
        assert router.receive(max_jobs=len(pairs), wait_seconds=0) == [], (
            "the second leases must hold"
        )
        for _first, second in pairs:
            router.ack(second)
        back = eventually(
            lambda: router.receive(max_jobs=len(pairs), wait_seconds=0.2), timeout=QUIET
        )
        action_of = {
            first.job.id: action for action, (first, _) in zip(STALE_ACTIONS, pairs, strict=True)
        }
        came_back = sorted(action_of.get(d.job.id, d.job.id) for d in back or [])
        assert back == [], teach(
            "routers",
            f"after a stale call the current receipt still acks the job for good (came back "
            f"after a stale {came_back})",
            "a stale retry or dead_letter that re-queued the job, or an ack the stale call spoiled",
            f'{SUITE_DOC}, "Rules: routers"',
        )
        assert router.dead_letters() == []

    @pytest.mark.obligations("O-routers-12")
    def test_retry_redelivers_after_the_given_delay(self, router: Router) -> None:
        job = _job()
        router.enqueue(job)
        delivery = _receive_one(router)
        assert delivery is not None
        router.retry(delivery, 3600)
        assert router.receive(max_jobs=1, wait_seconds=0.2) == []
        other = _job()
        router.enqueue(other)
        got = _receive_one(router)
        assert got is not None and got.job.id == other.id
        router.ack(got)

    @pytest.mark.obligations("O-routers-12")
    def test_retry_with_no_delay_redelivers_now(self, router: Router) -> None:
        job = _job()
        router.enqueue(job)
        delivery = _receive_one(router)
        assert delivery is not None
        router.retry(delivery, 0)
        again = _receive_one(router, timeout=QUIET)
        assert again is not None and again.job.id == job.id
        router.ack(again)

    @pytest.mark.obligations("O-routers-14")
    def test_extend_keeps_the_job_invisible(self, router: Router) -> None:
        router.enqueue(_job())
        delivery = _receive_one(router)
        assert delivery is not None
        router.extend(delivery, 60)
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET) == []
        router.ack(delivery)

    @pytest.mark.obligations("O-routers-15", "O-routers-16")
    def test_dead_letter_keeps_the_reason_and_acks(self, router: Router) -> None:
        job = _job()
        router.enqueue(job)
        delivery = _receive_one(router)
        assert delivery is not None
        router.dead_letter(delivery, "unknown reactor 'ghost'")
        letters = router.dead_letters()
        assert [letter.reason for letter in letters] == ["unknown reactor 'ghost'"]
        assert Job.from_json(letters[0].body).id == job.id
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET) == []

    @pytest.mark.obligations("O-routers-17", "O-routers-18")
    def test_an_undecodable_message_is_dead_lettered_with_its_reason(
        self, router: Router, router_probe: RouterProbe
    ) -> None:
        router_probe.inject_raw("{not json")
        good = _job()
        router.enqueue(good)
        delivery = _receive_one(router)
        assert delivery is not None and delivery.job.id == good.id
        router.ack(delivery)
        letters = eventually(router.dead_letters, timeout=SHOW_UP)
        assert letters is not None and len(letters) == 1
        assert letters[0].body == "{not json"
        assert letters[0].reason
        assert router.receive(max_jobs=5, wait_seconds=0.2) == []

    @pytest.mark.obligations("O-routers-17")
    def test_an_envelope_of_the_wrong_shape_is_dead_lettered(
        self, router: Router, router_probe: RouterProbe
    ) -> None:
        router_probe.inject_raw('{"id": "", "kind": 3, "payload": []}')
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=1.0) == []
        letters = router.dead_letters()
        assert len(letters) == 1 and letters[0].reason

    @pytest.mark.parametrize(("body", "word"), [(b, w) for _, b, w in POISON],
                             ids=[i for i, _, _ in POISON])
    @pytest.mark.obligations("O-routers-17", "O-routers-18")
    def test_a_poison_body_is_dead_lettered_raw_without_blocking_the_job_behind_it(
        self, router: Router, router_probe: RouterProbe, body: str | bytes, word: str
    ) -> None:
        _inject(router_probe, body)
        good = _job()
        router.enqueue(good)
        delivery = _receive_one(router)
        assert delivery is not None and delivery.job.id == good.id
        router.ack(delivery)
        letters = eventually(router.dead_letters, timeout=SHOW_UP)
        assert letters is not None and len(letters) == 1
        _assert_kept(letters[0], body, word)
        assert router.receive(max_jobs=5, wait_seconds=0.2) == []

    @pytest.mark.obligations("O-routers-17", "O-routers-18")
    def test_poison_among_jobs_never_fails_a_receive(
        self, router: Router, router_probe: RouterProbe
    ) -> None:
        jobs = [_job(), _job(), _job()]
        router.enqueue(jobs[0])
        router_probe.inject_raw(_DEEP_JSON)
        router.enqueue(jobs[1])
        router_probe.inject_raw('{"kind": "run", "payload": {}}')
        router.enqueue(jobs[2])
        seen: dict[str, Delivery] = {}

        def receive_all() -> bool:
            for delivery in router.receive(max_jobs=5, wait_seconds=0.2):  # never raises
                seen[delivery.job.id] = delivery
            return len(seen) == 3

        assert eventually(receive_all, timeout=SHOW_UP)
        assert set(seen) == {job.id for job in jobs}
        for delivery in seen.values():
            router.ack(delivery)
        assert eventually(lambda: len(router.dead_letters()) == 2, timeout=SHOW_UP)
        letters = router.dead_letters()
        assert sorted(letter.raw_body() for letter in letters) == sorted(
            [_DEEP_JSON.encode(), b'{"kind": "run", "payload": {}}']
        )

    @pytest.mark.obligations("O-routers-13")
    def test_retry_keeps_the_delivery_count(self, router: Router) -> None:
        job = _job()
        router.enqueue(job)
        first = _receive_one(router)
        assert first is not None and first.delivery_count == 1
        router.retry(first, 0)
        second = _receive_one(router)
        assert second is not None and second.delivery_count == 2
        assert second.job == job, "retry gives the job back unchanged"
        # a lapsed lease after a retry counts on top of it
        third = _receive_one(router)
        assert third is not None and third.job.id == job.id and third.delivery_count == 3
        router.retry(third, 1)  # a delayed retry keeps the count too
        assert router.receive(max_jobs=1, wait_seconds=0) == []
        fourth = _receive_one(router)
        assert fourth is not None and fourth.job == job and fourth.delivery_count == 4
        router.ack(fourth)

    @pytest.mark.obligations("O-routers-15", "O-routers-16", "O-routers-17")
    def test_dead_letters_come_back_oldest_first_with_their_reasons(
        self, router: Router, router_probe: RouterProbe
    ) -> None:
        first, second = _job(), _job()
        router.enqueue(first)
        delivery = _receive_one(router)
        assert delivery is not None and delivery.job.id == first.id
        router.dead_letter(delivery, "handler failed on 5 deliveries: boom")
        router_probe.inject_raw(_DEEP_JSON)
        router.enqueue(second)
        delivery = _receive_one(router)
        assert delivery is not None and delivery.job.id == second.id
        router.extend(delivery, 60)
        # the poison is dead-lettered by this receive or, on a queue without order, a later one
        assert eventually(
            lambda: router.receive(max_jobs=1, wait_seconds=0.2) == []
            and len(router.dead_letters()) == 2,
            timeout=SHOW_UP,
        )
        router.dead_letter(delivery, "unknown reactor 'ghost'")
        letters = router.dead_letters()
        assert len(letters) == 3
        assert letters[0].reason == "handler failed on 5 deliveries: boom"
        assert Job.from_json(letters[0].body).id == first.id
        _assert_kept(letters[1], _DEEP_JSON, "deeper than")
        assert letters[2].reason == "unknown reactor 'ghost'"
        assert Job.from_json(letters[2].body).id == second.id
        assert [letter.at for letter in letters] == sorted(letter.at for letter in letters)
        assert router.dead_letters(limit=2) == letters[:2]

    # -- the batch fast path (docs/protocol.md, "Optional fast paths"): through
    # reactor.engine.fast_paths.enqueue_all, which calls the router's own enqueue_many when it
    # declares EnqueuesMany and enqueues one by one otherwise.

    @pytest.mark.obligations("O-routers-2", "O-routers-25")
    def test_enqueue_all_queues_every_job_and_returns_their_ids_in_order(
        self, router: Router
    ) -> None:
        jobs = [_job(n=i) for i in range(7)]
        assert fast_paths.enqueue_all(router, jobs) == [job.id for job in jobs]
        got = _collect(router, {job.id for job in jobs})
        assert set(got) == {job.id for job in jobs}, f"only {len(got)} of 7 jobs were delivered"
        for job in jobs:
            delivery = got[job.id]
            assert delivery.job == job and delivery.delivery_count == 1
            router.ack(delivery)
        assert fast_paths.enqueue_all(router, []) == []
        assert router.receive(max_jobs=10, wait_seconds=0.2) == []

    @pytest.mark.obligations("O-routers-26")
    def test_enqueue_all_raises_encode_error_before_queueing_what_follows(
        self, router: Router
    ) -> None:
        too_large = Job(kind="run", payload={"blob": "x" * (MAX_ENVELOPE_BYTES + 1)})
        with pytest.raises(EncodeError):
            fast_paths.enqueue_all(router, [too_large, _job()])
        if isinstance(router, EnqueuesMany):
            # a native batch encodes every envelope before it sends one: all or nothing
            with pytest.raises(EncodeError):
                router.enqueue_many([_job(), _job(), too_large])
        assert eventually(lambda: router.receive(max_jobs=5, wait_seconds=0.2), timeout=QUIET) == []

    @pytest.mark.obligations("O-routers-23")
    def test_enqueue_all_on_a_closed_router_raises_router_error_or_works(
        self, reactor_router_url: str
    ) -> None:
        closed = open_router(reactor_router_url)
        closed.close()
        try:
            fast_paths.enqueue_all(closed, [_job(), _job()])
        except RouterError:
            pass  # typed: fine (so is a router that still works once closed)

    @pytest.mark.obligations("O-routers-22")
    def test_close_is_idempotent(self, router: Router) -> None:
        router.close()
        router.close()

    @pytest.mark.obligations("O-routers-24")
    def test_routers_with_other_prefixes_never_share_jobs(
        self, router: Router, reactor_router_url: str
    ) -> None:
        other = open_router(reactor_router_url)
        try:
            mine, theirs = _job(), _job()
            router.enqueue(mine)
            other.enqueue(theirs)
            got = _receive_one(router)
            seen_by_other = other.receive(max_jobs=10, wait_seconds=0.2)
            ids = {d.job.id for d in seen_by_other}
            assert got is not None and got.job.id == mine.id and mine.id not in ids, teach(
                "routers",
                "a router built from the same URL with another ?prefix= never receives this "
                "router's jobs",
                "ignoring the prefix URL parameter: the queue (stream, table, queue name) must "
                "be namespaced with it",
                f'{SUITE_DOC}, "Isolation: one namespace per test"',
            )
            router.dead_letter(got, "isolation check")
            assert other.dead_letters() == [], "dead letters must be namespaced by prefix too"
            for delivery in seen_by_other:
                other.ack(delivery)
        finally:
            other.close()

    @pytest.mark.obligations("O-routers-23")
    def test_a_closed_router_raises_router_error_never_a_driver_error(
        self, reactor_router_url: str
    ) -> None:
        closed = open_router(reactor_router_url)
        closed.close()
        calls: dict[str, Callable[[], object]] = {
            "enqueue": lambda: closed.enqueue(_job()),
            "receive": lambda: closed.receive(max_jobs=1, wait_seconds=0),
            "dead_letters": lambda: closed.dead_letters(),
        }
        leaked: list[str] = []
        for name, call in calls.items():
            try:
                call()
            except RouterError:
                pass
            except Exception as exc:
                leaked.append(f"{name} raised {type(exc).__module__}.{type(exc).__qualname__}: "
                              f"{str(exc)[:120]}")
        assert not leaked, teach(
            "routers",
            "every transport failure surfaces as reactor.RouterError (a closed router may "
            "still work, or must fail typed): " + "; ".join(leaked),
            "a driver call outside the adapter's try/except that wraps driver errors in "
            "RouterError",
            f'{SUITE_DOC}, "Rules: driver errors"',
        )

    @pytest.mark.obligations("O-routers-8")
    def test_retry_refuses_negative_or_non_finite_delays(self, router: Router) -> None:
        router.enqueue(_job())
        delivery = _receive_one(router)
        assert delivery is not None
        router.extend(delivery, 60)
        for delay in (-1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                router.retry(delivery, delay)
        router.ack(delivery)

    @pytest.mark.obligations("O-routers-5")
    def test_a_waiting_receive_returns_a_job_enqueued_meanwhile(self, router: Router) -> None:
        job = _job()
        timer = threading.Timer(0.5, router.enqueue, args=(job,))
        timer.start()
        try:
            got = router.receive(max_jobs=1, wait_seconds=SHOW_UP)
        finally:
            timer.join()
        assert [d.job.id for d in got] == [job.id], teach(
            "routers",
            f"receive(wait_seconds={SHOW_UP:g}) returns a job enqueued 0.5 s into its wait "
            f"(got {len(got)} deliveries)",
            "a wait that looks for due jobs once, then sleeps, or returns [] when a blocking "
            "read times out early",
            'docs/protocol.md, "Routers"',
        )
        router.ack(got[0])

    @pytest.mark.obligations("O-routers-21")
    def test_a_lapsed_lease_not_yet_redelivered_is_still_current(self, router: Router) -> None:
        router.enqueue(_job())
        delivery = _receive_one(router)
        assert delivery is not None
        time.sleep(VISIBILITY + 0.5)  # the lease lapses; nothing receives the job meanwhile
        router.ack(delivery)
        back = eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET)
        assert back == [], teach(
            "routers",
            "a receipt whose lease lapsed, the job not delivered again yet, is still current: "
            "its ack removes the job for good",
            "an ack refused as stale once the lease end passed (check the receipt, not the "
            "clock)",
            'docs/protocol.md, "Routers"',
        )

    @pytest.mark.obligations("O-routers-10")
    def test_concurrent_receives_never_hand_out_one_delivery_twice(self, router: Router) -> None:
        jobs = [_job(n=i) for i in range(RECEIVE_RACE_JOBS)]
        fast_paths.enqueue_all(router, jobs)
        ids = {job.id for job in jobs}
        seen: set[str] = set()
        guard = threading.Lock()
        deadline = time.monotonic() + RACE_DRAIN

        def drain(_i: int) -> list[Delivery]:
            got: list[Delivery] = []
            while time.monotonic() < deadline:
                with guard:
                    if ids <= seen:
                        break
                batch = router.receive(max_jobs=3, wait_seconds=0.2)
                with guard:
                    seen.update(d.job.id for d in batch)
                got += batch
            return got

        deliveries = [d for batch in race(RECEIVERS, drain) for d in batch]
        assert seen == ids, f"only {len(seen)} of {len(ids)} jobs were delivered"
        handed = [(d.job.id, d.delivery_count) for d in deliveries]
        twice = sorted({pair for pair in handed if handed.count(pair) > 1})
        assert twice == [], teach(
            "routers",
            f"{RECEIVERS} receivers racing on one queue never get the same delivery (a job "
            f"with one delivery_count) twice: {len(twice)} deliveries went to two receivers",
            "a claim that selects due messages and then leases them in a second request "
            "(no conditional update, no script, no row lock)",
            'docs/protocol.md, "Building a router"',
        )
        for delivery in deliveries:
            router.ack(delivery)


class TestRouters(RoutersContract):
    """The routers contract against ``--reactor-router``."""
