"""Concurrency: N threads race on one key and exactly the allowed number win
(docs/contract-suite.md).

Every racer starts on a :class:`threading.Barrier` so the calls really overlap. An operation
that reads and then writes (no compare-and-set, no server-side script) wins twice only when
two racers interleave between its read and its write, so each exactly-N check is a series of
races on fresh keys (:func:`race_rounds`): at least :data:`MIN_ROUNDS`, and more, up to
:data:`MAX_ROUNDS`, while the series is within :data:`ROUND_BUDGET` seconds. Every race runs
with the interpreter's thread switch interval cut to :data:`SWITCH_INTERVAL` and starts only
when every racer is awake, so an in-process adapter's threads interleave inside its calls (a
pure-Python read-then-write loses about one race in ten, and an in-process adapter runs
hundreds of rounds); a network adapter's racers overlap anyway, each call waiting on its
socket between its read and its write, so it loses nearly every race. A non-atomic acquire,
claim, mark or assign fails the check with overwhelming probability.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import pytest

from reactor.model.records import RateWindow, RollbackOutcome
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, map_metadata, rollback_metadata, teach, uid
from reactor_contract.optional_operations import read_counter

__all__ = [
    "MAX_ROUNDS",
    "MIN_ROUNDS",
    "ROUND_BUDGET",
    "SWITCH_INTERVAL",
    "ConcurrencyContract",
    "race",
    "race_rounds",
]

T = TypeVar("T")

#: Races every exactly-N check runs, however slow the adapter.
MIN_ROUNDS = 20
#: Races an exactly-N check runs at most (a fast adapter reaches it within the budget).
MAX_ROUNDS = 300
#: Seconds after which a check stops starting races once it ran :data:`MIN_ROUNDS`.
ROUND_BUDGET = 1.0
#: The thread switch interval during a race, in seconds (Python's default is 0.005).
SWITCH_INTERVAL = 1e-6
#: Where the atomicity rule is stated.
_WHERE = 'docs/protocol.md, "Conventions" (first-writer-wins claims)'
_READ_THEN_WRITE = (
    "{op} reads the record and then writes it without a compare-and-set or a server-side "
    "script: not atomic, so two racers that both read it free both win"
)


@contextmanager
def interleaved() -> Iterator[None]:
    """Cut the thread switch interval to :data:`SWITCH_INTERVAL` for the block."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _one_race(pool: ThreadPoolExecutor, n: int, call: Callable[[int], T]) -> list[T]:
    barrier = threading.Barrier(n)
    started = [0]
    guard = threading.Lock()

    def run(i: int) -> T:
        barrier.wait(timeout=30)
        # The barrier wakes its threads one after another; spinning until every racer is
        # awake keeps them all runnable, so the calls below overlap.
        with guard:
            started[0] += 1
        while started[0] < n:
            pass
        return call(i)

    return list(pool.map(run, range(n)))


def race_rounds(
    n: int,
    call: Callable[[str, int], T],
    check: Callable[[str, list[T]], None],
    *,
    prefix: str = "race",
    prepare: Callable[[str], None] | None = None,
) -> int:
    """Race ``n`` threads on a fresh key, round after round, checking every round.

    Each round makes a key ``uid(prefix)``, calls ``prepare(key)`` (if given), then runs
    ``call(key, i)`` for ``i in range(n)`` on ``n`` threads released together, and passes the
    results (in thread order) to ``check(key, results)``, which asserts. Rounds go on until
    :data:`MIN_ROUNDS` ran and :data:`ROUND_BUDGET` seconds passed, or :data:`MAX_ROUNDS` ran.

    Returns:
        The number of rounds run.
    """
    deadline = time.monotonic() + ROUND_BUDGET
    rounds = 0
    with ThreadPoolExecutor(max_workers=n) as pool, interleaved():
        while rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or time.monotonic() < deadline):
            key = uid(prefix)
            if prepare is not None:
                prepare(key)
            results = _one_race(pool, n, lambda i, key=key: call(key, i))  # type: ignore[misc]
            check(key, results)
            rounds += 1
    return rounds


def race(n: int, call: Callable[[int], T]) -> list[T]:
    """Run ``call(i)`` for ``i in range(n)`` on ``n`` threads released together."""
    with ThreadPoolExecutor(max_workers=n) as pool, interleaved():
        return _one_race(pool, n, call)


def not_atomic(op: str, rule: str) -> str:
    """The teaching message of an exactly-N check that failed."""
    return teach("concurrency", f"{rule}, in every race", _READ_THEN_WRITE.format(op=op),
                 _WHERE)


class ConcurrencyContract:
    """Atomicity under contention, for every adapter."""

    reactor_concern = "concurrency"

    @pytest.mark.obligations("O-locks-19")
    def test_one_lock_has_exactly_one_winner(self, storage: Storage) -> None:
        def check(key: str, tokens: list[int]) -> None:
            winners = [i for i, token in enumerate(tokens) if token]
            assert len(winners) == 1 and tokens.count(0) == 7, not_atomic(
                "acquire", f"exactly one of 8 owners racing for a free lock takes it: owners "
                f"{winners} all got a token")
            info = storage.locks.info(key)
            assert info is not None and info.count == 1
            assert (info.owner, info.token) == (f"o-{winners[0]}", tokens[winners[0]])

        race_rounds(8, lambda key, i: storage.locks.acquire(key, f"o-{i}", HOUR), check,
                    prefix="lock")

    @pytest.mark.obligations("O-semaphores-15")
    def test_a_semaphore_never_exceeds_its_limit(self, storage: Storage) -> None:
        key = uid("sem")
        peak = 0
        holding = 0
        guard = threading.Lock()

        def worker(i: int) -> int:
            nonlocal peak, holding
            holder = f"h-{i}"
            acquired = 0
            for _ in range(5):
                if storage.semaphores.acquire(key, holder, 3, HOUR):
                    acquired += 1
                    with guard:
                        holding += 1
                        peak = max(peak, holding)
                        state = storage.semaphores.state(key)
                        assert state is not None and len(state.holders) <= 3
                    with guard:
                        holding -= 1
                    assert storage.semaphores.release(key, holder) is True
            return acquired

        acquired = race(16, worker)
        assert sum(acquired) > 0
        assert peak <= 3
        assert storage.semaphores.state(key) is None

    @pytest.mark.obligations("O-semaphores-14")
    def test_a_semaphore_admits_exactly_its_limit_at_once(self, storage: Storage) -> None:
        def check(key: str, wins: list[bool]) -> None:
            winners = {f"h-{i}" for i, won in enumerate(wins) if won}
            state = storage.semaphores.state(key)
            holders = set() if state is None else set(state.holders)
            assert len(winners) == 3 and holders == winners, not_atomic(
                "acquire", f"exactly 3 of 16 holders racing for a semaphore of 3 get a lease, "
                f"and the leases stored are theirs: {sorted(winners)} were told True, "
                f"{sorted(holders)} are stored")

        race_rounds(16, lambda key, i: storage.semaphores.acquire(key, f"h-{i}", 3, HOUR), check,
                    prefix="sem")

    @pytest.mark.obligations("O-rate_limits-14")
    def test_a_rate_limit_admits_exactly_its_limit(self, storage: Storage) -> None:
        key = uid("rate")
        window = RateWindow("eon", 1e9, 10)
        decisions = race(16, lambda _i: [storage.rate_limits.hit(key, [window]) for _ in range(3)])
        allowed = sum(d.allowed for batch in decisions for d in batch)
        assert allowed == 10
        assert storage.rate_limits.count(key, window) == 10

    @pytest.mark.obligations("O-claims-17")
    def test_an_nx_claim_has_exactly_one_winner(self, storage: Storage) -> None:
        def check(_key: str, results: list[str | None]) -> None:
            winners = [i for i, holder in enumerate(results) if holder is None]
            assert len(winners) == 1, not_atomic(
                "claim_idempotency_key", f"exactly one of 8 runs racing for an idempotency "
                f"key claims it: runs {winners} were all told they claimed it")
            assert all(holder == f"ctx-{winners[0]}" for holder in results if holder is not None)

        race_rounds(
            8, lambda key, i: storage.claims.claim_idempotency_key("orders", key, f"ctx-{i}"),
            check, prefix="order",
        )

    @pytest.mark.obligations("O-claims-17")
    def test_an_interrupt_resume_claim_has_exactly_one_winner(self, storage: Storage) -> None:
        def check(run: str, wins: list[bool]) -> None:
            winners = [i for i, won in enumerate(wins) if won]
            assert len(winners) == 1, not_atomic(
                "claim_interrupt_resume", f"exactly one of 8 resumes racing for an interrupt "
                f"claims it: resumes {winners} all won")
            stored = storage.claims.interrupt_resumes(run, ["approve"])
            assert stored == {"approve": f'"p{winners[0]}"'}

        race_rounds(
            8, lambda run, i: storage.claims.claim_interrupt_resume(run, "approve", f'"p{i}"'),
            check, prefix="ctx",
        )

    @pytest.mark.obligations("O-periods-9")
    def test_period_marks_have_exactly_one_winner(self, storage: Storage) -> None:
        def check(key: str, wins: list[bool]) -> None:
            winners = [i for i, won in enumerate(wins) if won]
            assert len(winners) == 1, not_atomic(
                "mark", f"exactly one of 8 marks racing for a period marks it: marks "
                f"{winners} all won")
            marker = storage.periods.marker(key)
            assert marker is not None and marker.context_id == f"c-{winners[0]}"

        race_rounds(8, lambda key, i: storage.periods.mark(key, ttl=HOUR, context_id=f"c-{i}"),
                    check, prefix="period")

    @pytest.mark.obligations("O-maps-12")
    def test_owner_signal_has_exactly_one_winner(self, storage: Storage) -> None:
        meta = map_metadata()
        storage.maps.init(meta)
        wins = race(8, lambda _i: storage.maps.claim_owner_signal(meta.map_id))
        assert wins.count(True) == 1

    @pytest.mark.obligations("O-maps-6")
    def test_map_counter_decrements_are_exact(self, storage: Storage) -> None:
        meta = map_metadata(count=200)
        storage.maps.init(meta)
        values = race(
            8, lambda _i: [storage.maps.add_to_counter(meta.map_id, -1) for _ in range(25)]
        )
        seen = sorted(v for batch in values for v in batch)
        assert seen == list(range(200))
        assert read_counter(storage.maps, meta.map_id) == 0

    @pytest.mark.obligations("O-maps-23")
    def test_element_appends_never_share_a_position(self, storage: Storage) -> None:
        map_id = uid("map")
        positions = race(
            8,
            lambda i: [storage.maps.append_element(map_id, f"ctx-{i}-{j}") for j in range(10)],
        )
        flat = sorted(p for batch in positions for p in batch)
        assert flat == list(range(80))
        assert storage.maps.count_elements(map_id) == 80

    @pytest.mark.obligations("O-ordered_locks-25")
    def test_ordered_lock_nonces_are_unique(self, storage: Storage) -> None:
        def check(_key: str, nonces: list[int]) -> None:
            assert sorted(nonces) == list(range(1, 9)), not_atomic(
                "assign", f"8 waiters racing for tickets of one ordered lock get the nonces "
                f"1..8, each once: they got {sorted(nonces)} (two waiters holding one ticket "
                "both run as its turn)")

        race_rounds(8, lambda key, _i: storage.ordered_locks.assign(key, ttl=HOUR).nonce, check,
                    prefix="ol")
        key = uid("ol")
        tickets = race(8, lambda _i: storage.ordered_locks.assign(key, ttl=HOUR))
        assert len({t.epoch for t in tickets}) == 1

    @pytest.mark.obligations("O-map_rollbacks-9")
    def test_rollback_outcomes_first_writer_wins(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=1))
        wins = race(
            8,
            lambda i: storage.map_rollbacks.put_outcome(
                map_id, 0, RollbackOutcome(index=i, outcome="undone")
            ),
        )
        assert wins.count(True) == 1
        stored = storage.map_rollbacks.outcome(map_id, 0)
        assert stored is not None and stored.index == wins.index(True)

    @pytest.mark.obligations("O-map_rollbacks-7")
    def test_rollback_position_claims_never_overlap(self, storage: Storage) -> None:
        def check(map_id: str, claims: list[list[int]]) -> None:
            claimed = sorted(p for batch in claims for p in batch)
            assert claimed == list(range(16)), not_atomic(
                "claim_positions", f"8 rollback jobs racing to claim 2 positions each of a "
                f"rollback of 16 claim every position exactly once: they claimed {claims} "
                "(two jobs undoing one element)")
            assert storage.map_rollbacks.offset(map_id) == 16

        def start(map_id: str) -> None:
            storage.map_rollbacks.start(rollback_metadata(map_id, total=16))

        race_rounds(
            8, lambda map_id, _i: list(storage.map_rollbacks.claim_positions(map_id, 2)), check,
            prefix="map", prepare=start,
        )


class TestConcurrency(ConcurrencyContract):
    """The concurrency contract against ``--reactor-storage``."""
