"""Distributed map rollback state on Redis (docs/protocol.md#map-rollbacks).

The rollback aggregates live beside the map's forward keys under the same ``{map:<id>}`` tag
(``rb:metadata`` JSON, ``rb:offset``, ``rb:outcomes`` hash position -> outcome JSON,
``rb:indexes`` set, ``rb:handed_off``, ``rb:signal``, ``rb:failed`` counter). Every write is one
``scripts/map.lua`` call that re-stamps all the map's keys. ``P:{maps}:rollbacks`` lists started
rollbacks for the sweeper (keyset-paged like the maps' ``active`` index); a rollback leaves it
when its signal is claimed (docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from reactor.model.records import (
    FAILED_ROLLBACK_OUTCOMES,
    MapRollbackMetadata,
    RollbackOutcome,
    RollbackSummary,
    ScanPage,
)
from reactor.ports.serialization import record_from_json, record_to_json
from reactor_redis._base import Client, RedisScripts, storage_errors
from reactor_redis.keys import Keys
from reactor_redis.maps import MapScript, scan_index

__all__ = ["RedisMapRollbackStore"]


class RedisMapRollbackStore:
    """:class:`reactor.ports.MapRollbackStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
        context_ttl: retention in seconds after each write (``None`` = never expire).
    """

    def __init__(
        self, client: Client, scripts: RedisScripts, keys: Keys, *, context_ttl: float | None
    ) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts
        self._run = MapScript(scripts, keys, context_ttl)

    def _key(self, map_id: str, aggregate: str) -> str:
        return self._keys.rollback_key(map_id, aggregate)

    def start(self, metadata: MapRollbackMetadata) -> tuple[bool, MapRollbackMetadata]:
        """Create the rollback metadata once (NX); returns ``(created, first metadata)``.

        The map id enters the ``rollbacks`` index before the metadata is written (a crash never
        hides a rollback), and only while no metadata exists: a finished rollback that its
        owner re-enters stays out of the index.
        """
        with storage_errors("map rollback start"):
            if not self._client.exists(self._key(metadata.map_id, "metadata")):
                self._client.zadd(self._keys.started_rollbacks(), {metadata.map_id: 0})
            created, text = self._run(metadata.map_id, "rb_start", record_to_json(metadata))
        return bool(created), record_from_json(MapRollbackMetadata, text)

    def metadata(self, map_id: str) -> MapRollbackMetadata | None:
        """Read the rollback metadata."""
        with storage_errors("map rollback metadata"):
            text = self._client.get(self._key(map_id, "metadata"))
        return None if text is None else record_from_json(MapRollbackMetadata, text)

    def claim_positions(self, map_id: str, count: int) -> range:
        """Atomically add ``count`` to the claim offset; ``range(stop-count, min(stop, total))``.

        ``total`` is read in the same script (0 when the rollback never started).
        """
        with storage_errors("map rollback claim"):
            stop, text = self._run(map_id, "rb_claim", int(count))
        total = record_from_json(MapRollbackMetadata, text).total if text else 0
        stop = int(stop)
        return range(stop - count, min(stop, total))

    def offset(self, map_id: str) -> int:
        """The claim offset, 0 when never claimed."""
        with storage_errors("map rollback offset"):
            value = self._client.get(self._key(map_id, "offset"))
        return 0 if value is None else int(value)

    def put_outcome(self, map_id: str, position: int, outcome: RollbackOutcome) -> bool:
        """Store ``position``'s outcome, first writer wins (marks its index seen when stored)."""
        text = record_to_json(outcome)
        with storage_errors("map rollback outcome"):
            stored = self._run(
                map_id,
                "rb_outcome",
                int(position),
                text,
                "" if outcome.index is None else str(outcome.index),
                "1" if outcome.outcome in FAILED_ROLLBACK_OUTCOMES else "0",
            )
        return bool(stored)

    def outcome(self, map_id: str, position: int) -> RollbackOutcome | None:
        """Read one position's outcome."""
        with storage_errors("map rollback outcome read"):
            text = self._client.hget(self._key(map_id, "outcomes"), str(position))
        return None if text is None else record_from_json(RollbackOutcome, text)

    def count_outcomes(self, map_id: str) -> int:
        """The number of settled positions."""
        with storage_errors("map rollback count"):
            return int(self._client.hlen(self._key(map_id, "outcomes")))

    def outcome_positions(self, map_id: str) -> list[int]:
        """Settled positions, ascending."""
        with storage_errors("map rollback positions"):
            return sorted(int(k) for k in self._client.hkeys(self._key(map_id, "outcomes")))

    def outcomes(
        self, map_id: str, *, page_size: int = 500
    ) -> Iterator[tuple[int, RollbackOutcome]]:
        """Yield ``(position, outcome)`` in position order, ``page_size`` per read.

        Positions are always below the rollback's ``total`` (claims are clipped to it), so the
        pages are ``HMGET`` of consecutive position ranges: memory stays bounded by
        ``page_size`` whatever the number of outcomes (no ``HKEYS`` of the whole hash).
        """
        meta = self.metadata(map_id)
        if meta is None:
            return
        size = max(page_size, 1)
        key = self._key(map_id, "outcomes")
        for start in range(0, meta.total, size):
            chunk = range(start, min(start + size, meta.total))
            with storage_errors("map rollback outcomes"):
                texts = self._client.hmget(key, [str(p) for p in chunk])
            for position, text in zip(chunk, texts, strict=True):
                if text is not None:
                    yield position, record_from_json(RollbackOutcome, text)

    def indexes_seen(self, map_id: str, indexes: Sequence[int]) -> list[bool]:
        """For each element index, whether a stored outcome named it."""
        if not indexes:
            return []
        key = self._key(map_id, "indexes")
        out: list[bool] = []
        with storage_errors("map rollback indexes"):
            for start in range(0, len(indexes), 1000):
                chunk = [str(i) for i in indexes[start : start + 1000]]
                out.extend(bool(x) for x in self._client.smismember(key, chunk))
        return out

    def mark_handed_off(self, map_id: str) -> None:
        """Record that the owner saved itself as ``rolling_back`` (idempotent)."""
        with storage_errors("map rollback hand-off"):
            self._run(map_id, "rb_handoff")

    def handed_off(self, map_id: str) -> bool:
        """Whether :meth:`mark_handed_off` was called."""
        with storage_errors("map rollback hand-off read"):
            return bool(self._client.exists(self._key(map_id, "handed_off")))

    def claim_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner after the rollback (NX).

        Every call, winner or loser, then takes the rollback out of the ``rollbacks`` index (it
        is finished; docs/workers.md, "Sweep cursors and dispatch leases").

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("map rollback signal"):
            won = bool(self._run(map_id, "rb_signal"))
            self._client.zrem(self._keys.started_rollbacks(), map_id)
        return won

    def summary(self, map_id: str) -> RollbackSummary | None:
        """Progress counts, ``None`` when this map never rolled back."""
        meta = self.metadata(map_id)
        if meta is None:
            return None
        with storage_errors("map rollback summary"):
            settled = int(self._client.hlen(self._key(map_id, "outcomes")))
            failed = int(self._client.get(self._key(map_id, "failed")) or 0)
        return RollbackSummary(
            total=meta.total, settled=settled, outstanding=meta.total - settled, failed=failed
        )

    def scan(
        self, *, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[MapRollbackMetadata]:
        """List started, unfinished rollbacks from the ``rollbacks`` index.

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``(score, last map id examined)`` (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Args:
            limit: the maximum number of rollbacks.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            The metadata with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: Redis failed.
        """
        return scan_index(
            self._client,
            self._scripts,
            self._keys.started_rollbacks(),
            limit,
            cursor,
            lambda map_id: self._key(map_id, "metadata"),
            lambda text: record_from_json(MapRollbackMetadata, text),
        )
