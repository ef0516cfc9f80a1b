"""Fixtures for the generic coordination stores: a tiny dict-backed ``DocumentStore`` fake.

:class:`FakeDocumentStore` is the smallest correct compare-and-set store (one mutex around each
read and each write, a fresh UUID version per write, logical expiry on a settable clock). The
``docs`` fixture runs each test on it and, when importable, on
:class:`reactor.memory.documents.MemoryDocumentStore` too.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from reactor.model.coordination import SettableClock
from reactor.ports.documents import Versioned

START = 1_700_000_000.0


@dataclass(frozen=True)
class StoredDoc:
    """A physically stored document (expired or not)."""

    value: dict[str, Any]
    version: str
    expires_at: float | None


class FakeDocumentStore:
    """A dict-backed :class:`reactor.ports.DocumentStore` with a settable clock.

    Attributes:
        writes: the number of successful writes (deletes included).
        lose_next_writes: how many upcoming writes report a lost compare-and-set.
    """

    def __init__(self, start: float = START) -> None:
        self.clock = SettableClock(start)
        self._docs: dict[tuple[str, str], StoredDoc] = {}
        self._mutex = threading.Lock()
        self.writes = 0
        self.lose_next_writes = 0

    def now(self) -> float:
        return self.clock()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def read(self, collection: str, key: str) -> Versioned:
        with self._mutex:
            doc = self._docs.get((collection, key))
            if doc is None:
                return Versioned(None, None)
            if doc.expires_at is not None and doc.expires_at <= self.clock():
                return Versioned(None, doc.version)
            return Versioned(dict(doc.value), doc.version, doc.expires_at)

    def write(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None = None,
    ) -> bool:
        del index
        with self._mutex:
            if self.lose_next_writes > 0:
                self.lose_next_writes -= 1
                return False
            current = self._docs.get((collection, key))
            if (None if current is None else current.version) != expected_version:
                return False
            if value is None:
                self._docs.pop((collection, key), None)
            else:
                self._docs[(collection, key)] = StoredDoc(dict(value), uuid.uuid4().hex, expires_at)
            self.writes += 1
            return True

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        raise NotImplementedError("coordination stores never scan")

    def close(self) -> None:
        pass

    def raw(self, collection: str, key: str) -> StoredDoc | None:
        with self._mutex:
            return self._docs.get((collection, key))

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        with self._mutex:
            doc = self._docs.get((collection, key))
            if doc is None:
                return False
            self._docs[(collection, key)] = StoredDoc(doc.value, doc.version, expires_at)
            return True


class ProbeDocs(Protocol):
    """What the tests need from a document store: the port plus a clock and a raw probe."""

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def read(self, collection: str, key: str) -> Versioned: ...
    def write(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None = None,
    ) -> bool: ...
    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]: ...
    def close(self) -> None: ...
    def raw(self, collection: str, key: str) -> Any: ...


def _memory() -> ProbeDocs:
    try:
        from reactor.memory.documents import MemoryDocumentStore
    except ImportError as exc:  # the in-process adapter is written in parallel
        pytest.skip(f"reactor.memory.documents is not importable yet: {exc}")
    store: ProbeDocs = MemoryDocumentStore.manual(START)
    return store


FACTORIES: dict[str, Callable[[], ProbeDocs]] = {"fake": FakeDocumentStore, "memory": _memory}


@pytest.fixture(params=sorted(FACTORIES))
def docs(request: pytest.FixtureRequest) -> Iterator[ProbeDocs]:
    """A fresh document store at :data:`START` on a manual clock (fake and memory)."""
    store = FACTORIES[request.param]()
    yield store
    store.close()


@pytest.fixture
def fake() -> FakeDocumentStore:
    """A fresh :class:`FakeDocumentStore` (for write counting and injected CAS losses)."""
    return FakeDocumentStore()
