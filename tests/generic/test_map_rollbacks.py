"""DocumentMapRollbackStore on the memory document store (docs/protocol.md#map-rollbacks)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from reactor.generic.map_rollbacks import (
    MAP_ROLLBACK_OUTCOMES,
    MAP_ROLLBACK_SEEN,
    MAP_ROLLBACKS,
    DocumentMapRollbackStore,
)
from reactor.memory import ManualClock, MemoryDocumentStore, MemoryProbe, MemoryStorage
from reactor.ports import MapRollbackMetadata, RollbackOutcome, RollbackSummary

TTL = 100.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def storage(clock: ManualClock) -> MemoryStorage:
    return MemoryStorage(clock=clock, context_ttl=TTL)


def meta(map_id: str = "m1", total: int = 5, **extra: object) -> MapRollbackMetadata:
    fields: dict[str, object] = {
        "map_id": map_id,
        "total": total,
        "batch_size": 2,
        "step_name": "charge_all",
        "owner_context_id": "owner",
        "owner_reactor": "Checkout",
        "element_reactor": "Charge",
        "started_at": 50.25,
        "kind": "compensate",
    }
    fields.update(extra)
    return MapRollbackMetadata(**fields)  # type: ignore[arg-type]


def test_start_is_once_and_returns_the_first_metadata(storage: MemoryStorage) -> None:
    first = meta(total=5)
    assert storage.map_rollbacks.start(first) == (True, first)
    created, stored = storage.map_rollbacks.start(meta(total=9, kind="undo"))
    assert created is False
    assert stored == first and isinstance(stored.total, int)
    assert storage.map_rollbacks.metadata("m1") == first
    assert storage.map_rollbacks.metadata("unknown") is None


def test_concurrent_starts_create_once(storage: MemoryStorage) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def work(total: int) -> None:
        created, _ = storage.map_rollbacks.start(meta(total=total))
        with lock:
            results.append(created)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


def test_position_claims_clip_the_range_not_the_offset(storage: MemoryStorage) -> None:
    storage.map_rollbacks.start(meta(total=5))
    assert storage.map_rollbacks.offset("m1") == 0
    claims = [storage.map_rollbacks.claim_positions("m1", 2) for _ in range(4)]
    assert claims == [range(0, 2), range(2, 4), range(4, 5), range(6, 5)]
    assert [list(c) for c in claims] == [[0, 1], [2, 3], [4], []]
    assert storage.map_rollbacks.offset("m1") == 8


def test_claims_before_start_are_empty(storage: MemoryStorage) -> None:
    assert list(storage.map_rollbacks.claim_positions("m1", 3)) == []
    assert storage.map_rollbacks.offset("m1") == 3
    assert storage.map_rollbacks.metadata("m1") is None
    assert storage.map_rollbacks.scan() == []
    # a later start keeps the offset already claimed
    storage.map_rollbacks.start(meta(total=5))
    assert list(storage.map_rollbacks.claim_positions("m1", 3)) == [3, 4]


def test_outcomes_first_write_wins_and_views_agree(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    rb.start(meta(total=3))
    assert rb.put_outcome("m1", 0, RollbackOutcome(None, "context_unavailable")) is True
    assert rb.put_outcome("m1", 1, RollbackOutcome(1, "undone")) is True
    assert rb.put_outcome("m1", 2, RollbackOutcome(2, "failed", '[{"e":1}]')) is True
    assert rb.put_outcome("m1", 2, RollbackOutcome(2, "undone")) is False
    assert rb.outcome("m1", 2) == RollbackOutcome(2, "failed", '[{"e":1}]')
    assert rb.outcome("m1", 7) is None
    assert list(rb.outcomes("m1")) == [
        (0, RollbackOutcome(None, "context_unavailable")),
        (1, RollbackOutcome(1, "undone")),
        (2, RollbackOutcome(2, "failed", '[{"e":1}]')),
    ]
    assert rb.count_outcomes("m1") == 3
    assert rb.outcome_positions("m1") == [0, 1, 2]
    assert rb.indexes_seen("m1", [0, 1, 2]) == [False, True, True]
    assert rb.summary("m1") == RollbackSummary(total=3, settled=3, outstanding=0, failed=2)


def test_outcomes_page_through_every_position_in_order(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    for position in [4, 0, 3, 1, 2]:
        rb.put_outcome("m1", position, RollbackOutcome(position, "undone"))
    rb.put_outcome("m2", 0, RollbackOutcome(0, "undone"))
    assert [p for p, _ in rb.outcomes("m1", page_size=2)] == [0, 1, 2, 3, 4]
    assert [p for p, _ in rb.outcomes("m1", page_size=0)] == [0, 1, 2, 3, 4]


def test_a_losing_outcome_never_marks_its_index(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    assert rb.put_outcome("m1", 0, RollbackOutcome(3, "undone")) is True
    assert rb.put_outcome("m1", 0, RollbackOutcome(7, "undone")) is False
    assert rb.indexes_seen("m1", [3, 7, -1]) == [True, False, False]


def test_a_lost_seen_mark_is_repaired_by_the_next_duplicate(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    rb.put_outcome("m1", 0, RollbackOutcome(3, "undone"))
    docs = storage.documents
    found = docs.read(MAP_ROLLBACK_SEEN, "m1:000000000003")
    # simulate a crash between the outcome write and the seen mark
    assert docs.write(MAP_ROLLBACK_SEEN, "m1:000000000003", None,
                      expected_version=found.version, expires_at=None)
    assert rb.indexes_seen("m1", [3]) == [False]
    assert rb.put_outcome("m1", 0, RollbackOutcome(3, "undone")) is False
    assert rb.indexes_seen("m1", [3]) == [True]


def test_negative_positions_are_refused(storage: MemoryStorage) -> None:
    with pytest.raises(ValueError):
        storage.map_rollbacks.put_outcome("m1", -1, RollbackOutcome(None, "not_needed"))
    assert storage.map_rollbacks.outcome("m1", -1) is None


def test_hand_off_flag_and_signal_claim(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    rb.start(meta())
    assert rb.handed_off("m1") is False
    rb.mark_handed_off("m1")
    rb.mark_handed_off("m1")
    assert rb.handed_off("m1") is True
    assert rb.claim_signal("m1") is True
    assert rb.claim_signal("m1") is False
    assert rb.metadata("m1") == meta()  # flags never disturb the metadata


def test_scan_and_summary(storage: MemoryStorage) -> None:
    rb = storage.map_rollbacks
    assert rb.summary("m1") is None
    rb.start(meta("m1", total=4))
    rb.start(meta("m2", total=2))
    scanned = rb.scan()
    assert [(m.map_id, m.owner_reactor, m.total) for m in scanned] == [
        ("m1", "Checkout", 4), ("m2", "Checkout", 2),
    ]
    assert len(rb.scan(limit=1)) == 1
    rb.put_outcome("m1", 0, RollbackOutcome(0, "element_in_flight"))
    rb.put_outcome("m1", 1, RollbackOutcome(1, "not_needed"))
    assert rb.summary("m1") == RollbackSummary(total=4, settled=2, outstanding=2, failed=1)
    assert storage.maps.scan() == []  # rollback records never show up as maps


def test_every_head_write_restamps_retention(storage: MemoryStorage, clock: ManualClock) -> None:
    probe = MemoryProbe(storage)
    rb = storage.map_rollbacks
    rb.start(meta())
    assert probe.ttl(MAP_ROLLBACKS, "m1") == pytest.approx(TTL)
    clock.advance(TTL - 1)
    rb.claim_positions("m1", 2)
    clock.advance(2)
    assert rb.metadata("m1") is not None
    clock.advance(TTL - 5)  # 3 s before the claim's stamp lapses
    rb.mark_handed_off("m1")
    clock.advance(2)
    assert rb.handed_off("m1") is True and rb.offset("m1") == 2
    clock.advance(TTL)
    assert rb.metadata("m1") is None and rb.offset("m1") == 0 and rb.scan() == []


def test_expired_rollback_claims_are_taken_over(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    rb = storage.map_rollbacks
    rb.start(meta(total=5))
    rb.claim_signal("m1")
    rb.put_outcome("m1", 0, RollbackOutcome(0, "failed"))
    clock.advance(TTL)
    assert storage.documents.read(MAP_ROLLBACKS, "m1").version is not None
    created, stored = rb.start(meta(total=9))
    assert created is True and stored.total == 9
    assert rb.claim_signal("m1") is True
    assert rb.put_outcome("m1", 0, RollbackOutcome(0, "undone")) is True
    assert rb.outcome("m1", 0) == RollbackOutcome(0, "undone")


class _ScanLimits(MemoryDocumentStore):
    """A memory document store recording the ``limit`` of every scan."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.limits: list[int] = []

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        self.limits.append(limit)
        return super().scan(collection, index=index, after=after, limit=limit)


def test_outcomes_read_page_size_at_a_time_and_at_least_one(clock: ManualClock) -> None:
    """``outcomes`` reads ``page_size`` outcomes per document-store scan (a page size below 1
    reads one at a time)."""
    docs = _ScanLimits(clock)
    rb = DocumentMapRollbackStore(docs)
    for position in range(3):
        rb.put_outcome("m1", position, RollbackOutcome(position, "undone"))
    for page_size in (1, 0):
        docs.limits.clear()
        assert [p for p, _ in rb.outcomes("m1", page_size=page_size)] == [0, 1, 2]
        assert docs.limits == [1, 1, 1, 1]  # three full pages, then an empty one
    docs.limits.clear()
    assert [p for p, _ in rb.outcomes("m1", page_size=2)] == [0, 1, 2]
    assert docs.limits == [2, 2]


def test_rollback_state_lives_86400_seconds_after_its_last_write_by_default(
    clock: ManualClock,
) -> None:
    """Without a ``context_ttl`` the store keeps rollback state for the default retention of
    durable run state, 86400 s after each write (docs/protocol.md, "Conventions")."""
    docs = MemoryDocumentStore(clock=clock)
    rb = DocumentMapRollbackStore(docs)
    rb.start(meta())
    rb.put_outcome("m1", 0, RollbackOutcome(0, "undone"))
    for collection, key in ((MAP_ROLLBACKS, "m1"), (MAP_ROLLBACK_OUTCOMES, "m1:000000000000"),
                            (MAP_ROLLBACK_SEEN, "m1:000000000000")):
        raw = docs.raw(collection, key)
        assert raw is not None and raw.expires_at == clock() + 86400.0
    clock.advance(86399.5)
    assert rb.metadata("m1") == meta() and rb.outcome("m1", 0) is not None
    clock.advance(0.5)
    assert rb.metadata("m1") is None and rb.outcome("m1", 0) is None


def test_scan_lists_at_most_1000_rollbacks_by_default(storage: MemoryStorage) -> None:
    """MapRollbackStore.scan's default limit is the port's, 1000 rollbacks, then a cursor to
    the rest."""
    for i in range(1001):
        storage.map_rollbacks.start(meta(f"m{i:04d}"))
    page = storage.map_rollbacks.scan()
    assert len(page) == 1000 and page[-1].map_id == "m0999"
    assert page.next_cursor is not None
    rest = storage.map_rollbacks.scan(cursor=page.next_cursor)
    assert [m.map_id for m in rest] == ["m1000"]
