"""Fan-out map forward state on Redis (docs/protocol.md#maps).

All keys of one map share the hash tag ``{map:<map id>}`` (see :mod:`reactor_redis.keys`):
``metadata`` (JSON string), ``counter``, ``offset``, ``failed``, ``owner_signal`` (strings),
``results`` (hash index -> codec JSON), ``elements`` (list, append-only). Every write is one
call of ``scripts/map.lua``, which also re-stamps **every** key of the map (rollback keys
included) to ``context_ttl``, so an aggregate never expires before its members
(docs/protocol.md#conventions). The sweeper's scan reads the ``P:{maps}:active`` sorted set
(map ids, written before the map itself so a crash never hides a map), keyset-paged in
``(score, id)`` order (``scripts/index_page.lua``), pruning entries whose metadata is gone;
:meth:`RedisMapStore.claim_owner_signal` takes a settled map out of it (docs/workers.md, "Sweep
cursors and dispatch leases").

The store declares :class:`~reactor.ports.capabilities.BeginsAndSettlesElements`
(docs/protocol.md, "Optional fast paths"): :meth:`RedisMapStore.begin_element` and
:meth:`RedisMapStore.settle_element` are one ``map.lua`` call (one round trip) each. ``begin``
re-stamps the map only when it appends (a pure read writes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from redis.cluster import RedisCluster

from reactor.model.records import ElementStart, Fence, MapMetadata, ScanPage
from reactor.ports.serialization import (
    decode_scan_cursor,
    encode_scan_cursor,
    record_from_json,
    record_to_json,
)
from reactor_redis._base import Client, RedisScripts, storage_errors, ttl_arg
from reactor_redis.keys import Keys
from reactor_redis.locks import RETENTION_ARG

__all__ = ["RedisMapStore", "scan_index"]

T = TypeVar("T")


class MapScript:
    """Runs ``scripts/map.lua`` for one namespace (shared by maps and map rollbacks).

    Args:
        scripts: the shared script registry.
        keys: the key builder.
        context_ttl: retention in seconds (``None`` = never expire).
    """

    def __init__(self, scripts: RedisScripts, keys: Keys, context_ttl: float | None) -> None:
        self._scripts = scripts
        self._keys = keys
        self.ttl = ttl_arg(context_ttl)

    def __call__(self, map_id: str, op: str, *args: Any) -> Any:
        """Run operation ``op`` on ``map_id`` (raises redis errors; callers wrap them)."""
        return self._scripts("map", self._keys.map_keys(map_id), [self.ttl, op, *args])


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


def _metadata(text: str | None) -> MapMetadata | None:
    """Stored metadata JSON (``None`` when absent) as a :class:`MapMetadata`."""
    return None if text is None else record_from_json(MapMetadata, text)


def _check_index(index: int) -> None:
    if index < 0:
        raise ValueError(f"map indexes are >= 0, got {index!r}")


class RedisMapStore:
    """:class:`reactor.ports.MapStore` on Redis.

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

    def _get(self, map_id: str, aggregate: str) -> Any:
        with storage_errors(f"map {aggregate} read"):
            return self._client.get(self._keys.map_key(map_id, aggregate))

    def init(self, metadata: MapMetadata) -> bool:
        """Create metadata and counter (= ``count``) atomically; ``False`` when it existed."""
        with storage_errors("map init"):
            self._client.zadd(self._keys.active_maps(), {metadata.map_id: metadata.created_at})
            created = self._run(metadata.map_id, "init", record_to_json(metadata), metadata.count)
        return bool(created)

    def metadata(self, map_id: str) -> MapMetadata | None:
        """Read a map's metadata, ``None`` when unknown or expired."""
        return _metadata(self._get(map_id, "metadata"))

    def scan(self, *, limit: int = 1000, cursor: str | None = None) -> ScanPage[MapMetadata]:
        """List active (unsettled) maps, never rollback records, from the ``active`` index.

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``(score, last map id examined)`` (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Args:
            limit: the maximum number of maps.
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
            self._keys.active_maps(),
            limit,
            cursor,
            lambda map_id: self._keys.map_key(map_id, "metadata"),
            lambda text: record_from_json(MapMetadata, text),
        )

    def add_to_counter(self, map_id: str, delta: int) -> int:
        """Atomically add ``delta`` to the counter; returns the new value (re-stamps the map)."""
        with storage_errors("map counter"):
            return int(self._run(map_id, "add", int(delta)))

    def counter(self, map_id: str) -> int | None:
        """Read the counter, ``None`` when the map is unknown."""
        return _int(self._get(map_id, "counter"))

    def init_offset(self, map_id: str, value: int) -> bool:
        """Set the dispatch offset if never set (NX); ``True`` when this call set it."""
        with storage_errors("map offset init"):
            return bool(self._run(map_id, "init_offset", int(value)))

    def offset(self, map_id: str) -> int | None:
        """Read the dispatch offset, ``None`` when never set."""
        return _int(self._get(map_id, "offset"))

    def advance_offset(self, map_id: str, amount: int) -> int:
        """Atomically add ``amount`` to the offset and return the new value."""
        with storage_errors("map offset advance"):
            return int(self._run(map_id, "advance", int(amount)))

    def set_failed_context(self, map_id: str, context_id: str) -> bool:
        """Record the first failed element context (NX); ``True`` when this call won."""
        with storage_errors("map failed context"):
            return bool(self._run(map_id, "fail", context_id))

    def failed_context(self, map_id: str) -> str | None:
        """Read the first failed element context id."""
        value = self._get(map_id, "failed")
        return None if value is None else str(value)

    def claim_owner_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner (NX): exactly one ``True`` ever.

        Every call, winner or loser, then takes the map out of the ``active`` index (it is
        settled; docs/workers.md, "Sweep cursors and dispatch leases").

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("map owner signal"):
            won = bool(self._run(map_id, "owner"))
            self._client.zrem(self._keys.active_maps(), map_id)
        return won

    def put_result(self, map_id: str, index: int, value: str) -> None:
        """Store (overwrite) result slot ``index``.

        Raises:
            ValueError: ``index`` is negative.
        """
        _check_index(index)
        with storage_errors("map result put"):
            self._run(map_id, "put", int(index), value)

    def begin_element(self, map_id: str, index: int, context_id: str | None) -> ElementStart:
        """What an element job reads before it runs, in one ``map.lua`` call (one round trip).

        Stands for :meth:`metadata`, :meth:`result_slots` of ``[index]`` and
        :meth:`failed_context`, then, when ``context_id`` is given, the map is known, slot
        ``index`` is not stored and no element failed, :meth:`append_element` of
        ``context_id`` (docs/protocol.md, "Optional fast paths"). The reads and the append are
        one atomic step; the map is re-stamped only when the call appends.

        Args:
            map_id: the map.
            index: the element's index.
            context_id: the element's context id for a fresh element, ``None`` to only read.

        Returns:
            The :class:`~reactor.model.records.ElementStart` (``position`` set when appended).

        Raises:
            ValueError: ``index`` is negative.
            StorageError: Redis failed.
        """
        _check_index(index)
        extra = () if context_id is None else (context_id,)
        with storage_errors("map element begin"):
            meta, stored, failed, position = self._run(map_id, "begin", int(index), *extra)
        return ElementStart(
            _metadata(meta),
            int(stored) == 1,
            None if failed is None else str(failed),
            None if int(position) < 0 else int(position),
        )

    def settle_element(
        self, map_id: str, index: int, value: str, *, failed_context: str | None = None
    ) -> int:
        """Settle one element in one ``map.lua`` call (one round trip), re-stamping the map.

        In this order, atomically: :meth:`set_failed_context` of ``failed_context`` when given
        (first wins), :meth:`put_result` of slot ``index`` and :meth:`add_to_counter` ``-1``
        (docs/protocol.md, "Optional fast paths").

        Args:
            map_id: the map.
            index: the element's index.
            value: the slot's codec text.
            failed_context: the element's context id when it failed, else ``None``.

        Returns:
            The counter after the decrement.

        Raises:
            ValueError: ``index`` is negative.
            StorageError: Redis failed.
        """
        return self._settle(map_id, index, value, failed_context, None)

    def settle_releasing(
        self, map_id: str, index: int, value: str, *, failed_context: str | None = None,
        fence: Fence,
    ) -> int:
        """:meth:`settle_element`, then the release of the element's lock ``fence.key`` held
        by ``fence.owner``, in one ``map.lua`` call
        (:meth:`reactor.ports.capabilities.SettlesAndReleases.settle_releasing`); on a cluster,
        where the lock hash is on another slot than the map, the release follows as a
        ``lock.lua`` call of its own.

        Returns:
            The counter after the decrement.

        Raises:
            ValueError: ``index`` is negative.
            StorageError: Redis failed.
        """
        if not isinstance(self._client, RedisCluster):
            return self._settle(map_id, index, value, failed_context, fence)
        remaining = self._settle(map_id, index, value, failed_context, None)
        with storage_errors("lock release"):
            self._scripts("lock", [self._keys.lock(fence.key)],
                          ["release", fence.owner, RETENTION_ARG])
        return remaining

    def _settle(
        self, map_id: str, index: int, value: str, failed_context: str | None,
        fence: Fence | None,
    ) -> int:
        """One ``map.lua`` settle; given ``fence``, releasing its lock in the same script."""
        _check_index(index)
        keys = self._keys.map_keys(map_id)
        args: list[Any] = [self._run.ttl, "settle", int(index), value, failed_context or ""]
        if fence is not None:
            keys.append(self._keys.lock(fence.key))
            args += [fence.owner, RETENTION_ARG]
        with storage_errors("map element settle"):
            return int(self._scripts("map", keys, args))

    def results_page(self, map_id: str, *, offset: int, limit: int) -> list[tuple[int, str]]:
        """Present slots among indexes ``offset .. offset+limit-1``, in index order."""
        start = max(offset, 0)
        stop = offset + limit
        if limit <= 0 or stop <= start:
            return []
        indexes = list(range(start, stop))
        slots = self.result_slots(map_id, indexes)
        return [(i, v) for i, v in zip(indexes, slots, strict=True) if v is not None]

    def result_slots(self, map_id: str, indexes: Sequence[int]) -> list[str | None]:
        """Slots aligned with ``indexes``; ``None`` where missing."""
        if not indexes:
            return []
        key = self._keys.map_key(map_id, "results")
        out: list[str | None] = []
        with storage_errors("map result slots"):
            for start in range(0, len(indexes), 1000):
                chunk = [str(i) for i in indexes[start : start + 1000]]
                out.extend(self._client.hmget(key, chunk))
        return out

    def count_results(self, map_id: str) -> int:
        """The number of present slots."""
        with storage_errors("map result count"):
            return int(self._client.hlen(self._keys.map_key(map_id, "results")))

    def missing_indices(self, map_id: str, count: int) -> list[int]:
        """Ascending indexes in ``[0, count)`` that have no slot."""
        with storage_errors("map missing indices"):
            present = {int(k) for k in self._client.hkeys(self._keys.map_key(map_id, "results"))}
        return [i for i in range(count) if i not in present]

    def append_element(self, map_id: str, context_id: str) -> int:
        """Append an element context id; returns its 0-based position (never shifts)."""
        with storage_errors("map element append"):
            return int(self._run(map_id, "append", context_id))

    def element_ids(self, map_id: str, *, start: int = 0, limit: int | None = None) -> list[str]:
        """Element context ids in append order, from ``start``, at most ``limit``."""
        if limit is not None and limit <= 0:
            return []
        begin = max(start, 0)
        end = -1 if limit is None else begin + limit - 1
        with storage_errors("map element ids"):
            return list(self._client.lrange(self._keys.map_key(map_id, "elements"), begin, end))

    def element_id(self, map_id: str, position: int) -> str | None:
        """The id at ``position`` (negative counts from the end), ``None`` out of range."""
        with storage_errors("map element id"):
            value = self._client.lindex(self._keys.map_key(map_id, "elements"), position)
        return None if value is None else str(value)

    def count_elements(self, map_id: str) -> int:
        """The number of appended element ids."""
        with storage_errors("map element count"):
            return int(self._client.llen(self._keys.map_key(map_id, "elements")))

    def element_ids_from_tail(
        self, map_id: str, *, position: int, count: int, total: int
    ) -> list[str]:
        """Ids at tail positions ``position .. position+count-1`` of the first ``total``.

        docs/protocol.md#maps arithmetic; tail-first order, ``[]`` past the head.

        Raises:
            ValueError: ``position`` is negative.
        """
        if position < 0:
            raise ValueError(f"tail position must be >= 0, got {position!r}")
        if count <= 0:
            return []
        stop = total - 1 - position
        if stop < 0:
            return []
        start = max(total - position - count, 0)
        with storage_errors("map element tail"):
            found = self._client.lrange(self._keys.map_key(map_id, "elements"), start, stop)
        return list(reversed(found))


def scan_index(
    client: Client,
    scripts: RedisScripts,
    index: str,
    limit: int,
    cursor: str | None,
    meta_key: Callable[[str], str],
    parse: Callable[[str], T],
) -> ScanPage[T]:
    """One keyset page of a map scan index, reading each id's metadata (pruning gone ids).

    Args:
        client: the redis-py client.
        scripts: the script registry (``index_page``).
        index: the sorted set of map ids.
        limit: the maximum number of rows; ``<= 0`` reads nothing and hands ``cursor`` back.
        cursor: ``None`` for the start, else ``encode_scan_cursor(score, id)`` of the last id
            examined by an earlier page.
        meta_key: the metadata key of a map id.
        parse: decodes the metadata text.

    Returns:
        The rows with ``next_cursor`` (``None`` once the index was read to its end).

    Raises:
        ValueError: ``cursor`` is malformed.
        StorageError: Redis failed.
    """
    if limit <= 0:
        return ScanPage((), cursor)
    score, member = ("", "") if cursor is None else decode_scan_cursor(cursor, 2)
    if cursor is not None and not score:
        raise ValueError(f"malformed sweeper scan cursor {cursor!r}")
    out: list[T] = []
    with storage_errors("map scan"):
        while len(out) < limit:
            want = limit - len(out)
            flat: list[str] = scripts("index_page", [index], [score, member, want])
            gone: list[str] = []
            for i in range(0, len(flat), 2):
                map_id = flat[i]
                text = client.get(meta_key(map_id))
                if text is None:
                    gone.append(map_id)
                else:
                    out.append(parse(text))
            if flat:
                member, score = flat[-2], flat[-1]
            if gone:
                client.zrem(index, *gone)
            if len(flat) < 2 * want:
                return ScanPage(out, None)  # the index is exhausted
    return ScanPage(out, encode_scan_cursor(score, member))
