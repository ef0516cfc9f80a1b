"""A backend error between the two writes of ``DocumentMapStore.append_element`` leaves no hole
(``reactor.generic.maps`` module docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from reactor.errors import StorageError
from reactor.generic.maps import MAP_ELEMENTS, DocumentMapStore
from reactor.memory.documents import MemoryDocumentStore


class FailingElementWrites:
    """A document store whose next ``fail`` writes to ``map_elements`` raise ``StorageError``."""

    def __init__(self, inner: MemoryDocumentStore) -> None:
        self.inner = inner
        self.fail = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None,
              **kwargs: Any) -> bool:
        if collection == MAP_ELEMENTS and self.fail > 0:
            self.fail -= 1
            raise StorageError("backend down between the two writes")
        return self.inner.write(collection, key, value, **kwargs)


@pytest.fixture
def documents() -> FailingElementWrites:
    return FailingElementWrites(MemoryDocumentStore())


def test_a_retried_append_reuses_its_reserved_position(documents: FailingElementWrites) -> None:
    maps = DocumentMapStore(documents)  # type: ignore[arg-type]
    documents.fail = 1
    with pytest.raises(StorageError):
        maps.append_element("m", "ctx-0")
    assert maps.append_element("m", "ctx-0") == 0  # the job's retry: same position
    assert maps.append_element("m", "ctx-1") == 1
    assert maps.count_elements("m") == 2
    assert maps.element_ids("m") == ["ctx-0", "ctx-1"]
    assert maps.element_ids_from_tail("m", position=0, count=5, total=2) == ["ctx-1", "ctx-0"]
    assert maps.append_element("m", "ctx-0") == 2  # a finished append may be duplicated


def test_a_reservation_never_written_still_names_its_element(
    documents: FailingElementWrites,
) -> None:
    maps = DocumentMapStore(documents)  # type: ignore[arg-type]
    documents.fail = 1
    with pytest.raises(StorageError):
        maps.append_element("m", "ctx-0")
    assert maps.append_element("m", "ctx-1") == 1  # no retry of ctx-0 ever comes
    assert maps.count_elements("m") == 2
    assert maps.element_id("m", 0) == "ctx-0"
    assert maps.element_id("m", -2) == "ctx-0"
    assert maps.element_ids("m") == ["ctx-0", "ctx-1"]
    # The distributed rollback reads one tail position per job: position 1 is index 0.
    assert maps.element_ids_from_tail("m", position=1, count=1, total=2) == ["ctx-0"]


def test_a_read_from_a_later_start_still_finds_a_reservation_never_written(
    documents: FailingElementWrites,
) -> None:
    """A read from position 1 on counts only the documents from position 1: the one at 0 does
    not stand in for the position whose document is missing (its pending reservation does)."""
    maps = DocumentMapStore(documents)  # type: ignore[arg-type]
    assert maps.append_element("m", "ctx-0") == 0
    assert maps.append_element("m", "ctx-1") == 1
    documents.fail = 1
    with pytest.raises(StorageError):
        maps.append_element("m", "ctx-2")
    assert maps.element_ids("m", start=1) == ["ctx-1", "ctx-2"]
    assert maps.element_ids("m", start=1, limit=2) == ["ctx-1", "ctx-2"]
    assert maps.element_ids("m", start=2) == ["ctx-2"]


class _AppendAgainAfterTheElementWrite:
    """A document store that, after the first write to ``map_elements``, runs ``again`` once:
    a second delivery of the same append, run to its end while the first stands between its
    element write and the clearing of its reservation."""

    def __init__(self, inner: MemoryDocumentStore) -> None:
        self.inner = inner
        self.again: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write(
        self, collection: str, key: str, value: Mapping[str, Any] | None, **kwargs: Any
    ) -> bool:
        written = self.inner.write(collection, key, value, **kwargs)
        if collection == MAP_ELEMENTS and self.again is not None:
            again, self.again = self.again, None
            again()
        return written


def test_an_append_whose_reservation_a_redelivery_already_cleared_still_succeeds() -> None:
    """Two deliveries of one append (at-least-once jobs) overlap: the second reuses the
    pending position and clears it before the first gets to clear it. The first then finds
    nothing to clear and reports the same position; no hole, no second position."""
    documents = _AppendAgainAfterTheElementWrite(MemoryDocumentStore())
    maps = DocumentMapStore(documents)  # type: ignore[arg-type]
    second: list[int] = []
    documents.again = lambda: second.append(maps.append_element("m", "ctx-0"))
    assert maps.append_element("m", "ctx-0") == 0
    assert second == [0]
    assert maps.count_elements("m") == 1 and maps.element_ids("m") == ["ctx-0"]
    assert maps.append_element("m", "ctx-1") == 1
    assert maps.element_ids("m") == ["ctx-0", "ctx-1"]


def test_a_limited_read_with_holes_inside_and_past_its_end_names_every_element(
    documents: FailingElementWrites,
) -> None:
    """element_ids with a limit stops at the first position past its window: a document
    beyond it (position 4) never stands in for a missing one inside it (position 1, named by
    its pending reservation), also when the position at the window's end (3) is missing too."""
    maps = DocumentMapStore(documents)
    for i in range(5):
        documents.fail = 1 if i in (1, 3) else 0
        try:
            assert maps.append_element("m", f"ctx-{i}") == i
        except StorageError:
            assert i in (1, 3)
    assert maps.count_elements("m") == 5
    assert maps.element_ids("m", limit=3) == ["ctx-0", "ctx-1", "ctx-2"]
    assert maps.element_ids("m", start=1, limit=2) == ["ctx-1", "ctx-2"]
