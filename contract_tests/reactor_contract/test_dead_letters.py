"""Dead-letter administration: the optional :class:`reactor.ports.router.DeadLetterAdmin`
capability (docs/workers.md, "Dead letters").

A router that implements it must give every dead letter a stable, unique ``id``, page through
them oldest first, show one by id, requeue one (its job received again with a fresh delivery
count and its payload intact; an undecodable body refused and kept; concurrent requeues of one
id enqueueing it once) and purge some or all. A router without the capability skips every test
here with a reason naming the missing protocol (the conformance table's ``dead_letters`` row).
"""

from __future__ import annotations

import threading

import pytest

from reactor.errors import DeserializationError
from reactor.ports.router import DeadLetter, DeadLetterAdmin, Delivery, Job, Router
from reactor_contract._support import eventually, teach, uid
from reactor_contract.plugin import UNCARRIABLE_BODY, open_router
from reactor_contract.probe import RouterProbe, UnsupportedBody

__all__ = ["NO_ADMIN", "DeadLettersContract"]

#: The skip reason of a router without the capability.
NO_ADMIN = (
    "capability: the router does not implement reactor.ports.router.DeadLetterAdmin "
    "(list/show/requeue/purge of dead letters)"
)
#: Upper bound of a wait for a job that should show up (visibility 1 s + generous slack).
SHOW_UP = 10.0
#: How long the suite watches for a job that must *not* show up.
QUIET = 2.5
#: Concurrent callers of the requeue race.
RACERS = 4


def _job(**payload: object) -> Job:
    return Job(
        kind="run",
        payload={"context_id": uid("ctx"), "reactor": "orders", "note": "caf\u00e9", **payload},
    )


def _receive_one(router: Router, timeout: float = SHOW_UP) -> Delivery | None:
    found = eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=timeout)
    return found[0] if found else None


def _dead_letter_a_job(router: Router, reason: str, job: Job | None = None) -> Job:
    """Enqueue a job, receive it and dead-letter it with ``reason``; returns the job."""
    job = job or _job()
    router.enqueue(job)
    delivery = _receive_one(router)
    assert delivery is not None and delivery.job.id == job.id
    router.dead_letter(delivery, reason)
    return job


def _letters(admin: DeadLetterAdmin, count: int) -> list[DeadLetter]:
    """Every dead letter once ``count`` are listed (bounded poll)."""
    found = eventually(lambda: len(admin.dead_letters()) >= count, timeout=SHOW_UP)
    assert found, f"expected {count} dead letters"
    return admin.dead_letters()


def _inject(probe: RouterProbe, body: str | bytes) -> None:
    try:
        probe.inject_raw(body)
    except UnsupportedBody as exc:
        pytest.skip(f"{UNCARRIABLE_BODY} {exc}")


class DeadLettersContract:
    """:class:`reactor.ports.router.DeadLetterAdmin` behaviour every router offering it shows."""

    reactor_concern = "dead_letters"

    @pytest.fixture
    def admin(self, router: Router) -> DeadLetterAdmin:
        """The router as a :class:`DeadLetterAdmin`; skips when it lacks the capability."""
        if not isinstance(router, DeadLetterAdmin):
            pytest.skip(NO_ADMIN)
        return router

    @pytest.mark.obligations("O-dead_letters-1", "O-dead_letters-2", "O-dead_letters-3")
    def test_every_dead_letter_has_a_stable_unique_id(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        first = _dead_letter_a_job(router, "first")
        second = _dead_letter_a_job(router, "second")
        letters = _letters(admin, 2)
        assert [Job.from_json(d.body).id for d in letters] == [first.id, second.id]
        ids = [d.id for d in letters]
        assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2
        assert [d.id for d in admin.dead_letters()] == ids, "ids must be stable across reads"
        assert admin.dead_letters() == letters

    @pytest.mark.obligations("O-dead_letters-6")
    def test_a_dead_letter_is_shown_by_id(self, router: Router, admin: DeadLetterAdmin) -> None:
        job = _dead_letter_a_job(router, "unknown reactor 'ghost'")
        (letter,) = _letters(admin, 1)
        shown = admin.get_dead_letter(letter.id)
        assert shown == letter
        assert shown.reason == "unknown reactor 'ghost'" and shown.body_encoding == "text"
        assert Job.from_json(shown.body).id == job.id
        assert admin.get_dead_letter(f"{letter.id}0") is None
        assert admin.get_dead_letter("no-such-dead-letter") is None

    @pytest.mark.obligations("O-dead_letters-3")
    def test_dead_letters_page_with_a_cursor(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        jobs = [_dead_letter_a_job(router, f"reason {n}") for n in range(3)]
        everything = _letters(admin, 3)
        first = admin.dead_letters(limit=2)
        assert first == everything[:2]
        rest = admin.dead_letters(limit=2, cursor=first[-1].id)
        assert rest == everything[2:]
        assert [Job.from_json(d.body).id for d in first + rest] == [j.id for j in jobs]
        assert admin.dead_letters(limit=2, cursor=rest[-1].id) == []

    @pytest.mark.obligations("O-dead_letters-7", "O-dead_letters-8")
    def test_a_requeued_job_is_received_again_with_a_fresh_delivery_count(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        job = _job(order=42, lines=[{"sku": "a", "qty": 2}])
        router.enqueue(job)
        first = _receive_one(router)
        assert first is not None
        second = _receive_one(router)  # the lease lapsed: delivery 2
        assert second is not None and second.delivery_count == 2
        router.dead_letter(second, "handler failed on 2 deliveries: boom")
        (letter,) = _letters(admin, 1)

        assert admin.requeue_dead_letter(letter.id) == job.id
        assert admin.get_dead_letter(letter.id) is None
        assert admin.dead_letters() == []
        again = _receive_one(router)
        assert again is not None, "the requeued job never came"
        assert again.delivery_count == 1
        assert again.job.id == job.id and again.job.kind == job.kind
        assert dict(again.job.payload) == dict(job.payload)
        assert again.job.attempt == job.attempt
        router.ack(again)
        assert admin.requeue_dead_letter(letter.id) is None, "a requeued letter is gone"
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET) == []

    @pytest.mark.obligations("O-dead_letters-8")
    def test_requeue_of_an_unknown_id_returns_none(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        assert admin.requeue_dead_letter("no-such-dead-letter") is None
        assert router.receive(max_jobs=1, wait_seconds=0) == []

    @pytest.mark.obligations("O-dead_letters-9")
    def test_concurrent_requeues_of_one_id_enqueue_it_once(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        job = _dead_letter_a_job(router, "boom")
        (letter,) = _letters(admin, 1)
        barrier = threading.Barrier(RACERS)
        results: list[str | None] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def requeue() -> None:
            try:
                barrier.wait(timeout=10)
                outcome = admin.requeue_dead_letter(letter.id)
            except BaseException as exc:  # reported below, never lost in the thread
                with lock:
                    errors.append(exc)
                return
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=requeue) for _ in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors
        assert len(results) == RACERS
        assert [r for r in results if r is not None] == [job.id], results
        delivery = _receive_one(router)
        assert delivery is not None and delivery.job.id == job.id
        router.extend(delivery, 60)
        assert eventually(
            lambda: router.receive(max_jobs=5, wait_seconds=0.2), timeout=QUIET
        ) == [], "the job was enqueued more than once"
        router.ack(delivery)
        assert admin.dead_letters() == []

    @pytest.mark.parametrize(
        "body",
        ["{not json", b'{"id": "caf\xe9", "kind": "run", "payload": {}}'],
        ids=["not-json", "non-utf8"],
    )
    @pytest.mark.obligations("O-dead_letters-10")
    def test_requeue_of_an_undecodable_body_is_refused_and_the_letter_kept(
        self,
        router: Router,
        router_probe: RouterProbe,
        admin: DeadLetterAdmin,
        body: str | bytes,
    ) -> None:
        _inject(router_probe, body)
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=1.0) == []
        (letter,) = _letters(admin, 1)
        with pytest.raises(DeserializationError, match="cannot be requeued"):
            admin.requeue_dead_letter(letter.id)
        assert admin.get_dead_letter(letter.id) == letter, "a refused letter must be kept"
        assert admin.dead_letters() == [letter]
        assert eventually(lambda: router.receive(max_jobs=1, wait_seconds=0.2), timeout=QUIET) == []

    @pytest.mark.obligations("O-dead_letters-11", "O-dead_letters-12")
    def test_purge_by_id_then_all(self, router: Router, admin: DeadLetterAdmin) -> None:
        for n in range(3):
            _dead_letter_a_job(router, f"reason {n}")
        a, b, c = _letters(admin, 3)
        assert admin.purge_dead_letters([a.id]) == 1
        assert admin.dead_letters() == [b, c]
        assert admin.get_dead_letter(a.id) is None
        assert admin.purge_dead_letters([a.id, "no-such-dead-letter"]) == 0
        assert admin.purge_dead_letters([]) == 0
        assert admin.dead_letters() == [b, c]
        assert admin.purge_dead_letters() == 2
        assert admin.dead_letters() == []
        assert admin.purge_dead_letters() == 0

    @pytest.mark.obligations("O-dead_letters-4")
    def test_a_page_of_at_most_zero_letters_is_empty(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        _dead_letter_a_job(router, "boom")
        (letter,) = _letters(admin, 1)
        assert admin.dead_letters(limit=0) == []
        assert admin.dead_letters(limit=-1) == []
        assert admin.dead_letters(limit=1) == [letter]

    @pytest.mark.obligations("O-dead_letters-5")
    def test_a_cursor_the_router_cannot_place_raises_value_error(
        self, router: Router, admin: DeadLetterAdmin
    ) -> None:
        _dead_letter_a_job(router, "boom")
        _letters(admin, 1)
        with pytest.raises(ValueError):
            admin.dead_letters(cursor="no-such-dead-letter")

    @pytest.mark.obligations("O-dead_letters-12")
    def test_purging_all_leaves_the_letters_of_another_prefix(
        self, router: Router, admin: DeadLetterAdmin, reactor_router_url: str
    ) -> None:
        other = open_router(reactor_router_url)
        try:
            assert isinstance(other, DeadLetterAdmin)
            _dead_letter_a_job(router, "mine")
            _dead_letter_a_job(other, "theirs")
            _letters(admin, 1)
            kept = _letters(other, 1)
            assert admin.purge_dead_letters() == 1
            assert admin.dead_letters() == []
            assert other.dead_letters() == kept, teach(
                "dead_letters",
                "purge_dead_letters() deletes this queue's letters only, never those of a "
                "router on another prefix",
                "a purge that deletes the whole dead-letter table or queue, not the prefix's",
                'docs/protocol.md, "Dead-letter administration"',
            )
        finally:
            other.close()


class TestDeadLetters(DeadLettersContract):
    """The dead-letter administration contract against ``--reactor-router``."""
