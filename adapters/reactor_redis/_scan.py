"""Keyset paging over the sharded index sets of the Redis adapter (contexts, step results).

A scan walks shards ``0 .. SHARDS-1``, in each the index sets named by the caller in ascending
order, in each the members in ``(score, member)`` order (``scripts/context_scan.lua``,
``scripts/step_scan.lua``, helper ``rank_after`` in ``scripts/_common.lua``). Its cursor is
:func:`~reactor.ports.serialization.encode_scan_cursor` of ``(shard, index, score, member)``
(docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reactor.ports.records import ScanPage
from reactor.ports.serialization import decode_scan_cursor, encode_scan_cursor
from reactor_redis.keys import SHARDS

__all__ = ["BUDGET", "Fetch", "ShardPosition", "sharded_scan"]

T = TypeVar("T")

#: One script call: ``(shard, names to read, resume score, resume member, rows wanted)`` ->
#: the script's reply ``[rows, last name, last score, last member, done]`` (rows still raw).
Fetch = Callable[[int, Sequence[str], str, str, int], Sequence[Any]]

#: Index members one scan script call examines at most (stale ones included).
BUDGET = 2000


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
