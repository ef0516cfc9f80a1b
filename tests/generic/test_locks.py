"""DocumentLockStore over a DocumentStore (storage-protocol.md §4.2 items 26-27)."""

from __future__ import annotations

import pytest

from reactor.generic.locks import DocumentLockStore
from reactor.ports.records import LockInfo
from reactor.ports.storage import LockStore

from .conftest import START, ProbeDocs


def test_is_a_lock_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentLockStore(docs), LockStore)


def test_item_26_reentrancy(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    assert store.acquire("k", "a", 60) is True
    assert store.acquire("k", "a", 60) is True
    assert store.acquire("k", "b", 60) is False
    assert store.info("k") == LockInfo("a", 2, START + 60)
    assert store.release("k", "b") is False
    assert store.release("k", "a") is True
    assert store.held("k") is True
    assert store.release("k", "a") is True
    assert store.held("k") is False
    assert store.info("k") is None
    assert docs.raw("locks", "k") is None


def test_item_27_expiry_and_extend(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    assert store.acquire("k", "a", 1) is True
    assert store.extend("k", "b", 120) is False
    docs.advance(1.2)
    assert store.held("k") is False
    assert store.release("k", "a") is False
    assert store.acquire("k", "b", 10) is True
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
    assert other.acquire("k", "b", 60) is True


def test_document_expiry_follows_the_lock(docs: ProbeDocs) -> None:
    store = DocumentLockStore(docs)
    store.acquire("k", "a", 60)
    docs.advance(10)
    store.extend("k", "a", 5)
    raw = docs.raw("locks", "k")
    assert raw is not None and raw.expires_at == START + 15
