"""DocumentClaimStore on the memory document store (docs/protocol.md#claims)."""

from __future__ import annotations

import hashlib
import threading

import pytest

from reactor.generic._durable import DurableCollection
from reactor.generic.claims import IDEMPOTENCY, INTERRUPT_ATTEMPTS, INTERRUPT_RESUMES
from reactor.memory import ManualClock, MemoryDocumentStore, MemoryProbe, MemoryStorage

TTL = 100.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def storage(clock: ManualClock) -> MemoryStorage:
    return MemoryStorage(clock=clock, context_ttl=TTL)


def idem_key(reactor: str, key: str) -> str:
    return f"{reactor}:{hashlib.sha256(key.encode()).hexdigest()}"


# -- correlation ids (item 8, adapted: the loser gets the holder instead of an exception) -------


def test_correlation_first_writer_wins(storage: MemoryStorage) -> None:
    claims = storage.claims
    assert claims.claim_correlation_id("order-1", "ctx-a") is None
    assert claims.claim_correlation_id("order-1", "ctx-a") is None  # same id: a no-op
    assert claims.claim_correlation_id("order-1", "ctx-b") == "ctx-a"
    assert claims.correlation_context("order-1") == "ctx-a"
    assert claims.release_correlation_id("order-1") is True
    assert claims.correlation_context("order-1") is None
    assert claims.release_correlation_id("order-1") is False
    assert claims.claim_correlation_id("order-1", "ctx-b") is None


def test_reclaiming_the_same_correlation_restamps(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    storage.claims.claim_correlation_id("c", "ctx")
    clock.advance(TTL - 1)
    storage.claims.claim_correlation_id("c", "ctx")
    clock.advance(2)
    assert storage.claims.correlation_context("c") == "ctx"


# -- interrupt resumes (items 22-23) ---------------------------------------------------------


def test_interrupt_resume_claims(storage: MemoryStorage) -> None:
    claims = storage.claims
    assert claims.claim_interrupt_resume("ctx", "approve", '{"ok":true}') is True
    assert claims.claim_interrupt_resume("ctx", "approve", '{"ok":false}') is False
    assert claims.claim_interrupt_resume("ctx", "child.sign", '"x"') is True
    assert claims.interrupt_resumes("ctx", ["approve", "child.sign", "never"]) == {
        "approve": '{"ok":true}',
        "child.sign": '"x"',
    }
    assert claims.interrupt_resumes("ctx", []) == {}
    assert claims.interrupt_resumes("other", ["approve"]) == {}


def test_interrupt_attempts_count_and_restamp(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    probe = MemoryProbe(storage)
    assert storage.claims.increment_interrupt_attempts("ctx", "approve") == 1
    clock.advance(TTL - 1)
    assert storage.claims.increment_interrupt_attempts("ctx", "approve") == 2
    assert probe.ttl(INTERRUPT_ATTEMPTS, "ctx:approve") == pytest.approx(TTL)
    assert storage.claims.increment_interrupt_attempts("ctx", "other") == 1
    clock.advance(TTL)
    assert storage.claims.increment_interrupt_attempts("ctx", "approve") == 1


def test_a_resume_claim_expires_with_the_run(storage: MemoryStorage, clock: ManualClock) -> None:
    probe = MemoryProbe(storage)
    storage.claims.claim_interrupt_resume("ctx", "approve", "1")
    assert probe.ttl(INTERRUPT_RESUMES, "ctx:approve") == pytest.approx(TTL)
    clock.advance(TTL)
    assert storage.claims.interrupt_resumes("ctx", ["approve"]) == {}
    assert storage.claims.claim_interrupt_resume("ctx", "approve", "2") is True
    assert storage.claims.interrupt_resumes("ctx", ["approve"]) == {"approve": "2"}


# -- idempotency keys (items 24-25) ----------------------------------------------------------


def test_idempotency_claims(storage: MemoryStorage) -> None:
    claims = storage.claims
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-a") is None
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-b") == "ctx-a"
    assert claims.claim_idempotency_key("Refunds", "k1", "ctx-c") is None


def test_idempotency_release_only_by_the_holder(storage: MemoryStorage) -> None:
    claims = storage.claims
    claims.claim_idempotency_key("Orders", "k1", "ctx-a")
    assert claims.release_idempotency_key("Orders", "k1", "ctx-b") is False
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-b") == "ctx-a"
    assert claims.release_idempotency_key("Orders", "k1", "ctx-a") is True
    assert claims.release_idempotency_key("Orders", "k1", "ctx-a") is False
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-b") is None


def test_idempotency_reclaim_only_from_the_holder(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    claims = storage.claims
    claims.claim_idempotency_key("Orders", "k1", "ctx-a")
    assert claims.reclaim_idempotency_key("Orders", "k1", "ctx-x", "ctx-b") is False
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-z") == "ctx-a"
    clock.advance(TTL - 1)
    assert claims.reclaim_idempotency_key("Orders", "k1", "ctx-a", "ctx-b") is True
    clock.advance(2)  # the reclaim re-stamped retention
    assert claims.claim_idempotency_key("Orders", "k1", "ctx-z") == "ctx-b"
    assert claims.reclaim_idempotency_key("Orders", "unknown", "ctx-a", "ctx-b") is False


def test_idempotency_keys_are_hashed_and_expire(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    long_key = "k" * 5000 + ":weird/|chars"
    storage.claims.claim_idempotency_key("Orders", long_key, "ctx-a")
    raw = storage.documents.raw(IDEMPOTENCY, idem_key("Orders", long_key))
    assert raw is not None and raw.value["context_id"] == "ctx-a"
    clock.advance(TTL)
    found = storage.documents.read(IDEMPOTENCY, idem_key("Orders", long_key))
    assert found.value is None and found.version is not None  # logically expired, stored
    assert storage.claims.claim_idempotency_key("Orders", long_key, "ctx-b") is None
    assert storage.claims.release_idempotency_key("Orders", long_key, "ctx-a") is False


def test_racing_claims_have_one_winner(storage: MemoryStorage) -> None:
    winners: list[str] = []
    lock = threading.Lock()

    def work(context_id: str) -> None:
        if storage.claims.claim_idempotency_key("Orders", "k", context_id) is None:
            with lock:
                winners.append(context_id)

    threads = [threading.Thread(target=work, args=(f"ctx-{i}",)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert storage.claims.claim_idempotency_key("Orders", "k", "late") == winners[0]


# -- the create-if-absent primitive -------------------------------------------------------------


def test_create_takes_over_an_expired_document_by_its_version(clock: ManualClock) -> None:
    docs = MemoryDocumentStore(clock=clock)
    claims = DurableCollection(docs, "c", 10.0)
    assert claims.create("k", {"v": 1}) is True
    assert claims.create("k", {"v": 2}) is False
    clock.advance(10)
    expired = docs.read("c", "k")
    assert expired.value is None and expired.version is not None
    # a plain create-if-absent (expected_version=None) would lose against the stored document
    assert docs.write("c", "k", {"v": 3}, expected_version=None, expires_at=None) is False
    assert claims.create("k", {"v": 4}) is True
    assert claims.get("k") == {"v": 4}
    assert docs.read("c", "k").version != expired.version


def test_durable_collection_without_ttl_never_expires(clock: ManualClock) -> None:
    docs = MemoryDocumentStore(clock=clock)
    forever = DurableCollection(docs, "c", None)
    forever.put("k", {"v": 1})
    clock.advance(10**9)
    assert forever.get("k") == {"v": 1}
    assert docs.read("c", "k").expires_at is None


def test_idempotency_document_key_is_the_public_stored_key(storage: MemoryStorage) -> None:
    from reactor.generic.claims import idempotency_document_key

    assert idempotency_document_key("Orders", "k-1") == idem_key("Orders", "k-1")
    storage.claims.claim_idempotency_key("Orders", "k-1", "ctx-1")
    raw = storage.documents.raw(IDEMPOTENCY, idempotency_document_key("Orders", "k-1"))
    assert raw is not None and raw.value["context_id"] == "ctx-1"
