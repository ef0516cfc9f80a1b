"""keyset_scan: pages over one or more indexes of a document collection (docs/protocol.md,
"Sweep cursors")."""

from __future__ import annotations

from typing import Any

from reactor.generic._scan import keyset_scan
from reactor.memory import ManualClock, MemoryDocumentStore


def _store(counts: dict[str, int]) -> MemoryDocumentStore:
    documents = MemoryDocumentStore(ManualClock())
    for index, count in counts.items():
        for n in range(count):
            documents.write("rows", f"{index}-{n:05d}", {"n": n}, expected_version=None,
                            expires_at=None, index=index)
    return documents


def _all(documents: MemoryDocumentStore, indexes: list[str | None], limit: int) -> list[Any]:
    rows: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = keyset_scan(documents, "rows", indexes, limit=limit, cursor=cursor,
                           decode=lambda value: value["n"])
        rows += list(page)
        cursor = page.next_cursor
        if cursor is None:
            return rows
    raise AssertionError("the scan never ended")


def test_a_page_larger_than_the_small_int_cache_keeps_its_cursor() -> None:
    """A full page of 300 rows (above 256, where ints stop being shared objects) is not taken
    for an exhausted index: the next page carries on."""
    documents = _store({"a": 301})
    first = keyset_scan(documents, "rows", ["a"], limit=300, cursor=None,
                        decode=lambda value: value["n"])
    assert len(first) == 300 and first.next_cursor is not None
    second = keyset_scan(documents, "rows", ["a"], limit=300, cursor=first.next_cursor,
                         decode=lambda value: value["n"])
    assert list(second) == [300] and second.next_cursor is None


def test_pages_walk_every_index_once_in_label_order() -> None:
    documents = _store({"a": 5, "b": 3})
    assert _all(documents, ["b", "a"], limit=2) == [0, 1, 2, 3, 4, 0, 1, 2]
    assert _all(documents, ["a", "b"], limit=300) == [0, 1, 2, 3, 4, 0, 1, 2]



class _CountingScans:
    """A document store counting its ``scan`` calls."""

    def __init__(self, inner: MemoryDocumentStore) -> None:
        self.inner = inner
        self.scans = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scan(self, collection: str, **kwargs: Any) -> Any:
        self.scans += 1
        return self.inner.scan(collection, **kwargs)


def test_a_limit_of_zero_or_less_reads_nothing_and_hands_the_cursor_back() -> None:
    """A page of ``limit <= 0`` reads no document and holds no rows, and its ``next_cursor``
    is the cursor it was given, ``None`` included: the walk stands where it stood."""
    documents: Any = _CountingScans(_store({"a": 3}))
    first = keyset_scan(
        documents, "rows", ["a"], limit=1, cursor=None, decode=lambda value: value["n"]
    )
    documents.scans = 0
    for limit in (0, -1):
        for cursor in (None, first.next_cursor):
            page = keyset_scan(
                documents, "rows", [None, "a"], limit=limit, cursor=cursor, decode=lambda v: v["n"]
            )
            assert list(page) == [] and page.next_cursor == cursor
    assert documents.scans == 0
