"""``DocumentSemaphoreStore``: lease semaphores over any :class:`reactor.ports.DocumentStore`.

Semantics: docs/protocol.md#semaphores (per-holder leases) as implemented by the pure model
:mod:`reactor.model.coordination.semaphores`; atomicity: :mod:`reactor.generic._cas`. One
document per semaphore key::

    {"limit": 3, "holders": {"<token>": 1700000030.0, ...}}

The document expires with its longest lease, so an abandoned semaphore is collected natively.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import semaphores as model
from reactor.model.records import SemaphoreState
from reactor.ports.documents import DocumentStore

__all__ = ["SEMAPHORES", "SEMAPHORE_CODEC", "DocumentSemaphoreStore"]

#: The default collection of semaphore documents (one per key).
SEMAPHORES = "semaphores"


def _encode(state: model.SemaphoreLeases) -> dict[str, Any]:
    return {"limit": state.limit, "holders": dict(state.holders)}


def _decode(doc: Mapping[str, Any]) -> model.SemaphoreLeases:
    holders = doc["holders"]
    return model.SemaphoreLeases(
        limit=int(doc["limit"]),
        holders={str(token): float(at) for token, at in holders.items()},
    )


#: The document shape of a semaphore.
SEMAPHORE_CODEC: StateCodec[model.SemaphoreLeases] = StateCodec(
    "semaphore", _encode, _decode, model.expiry
)


class DocumentSemaphoreStore:
    """A :class:`reactor.ports.SemaphoreStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive (its clock judges leases).
        collection: the collection holding one document per semaphore key.
    """

    def __init__(self, documents: DocumentStore, collection: str = SEMAPHORES) -> None:
        self._states = StateCollection(documents, collection, SEMAPHORE_CODEC)

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        """Lease a slot for ``holder`` (:func:`reactor.model.coordination.semaphores.acquire`).

        Args:
            key: the semaphore key.
            holder: the holder token.
            limit: the limit used when the semaphore is created (>= 0); a semaphore with live
                leases keeps its limit.
            lease: seconds the lease lives (> 0).

        Returns:
            ``True`` when ``holder`` now has a lease (new or renewed).

        Raises:
            ValueError: ``limit`` is negative or ``lease`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.acquire(state, now, holder, limit, lease),
        )

    def release(self, key: str, holder: str) -> bool:
        """Remove ``holder``'s lease; ``False`` when it holds none (expired, double release).

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.release(state, now, holder),
        )

    def extend(self, key: str, holder: str, lease: float) -> bool:
        """Renew ``holder``'s live lease to ``lease`` seconds from now; ``False`` without one.

        Raises:
            ValueError: ``lease`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.extend(state, now, holder, lease),
        )

    def state(self, key: str) -> SemaphoreState | None:
        """Limit and live leases, ``None`` when never used, reset, or every lease ended."""
        return self._states.read(key, model.view)

    def reset(self, key: str) -> None:
        """Drop every lease (operators).

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        self._states.apply(key, model.reset)
