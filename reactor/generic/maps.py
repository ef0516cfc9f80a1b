"""Fan-out map forward state over a :class:`reactor.ports.DocumentStore` (docs/protocol.md#maps).

A map of 100,000 elements never puts all its slots or element ids into one document (MongoDB
caps a document at 16 MiB, DynamoDB an item at 400 KB). Layout, every document re-stamped to
``now + context_ttl`` when written (docs/protocol.md#conventions):

==================  ===============================  =========================================
collection          key                              value (``index``)
==================  ===============================  =========================================
``maps``            ``<map id>``                     ``{meta, counter, settled}`` -- the head;
                                                     metadata and counter share one document
                                                     so :meth:`DocumentMapStore.init` is
                                                     atomic and every counter write re-stamps
                                                     the metadata (index ``"map"`` while it has
                                                     metadata and is not ``settled``: the
                                                     sweeper's scan)
``map_state``       ``<map id>:offset``              ``{value}`` the dispatch offset
``map_state``       ``<map id>:failed``              ``{context_id}`` first failed element
``map_state``       ``<map id>:owner_signal``        ``{at}`` the owner-signal claim
``map_state``       ``<map id>:elements``            ``{count}`` element ids appended
``map_slots``       ``<map id>:<index, 12 digits>``  ``{index, value}`` (index ``<map id>``)
``map_elements``    ``<map id>:<pos, 12 digits>``    ``{position, context_id}`` (index
                                                     ``<map id>``)
==================  ===============================  =========================================

Slots and element positions are scanned per map through their ``index`` (= the map id), in
key order, which is index/position order thanks to the zero padding.

:meth:`DocumentMapStore.claim_owner_signal` settles the map: it creates the ``owner_signal``
claim, then sets ``settled`` on the head, which takes it out of the sweeper's index (winners and
losers alike, so a crash between the two writes is repaired by the next collector). Every head
write keeps ``settled`` (docs/workers.md, "Sweep cursors and dispatch leases").

:meth:`DocumentMapStore.append_element` is hole-free. It reserves a position on the
``elements`` counter **and records it as pending for that context id** (``pending: {context id:
position}`` on the counter document), writes the position document, then clears the pending
entry. A backend error or crash between the writes leaves the reservation pending: the element
job's retry (element context ids are stable) finds it and writes the **same** position instead
of reserving another, and every read of a position without its document falls back to the
pending entry, so a reserved position always names its element (never a
``context_unavailable`` hole in a rollback: an element that never started settles as
``not_needed``). The pending map only holds appends in flight or cut off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactor.generic._durable import DurableCollection, Mutation
from reactor.generic._scan import keyset_scan
from reactor.model.records import MapMetadata, ScanPage
from reactor.ports.documents import DocumentStore
from reactor.ports.serialization import record_from_dict, record_to_dict

__all__ = [
    "MAPS",
    "MAP_ELEMENTS",
    "MAP_SLOTS",
    "MAP_STATE",
    "DocumentMapStore",
    "position_key",
]

#: Collection of map heads (metadata + counter).
MAPS = "maps"
#: Collection of per-map scalars (offset, failed element, owner signal, element count).
MAP_STATE = "map_state"
#: Collection of result slots, one document per index.
MAP_SLOTS = "map_slots"
#: Collection of the element-context index, one document per position.
MAP_ELEMENTS = "map_elements"

_ACTIVE = "map"


def position_key(map_id: str, position: int) -> str:
    """The key of slot/position ``position`` of ``map_id`` (zero-padded to 12 digits)."""
    return f"{map_id}:{position:012d}"


def _head_index(head: Mapping[str, Any]) -> str | None:
    """The scan index of a head document: listed while it has metadata and is not settled."""
    return _ACTIVE if head.get("meta") and not head.get("settled") else None


def _check_index(index: int) -> None:
    if index < 0:
        raise ValueError(f"map indexes are >= 0, got {index!r}")


class DocumentMapStore:
    """:class:`reactor.ports.MapStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        context_ttl: retention in seconds after each write (``None`` = keep forever).
    """

    def __init__(self, documents: DocumentStore, *, context_ttl: float | None = 86400.0) -> None:
        self._heads = DurableCollection(documents, MAPS, context_ttl)
        self._state = DurableCollection(documents, MAP_STATE, context_ttl)
        self._slots = DurableCollection(documents, MAP_SLOTS, context_ttl)
        self._elements = DurableCollection(documents, MAP_ELEMENTS, context_ttl)

    # -- metadata and counter (one head document) ----------------------------------------

    def init(self, metadata: MapMetadata) -> bool:
        """Create the metadata and set the counter to ``metadata.count`` in one write.

        Returns:
            ``True`` when created; ``False`` when the map already had metadata (no change).
        """
        meta = record_to_dict(metadata)

        def mutate(head: Mapping[str, Any] | None) -> Mutation[bool]:
            if head is not None and head.get("meta") is not None:
                return None, None, False
            new = {"meta": meta, "counter": metadata.count, "settled": False}
            return new, _head_index(new), True

        return self._heads.update(metadata.map_id, mutate)

    def metadata(self, map_id: str) -> MapMetadata | None:
        """The map's metadata, ``None`` when unknown or expired."""
        head = self._heads.get(map_id)
        meta = None if head is None else head.get("meta")
        return None if meta is None else record_from_dict(MapMetadata, meta)

    def scan(self, *, limit: int = 1000, cursor: str | None = None) -> ScanPage[MapMetadata]:
        """List unsettled maps with metadata, in map-id order (an indexed query; never rollbacks).

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``("map", last map id examined)`` (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Args:
            limit: the maximum number of maps.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            The metadata with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: the backend failed.
        """

        def decode(head: Mapping[str, Any]) -> MapMetadata | None:
            meta = head.get("meta")
            return record_from_dict(MapMetadata, meta) if meta else None

        return keyset_scan(
            self._heads.documents, MAPS, [_ACTIVE], limit=limit, cursor=cursor, decode=decode
        )

    def add_to_counter(self, map_id: str, delta: int) -> int:
        """Atomically add ``delta`` to the counter (absent counts as 0); returns the new value.

        Re-stamps the head (metadata included) to ``now + context_ttl``.
        """

        def mutate(head: Mapping[str, Any] | None) -> Mutation[int]:
            new = int((head or {}).get("counter", 0)) + delta
            updated = {**(head or {"meta": None}), "counter": new}
            return updated, _head_index(updated), new

        return self._heads.update(map_id, mutate)

    def counter(self, map_id: str) -> int | None:
        """The counter, ``None`` when the map is unknown or expired."""
        head = self._heads.get(map_id)
        return None if head is None else int(head.get("counter", 0))

    # -- scalars ---------------------------------------------------------------------------

    def init_offset(self, map_id: str, value: int) -> bool:
        """Set the dispatch offset if it was never set (NX); ``True`` when this call set it."""
        return self._state.create(f"{map_id}:offset", {"value": value})

    def offset(self, map_id: str) -> int | None:
        """The dispatch offset, ``None`` when never set (or expired)."""
        doc = self._state.get(f"{map_id}:offset")
        return None if doc is None else int(doc["value"])

    def advance_offset(self, map_id: str, amount: int) -> int:
        """Atomically add ``amount`` to the offset (absent = 0); returns the new value.

        The caller's batch is ``[new - amount, new)``; the offset may grow past ``count``.
        """

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[int]:
            new = int((doc or {}).get("value", 0)) + amount
            return {"value": new}, None, new

        return self._state.update(f"{map_id}:offset", mutate)

    def set_failed_context(self, map_id: str, context_id: str) -> bool:
        """Record the first failed element context (NX); ``True`` when this call won."""
        return self._state.create(f"{map_id}:failed", {"context_id": context_id})

    def failed_context(self, map_id: str) -> str | None:
        """The first failed element context id, ``None`` when none."""
        doc = self._state.get(f"{map_id}:failed")
        return None if doc is None else str(doc["context_id"])

    def claim_owner_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner (NX): exactly one caller gets ``True``.

        Every call, winner or loser, then marks the head ``settled``, which takes the map out
        of :meth:`scan` (docs/workers.md, "Sweep cursors and dispatch leases").

        Raises:
            StorageError: the backend failed.
        """
        won = self._state.create(f"{map_id}:owner_signal", {"at": self._state.documents.now()})

        def settle(head: Mapping[str, Any] | None) -> Mutation[None]:
            if head is None or head.get("settled"):
                return None, None, None
            updated = {**head, "settled": True}
            return updated, _head_index(updated), None

        self._heads.update(map_id, settle)
        return won

    # -- result slots ------------------------------------------------------------------------

    def put_result(self, map_id: str, index: int, value: str) -> None:
        """Store (overwrite) slot ``index`` with codec JSON text; re-stamps the slot.

        Raises:
            ValueError: ``index`` is negative.
        """
        _check_index(index)
        self._slots.put(position_key(map_id, index), {"index": index, "value": value}, index=map_id)

    def results_page(self, map_id: str, *, offset: int, limit: int) -> list[tuple[int, str]]:
        """Present slots among indexes ``offset .. offset+limit-1``, in index order."""
        if limit <= 0:
            return []
        start = max(offset, 0)
        stop = offset + limit
        if stop <= start:
            return []
        after = position_key(map_id, start - 1) if start > 0 else None
        found = self._slots.documents.scan(MAP_SLOTS, index=map_id, after=after, limit=stop - start)
        out: list[tuple[int, str]] = []
        for _key, doc in found:
            at = int(doc["index"])
            if at >= stop:
                break
            out.append((at, str(doc["value"])))
        return out

    def result_slots(self, map_id: str, indexes: Sequence[int]) -> list[str | None]:
        """Slots aligned with ``indexes``; ``None`` where missing, expired or negative."""
        out: list[str | None] = []
        for index in indexes:
            doc = None if index < 0 else self._slots.get(position_key(map_id, index))
            out.append(None if doc is None else str(doc["value"]))
        return out

    def count_results(self, map_id: str) -> int:
        """The number of present slots (a keyset walk of the map's slot index)."""
        return sum(1 for _ in self._slots.scan(index=map_id))

    def missing_indices(self, map_id: str, count: int) -> list[int]:
        """Ascending indexes in ``[0, count)`` with no slot: the authoritative completion test."""
        present = {int(doc["index"]) for _key, doc in self._slots.scan(index=map_id)}
        return [i for i in range(count) if i not in present]

    # -- element-context index ---------------------------------------------------------------

    def append_element(self, map_id: str, context_id: str) -> int:
        """Append an element context id; returns its 0-based position (never shifts).

        Duplicates are allowed once an append finished. Hole-free: the position is reserved on
        the element counter together with a pending entry for ``context_id``; the position
        document is written; the pending entry is cleared. A retry after an error between
        those writes (same ``context_id``) reuses the pending position.

        Args:
            map_id: the map.
            context_id: the element context id.

        Returns:
            The position (0-based).

        Raises:
            StorageError: the backend failed (retrying the same call is safe).
        """

        def reserve(doc: Mapping[str, Any] | None) -> Mutation[int]:
            current = dict(doc or {})
            pending = dict(current.get("pending") or {})
            if context_id in pending:  # a retry of an append cut off after its reservation
                return None, None, int(pending[context_id])
            position = int(current.get("count", 0))
            pending[context_id] = position
            return {"count": position + 1, "pending": pending}, None, position

        key = f"{map_id}:elements"
        position = self._state.update(key, reserve)
        self._elements.put(
            position_key(map_id, position),
            {"position": position, "context_id": context_id},
            index=map_id,
        )

        def settle(doc: Mapping[str, Any] | None) -> Mutation[None]:
            pending = dict((doc or {}).get("pending") or {})
            if doc is None or pending.get(context_id) != position:
                return None, None, None
            del pending[context_id]
            return {**doc, "pending": pending}, None, None

        self._state.update(key, settle)
        return position

    def _pending(self, map_id: str) -> dict[int, str]:
        """``{position: context id}`` of appends whose position document may be missing."""
        doc = self._state.get(f"{map_id}:elements")
        pending = (doc or {}).get("pending") or {}
        return {int(position): str(cid) for cid, position in pending.items()}

    def element_ids(self, map_id: str, *, start: int = 0, limit: int | None = None) -> list[str]:
        """Element context ids in append order from position ``start``, at most ``limit``."""
        if limit is not None and limit <= 0:
            return []
        start = max(start, 0)
        after = position_key(map_id, start - 1) if start > 0 else None
        page = 1000 if limit is None else min(limit, 1000)
        total = self.count_elements(map_id)
        stop = total if limit is None else min(total, start + limit)
        found: dict[int, str] = {}
        for _key, doc in self._elements.scan(index=map_id, after=after, page_size=page):
            position = int(doc["position"])
            if position >= stop:
                break
            found[position] = str(doc["context_id"])
        return self._fill(map_id, found, range(start, stop))

    def _fill(self, map_id: str, found: dict[int, str], positions: range) -> list[str]:
        """The ids at ``positions`` in order; a position without its document falls back to
        its pending reservation (an append cut off between its writes)."""
        if len(found) < len(positions):
            pending = self._pending(map_id)
            found = {**{p: c for p, c in pending.items() if p in positions}, **found}
        return [found[p] for p in positions if p in found]

    def element_id(self, map_id: str, position: int) -> str | None:
        """The id at ``position`` (negative counts from the end), ``None`` when out of range."""
        if position < 0:
            position += self.count_elements(map_id)
            if position < 0:
                return None
        doc = self._elements.get(position_key(map_id, position))
        if doc is None:
            return self._pending(map_id).get(position)
        return str(doc["context_id"])

    def count_elements(self, map_id: str) -> int:
        """The number of appended element ids (reserved positions), 0 when none."""
        doc = self._state.get(f"{map_id}:elements")
        return 0 if doc is None else int(doc["count"])

    def element_ids_from_tail(
        self, map_id: str, *, position: int, count: int, total: int
    ) -> list[str]:
        """Ids at tail positions ``position .. position+count-1`` of the first ``total`` entries.

        docs/protocol.md#maps: ``stop = total - 1 - position``; ``[]`` when ``stop < 0``;
        else ``start = max(total - position - count, 0)``; the entries ``start..stop`` are
        returned reversed (tail first). Entries appended after ``total`` never shift positions.

        Raises:
            ValueError: ``position`` is negative.
        """
        if position < 0:
            raise ValueError(f"tail positions are >= 0, got {position!r}")
        stop = total - 1 - position
        if stop < 0 or count <= 0:
            return []
        start = max(total - position - count, 0)
        if start > stop:
            return []
        after = position_key(map_id, start - 1) if start > 0 else None
        found = self._elements.documents.scan(
            MAP_ELEMENTS, index=map_id, after=after, limit=stop - start + 1
        )
        by_position = {
            int(doc["position"]): str(doc["context_id"])
            for _key, doc in found if int(doc["position"]) <= stop
        }
        ids = self._fill(map_id, by_position, range(start, stop + 1))
        ids.reverse()
        return ids
