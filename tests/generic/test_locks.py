"""DocumentLockStore over a DocumentStore (items 26-27; docs/coordination.md#fencing-tokens)."""

from __future__ import annotations

import pytest

from reactor.generic.locks import DocumentLockStore
from reactor.model.coordination.fencing import FENCE_RETENTION, clock_micros
from reactor.model.records import LockInfo
from reactor.ports.storage import LockStore

from .conftest import START, ProbeDocs

T0 = clock_micros(START)  # the first token of a key: the clock in microseconds


def test_is_a_lock_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentLockStore(docs), LockStore)


def test_item_26_reentrancy(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    assert store.acquire("k", "a", 60) == T0
    assert store.acquire("k", "a", 60) == T0
    assert store.acquire("k", "b", 60) == 0
    assert store.info("k") == LockInfo("a", 2, START + 60, T0)
    assert store.release("k", "b") is False
    assert store.release("k", "a") is True
    assert store.held("k") is True
    assert store.release("k", "a") is True
    assert store.held("k") is False
    assert store.info("k") is None
    raw = docs.raw("locks", "k")  # a tombstone, collected after the retention
    assert raw is not None and raw.value["owner"] is None and raw.value["token"] == T0
    assert raw.expires_at == START + FENCE_RETENTION
    assert store.acquire("k", "b", 60) == T0 + 1  # same instant: previous + 1


def test_item_27_expiry_and_extend(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    assert store.acquire("k", "a", 1) == T0
    assert store.extend("k", "b", 120) is False
    docs.advance(1.2)
    assert store.held("k") is False
    assert store.release("k", "a") is False
    assert store.acquire("k", "b", 10) == T0 + 1_200_000
    assert store.extend("k", "b", 120) is True
    info = store.info("k")
    assert info is not None and info.expires_at == pytest.approx(docs.now() + 120)


def test_extend_never_adds(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    store.acquire("k", "a", 60)
    docs.advance(50)
    store.extend("k", "a", 30)
    info = store.info("k")
    assert info is not None and info.expires_at == START + 80
    docs.advance(30)
    assert store.held("k") is False


def test_ttl_none_never_expires(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    store.acquire("k", "a", None)
    docs.advance(10**9)
    assert store.held("k") is True
    raw = docs.raw("locks", "k")
    assert raw is not None and raw.expires_at is None


def test_keys_and_collections_are_isolated(docs: ProbeDocs) -> None:
    one = DocumentLockStore(docs)
    other = DocumentLockStore(docs, collection="other_locks")
    one.acquire("k", "a", 60)
    assert one.held("k2") is False
    assert other.held("k") is False
    assert other.acquire("k", "b", 60) == T0


def test_document_expiry_follows_the_lock(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    store.acquire("k", "a", 60)
    docs.advance(10)
    store.extend("k", "a", 5)
    raw = docs.raw("locks", "k")
    assert raw is not None and raw.expires_at == START + 15 + FENCE_RETENTION


def test_a_collected_record_leaves_the_clock_term(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    first = store.acquire("k", "a", 10)
    docs.advance(10 + FENCE_RETENTION)  # the document itself has expired
    assert store.acquire("k", "b", 10) == clock_micros(START + 10 + FENCE_RETENTION) > first


def test_a_lock_document_written_before_fencing_tokens_reads_as_token_0(docs: ProbeDocs) -> None:
    """The stored shape without ``token`` (docs/coordination.md#fencing-tokens): its holder
    reads as token 0, it keeps working, and the next holder gets a real token."""
    docs.write("locks", "old", {"owner": "a", "count": 1, "expires_at": START + 60},
               expected_version=None, expires_at=START + 60)
    store = DocumentLockStore(docs)
    assert store.info("old") == LockInfo("a", 1, START + 60, 0)
    assert store.acquire("old", "b", 60) == 0  # still held by "a"
    assert store.release("old", "a") is True and store.info("old") is None
    assert store.acquire("old", "b", 60) == T0
