"""``DocumentLockStore``: re-entrant TTL locks over any :class:`reactor.ports.DocumentStore`.

Semantics: docs/protocol.md#locks as implemented by the pure model
:mod:`reactor.model.coordination.locks`; atomicity: the compare-and-set loop of
:mod:`reactor.generic._cas`. One document per lock key::

    {"owner": "<token>" | null, "count": 2, "expires_at": 1700000060.0 | null,
     "token": 1700000000123456}

``token`` is the fencing token of the current (or last) acquisition; a released lock is a
tombstone ``{"owner": null, "count": 0, "expires_at": <release instant>, "token": ...}``
(docs/coordination.md#fencing-tokens). The document's own expiry is the lock's ``expires_at``
plus :data:`~reactor.model.coordination.fencing.FENCE_RETENTION`, so native TTL (a MongoDB TTL
index, a DynamoDB TTL attribute, the memory store's purge) collects lapsed locks and tombstones
only after the retention, and until then the next acquisition reads the previous token. A
document written before tokens existed (no ``token`` field) reads as token 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import locks as model
from reactor.model.records import LockInfo
from reactor.ports.documents import DocumentStore

__all__ = ["LOCKS", "LOCK_CODEC", "DocumentLockStore"]

#: The default collection of lock documents (one per key).
LOCKS = "locks"


def _encode(state: model.LockState) -> dict[str, Any]:
    return {
        "owner": state.owner,
        "count": state.count,
        "expires_at": state.expires_at,
        "token": state.token,
    }


def _decode(doc: Mapping[str, Any]) -> model.LockState:
    expires_at = doc["expires_at"]
    owner = doc["owner"]
    return model.LockState(
        owner=None if owner is None else str(owner),
        count=int(doc["count"]),
        expires_at=None if expires_at is None else float(expires_at),
        token=int(doc.get("token", 0)),
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

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        """Take or re-enter the lock (:func:`reactor.model.coordination.locks.acquire`).

        Args:
            key: the lock key.
            owner: the owner token.
            ttl: seconds until the lock lapses (reset on re-entry), ``None`` for no expiry.

        Returns:
            The holder's fencing token (>= 1) when ``owner`` now holds the lock: greater than
            any earlier token of ``key`` for a fresh acquisition, unchanged on re-entry
            (docs/coordination.md#fencing-tokens); 0 when another owner holds it.

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.acquire(state, now, owner, ttl),
        )

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count when ``owner`` holds the lock; else ``False``.

        At 0 the document becomes a tombstone that keeps the fencing token for
        ``FENCE_RETENTION`` seconds (docs/coordination.md#fencing-tokens).

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
        """Whether anyone holds the lock (the sweepers' liveness test); a tombstone is not held.

        Raises:
            StorageError: the backend failed or the document is malformed.
        """
        return self._states.read(key, model.held)

    def info(self, key: str) -> LockInfo | None:
        """The holder (owner, count, expiry, fencing token), or ``None`` when not held.

        Raises:
            StorageError: the backend failed or the document is malformed.
        """
        return self._states.read(key, model.info)
