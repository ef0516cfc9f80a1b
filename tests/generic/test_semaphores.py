"""DocumentSemaphoreStore over a DocumentStore (docs/protocol.md#semaphores)."""

from __future__ import annotations

from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.model.records import SemaphoreState
from reactor.ports.storage import SemaphoreStore

from .conftest import START, ProbeDocs


def test_is_a_semaphore_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentSemaphoreStore(docs), SemaphoreStore)


def test_limit_leases_and_release(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    assert store.state("s") is None
    assert store.acquire("s", "t1", 2, 30) is True
    assert store.acquire("s", "t2", 2, 30) is True
    assert store.acquire("s", "t3", 2, 30) is False
    state = store.state("s")
    assert state == SemaphoreState(2, {"t1": START + 30, "t2": START + 30})
    assert state is not None and state.available == 0
    assert store.release("s", "t1") is True
    assert store.release("s", "t1") is False
    assert store.release("s", "forged") is False
    assert store.acquire("s", "t3", 2, 30) is True


def test_reacquire_renews(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    store.acquire("s", "t1", 1, 30)
    docs.advance(20)
    assert store.acquire("s", "t1", 1, 30) is True
    state = store.state("s")
    assert state is not None and dict(state.holders) == {"t1": START + 50}


def test_dead_holder_never_leaks_capacity(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    store.acquire("s", "dead", 1, 10)
    assert store.acquire("s", "live", 1, 10) is False
    docs.advance(10)
    assert store.state("s") is None
    assert store.acquire("s", "live", 1, 10) is True
    assert store.release("s", "dead") is False


def test_extend_keeps_the_lease_alive(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    store.acquire("s", "h", 1, 10)
    docs.advance(8)
    assert store.extend("s", "h", 10) is True
    docs.advance(8)
    assert store.acquire("s", "other", 1, 10) is False
    assert store.extend("s", "nobody", 10) is False


def test_reset_and_empty_semaphore_is_absent(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    store.acquire("s", "a", 3, 10)
    store.reset("s")
    assert store.state("s") is None
    assert docs.raw("semaphores", "s") is None
    store.acquire("s", "a", 3, 10)
    store.release("s", "a")
    assert docs.raw("semaphores", "s") is None


def test_document_expires_with_the_longest_lease(docs: ProbeDocs) -> None:
    store = DocumentSemaphoreStore(docs)
    store.acquire("s", "a", 3, 10)
    store.acquire("s", "b", 3, 50)
    raw = docs.raw("semaphores", "s")
    assert raw is not None and raw.expires_at == START + 50
