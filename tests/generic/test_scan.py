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
