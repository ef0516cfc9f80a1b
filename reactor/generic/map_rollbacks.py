"""Distributed map rollback state over a :class:`reactor.ports.DocumentStore`.

Semantics: docs/protocol.md#map-rollbacks. Layout, every document
re-stamped to ``now + context_ttl`` when written:

===========================  ================================  =================================
collection                   key                               value (``index``)
===========================  ================================  =================================
``map_rollbacks``            ``<map id>``                      the head: ``{meta, offset,
                                                               handed_off, signal}`` (index
                                                               ``"rollback"`` once started,
                                                               until the signal is claimed)
``map_rollback_outcomes``    ``<map id>:<position, 12 digits>``  ``{position, index, outcome,
                                                               failures}`` (index ``<map id>``)
``map_rollback_seen``        ``<map id>:<index, 12 digits>``   ``{index}``
===========================  ================================  =================================

The head is one small document, so the start-once claim, the position claims (which read
``total`` in the same compare-and-set), the hand-off flag and the signal claim are each one
atomic write. Outcomes are per-position documents written create-if-absent (first wins), so a
rollback of 100,000 positions never builds one large document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from reactor.generic._durable import DurableCollection, Mutation
from reactor.generic._scan import keyset_scan
from reactor.generic.maps import position_key
from reactor.model.records import (
    FAILED_ROLLBACK_OUTCOMES,
    MapRollbackMetadata,
    RollbackOutcome,
    RollbackSummary,
    ScanPage,
)
from reactor.ports.documents import DocumentStore
from reactor.ports.serialization import record_from_dict, record_to_dict

__all__ = [
    "MAP_ROLLBACKS",
    "MAP_ROLLBACK_OUTCOMES",
    "MAP_ROLLBACK_SEEN",
    "DocumentMapRollbackStore",
]

#: Collection of rollback heads.
MAP_ROLLBACKS = "map_rollbacks"
#: Collection of per-position outcomes.
MAP_ROLLBACK_OUTCOMES = "map_rollback_outcomes"
#: Collection of element indexes named by a stored outcome.
MAP_ROLLBACK_SEEN = "map_rollback_seen"

_STARTED = "rollback"


def _head(doc: Mapping[str, Any] | None, **changes: Any) -> tuple[dict[str, Any], str | None]:
    head = {"meta": None, "offset": 0, "handed_off": False, "signal": False}
    head.update(doc or {})
    head.update(changes)
    listed = head["meta"] is not None and not head["signal"]  # finished once signalled
    return head, (_STARTED if listed else None)


class DocumentMapRollbackStore:
    """:class:`reactor.ports.MapRollbackStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        context_ttl: retention in seconds after each write (``None`` = keep forever).
    """

    def __init__(self, documents: DocumentStore, *, context_ttl: float | None = 86400.0) -> None:
        self._heads = DurableCollection(documents, MAP_ROLLBACKS, context_ttl)
        self._outcomes = DurableCollection(documents, MAP_ROLLBACK_OUTCOMES, context_ttl)
        self._seen = DurableCollection(documents, MAP_ROLLBACK_SEEN, context_ttl)

    def start(self, metadata: MapRollbackMetadata) -> tuple[bool, MapRollbackMetadata]:
        """Create the rollback metadata once (NX on the whole record).

        Returns:
            ``(True, metadata)`` when created, else ``(False, the first caller's metadata)``.
        """
        meta = record_to_dict(metadata)

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[MapRollbackMetadata | None]:
            if doc is not None and doc.get("meta") is not None:
                return None, None, record_from_dict(MapRollbackMetadata, doc["meta"])
            head, index = _head(doc, meta=meta)
            return head, index, None

        first = self._heads.update(metadata.map_id, mutate)
        return (True, metadata) if first is None else (False, first)

    def metadata(self, map_id: str) -> MapRollbackMetadata | None:
        """The rollback metadata, ``None`` when this map never rolled back (or it expired)."""
        doc = self._heads.get(map_id)
        meta = None if doc is None else doc.get("meta")
        return None if meta is None else record_from_dict(MapRollbackMetadata, meta)

    def claim_positions(self, map_id: str, count: int) -> range:
        """Atomically add ``count`` to the claim offset and return the claimed positions.

        docs/protocol.md#map-rollbacks: ``range(stop - count, min(stop, total))`` where ``stop`` is
        the new offset; the stored offset is not clipped (claims of 2, 2, 2, 2 against total
        5 give ``0..2``, ``2..4``, ``4..5``, empty, and the offset reads 8). ``total`` is read
        in the same compare-and-set (0 when the rollback was never started).
        """

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[range]:
            stop = int((doc or {}).get("offset", 0)) + count
            meta = None if doc is None else doc.get("meta")
            total = 0 if meta is None else int(meta["total"])
            head, index = _head(doc, offset=stop)
            return head, index, range(stop - count, min(stop, total))

        return self._heads.update(map_id, mutate)

    def offset(self, map_id: str) -> int:
        """The claim offset, 0 when never claimed."""
        doc = self._heads.get(map_id)
        return 0 if doc is None else int(doc.get("offset", 0))

    def put_outcome(self, map_id: str, position: int, outcome: RollbackOutcome) -> bool:
        """Store the outcome of ``position``, first writer wins; ``True`` when stored.

        A stored outcome with a non-``None`` index marks that index as seen. When this call
        loses, the *stored* outcome's index is (re-)marked seen, which repairs a crash between
        the two writes without ever marking the loser's index.

        Raises:
            ValueError: ``position`` is negative.
        """
        if position < 0:
            raise ValueError(f"rollback positions are >= 0, got {position!r}")
        stored = self._outcomes.create(
            position_key(map_id, position),
            {"position": position, **record_to_dict(outcome)},
            index=map_id,
        )
        if stored:
            seen_index = outcome.index
        else:
            existing = self.outcome(map_id, position)
            seen_index = None if existing is None else existing.index
        if seen_index is not None:
            self._seen.create(position_key(map_id, seen_index), {"index": seen_index})
        return stored

    def outcome(self, map_id: str, position: int) -> RollbackOutcome | None:
        """The outcome of ``position``, ``None`` when unsettled."""
        if position < 0:
            return None
        doc = self._outcomes.get(position_key(map_id, position))
        return None if doc is None else record_from_dict(RollbackOutcome, doc)

    def count_outcomes(self, map_id: str) -> int:
        """The number of settled positions (a keyset walk of the map's outcomes)."""
        return sum(1 for _ in self._outcomes.scan(index=map_id))

    def outcome_positions(self, map_id: str) -> list[int]:
        """Settled positions, ascending."""
        return [int(doc["position"]) for _key, doc in self._outcomes.scan(index=map_id)]

    def outcomes(
        self, map_id: str, *, page_size: int = 500
    ) -> Iterator[tuple[int, RollbackOutcome]]:
        """Yield ``(position, outcome)`` in position order, reading ``page_size`` at a time."""
        for _key, doc in self._outcomes.scan(index=map_id, page_size=max(page_size, 1)):
            yield int(doc["position"]), record_from_dict(RollbackOutcome, doc)

    def indexes_seen(self, map_id: str, indexes: Sequence[int]) -> list[bool]:
        """For each element index, whether a stored outcome named it."""
        return [
            index >= 0 and self._seen.get(position_key(map_id, index)) is not None
            for index in indexes
        ]

    def mark_handed_off(self, map_id: str) -> None:
        """Record that the owner saved itself as ``rolling_back`` (idempotent; re-stamps)."""

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[None]:
            head, index = _head(doc, handed_off=True)
            return head, index, None

        self._heads.update(map_id, mutate)

    def handed_off(self, map_id: str) -> bool:
        """Whether :meth:`mark_handed_off` was called (and has not expired)."""
        doc = self._heads.get(map_id)
        return bool(doc is not None and doc.get("handed_off"))

    def claim_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner after the rollback (NX): exactly one ``True``.

        The same write takes the rollback out of :meth:`scan` (it is finished; docs/workers.md,
        "Sweep cursors and dispatch leases").
        """

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[bool]:
            if doc is not None and doc.get("signal"):
                return None, None, False
            head, index = _head(doc, signal=True)
            return head, index, True

        return self._heads.update(map_id, mutate)

    def summary(self, map_id: str) -> RollbackSummary | None:
        """``{total, settled, outstanding, failed}``, ``None`` when this map never rolled back.

        ``failed`` counts outcomes in :data:`FAILED_ROLLBACK_OUTCOMES` (``failed``,
        ``element_in_flight``, ``context_unavailable``; docs/protocol.md#map-rollbacks).
        """
        meta = self.metadata(map_id)
        if meta is None:
            return None
        settled = failed = 0
        for _key, doc in self._outcomes.scan(index=map_id):
            settled += 1
            if doc.get("outcome") in FAILED_ROLLBACK_OUTCOMES:
                failed += 1
        return RollbackSummary(
            total=meta.total, settled=settled, outstanding=meta.total - settled, failed=failed
        )

    def scan(
        self, *, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[MapRollbackMetadata]:
        """List started rollbacks whose signal is not claimed yet, in map-id order (indexed).

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``("rollback", last map id examined)`` (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Args:
            limit: the maximum number of rollbacks.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            The metadata with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: the backend failed.
        """

        def decode(doc: Mapping[str, Any]) -> MapRollbackMetadata | None:
            meta = doc.get("meta")
            return record_from_dict(MapRollbackMetadata, meta) if meta else None

        return keyset_scan(
            self._heads.documents, MAP_ROLLBACKS, [_STARTED], limit=limit, cursor=cursor,
            decode=decode,
        )
