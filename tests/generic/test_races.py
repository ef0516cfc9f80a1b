"""Threads racing on one key through the compare-and-set loop (docs/protocol.md#document-stores)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from reactor.generic.locks import DocumentLockStore
from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.model.records import OrderedTicket, RateWindow

from .conftest import ProbeDocs


@pytest.fixture(autouse=True)
def _fast_switching() -> Iterator[None]:
    """Switch threads very often so reads and writes interleave and CAS losses happen."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _race(n: int, work: Callable[[int], None]) -> None:
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_sixteen_threads_on_a_semaphore_of_three(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    wins: list[int] = []
    _race(16, lambda i: wins.append(i) if store.acquire("s", f"h{i}", 3, 60) else None)
    assert len(wins) == 3
    state = store.state("s")
    assert state is not None and set(state.holders) == {f"h{i}" for i in wins}


def test_semaphore_never_admits_more_than_its_limit_under_churn(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    inside = 0
    peak = 0
    mutex = threading.Lock()

    def work(i: int) -> None:
        nonlocal inside, peak
        for _ in range(30):
            if store.acquire("s", f"h{i}", 3, 60):
                with mutex:
                    inside += 1
                    peak = max(peak, inside)
                with mutex:
                    inside -= 1
                assert store.release("s", f"h{i}") is True

    _race(16, work)
    assert 1 <= peak <= 3
    assert store.state("s") is None


def test_eight_threads_on_one_lock_exactly_one_winner(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    wins: list[int] = []
    _race(8, lambda i: wins.append(i) if store.acquire("k", f"o{i}", 60) else None)
    assert len(wins) == 1
    info = store.info("k")
    assert info is not None and info.owner == f"o{wins[0]}" and info.count == 1


def test_lock_mutual_exclusion_under_churn(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    inside = 0
    overlaps = 0
    mutex = threading.Lock()

    def work(i: int) -> None:
        nonlocal inside, overlaps
        for _ in range(30):
            if store.acquire("k", f"o{i}", 60):
                with mutex:
                    inside += 1
                    overlaps += inside > 1
                with mutex:
                    inside -= 1
                assert store.release("k", f"o{i}") is True

    _race(8, work)
    assert overlaps == 0
    assert store.held("k") is False


def test_rate_limit_admits_exactly_the_limit(docs: ProbeDocs) -> None:
    store = DocumentRateLimitStore(docs)
    window = RateWindow("hour", 3600, 25)
    admitted: list[int] = []

    def work(i: int) -> None:
        for _ in range(5):
            if store.hit("api", [window]).allowed:
                admitted.append(i)

    _race(8, work)
    assert len(admitted) == 25
    assert store.count("api", window) == 25


def test_ordered_lock_assign_gives_unique_nonces(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    tickets: list[OrderedTicket] = []
    _race(8, lambda i: tickets.extend(store.assign("k", ttl=600) for _ in range(4)))
    assert sorted(t.nonce for t in tickets) == list(range(1, 33))
    assert len({t.epoch for t in tickets}) == 1
