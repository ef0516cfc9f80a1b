"""``DocumentPeriodStore``: once-per-bucket markers over any ``DocumentStore``, first wins.

Semantics: docs/protocol.md#periods (mark-if-absent), as implemented
by the pure model :mod:`reactor.model.coordination.periods`; atomicity:
:mod:`reactor.generic._cas`. One document per (already bucketed) period key::

    {"context_id": "<run id>" | null, "marked_at": 1700000000.0, "expires_at": ... | null}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import periods as model
from reactor.model.records import PeriodMarker
from reactor.ports.documents import DocumentStore

__all__ = ["PERIODS", "PERIOD_CODEC", "DocumentPeriodStore"]

#: The default collection of period marker documents (one per key).
PERIODS = "periods"


def _encode(state: model.PeriodMarkState) -> dict[str, Any]:
    return {
        "context_id": state.context_id,
        "marked_at": state.marked_at,
        "expires_at": state.expires_at,
    }


def _decode(doc: Mapping[str, Any]) -> model.PeriodMarkState:
    context_id = doc["context_id"]
    expires_at = doc["expires_at"]
    return model.PeriodMarkState(
        context_id=None if context_id is None else str(context_id),
        marked_at=float(doc["marked_at"]),
        expires_at=None if expires_at is None else float(expires_at),
    )


#: The document shape of a period marker.
PERIOD_CODEC: StateCodec[model.PeriodMarkState] = StateCodec(
    "period", _encode, _decode, model.expiry
)


class DocumentPeriodStore:
    """A :class:`reactor.ports.PeriodStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive (its clock stamps ``marked_at``).
        collection: the collection holding one document per period key.
    """

    def __init__(self, documents: DocumentStore, collection: str = PERIODS) -> None:
        self._states = StateCollection(documents, collection, PERIOD_CODEC)

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        """Mark ``key`` (already bucketed by the caller) if absent; the first mark wins.

        Args:
            key: the bucketed period key (see :func:`reactor.model.coordination.bucket_key`).
            ttl: seconds the marker lives, ``None`` for forever.
            context_id: the claiming run, if any.

        Returns:
            ``True`` when this call created the marker.

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._states.apply(
            key,
            lambda state, now: model.mark(state, now, ttl, context_id),
        )

    def marker(self, key: str) -> PeriodMarker | None:
        """The marker, ``None`` when unmarked or expired."""
        return self._states.read(key, model.marker)
