"""Keyset paging over the sharded index sets of the Redis adapter (contexts, step results).

A scan walks shards ``0 .. SHARDS-1``, in each the index sets named by the caller in ascending
order, in each the members in ``(score, member)`` order (``scripts/context_scan.lua``,
``scripts/step_scan.lua``, helper ``rank_after`` in ``scripts/_common.lua``). Its cursor is
:func:`~reactor.ports.serialization.encode_scan_cursor` of ``(shard, index, score, member)``
(docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reactor.model.records import ScanPage
from reactor.ports.clock import Clock, monotonic_reader
from reactor.ports.serialization import decode_scan_cursor, encode_scan_cursor
from reactor_redis.keys import SHARDS

__all__ = ["BUDGET", "PAGE_TRIM_BUDGET", "TRIM_INTERVAL", "Fetch", "IndexTrimmer", "ShardPosition",
           "sharded_scan"]

T = TypeVar("T")

#: One script call: ``(shard, names to read, resume score, resume member, rows wanted)`` ->
#: the script's reply ``[rows, last name, last score, last member, done]`` (rows still raw).
Fetch = Callable[[int, Sequence[str], str, str, int], Sequence[Any]]

#: Index members one scan script call examines at most (stale ones included).
BUDGET = 2000

#: Seconds between two index trims of one store object (:class:`IndexTrimmer`): the first scan
#: of a store trims, later scans only once this long after the previous trim. Index members of
#: expired records therefore outlive their record by at most this long plus the gap between
#: sweep ticks (docs/adapters/redis.md, "Bounded keys").
TRIM_INTERVAL = 60.0

#: Oldest page entries (``:pages``) one trim checks per shard against their record.
PAGE_TRIM_BUDGET = 500


class IndexTrimmer:
    """Removes expired members from the sharded index sets, at most every ``interval`` s.

    Index sets are scored by their record's expiry (µs), so ``ZREMRANGEBYSCORE -inf now``
    drops exactly the members whose record expired (``scripts/index_trim.lua``); a context
    shard's page set is trimmed by checking its oldest :data:`PAGE_TRIM_BUDGET` entries. The
    stores call :meth:`maybe_trim` from the start of every ``scan`` (the sweep ticks), so the
    indexes of terminal runs stay bounded by the live records without a dedicated job.

    Args:
        scripts: the client's scripts (``RedisScripts``).
        index_prefix: ``shard -> index key prefix``.
        names: every index set name of a shard.
        pages: ``shard -> (page set key, record key prefix)``, or ``None`` (no page set).
        interval: seconds between trims (:data:`TRIM_INTERVAL`); ``0`` trims on every call.
        clock: monotonic seconds: a callable or a :class:`reactor.ports.Clock` (its
            ``monotonic``); default ``None``: the system's monotonic clock, read at call time.
    """

    def __init__(
        self,
        scripts: Any,
        index_prefix: Callable[[int], str],
        names: Sequence[str],
        pages: Callable[[int], tuple[str, str]] | None = None,
        *,
        interval: float = TRIM_INTERVAL,
        clock: Callable[[], float] | Clock | None = None,
    ) -> None:
        self._scripts = scripts
        self._prefix = index_prefix
        self._names = list(names)
        self._pages = pages
        self.interval = interval
        self._clock = monotonic_reader(clock)
        self._last: float | None = None
        self._lock = threading.Lock()

    def maybe_trim(self) -> int:
        """Trim unless the last trim was less than ``interval`` seconds ago.

        Returns:
            Members removed (0 when skipped).

        Raises:
            redis.RedisError: Redis failed (the caller maps it).
        """
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self.interval:
                return 0
            self._last = now
        return self.trim()

    def trim(self) -> int:
        """Trim every shard now (one script call per shard).

        Returns:
            Members removed.

        Raises:
            redis.RedisError: Redis failed (the caller maps it).
        """
        removed = 0
        for shard in range(SHARDS):
            prefix = self._prefix(shard)
            if self._pages is not None:
                page_key, record_prefix = self._pages(shard)
                keys, args = [page_key], [prefix, record_prefix, PAGE_TRIM_BUDGET]
            else:
                keys, args = [prefix + "routing"], [prefix, "", 0]
            removed += int(self._scripts("index_trim", keys, [*args, *self._names]))
        return removed


class ShardPosition:
    """Where a keyset scan over the shards' index sets stands.

    Args:
        shard: the shard (``0 .. SHARDS-1``).
        name: the index set within the shard (``""``: the start of the shard).
        score: the score (a ``WITHSCORES`` string) of the last member examined.
        member: the last member examined.
    """

    __slots__ = ("member", "name", "score", "shard")

    def __init__(self, shard: int, name: str, score: str, member: str) -> None:
        self.shard, self.name, self.score, self.member = shard, name, score, member

    @classmethod
    def decode(cls, cursor: str | None) -> ShardPosition:
        """The position inside ``cursor`` (the start for ``None``).

        Raises:
            ValueError: ``cursor`` is malformed.
        """
        if cursor is None:
            return cls(0, "", "", "")
        shard, name, score, member = decode_scan_cursor(cursor, 4)
        if not shard.isdigit() or not 0 <= int(shard) < SHARDS or (name and not score):
            raise ValueError(f"malformed sweeper scan cursor {cursor!r}")
        return cls(int(shard), name, score, member)

    @staticmethod
    def encode(shard: int, name: str, score: str, member: str) -> str:
        """The cursor of a position."""
        return encode_scan_cursor(str(shard), name, score, member)

    def resume(self, shard: int, names: list[str]) -> tuple[list[str], str, str]:
        """The names still to read in ``shard`` and the position inside the first of them."""
        if shard != self.shard or not self.name:
            return names, "", ""
        todo = [n for n in names if n >= self.name]
        if todo and todo[0] == self.name:
            return todo, self.score, self.member
        return todo, "", ""


def sharded_scan(
    names: Sequence[str],
    limit: int,
    cursor: str | None,
    fetch: Fetch,
    rows_of: Callable[[Sequence[Any]], list[T]],
) -> ScanPage[T]:
    """Read up to ``limit`` rows from the index sets ``names`` of every shard, after ``cursor``.

    Args:
        names: the index set names (walked in ascending order in each shard).
        limit: the maximum number of rows; ``<= 0`` reads nothing and hands ``cursor`` back.
        cursor: ``None`` for the start, else a ``next_cursor`` of an earlier page.
        fetch: runs the shard's scan script (see :data:`Fetch`).
        rows_of: turns a script's raw rows into rows (it may drop some: a filter).

    Returns:
        The rows and the cursor after the last member examined (``None`` at the end).

    Raises:
        ValueError: ``cursor`` is malformed.
        redis.RedisError: Redis failed (callers wrap it).
    """
    if limit <= 0:
        return ScanPage((), cursor)
    ordered = sorted(set(names))
    position = ShardPosition.decode(cursor)
    rows: list[T] = []
    for shard in range(position.shard, SHARDS):
        if len(rows) >= limit:  # the next page starts with this shard
            return ScanPage(rows, ShardPosition.encode(shard, "", "", ""))
        todo, score, member = position.resume(shard, ordered)
        while todo:
            raw, last_name, last_score, last_member, done = fetch(
                shard, todo, score, member, limit - len(rows)
            )
            rows.extend(rows_of(raw))
            if int(done):
                break
            todo = todo[todo.index(str(last_name)) :]
            score, member = str(last_score), str(last_member)
            if len(rows) >= limit:
                return ScanPage(rows, ShardPosition.encode(shard, todo[0], score, member))
    return ScanPage(rows, None)
