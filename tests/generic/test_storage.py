"""GenericStorage: the whole Storage over one DocumentStore (docs/protocol.md, "Document
stores")."""

from __future__ import annotations

from reactor.generic.storage import GenericStorage
from reactor.memory import ManualClock, MemoryDocumentStore


class _CountingCloses(MemoryDocumentStore):
    """A memory document store counting its ``close`` calls."""

    def __init__(self) -> None:
        super().__init__(clock=ManualClock())
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        super().close()


def test_close_closes_the_document_store_once() -> None:
    documents = _CountingCloses()
    storage = GenericStorage(documents)
    assert documents.closes == 0
    storage.close()
    assert documents.closes == 1
    storage.close()  # idempotent
    assert documents.closes == 1
