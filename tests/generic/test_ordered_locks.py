"""DocumentOrderedLockStore over a DocumentStore (items 36-43).

Epochs: docs/coordination.md#fencing-tokens.
"""

from __future__ import annotations

from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.model.coordination.fencing import FENCE_RETENTION, clock_micros
from reactor.model.records import OrderedGate, OrderedLockState, OrderedTicket
from reactor.ports.storage import OrderedLockStore

from .conftest import START, ProbeDocs

PP = 600.0
TTL = 86_400.0
E0 = clock_micros(START)  # the first epoch of a key: the clock in microseconds


def test_is_an_ordered_lock_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentOrderedLockStore(docs), OrderedLockStore)


def test_items_36_39_assign_gate_advance_and_gc(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    t1, t2 = store.assign("k", ttl=TTL), store.assign("k", ttl=TTL)
    assert (t1, t2) == (OrderedTicket(1, E0), OrderedTicket(2, E0))
    assert store.assign("other", ttl=TTL) == OrderedTicket(1, E0)
    view = store.peek("k")
    assert (view.next_nonce, view.last_completed, sorted(view.in_flight)) == (2, 0, [1, 2])
    assert store.can_proceed("k", t1, poison_pill_timeout=PP).state == "go"
    gate = store.can_proceed("k", t2, poison_pill_timeout=PP)
    assert gate.state == "wait" and 1 <= gate.retry_after <= PP
    assert store.advance("k", t2, failed=False, ttl=TTL) == 0  # out of order
    assert store.advance("k", t1, failed=False, ttl=TTL) == 1
    assert store.advance("k", t2, failed=False, ttl=TTL) == 2
    assert store.peek("k") == OrderedLockState(0, 0, 0, E0, {})
    assert store.assign("k", ttl=TTL) == OrderedTicket(1, E0 + 1)  # the clock stood still


def test_item_37_poison_drain_on_the_store_clock(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    tickets = [store.assign("k", ttl=TTL) for _ in range(4)]
    docs.advance(PP + 1)
    fresh = store.assign("k", ttl=TTL)
    gate = store.can_proceed("k", fresh, poison_pill_timeout=PP)
    assert gate == OrderedGate("poison_advance", 0.0, 4, 0)
    assert store.heartbeat("k", tickets[0]) is False  # its timer was drained


def test_items_38_42_heartbeat_fences_and_drained_go(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    t1, t2 = store.assign("k", ttl=TTL), store.assign("k", ttl=TTL)
    docs.advance(PP / 2)
    assert store.heartbeat("k", t2) is True
    docs.advance(PP / 2 + 1)
    assert store.can_proceed("k", t2, poison_pill_timeout=PP).state == "poison_advance"
    assert store.advance("k", t2, failed=False, ttl=TTL) == 2
    gate = store.can_proceed("k", t1, poison_pill_timeout=PP)
    assert gate.state == "drained_go"
    assert store.advance("k", t1, failed=True, ttl=TTL) == 0
    assert store.peek("k") == OrderedLockState(0, 0, 0, E0, {})
    n1 = store.assign("k", ttl=TTL)
    n2 = store.assign("k", ttl=TTL)
    assert n1 == OrderedTicket(1, clock_micros(START + PP + 1))
    assert store.can_proceed("k", t1, poison_pill_timeout=PP).state == "stale"
    assert store.heartbeat("k", t1) is False
    assert store.advance("k", t1, failed=True, ttl=TTL) == 0
    assert store.can_proceed("k", n1, poison_pill_timeout=PP).state == "go"
    assert store.can_proceed("k", n2, poison_pill_timeout=PP).state == "wait"
    assert store.peek("k").first_failed == 0


def test_item_40_failures(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    t1, t2, t3 = (store.assign("k", ttl=TTL) for _ in range(3))
    assert store.advance("k", t3, failed=True, ttl=TTL) == 0  # ahead of the cursor: recorded
    assert store.advance("k", t1, failed=True, ttl=TTL) == 1
    assert store.can_proceed("k", t2, poison_pill_timeout=PP).first_failed == 1
    assert store.advance("k", t1, failed=True, ttl=TTL) == 1  # behind: ignored
    assert store.peek("k").first_failed == 1


def test_item_43_skip_and_advance_keep_the_cursor_ttl(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    t1 = store.assign("k", ttl=100)
    store.assign("k", ttl=100)
    store.assign("k", ttl=100)
    docs.advance(60)
    assert store.advance("k", t1, failed=False, ttl=TTL) == 1
    assert store.skip("k", 2) == 2
    raw = docs.raw("ordered_locks", "k")
    assert raw is not None and raw.value["cursor"] == {"value": 2, "expires_at": START + 100}
    docs.advance(40)
    assert store.peek("k") == OrderedLockState(0, 0, 0, 0, {})  # idled out, epoch included


def test_skip_on_drained_is_zero_and_reset_deletes_the_epoch(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    assert store.skip("k", 3) == 0
    t1 = store.assign("k", ttl=TTL)
    store.advance("k", t1, failed=False, ttl=TTL)
    assert store.skip("k", 3) == 0
    store.reset("k")
    assert store.peek("k") == OrderedLockState(0, 0, 0, 0, {})
    raw = docs.raw("ordered_locks", "k")  # only the lapsed epoch, kept for the retention
    assert raw is not None and raw.value == {"epoch": {"value": E0, "expires_at": START}}
    assert raw.expires_at == START + FENCE_RETENTION
    assert store.assign("k", ttl=TTL) == OrderedTicket(1, E0 + 1)
    store.reset("k")
    docs.advance(FENCE_RETENTION)  # collected: the clock term alone is greater
    assert store.assign("k", ttl=TTL) == OrderedTicket(1, clock_micros(START + FENCE_RETENTION))


def test_document_expiry_never_cuts_the_epoch_short(docs: ProbeDocs) -> None:
    store = DocumentOrderedLockStore(docs)
    t1 = store.assign("k", ttl=1000)
    t2 = store.assign("k", ttl=1000)
    docs.advance(10)
    store.advance("k", t2, failed=True, ttl=5000)  # first_failed outlives the rest
    raw = docs.raw("ordered_locks", "k")
    assert raw is not None and raw.expires_at == START + 10 + 5000 + FENCE_RETENTION
    store.advance("k", t1, failed=False, ttl=TTL)
    store.advance("k", t2, failed=False, ttl=TTL)  # drains: only the epoch is left
    raw = docs.raw("ordered_locks", "k")
    assert raw is not None
    assert raw.value == {"epoch": {"value": E0, "expires_at": START + 1000}}
    assert raw.expires_at == START + 1000 + FENCE_RETENTION
