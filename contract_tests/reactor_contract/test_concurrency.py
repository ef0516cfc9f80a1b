"""Concurrency: N threads race on one key and exactly the allowed number win
(docs/contract-suite.md).

Every racer starts on a :class:`threading.Barrier` so the calls really overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from reactor.model.records import RateWindow, RollbackOutcome
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, map_metadata, rollback_metadata, uid

__all__ = ["ConcurrencyContract"]

T = TypeVar("T")


def race(n: int, call: Callable[[int], T]) -> list[T]:
    """Run ``call(i)`` for ``i in range(n)`` on ``n`` threads released together."""
    barrier = threading.Barrier(n)

    def run(i: int) -> T:
        barrier.wait(timeout=30)
        return call(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


class ConcurrencyContract:
    """Atomicity under contention, for every adapter."""

    reactor_concern = "concurrency"

    def test_one_lock_has_exactly_one_winner(self, storage: Storage) -> None:
        key = uid("lock")
        tokens = race(8, lambda i: storage.locks.acquire(key, f"owner-{i}", HOUR))
        winners = [i for i, token in enumerate(tokens) if token]
        assert len(winners) == 1 and tokens.count(0) == 7
        info = storage.locks.info(key)
        assert info is not None and info.count == 1
        assert (info.owner, info.token) == (f"owner-{winners[0]}", tokens[winners[0]])

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

    def test_a_semaphore_admits_exactly_its_limit_at_once(self, storage: Storage) -> None:
        key = uid("sem")
        wins = race(16, lambda i: storage.semaphores.acquire(key, f"h-{i}", 3, HOUR))
        assert wins.count(True) == 3
        state = storage.semaphores.state(key)
        assert state is not None and len(state.holders) == 3

    def test_a_rate_limit_admits_exactly_its_limit(self, storage: Storage) -> None:
        key = uid("rate")
        window = RateWindow("eon", 1e9, 10)
        decisions = race(16, lambda _i: [storage.rate_limits.hit(key, [window]) for _ in range(3)])
        allowed = sum(d.allowed for batch in decisions for d in batch)
        assert allowed == 10
        assert storage.rate_limits.count(key, window) == 10

    def test_an_nx_claim_has_exactly_one_winner(self, storage: Storage) -> None:
        key = uid("order")
        results = race(8, lambda i: storage.claims.claim_idempotency_key("orders", key, f"ctx-{i}"))
        winners = [i for i, holder in enumerate(results) if holder is None]
        assert len(winners) == 1
        assert all(holder == f"ctx-{winners[0]}" for holder in results if holder is not None)

    def test_period_marks_have_exactly_one_winner(self, storage: Storage) -> None:
        key = uid("period")
        wins = race(8, lambda i: storage.periods.mark(key, ttl=HOUR, context_id=f"ctx-{i}"))
        assert wins.count(True) == 1
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id == f"ctx-{wins.index(True)}"

    def test_owner_signal_has_exactly_one_winner(self, storage: Storage) -> None:
        meta = map_metadata()
        storage.maps.init(meta)
        wins = race(8, lambda _i: storage.maps.claim_owner_signal(meta.map_id))
        assert wins.count(True) == 1

    def test_map_counter_decrements_are_exact(self, storage: Storage) -> None:
        meta = map_metadata(count=200)
        storage.maps.init(meta)
        values = race(
            8, lambda _i: [storage.maps.add_to_counter(meta.map_id, -1) for _ in range(25)]
        )
        seen = sorted(v for batch in values for v in batch)
        assert seen == list(range(200))
        assert storage.maps.counter(meta.map_id) == 0

    def test_element_appends_never_share_a_position(self, storage: Storage) -> None:
        map_id = uid("map")
        positions = race(
            8,
            lambda i: [storage.maps.append_element(map_id, f"ctx-{i}-{j}") for j in range(10)],
        )
        flat = sorted(p for batch in positions for p in batch)
        assert flat == list(range(80))
        assert storage.maps.count_elements(map_id) == 80

    def test_ordered_lock_nonces_are_unique(self, storage: Storage) -> None:
        key = uid("ol")
        tickets = race(8, lambda _i: storage.ordered_locks.assign(key, ttl=HOUR))
        assert sorted(t.nonce for t in tickets) == list(range(1, 9))
        assert len({t.epoch for t in tickets}) == 1

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


class TestConcurrency(ConcurrencyContract):
    """The concurrency contract against ``--reactor-storage``."""
