"""MemoryDocumentStore: the reference versioned-document primitive (reactor/ports/documents.py)."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from reactor.memory import ManualClock, MemoryDocumentStore
from reactor.ports import DocumentStore


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def docs(clock: ManualClock) -> MemoryDocumentStore:
    return MemoryDocumentStore(clock=clock)


def test_is_a_document_store(docs: MemoryDocumentStore) -> None:
    assert isinstance(docs, DocumentStore)


def test_compare_and_set(docs: MemoryDocumentStore) -> None:
    assert docs.read("c", "k").version is None
    assert docs.write("c", "k", {"a": 1}, expected_version=None, expires_at=None) is True
    assert docs.write("c", "k", {"a": 2}, expected_version=None, expires_at=None) is False
    first = docs.read("c", "k")
    assert first.value == {"a": 1} and first.version is not None
    assert docs.write("c", "k", {"a": 2}, expected_version="stale", expires_at=None) is False
    assert docs.write("c", "k", {"a": 2}, expected_version=first.version, expires_at=None)
    second = docs.read("c", "k")
    assert second.value == {"a": 2} and second.version != first.version
    assert docs.write("c", "k", None, expected_version=first.version, expires_at=None) is False
    assert docs.write("c", "k", None, expected_version=second.version, expires_at=None) is True
    assert docs.read("c", "k").version is None


def test_values_are_copied_and_must_be_json(docs: MemoryDocumentStore) -> None:
    value = {"list": [1, 2]}
    docs.write("c", "k", value, expected_version=None, expires_at=None)
    value["list"].append(3)
    read = docs.read("c", "k").value
    assert read == {"list": [1, 2]}
    with pytest.raises(TypeError):
        docs.write("c", "x", {"bad": object()}, expected_version=None, expires_at=None)
    with pytest.raises(ValueError):
        docs.write("c", "x", {"bad": float("nan")}, expected_version=None, expires_at=None)


def test_logical_expiry_keeps_the_version(docs: MemoryDocumentStore, clock: ManualClock) -> None:
    docs.write("c", "k", {"a": 1}, expected_version=None, expires_at=clock() + 10)
    live = docs.read("c", "k")
    assert live.expires_at == clock() + 10
    clock.advance(9.999)
    assert docs.read("c", "k").value == {"a": 1}
    clock.advance(0.001)  # expires_at <= now reads as absent
    expired = docs.read("c", "k")
    assert expired.value is None and expired.version == live.version
    assert docs.scan("c") == []
    assert docs.write("c", "k", {"a": 2}, expected_version=None, expires_at=None) is False
    assert docs.write("c", "k", {"a": 2}, expected_version=live.version, expires_at=None)
    assert docs.read("c", "k").value == {"a": 2}


def test_scan_orders_filters_and_pages(docs: MemoryDocumentStore, clock: ManualClock) -> None:
    for key, index in [("b", "x"), ("a", "y"), ("d", "x"), ("c", None), ("e", "x")]:
        docs.write("c", key, {"k": key}, expected_version=None, expires_at=None, index=index)
    docs.write("c", "f", {"k": "f"}, expected_version=None, expires_at=clock(), index="x")
    docs.write("other", "a", {"k": "o"}, expected_version=None, expires_at=None, index="x")
    assert [k for k, _ in docs.scan("c")] == ["a", "b", "c", "d", "e"]
    assert [k for k, _ in docs.scan("c", index="x")] == ["b", "d", "e"]
    assert [k for k, _ in docs.scan("c", index="x", after="b", limit=1)] == ["d"]
    assert [k for k, _ in docs.scan("c", after="c")] == ["d", "e"]
    assert docs.scan("c", limit=0) == []
    assert docs.scan("nothing") == []
    assert docs.scan("c", index="missing") == []


def test_rewriting_moves_a_document_between_indexes(docs: MemoryDocumentStore) -> None:
    docs.write("c", "k", {"v": 1}, expected_version=None, expires_at=None, index="running")
    version = docs.read("c", "k").version
    docs.write("c", "k", {"v": 2}, expected_version=version, expires_at=None, index="done")
    assert docs.scan("c", index="running") == []
    assert [v for _, v in docs.scan("c", index="done")] == [{"v": 2}]
    version = docs.read("c", "k").version
    docs.write("c", "k", {"v": 3}, expected_version=version, expires_at=None)
    assert docs.scan("c", index="done") == []
    assert len(docs.scan("c")) == 1


def test_purge_removes_only_expired_documents(
    docs: MemoryDocumentStore, clock: ManualClock
) -> None:
    docs.write("c", "old", {}, expected_version=None, expires_at=clock() + 1, index="i")
    docs.write("c", "new", {}, expected_version=None, expires_at=clock() + 100, index="i")
    clock.advance(1)
    assert docs.raw("c", "old") is not None
    assert docs.purge() == 1
    assert docs.raw("c", "old") is None and docs.keys("c") == ["new"]
    assert [k for k, _ in docs.scan("c", index="i")] == ["new"]


def test_automatic_purge(clock: ManualClock) -> None:
    docs = MemoryDocumentStore(clock=clock, purge_every=3)
    docs.write("c", "a", {}, expected_version=None, expires_at=clock() + 1)
    clock.advance(1)
    docs.write("c", "b", {}, expected_version=None, expires_at=None)
    assert docs.keys("c") == ["a", "b"]
    docs.write("c", "c", {}, expected_version=None, expires_at=None)  # third write purges
    assert docs.keys("c") == ["b", "c"]
    with pytest.raises(ValueError):
        MemoryDocumentStore(purge_every=-1)


def test_purge_every_zero_disables_the_automatic_purge(clock: ManualClock) -> None:
    """``purge_every=0`` is accepted and turns the automatic purge off: an expired document
    stays stored until :meth:`MemoryDocumentStore.purge`."""
    docs = MemoryDocumentStore(clock=clock, purge_every=0)
    docs.write("c", "a", {}, expected_version=None, expires_at=clock() + 1)
    clock.advance(1)
    for n in range(5):
        docs.write("c", f"k{n}", {}, expected_version=None, expires_at=None)
    assert docs.raw("c", "a") is not None and docs.read("c", "a").value is None
    assert docs.purge() == 1
    assert docs.raw("c", "a") is None


def test_the_default_store_purges_on_every_4096th_write(clock: ManualClock) -> None:
    """``purge_every`` defaults to 4096: the 4096th write removes what expired before it."""
    docs = MemoryDocumentStore(clock=clock)
    docs.write("c", "expired", {}, expected_version=None, expires_at=clock() + 1)
    clock.advance(1)
    for n in range(4094):  # writes 2 to 4095
        docs.write("c", f"k{n:04d}", {}, expected_version=None, expires_at=None)
    assert docs.raw("c", "expired") is not None
    docs.write("c", "last", {}, expected_version=None, expires_at=None)  # the 4096th
    assert docs.raw("c", "expired") is None
    assert len(docs.keys("c")) == 4095


def test_purge_follows_rewrites_deletes_and_probe_expiries(
    docs: MemoryDocumentStore, clock: ManualClock
) -> None:
    """The purge's expiry list is a hint, checked against the stored document: a document
    rewritten with a later expiry (or none), deleted, or recreated is not removed at its old
    time; one whose expiry a probe moved earlier is removed at the new time, and one a probe
    moved later is kept."""
    now = clock()
    docs.write("c", "rewritten", {}, expected_version=None, expires_at=now + 1)
    version = docs.read("c", "rewritten").version
    docs.write("c", "rewritten", {"v": 2}, expected_version=version, expires_at=now + 50)
    docs.write("c", "forever", {}, expected_version=None, expires_at=now + 1)
    docs.write("c", "forever", {}, expected_version=docs.read("c", "forever").version,
               expires_at=None)
    docs.write("c", "gone", {}, expected_version=None, expires_at=now + 1)
    docs.write("c", "gone", None, expected_version=docs.read("c", "gone").version,
               expires_at=None)
    docs.write("c", "gone", {"again": True}, expected_version=None, expires_at=now + 50)
    docs.write("c", "earlier", {}, expected_version=None, expires_at=now + 50)
    assert docs.set_expiry("c", "earlier", now + 1)
    docs.write("c", "later", {}, expected_version=None, expires_at=now + 1)
    assert docs.set_expiry("c", "later", now + 50)
    clock.advance(1)
    assert docs.purge() == 1
    assert docs.keys("c") == ["forever", "gone", "later", "rewritten"]
    clock.advance(49)
    assert docs.purge() == 3
    assert docs.keys("c") == ["forever"]
    assert docs.purge() == 0


def test_purge_through_a_view_removes_what_the_other_view_wrote(clock: ManualClock) -> None:
    """Views of one store (``with_clock``) share the documents and the purge's expiry list."""
    docs = MemoryDocumentStore(clock=clock, purge_every=0)
    view = docs.with_clock(lambda: clock() + 10)
    docs.write("c", "a", {}, expected_version=None, expires_at=clock() + 5)
    assert view.purge() == 1 and docs.keys("c") == []
    docs.write("c", "b", {}, expected_version=None, expires_at=clock() + 5)
    docs.clear()
    assert view.purge() == 0


def test_the_expiry_list_stays_bounded_by_the_stored_documents(
    clock: ManualClock,
) -> None:
    """One document rewritten many times with a far expiry leaves at most about twice the
    stored documents' entries behind (the list is rebuilt), and the purge still removes it
    at its last expiry, not at any earlier one."""
    docs = MemoryDocumentStore(clock=clock, purge_every=0)
    version = None
    for n in range(5000):
        docs.write("c", "k", {"n": n}, expected_version=version, expires_at=clock() + 100 + n)
        version = docs.read("c", "k").version
    assert len(docs._expiries.heap) <= 1025
    clock.advance(100 + 4998)
    assert docs.purge() == 0 and docs.keys("c") == ["k"]
    clock.advance(1)
    assert docs.purge() == 1 and docs.keys("c") == []


def test_raw_set_expiry_collections_and_clear(docs: MemoryDocumentStore) -> None:
    docs.write("c", "k", {"a": 1}, expected_version=None, expires_at=None, index="i")
    raw = docs.raw("c", "k")
    assert raw is not None and (raw.value, raw.expires_at, raw.index) == ({"a": 1}, None, "i")
    assert docs.set_expiry("c", "k", docs.now()) is True
    assert docs.set_expiry("c", "absent", 1.0) is False
    assert docs.read("c", "k").value is None
    assert docs.collections() == ["c"]
    docs.clear()
    assert docs.collections() == [] and docs.raw("c", "k") is None
    docs.close()
    docs.close()


def test_concurrent_cas_increments_are_exact(docs: MemoryDocumentStore) -> None:
    def work() -> None:
        for _ in range(200):
            while True:
                cur = docs.read("c", "n")
                n = 0 if cur.value is None else cur.value["n"]
                if docs.write("c", "n", {"n": n + 1}, expected_version=cur.version,
                              expires_at=None):
                    break

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert docs.read("c", "n").value == {"n": 800}


def test_manual_constructor_and_advance() -> None:
    docs = MemoryDocumentStore.manual(start=500.0)
    assert docs.now() == 500.0
    docs.advance(2.5)
    assert docs.now() == 502.5
    with pytest.raises(TypeError):
        MemoryDocumentStore().advance(1)
    clock = ManualClock()
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(clock() - 1)
    clock.set(clock() + 10)


def test_a_version_token_is_compared_by_value(docs: MemoryDocumentStore) -> None:
    """A version token is opaque and compared by value (reactor/ports/documents.py): an equal
    copy, as a caller gets back from JSON or another process, is as good as the one read."""
    docs.write("c", "k", {"a": 1}, expected_version=None, expires_at=None)
    version = docs.read("c", "k").version
    assert version is not None
    copy = json.loads(json.dumps(version))
    assert copy == version and copy is not version
    assert docs.write("c", "k", {"a": 2}, expected_version=copy, expires_at=None) is True
    assert docs.read("c", "k").value == {"a": 2}


def test_a_raw_document_is_a_frozen_snapshot(docs: MemoryDocumentStore) -> None:
    """``raw()`` returns a :class:`RawDocument`, an immutable snapshot: assigning a field
    raises instead of seeming to change the stored document."""
    docs.write("c", "k", {"a": 1}, expected_version=None, expires_at=None)
    raw = docs.raw("c", "k")
    assert raw is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(raw, "expires_at", 1.0)  # noqa: B010 (the assignment mypy would refuse)
    assert raw.expires_at is None and docs.read("c", "k").expires_at is None


def test_manual_starts_at_the_manual_clocks_fixed_instant() -> None:
    """``MemoryDocumentStore.manual()`` without ``start`` starts at 1_700_000_000.0, the fixed
    instant a :class:`ManualClock` starts at by default."""
    assert MemoryDocumentStore.manual().now() == 1_700_000_000.0 == ManualClock()()


def test_scan_returns_at_most_1000_documents_by_default(docs: MemoryDocumentStore) -> None:
    """``scan(limit=1000)`` (reactor/ports/documents.py): without a limit, the first 1000
    keys in order, and the rest after the last of them."""
    keys = [f"k{n:04d}" for n in range(1001)]
    for key in keys:
        docs.write("c", key, {}, expected_version=None, expires_at=None)
    page = docs.scan("c")
    assert [k for k, _ in page] == keys[:1000]
    assert [k for k, _ in docs.scan("c", after=page[-1][0])] == ["k1000"]
