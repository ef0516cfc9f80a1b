"""The in-process :class:`reactor.ports.DocumentStore`: dicts behind one ``threading.Lock``.

This is the reference implementation of the versioned-document primitive
(``reactor/ports/documents.py``): every generic store in :mod:`reactor.generic` runs on it, so
:class:`reactor.memory.MemoryStorage` is exactly "the generic stores over the simplest possible
compare-and-set".

Semantics (``reactor/ports/documents.py``; docs/protocol.md#document-stores; expiry never
depends on a database's TTL deletion):

* values are JSON-native dicts; they are stored as JSON text, so callers never share mutable
  state with the store and a non-JSON value fails at write time;
* every write stores a fresh version token, never reused in this process (no ABA);
* a document with ``expires_at <= now`` reads as absent (``value=None``) but keeps reporting
  its stored ``version`` so a caller can take it over with a compare-and-set;
* scans return unexpired documents in ascending key order, optionally filtered by ``index``;
* expired documents are physically removed only by :meth:`MemoryDocumentStore.purge` (also run
  automatically every ``purge_every`` writes) -- garbage collection, never a semantic. A purge
  visits only the documents whose expiry has passed (a heap of expiries, checked against the
  stored document), so its cost does not grow with the documents that never expire or have not
  expired yet (docs/architecture.md, "Engine cost per step").
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reactor.memory.clock import ManualClock
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.documents import Versioned

__all__ = ["MemoryDocumentStore", "RawDocument"]


@dataclass(frozen=True, slots=True)
class RawDocument:
    """A physically stored document, expired or not (for probes and tests).

    Attributes:
        value: the stored JSON-native dict (a fresh copy).
        version: the stored version token.
        expires_at: epoch seconds after which the document reads as absent, ``None`` = never.
        index: the ``index`` string it was written with, or ``None``.
    """

    value: dict[str, Any]
    version: str
    expires_at: float | None
    index: str | None


@dataclass(slots=True)
class _Doc:
    text: str
    version: str
    expires_at: float | None
    index: str | None


class _Collection:
    """One collection: documents plus sorted key lists (all keys, and per index value)."""

    __slots__ = ("by_index", "docs", "keys")

    def __init__(self) -> None:
        self.docs: dict[str, _Doc] = {}
        self.keys: list[str] = []
        self.by_index: dict[str, list[str]] = {}

    def put(self, key: str, doc: _Doc) -> None:
        old = self.docs.get(key)
        if old is None:
            bisect.insort(self.keys, key)
        elif old.index != doc.index and old.index is not None:
            _remove_sorted(self.by_index[old.index], key)
            if not self.by_index[old.index]:
                del self.by_index[old.index]
        if doc.index is not None and (old is None or old.index != doc.index):
            bisect.insort(self.by_index.setdefault(doc.index, []), key)
        self.docs[key] = doc

    def remove(self, key: str) -> None:
        old = self.docs.pop(key, None)
        if old is None:
            return
        _remove_sorted(self.keys, key)
        if old.index is not None:
            _remove_sorted(self.by_index[old.index], key)
            if not self.by_index[old.index]:
                del self.by_index[old.index]


def _remove_sorted(keys: list[str], key: str) -> None:
    at = bisect.bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]


#: The version tokens of every store of this process: a counter (``next`` on it is atomic under
#: the GIL), so a token is never reused, not even by another store or view (no ABA), and costs
#: no random bytes on the write path. A token is opaque: callers only compare it.
_versions = itertools.count(1)

#: One encoder for every write (``json.dumps`` with a non-default option builds a new one each
#: call): compact is not needed, refusing NaN and infinities is (JSON has no such numbers).
_encode = json.JSONEncoder(allow_nan=False).encode


#: The purge's expiry list is never rebuilt below this many entries.
_REBUILD_FLOOR = 1024


class _Expiries:
    """The purge's work list, shared by the views of one store: ``(expires_at, collection,
    key, version)`` of every write or probe that set an expiry, as a heap. An entry is only a
    hint (the document may have been rewritten, deleted or given another expiry since): the
    purge checks the stored document."""

    __slots__ = ("heap", "rebuild_at")

    def __init__(self) -> None:
        self.heap: list[tuple[float, str, str, str]] = []
        #: Check whether to rebuild only once the heap is longer than this.
        self.rebuild_at = _REBUILD_FLOOR


def _live(doc: _Doc, now: float) -> bool:
    return doc.expires_at is None or doc.expires_at > now


class MemoryDocumentStore:
    """A thread-safe in-process :class:`reactor.ports.DocumentStore`.

    Args:
        clock: the store clock, epoch seconds: a callable or a :class:`~reactor.ports.Clock`
            (default ``None``: the system clock, read at call time). Pass a
            :class:`reactor.memory.clock.ManualClock` to drive expiry from tests.
        purge_every: physically remove expired documents every this many writes (``0``
            disables the automatic purge; :meth:`purge` still works).

    Example:
        >>> store = MemoryDocumentStore(clock=ManualClock())
        >>> store.write("c", "k", {"a": 1}, expected_version=None, expires_at=store.now() + 5)
        True
        >>> store.advance(5)
        >>> store.read("c", "k").value is None
        True
    """

    def __init__(
        self, clock: Callable[[], float] | Clock | None = None, *, purge_every: int = 4096
    ) -> None:
        if purge_every < 0:
            raise ValueError(f"purge_every must be >= 0, got {purge_every!r}")
        self._clock = wall_reader(clock)
        self._lock = threading.Lock()
        self._collections: dict[str, _Collection] = {}
        self._expiries = _Expiries()
        self._purge_every = purge_every
        self._writes = 0
        self._closed = False

    @classmethod
    def manual(cls, start: float = 1_700_000_000.0) -> MemoryDocumentStore:
        """Build a store on a fresh :class:`ManualClock` starting at ``start`` epoch seconds."""
        return cls(clock=ManualClock(start))

    @property
    def clock(self) -> Callable[[], float]:
        """The clock callable this store judges expiry with."""
        return self._clock

    def with_clock(self, clock: Callable[[], float]) -> MemoryDocumentStore:
        """A view of the same documents (same lock, same data) judged by another clock.

        Two views with different clocks behave like two processes whose clocks disagree
        sharing one backend: the contract suite uses it to test clock skew without sleeping
        (docs/coordination.md#clock-skew).

        Args:
            clock: the view's clock, ``() -> epoch seconds``.

        Returns:
            A new store sharing every document with this one; closing it closes only the view.
        """
        view = MemoryDocumentStore(clock, purge_every=self._purge_every)
        view._lock = self._lock
        view._collections = self._collections
        view._expiries = self._expiries
        return view

    def advance(self, seconds: float) -> None:
        """Move the manual clock forward by ``seconds`` (tests only).

        Raises:
            TypeError: the store was not constructed with a :class:`ManualClock`.
        """
        if not isinstance(self._clock, ManualClock):
            raise TypeError("advance() needs a store constructed with a ManualClock")
        self._clock.advance(seconds)

    def now(self) -> float:
        """The store's clock in epoch seconds."""
        return self._clock()

    def read(self, collection: str, key: str) -> Versioned:
        """Read one document; an expired document gives ``value=None`` with its ``version``."""
        with self._lock:
            doc = self._doc(collection, key)
            if doc is None:
                return Versioned(value=None, version=None)
            if not _live(doc, self._clock()):
                return Versioned(value=None, version=doc.version)
            return Versioned(
                value=json.loads(doc.text), version=doc.version, expires_at=doc.expires_at
            )

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
        """Compare-and-set one document (``value=None`` deletes it).

        Args:
            collection: the collection name.
            key: the document key.
            value: a JSON-native dict, or ``None`` to delete.
            expected_version: the version the caller read; ``None`` = physically absent.
            expires_at: epoch seconds after which the document reads as absent, ``None`` = never.
            index: an optional string :meth:`scan` can filter on.

        Returns:
            ``True`` when written, ``False`` when the stored version differed.

        Raises:
            TypeError: ``value`` is not JSON-serializable.
            ValueError: ``value`` holds a non-finite float.
        """
        text = None if value is None else _encode(value if type(value) is dict else dict(value))
        with self._lock:
            coll = self._collections.get(collection)
            current = None if coll is None else coll.docs.get(key)
            if (None if current is None else current.version) != expected_version:
                return False
            if text is None:
                if coll is not None:
                    coll.remove(key)
            else:
                if coll is None:
                    coll = self._collections[collection] = _Collection()
                version = f"v{next(_versions):x}"
                coll.put(key, _Doc(text, version, expires_at, index))
                if expires_at is not None:
                    self._expire_at(expires_at, collection, key, version)
            self._writes += 1
            if self._purge_every and self._writes % self._purge_every == 0:
                self._purge_locked()
            return True

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired documents in ascending key order.

        Args:
            collection: the collection name.
            index: only documents written with this ``index`` (``None``: all).
            after: only keys strictly greater than this one.
            limit: the maximum number of documents (``<= 0`` gives ``[]``).

        Returns:
            ``(key, value)`` pairs.
        """
        out: list[tuple[str, Mapping[str, Any]]] = []
        if limit <= 0:
            return out
        with self._lock:
            coll = self._collections.get(collection)
            if coll is None:
                return out
            keys = coll.keys if index is None else coll.by_index.get(index, [])
            at = 0 if after is None else bisect.bisect_right(keys, after)
            now = self._clock()
            while at < len(keys) and len(out) < limit:
                key = keys[at]
                doc = coll.docs[key]
                if _live(doc, now):
                    out.append((key, json.loads(doc.text)))
                at += 1
        return out

    def close(self) -> None:
        """Mark the store closed (data stays readable: nothing to release); idempotent."""
        self._closed = True

    # -- garbage collection and test access -----------------------------------------------

    def purge(self) -> int:
        """Physically remove every expired document; returns how many were removed."""
        with self._lock:
            return self._purge_locked()

    def _purge_locked(self) -> int:
        now = self._clock()
        heap = self._expiries.heap
        removed = 0
        while heap and heap[0][0] <= now:
            _, collection, key, version = heapq.heappop(heap)
            coll = self._collections.get(collection)
            doc = None if coll is None else coll.docs.get(key)
            if coll is not None and doc is not None and doc.version == version and not _live(
                doc, now
            ):
                coll.remove(key)
                removed += 1
        return removed

    def _expire_at(self, expires_at: float, collection: str, key: str, version: str) -> None:
        """Note that ``collection/key`` at ``version`` expires at ``expires_at`` (epoch s).

        Entries of rewritten documents stay until their time comes; once they outnumber the
        stored documents twice over, the list is rebuilt from the stored expiries (amortized
        constant work per write)."""
        expiries = self._expiries
        heap = expiries.heap
        heapq.heappush(heap, (expires_at, collection, key, version))
        if len(heap) <= expiries.rebuild_at:
            return
        stored = sum(len(coll.docs) for coll in self._collections.values())
        if len(heap) > 2 * stored:
            heap[:] = [
                (doc.expires_at, name, key, doc.version)
                for name, coll in self._collections.items()
                for key, doc in coll.docs.items()
                if doc.expires_at is not None
            ]
            heapq.heapify(heap)
        expiries.rebuild_at = max(_REBUILD_FLOOR, 2 * stored)

    def raw(self, collection: str, key: str) -> RawDocument | None:
        """The physically stored document, expired or not; ``None`` when nothing is stored."""
        with self._lock:
            doc = self._doc(collection, key)
            if doc is None:
                return None
            return RawDocument(json.loads(doc.text), doc.version, doc.expires_at, doc.index)

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a stored document's expiry in place (probes); ``False`` when absent.

        The version is kept: this simulates the passage of time, not a write.
        """
        with self._lock:
            doc = self._doc(collection, key)
            if doc is None:
                return False
            doc.expires_at = expires_at
            if expires_at is not None:
                self._expire_at(expires_at, collection, key, doc.version)
            return True

    def keys(self, collection: str) -> list[str]:
        """Every physically stored key of ``collection`` (expired ones included), sorted."""
        with self._lock:
            coll = self._collections.get(collection)
            return [] if coll is None else list(coll.keys)

    def collections(self) -> list[str]:
        """Names of the collections that hold at least one stored document, sorted."""
        with self._lock:
            return sorted(name for name, coll in self._collections.items() if coll.docs)

    def clear(self) -> None:
        """Drop every document (a test helper: the contract suite starts each test empty)."""
        with self._lock:
            self._collections.clear()
            self._expiries.heap.clear()

    def _doc(self, collection: str, key: str) -> _Doc | None:
        coll = self._collections.get(collection)
        return None if coll is None else coll.docs.get(key)
