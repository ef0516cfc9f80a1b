"""``DocumentLockStore``: re-entrant TTL locks over any :class:`reactor.ports.DocumentStore`.

Semantics: storage-protocol.md §2.8 as implemented by the pure model
:mod:`reactor.model.coordination.locks`; atomicity: the compare-and-set loop of
:mod:`reactor.generic._cas`. One document per lock key::

    {"owner": "<token>", "count": 2, "expires_at": 1700000060.0 | null}

The document's ``expires_at`` is the lock's, so native TTL collects lapsed locks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import locks as model
from reactor.ports.documents import DocumentStore
from reactor.ports.records import LockInfo

__all__ = ["LOCKS", "LOCK_CODEC", "DocumentLockStore"]

#: The default collection of lock documents (one per key).
LOCKS = "locks"


def _encode(state: model.LockState) -> dict[str, Any]:
    return {"owner": state.owner, "count": state.count, "expires_at": state.expires_at}


def _decode(doc: Mapping[str, Any]) -> model.LockState:
    expires_at = doc["expires_at"]
    return model.LockState(
        owner=str(doc["owner"]),
        count=int(doc["count"]),
        expires_at=None if expires_at is None else float(expires_at),
    )


#: The document shape of a lock.
LOCK_CODEC: StateCodec[model.LockState] = StateCodec("lock", _encode, _decode, model.expiry)


class DocumentLockStore:
    """A :class:`reactor.ports.LockStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive (its clock judges expiry).
        collection: the collection holding one document per lock key.
    """

    def __init__(self, documents: DocumentStore, collection: str = LOCKS) -> None:
        self._states = StateCollection(documents, collection, LOCK_CODEC)

    def acquire(self, key: str, owner: str, ttl: float | None) -> bool:
        """Take or re-enter the lock (:func:`reactor.model.coordination.locks.acquire`).

        Args:
            key: the lock key.
            owner: the owner token.
            ttl: seconds until the lock lapses (reset on re-entry), ``None`` for no expiry.

        Returns:
            ``True`` when ``owner`` now holds the lock.

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.acquire(state, now, owner, ttl),
        )

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count, deleting the lock at 0, when ``owner`` holds it; else ``False``.

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.release(state, now, owner),
        )

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        """Set the remaining TTL to ``ttl`` seconds (never adds) when ``owner`` holds the lock.

        Returns:
            ``False`` for a stranger or an absent or lapsed lock.

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.extend(state, now, owner, ttl),
        )

    def held(self, key: str) -> bool:
        """Whether anyone holds the lock (the sweepers' liveness test)."""
        return self._states.read(key, model.held)

    def info(self, key: str) -> LockInfo | None:
        """The holder, or ``None`` when absent or lapsed."""
        return self._states.read(key, model.info)
