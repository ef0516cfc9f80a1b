"""Run contexts on Redis (docs/protocol.md#contexts).

Each context is a hash ``P:{ctx:NN}:c:<id>`` (fields of :class:`ContextRecord` plus the scan
index and page entry it is listed under) with a native TTL of ``context_ttl``. Beside it, in
the same shard slot:

* one sorted set per scan index (``<status>`` for top-level runs, ``child:<status>`` for
  dispatched ``async_reactor`` children; other children are never indexed), scored by the
  record's expiry (µs) so stale members are pruned by score;
* one lexicographic sorted set of page keys (``<inverted created_at µs, 17 digits>:<id>``)
  for the newest-first dashboard pages.

A save is **one** round trip: one script checks the record's fence (hash field ``_fence``, the
largest token of any fenced save; docs/workers.md, "Stale writers and fenced saves"), writes the
hash, moves the index and page entries and sets the TTL. Scans walk the 16 shards' index sets
(never ``KEYS``/``SCAN``), checking each member against its record, keyset-paged in ``(shard,
index, expiry, id)`` order: a save only ever moves a member to a later expiry, so a run present
for a whole pass is listed in it (docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from typing import Any

from reactor.errors import ContextTooLargeError, StaleWriterError
from reactor.model.records import ContextRecord, Fence, RunPage, RunSummary, ScanPage
from reactor.model.status import RunStatus
from reactor.ports.serialization import decode_page_cursor, encode_page_cursor, page_key
from reactor_redis._base import Client, RedisScripts, storage_errors, ttl_arg
from reactor_redis._scan import BUDGET, IndexTrimmer, sharded_scan
from reactor_redis.keys import SHARDS, Keys, shard_of

__all__ = ["RedisContextStore"]

_KNOWN: tuple[str, ...] = tuple(s.value for s in RunStatus)
_OTHER = "~other"
_CHILD = "child:"


def _bucket(status: str) -> str:
    return status if status in _KNOWN else _OTHER


def _index(record: ContextRecord) -> str:
    if record.parent_context_id is None:
        return _bucket(record.status)
    if record.dispatched_child:
        return _CHILD + _bucket(record.status)
    return ""


def _summary(row: Sequence[str]) -> RunSummary:
    return RunSummary(
        context_id=row[0],
        reactor=row[1],
        status=row[2],
        created_at=float(row[3]),
        updated_at=float(row[4]),
        parent_context_id=row[5] or None,
        dispatched_child=row[6] == "1",
    )


class RedisContextStore:
    """:class:`reactor.ports.ContextStore` on Redis.

    Args:
        client: the shared redis-py client (``decode_responses=True``).
        scripts: the shared script registry.
        keys: the key builder of this namespace.
        context_ttl: retention in seconds after each save (``None`` = never expire).
        max_document_bytes: refuse larger documents (``None`` = unbounded).
    """

    def __init__(
        self,
        client: Client,
        scripts: RedisScripts,
        keys: Keys,
        *,
        context_ttl: float | None,
        max_document_bytes: int | None = None,
    ) -> None:
        self._client = client
        self._scripts = scripts
        self._keys = keys
        self._ttl = ttl_arg(context_ttl)
        #: Trims expired members from the scan indexes and pages at the start of scans.
        self.trimmer = IndexTrimmer(
            scripts,
            keys.context_index_prefix,
            [*_KNOWN, _OTHER, *(_CHILD + name for name in (*_KNOWN, _OTHER))],
            lambda shard: (keys.context_pages(shard), keys.context_record_prefix(shard)),
        )
        self._max = max_document_bytes

    def save(self, record: ContextRecord, *, fence: Fence | None = None) -> None:
        """Write a context and re-stamp its TTL in one script, unless fenced off.

        The hash keeps the record's fence in field ``_fence`` (the largest token of any fenced
        save); the script checks it and writes in one atomic step (the rule:
        :meth:`reactor.ports.ContextStore.save`; docs/workers.md, "Stale writers and fenced
        saves").

        Args:
            record: the context to write.
            fence: the writer's hold on the lock guarding the record; ``None`` = unfenced
                (always written, the stored fence kept).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: the document exceeds ``max_document_bytes``.
            StorageError: Redis failed.
        """
        if self._max is not None:
            size = len(record.document.encode("utf-8"))
            if size > self._max:
                raise ContextTooLargeError(
                    f"context {record.context_id} is {size} bytes, over {self._max}",
                    size_bytes=size,
                    limit_bytes=self._max,
                )
        shard = shard_of(record.context_id)
        fields: list[str] = [
            "id", record.context_id,
            "reactor", record.reactor,
            "status", record.status,
            "document", record.document,
            "created_at", repr(float(record.created_at)),
            "updated_at", repr(float(record.updated_at)),
            "child", "1" if record.dispatched_child else "0",
        ]  # fmt: skip
        if record.parent_context_id is not None:
            fields += ["parent", record.parent_context_id]
        if record.root_context_id is not None:
            fields += ["root", record.root_context_id]
        page = (
            page_key(record.created_at, record.context_id)
            if record.parent_context_id is None
            else ""
        )
        with storage_errors("context save"):
            reply = self._scripts(
                "context_save",
                [self._keys.context(record.context_id), self._keys.context_pages(shard)],
                [
                    self._ttl,
                    self._keys.context_index_prefix(shard),
                    _index(record),
                    page,
                    record.context_id,
                    "" if fence is None else str(fence.token),
                    *fields,
                ],
            )
        if isinstance(reply, list):  # {0, stored token}: refused, nothing written
            assert fence is not None
            raise StaleWriterError.refused(
                record.context_id, key=fence.key, token=fence.token, stored_token=int(reply[1])
            )

    def load(self, context_id: str) -> ContextRecord | None:
        """Read a context by id, ``None`` when absent or expired."""
        with storage_errors("context load"):
            found: dict[str, str] = self._client.hgetall(self._keys.context(context_id))
        if not found or "id" not in found:
            return None
        return ContextRecord(
            context_id=found["id"],
            reactor=found["reactor"],
            status=found["status"],
            document=found["document"],
            created_at=float(found["created_at"]),
            updated_at=float(found["updated_at"]),
            parent_context_id=found.get("parent"),
            root_context_id=found.get("root"),
            dispatched_child=found.get("child") == "1",
        )

    def delete(self, context_id: str) -> bool:
        """Delete a context with its index entries; ``True`` when one was deleted."""
        shard = shard_of(context_id)
        with storage_errors("context delete"):
            deleted = self._scripts(
                "context_delete",
                [self._keys.context(context_id), self._keys.context_pages(shard)],
                [self._keys.context_index_prefix(shard), context_id],
            )
        return bool(deleted)

    def scan(
        self,
        *,
        statuses: Collection[str] | None = None,
        limit: int = 1000,
        include_dispatched_children: bool = False,
        cursor: str | None = None,
    ) -> ScanPage[RunSummary]:
        """List top-level runs (and dispatched children when asked) through the index sets.

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``(shard, index, expiry score, last id examined)`` (docs/workers.md, "Sweep cursors
        and dispatch leases").

        Args:
            statuses: only these statuses; applied before ``limit``.
            limit: the maximum number of rows.
            include_dispatched_children: also list ``async_reactor`` children.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            Summaries in scan order, with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: Redis failed.
        """
        if limit <= 0:
            return ScanPage((), cursor)
        if cursor is None:  # a new pass (a sweep tick): drop expired runs' index entries
            with storage_errors("context index trim"):
                self.trimmer.maybe_trim()
        if statuses is None:
            wanted: set[str] | None = None
            buckets = [*_KNOWN, _OTHER]
        else:
            wanted = set(statuses)
            buckets = list(dict.fromkeys(_bucket(s) for s in statuses))
        names = list(buckets)
        if include_dispatched_children:
            names += [_CHILD + b for b in buckets]
        if not names:
            return ScanPage((), None)
        def fetch(
            shard: int, todo: Sequence[str], score: str, member: str, want: int
        ) -> Sequence[Any]:
            reply: Sequence[Any] = self._scripts(
                "context_scan",
                [self._keys.context_pages(shard)],
                [
                    self._keys.context_index_prefix(shard),
                    self._keys.context_record_prefix(shard),
                    want,
                    BUDGET,
                    score,
                    member,
                    *todo,
                ],
            )
            return reply

        def rows_of(flat: Sequence[Any]) -> list[RunSummary]:
            rows = [_summary(flat[i : i + 7]) for i in range(0, len(flat), 7)]
            return [r for r in rows if wanted is None or r.status in wanted]

        with storage_errors("context scan"):
            return sharded_scan(names, limit, cursor, fetch, rows_of)

    def page(self, *, cursor: str | None = None, limit: int = 50) -> RunPage:
        """List top-level runs newest first (``created_at``, then id) with keyset paging.

        Raises:
            ValueError: the cursor is malformed or ``limit`` is below 1.
        """
        if limit < 1:
            raise ValueError(f"page limit must be >= 1, got {limit!r}")
        after = "" if cursor is None else decode_page_cursor(cursor)
        found: list[tuple[str, RunSummary]] = []
        with storage_errors("context page"):
            for shard in range(SHARDS):
                flat: list[str] = self._scripts(
                    "context_page",
                    [self._keys.context_pages(shard)],
                    [self._keys.context_record_prefix(shard), after, limit + 1],
                )
                for i in range(0, len(flat), 8):
                    found.append((flat[i], _summary(flat[i + 1 : i + 8])))
        rows = heapq.nsmallest(limit + 1, found, key=lambda item: item[0])
        page = rows[:limit]
        return RunPage(
            runs=tuple(summary for _key, summary in page),
            next_cursor=encode_page_cursor(page[-1][0]) if len(rows) > limit else None,
        )
