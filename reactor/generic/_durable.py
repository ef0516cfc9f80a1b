"""Compare-and-set building blocks for the durable generic stores.

A :class:`DurableCollection` is one collection of a :class:`reactor.ports.DocumentStore` whose
every write stamps ``expires_at = now + context_ttl`` (docs/protocol.md#conventions: durable run
state lives ``context_ttl`` after its last write, re-stamped on every write, counters included).
It offers the four write shapes the durable stores need:

* :meth:`DurableCollection.put` -- last writer wins (contexts, step results, slots);
* :meth:`DurableCollection.create` -- first writer wins (NX claims); a logically expired
  document (``value=None`` but ``version`` set) is taken over with a compare-and-set on its
  version, so an expired claim never blocks a new one;
* :meth:`DurableCollection.update` -- an atomic read-modify-write loop (counters, flags);
* :meth:`DurableCollection.delete` -- compare-and-delete, optionally only when a predicate on
  the live value holds.

Every loop retries only on a lost compare-and-set, after a randomized pause that grows with
each loss (:func:`attempts`), and gives up
with :class:`reactor.errors.StorageError` after :data:`MAX_ATTEMPTS` losses in a row,
which under any sane contention never happens.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from types import EllipsisType
from typing import Any, TypeVar

from reactor.errors import StorageError
from reactor.ports.documents import DocumentStore

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["MAX_ATTEMPTS", "DurableCollection", "Mutation", "attempts", "require_after"]

#: Lost compare-and-sets tolerated in a row before a loop raises ``StorageError``.
MAX_ATTEMPTS = 1000
#: The smallest backoff unit, in seconds (an in-process store's attempt takes microseconds).
MIN_BACKOFF = 0.0002
#: The largest pause between two attempts, in seconds.
MAX_BACKOFF = 0.05


def attempts() -> Iterator[int]:
    """Attempt numbers; from the second attempt on, pause first: full-jitter exponential
    backoff in units of the lost attempt's own duration.

    A lost compare-and-set means another writer won meanwhile; when ``n`` writers race on one
    document, retrying at once makes every round of reads cost ``n`` round trips for one win,
    so ``n`` appends cost ``n**2`` requests. Each retry therefore waits a random time in
    ``[0, d * 2**(k-1))`` (``d``: how long the attempt that lost took, at least
    :data:`MIN_BACKOFF`; ``k``: the losses so far; capped at :data:`MAX_BACKOFF`), which
    spreads the racers over as many round trips as there are racers, on a slow server as on a
    fast one (docs/protocol.md, "Document stores").
    """
    started = time.monotonic()
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            now = time.monotonic()
            unit = max(now - started, MIN_BACKOFF)
            ceiling = min(unit * 2.0 ** min(attempt - 1, 16), MAX_BACKOFF)
            time.sleep(_RANDOM.uniform(0, ceiling))
            started = time.monotonic()
        yield attempt


T = TypeVar("T")

#: What an :meth:`DurableCollection.update` function returns: ``(new value or None to keep the
#: document unchanged, index for the new value, result for the caller)``.
Mutation = tuple[Mapping[str, Any] | None, str | None, T]


def require_after(collection: str, after: str | None, key: str) -> None:
    """Check that a :meth:`DocumentStore.scan` given ``after`` returned ``key`` strictly after
    it: keyset paging over a store that does not would loop forever (docs/protocol.md,
    "Document stores").

    Raises:
        StorageError: ``after`` is set and ``key`` is not strictly greater, naming both.
    """
    if after is not None and not key > after:
        raise StorageError(
            f"DocumentStore.scan of {collection!r} returned key {key!r} for after={after!r}: "
            "keys must be strictly greater than `after` (keyset paging would loop forever)"
        )


class DurableCollection:
    """One collection of durable documents with retention ``ttl`` re-stamped on every write.

    Args:
        documents: the versioned-document primitive.
        collection: the collection name.
        ttl: retention in seconds after each write; ``None`` = never expire.
    """

    __slots__ = ("collection", "documents", "ttl")

    def __init__(self, documents: DocumentStore, collection: str, ttl: float | None) -> None:
        self.documents = documents
        self.collection = collection
        self.ttl = ttl

    def expiry(self) -> float | None:
        """The ``expires_at`` a write made now gets (store clock + ``ttl``)."""
        return None if self.ttl is None else self.documents.now() + self.ttl

    def get(self, key: str) -> Mapping[str, Any] | None:
        """The live value of ``key``, ``None`` when absent or expired."""
        return self.documents.read(self.collection, key).value

    def put(
        self,
        key: str,
        value: Mapping[str, Any],
        *,
        index: str | None = None,
        expires_at: float | EllipsisType | None = ...,
    ) -> None:
        """Write ``value`` whatever is stored (last writer wins), re-stamping retention.

        Args:
            key: the document key.
            value: the document.
            index: the ``index`` to write it with.
            expires_at: its expiry (epoch seconds, ``None`` = never); default ``...``: now +
                the collection's TTL.
        """
        for _ in attempts():
            current = self.documents.read(self.collection, key)
            if self.documents.write(
                self.collection,
                key,
                value,
                expected_version=current.version,
                expires_at=self.expiry() if expires_at is ... else expires_at,
                index=index,
            ):
                return
        raise self.contention(key)

    def create(self, key: str, value: Mapping[str, Any], *, index: str | None = None) -> bool:
        """Write ``value`` only if no live document exists (NX); ``True`` when this call wrote.

        An expired document is taken over by a compare-and-set on its stored version.
        """
        for _ in attempts():
            current = self.documents.read(self.collection, key)
            if current.value is not None:
                return False
            if self.documents.write(
                self.collection,
                key,
                value,
                expected_version=current.version,
                expires_at=self.expiry(),
                index=index,
            ):
                return True
        raise self.contention(key)

    def update(
        self,
        key: str,
        mutate: Callable[[Mapping[str, Any] | None], Mutation[T]],
    ) -> T:
        """Atomically read-modify-write ``key``.

        Args:
            key: the document key.
            mutate: called with the live value (``None`` when absent or expired); returns
                ``(new value, index, result)``. A ``None`` new value leaves the document as it
                is (no write, no re-stamp). It may be called several times (once per lost
                compare-and-set), so it must be pure.

        Returns:
            The ``result`` of the call whose write won (or that chose not to write).
        """
        for _ in attempts():
            current = self.documents.read(self.collection, key)
            new_value, index, result = mutate(current.value)
            if new_value is None:
                return result
            if self.documents.write(
                self.collection,
                key,
                new_value,
                expected_version=current.version,
                expires_at=self.expiry(),
                index=index,
            ):
                return result
        raise self.contention(key)

    def delete(self, key: str, when: Callable[[Mapping[str, Any]], bool] | None = None) -> bool:
        """Delete ``key`` when it is live (and ``when(value)`` holds); ``True`` when deleted.

        An expired document is removed too (garbage collection) but reported as ``False``.
        """
        for _ in attempts():
            current = self.documents.read(self.collection, key)
            if current.version is None:
                return False
            live = current.value is not None
            if live and when is not None and not when(current.value or {}):
                return False
            if self.documents.write(
                self.collection, key, None, expected_version=current.version, expires_at=None
            ):
                return live
        raise self.contention(key)

    def scan(
        self, *, index: str | None = None, after: str | None = None, page_size: int = 1000
    ) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """Iterate every live document (optionally one ``index``) in key order, paging lazily.

        Args:
            index: only documents written with this index (``None``: all).
            after: start strictly after this key.
            page_size: documents fetched per :meth:`DocumentStore.scan` call (>= 1).

        Raises:
            StorageError: the document store returned a page whose last key does not come after
                the key it was asked to start after (its ``after`` is broken: paging on would
                loop forever).
        """
        cursor = after
        while True:
            page = self.documents.scan(self.collection, index=index, after=cursor, limit=page_size)
            if page:
                require_after(self.collection, cursor, page[0][0])
            yield from page
            if len(page) < page_size:
                return
            last = page[-1][0]
            require_after(self.collection, cursor, last)
            cursor = last

    def contention(self, key: str) -> StorageError:
        """The error a loop raises after :data:`MAX_ATTEMPTS` lost compare-and-sets on ``key``."""
        return StorageError(
            f"gave up after {MAX_ATTEMPTS} lost compare-and-sets on {self.collection}/{key}"
        )
