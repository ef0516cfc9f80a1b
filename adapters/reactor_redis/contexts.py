"""Run contexts on Redis (docs/protocol.md#contexts).

Each context is a hash ``P:{ctx:NN}:c:<id>`` (fields of :class:`ContextRecord` plus the scan
index and page entry it is listed under) with a native TTL of ``context_ttl``. Beside it, in
the same shard slot:

* one sorted set per scan index (``<status>`` for top-level runs, ``child:<status>`` for
  dispatched ``async_reactor`` children; other children are never indexed), scored by the
  record's expiry (µs) so stale members are pruned by score;
* one lexicographic sorted set of page keys (``<inverted created_at µs, 17 digits>:<id>``)
  for the newest-first dashboard pages;
* one list ``P:{ctx:NN}:s:<id>`` of the run's segments, oldest first (docs/protocol.md,
  "Incremental checkpoints"): the hash holds the base document (``document``), its id
  (``base``), how many segments follow it (``_count``) and the stored UTF-8 size of document
  and segments (``_bytes``, what ``max_document_bytes`` bounds). The list carries the hash's
  TTL. A record written before incremental checkpoints has none of these and no list.

A save is **one** round trip: one script checks the record's fence (hash field ``_fence``, the
largest token of any fenced save; docs/workers.md, "Stale writers and fenced saves"), writes the
hash, replaces the segment list with the record's segments, moves the index and page entries
and sets the TTL; :meth:`RedisContextStore.save_many` (a fan-out batch's new records:
docs/protocol.md, "Optional fast paths") sends several such scripts in one pipeline, one round
trip. An append is **one** round trip too: one script checks the fence, the base
and the segment count, pushes the segment, updates the head fields (``status``,
``updated_at``, ``_count``, ``_bytes``, ``_fence``), moves the index entry and re-stamps the
TTL of the hash and the list. A load reads the hash and the list in one ``MULTI``/``EXEC``
and keeps the first ``_count`` segments, so it never sees a segment the head does not count.

Scans walk the 16 shards' index sets (never ``KEYS``/``SCAN``), checking each member against
its record, keyset-paged in ``(shard, index, expiry, id)`` order: a save or an append only ever
moves a member to a later expiry, so a run present for a whole pass is listed in it
(docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from reactor.errors import ContextTooLargeError, DeserializationError, StaleWriterError
from reactor.model.records import (
    ContextDelta,
    ContextRecord,
    Fence,
    LockClaim,
    RunPage,
    RunSummary,
    ScanPage,
)
from reactor.model.status import RunStatus
from reactor.ports.run_pages import RunPageFilter, collect_page
from reactor.ports.serialization import page_key
from reactor_redis._base import Client, RedisScripts, _source, storage_errors, ttl_arg
from reactor_redis._scan import BUDGET, IndexTrimmer, sharded_scan
from reactor_redis.keys import SHARDS, Keys, shard_of
from reactor_redis.locks import RETENTION_ARG

__all__ = ["RedisContextStore", "RedisLockingContextStore"]

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


def _too_large(context_id: str, size: int, limit: int) -> ContextTooLargeError:
    return ContextTooLargeError(
        f"context {context_id} is {size} bytes, over {limit}", size_bytes=size, limit_bytes=limit
    )


def _no_script(reply: object) -> bool:
    """Whether a pipelined reply is the server's "unknown script" error (``NOSCRIPT``)."""
    return isinstance(reply, NoScriptError)


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
        max_document_bytes: refuse a save or append that would store more UTF-8 bytes of
            document and segments (:attr:`ContextRecord.stored_bytes`) than this
            (``None`` = unbounded).
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
        saves"). The record's ``base`` and ``segments`` replace the stored ones: the segment
        list is rewritten to exactly ``record.segments`` (docs/protocol.md, "Incremental
        checkpoints").

        Args:
            record: the context to write.
            fence: the writer's hold on the lock guarding the record; ``None`` = unfenced
                (always written, the stored fence kept).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: the document and segments (``record.stored_bytes``) exceed
                ``max_document_bytes`` (nothing written).
            StorageError: Redis failed.
        """
        self._save(record, fence)

    def _save(
        self, record: ContextRecord, fence: Fence | None,
        lock: tuple[str, str, str, Any, str | None] | None = None,
    ) -> int:
        """:meth:`save`, with ``lock`` as :meth:`_save_call` takes it.

        Returns:
            The script's reply: 1, or the new token of a ``'take'`` (0: held, nothing
            written).
        """
        keys, args = self._save_call(record, fence, lock)
        with storage_errors("context save"):
            reply = self._scripts("context_save", keys, args)
        if isinstance(reply, list):
            if reply[0] == "held":  # 'take' of a lock another owner holds: nothing written
                return 0
            # {0, stored token, save token}: refused, nothing written (a 'take' given back)
            key = fence.key if fence is not None else str(lock[1]) if lock else ""
            raise StaleWriterError.refused(
                record.context_id, key=key, token=int(reply[2]), stored_token=int(reply[1])
            )
        return int(reply)

    def save_many(self, records: Sequence[ContextRecord]) -> None:
        """Unfenced :meth:`save` of each record, all sent in one pipeline (one round trip).

        The fast path of :class:`~reactor.ports.capabilities.SavesContextsTogether`
        (docs/protocol.md, "Optional fast paths"): each record is written by its own
        ``context_save`` script, exactly as :meth:`save` with no fence writes it; the scripts
        travel together in one non-transactional pipeline (on a cluster, redis-py sends one
        request per node holding some of the records). Not atomic across records. Every
        record's size is checked before anything is sent.

        Args:
            records: the contexts to write, in order.

        Raises:
            ContextTooLargeError: a record's document and segments exceed
                ``max_document_bytes`` (nothing written).
            StorageError: Redis failed (any subset of the records may be written).
        """
        calls = [self._save_call(record, None) for record in records]
        if not calls:
            return
        script = self._scripts.get("context_save")
        with storage_errors("context save"):
            replies = self._pipelined(script.sha, calls)
            unknown = [c for c, r in zip(calls, replies, strict=True) if _no_script(r)]
            failed = [r for r in replies if isinstance(r, Exception) and not _no_script(r)]
            if unknown:  # the server does not know the script yet (or was restarted): load it
                script.sha = self._client.script_load(_source("context_save"))
                retried = self._pipelined(script.sha, unknown)
                failed += [r for r in retried if isinstance(r, Exception)]
            if failed:
                raise failed[0]

    def _pipelined(self, sha: str, calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
        """``EVALSHA sha`` of each ``(keys, args)`` in one non-transactional pipeline; the
        replies, an exception instance in place of each error reply.

        On a cluster each call names its node (from the client's slot table): redis-py's
        cluster pipeline would otherwise ask a server for the keys of every ``EVALSHA``
        (``COMMAND GETKEYS``, one round trip per call) before sending the batch.
        """
        cluster = isinstance(self._client, RedisCluster)
        pipe = self._client.pipeline(transaction=False)
        for keys, args in calls:
            options = {"target_nodes": self._client.get_node_from_key(keys[0])} if cluster else {}
            pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args, **options)
        return list(pipe.execute(raise_on_error=False))

    def _save_call(
        self, record: ContextRecord, fence: Fence | None,
        lock: tuple[str, str, str, Any, str | None] | None = None,
    ) -> tuple[list[str], list[Any]]:
        """The ``context_save`` keys and arguments that write ``record`` (:meth:`save`);
        ``lock``: ``(op, lock key, owner, ttl_us, channel or None)`` to take (``'take'``) or
        release (``'drop'``, then publish the status on the signal channel) a lock in the
        same script.

        Raises:
            ContextTooLargeError: the record exceeds ``max_document_bytes``.
        """
        size = record.stored_bytes
        if self._max is not None and size > self._max:
            raise _too_large(record.context_id, size, self._max)
        shard = shard_of(record.context_id)
        fields: list[str] = [
            "id", record.context_id,
            "reactor", record.reactor,
            "status", record.status,
            "document", record.document,
            "created_at", repr(float(record.created_at)),
            "updated_at", repr(float(record.updated_at)),
            "child", "1" if record.dispatched_child else "0",
            "base", record.base,
            "_count", str(len(record.segments)),
            "_bytes", str(size),
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
        keys = [
            self._keys.context(record.context_id),
            self._keys.context_pages(shard),
            self._keys.context_segments(record.context_id),
        ]
        lock_args: list[Any] = ["", "", "", "", ""]
        if lock is not None:
            op, lock_key, owner, ttl_us, announce = lock
            keys.append(self._keys.lock(lock_key))
            lock_args = [
                op, owner, ttl_us, RETENTION_ARG, self._keys.channel(announce) if announce else "",
            ]
        args: list[Any] = [
            *lock_args,
            self._ttl,
            self._keys.context_index_prefix(shard),
            _index(record),
            page,
            record.context_id,
            "" if fence is None else str(fence.token),
            len(record.segments),
            *record.segments,
            *fields,
        ]
        return keys, args

    def append(self, delta: ContextDelta, *, fence: Fence | None = None) -> bool:
        """Append one incremental checkpoint in one script (one round trip), unless fenced off.

        The rule is ``AppendsContexts.append`` (docs/protocol.md, "Incremental
        checkpoints"): atomically, the script checks the stored fence (as :meth:`save` does),
        that the hash's ``base`` is ``delta.base`` and its ``_count`` is ``delta.position - 1``
        and that ``_bytes`` plus the segment stays within ``max_document_bytes``; then it
        pushes the segment onto the run's list, sets ``status``, ``updated_at``, ``_count``,
        ``_bytes`` (and ``_fence`` when fenced), moves the scan index entry when the status
        changes it, and re-stamps the TTL of the hash and the list (the index member re-scored
        with the new expiry). The page entry depends on ``created_at`` only and stays.

        Args:
            delta: the segment and the head fields it changes.
            fence: the writer's hold on the lock guarding the record; ``None`` = unfenced
                (the stored fence kept).

        Returns:
            ``True`` when appended; ``False`` when nothing was written: the record is absent or
            expired, was written before incremental checkpoints, has another base or another
            number of segments (the writer then saves the whole context).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: the stored size with this segment exceeds
                ``max_document_bytes`` (nothing written).
            StorageError: Redis failed.
        """
        return self._append(delta, fence, release=False)

    def _append(
        self, delta: ContextDelta, fence: Fence | None, *, release: bool,
        announce: str | None = None, claim_paths: Sequence[str] = (),
    ) -> bool:
        """:meth:`append`; ``release``: also release ``fence``'s lock once appended (and
        publish the status on the signal channel ``announce`` when given)."""
        return self._append_reading(
            delta, fence, release=release, announce=announce, claim_paths=claim_paths
        )[0]

    def _append_reading(
        self, delta: ContextDelta, fence: Fence | None, *, release: bool,
        announce: str | None = None, claim_paths: Sequence[str] = (),
    ) -> tuple[bool, dict[str, str]]:
        """:meth:`_append`, also reading the run's claims at ``claim_paths`` once appended
        (same script): ``(appended, {step_path: payload} for the claimed paths)``."""
        context_id = delta.context_id
        paths = list(dict.fromkeys(claim_paths))
        shard = shard_of(context_id)
        bucket = _bucket(delta.status)
        keys = [self._keys.context(context_id), self._keys.context_segments(context_id)]
        args: list[Any] = [
            self._ttl,
            self._keys.context_index_prefix(shard),
            context_id,
            "" if fence is None else str(fence.token),
            delta.base,
            delta.position - 1,
            delta.segment,
            len(delta.segment.encode("utf-8")),
            "" if self._max is None else self._max,
            delta.status,
            repr(float(delta.updated_at)),
            bucket,
            _CHILD + bucket,
            len(paths),
        ]
        keys += [self._keys.interrupt(context_id, path) for path in paths]
        if release and fence is not None:
            keys.append(self._keys.lock(fence.key))
            args += [fence.owner, RETENTION_ARG,
                     self._keys.channel(announce) if announce else ""]
        with storage_errors("context append"):
            reply = self._scripts("context_append", keys, args)
        if isinstance(reply, list):
            if reply[0] == "fence":  # refused by a newer holder, nothing written
                assert fence is not None
                raise StaleWriterError.refused(
                    context_id, key=fence.key, token=fence.token, stored_token=int(reply[1])
                )
            if reply[0] == "size":
                assert self._max is not None  # over the limit, nothing written
                raise _too_large(context_id, int(reply[1]), self._max)
            values = reply[1] if len(reply) > 1 else []  # {1, claims}: appended
            return True, {
                path: str(value) for path, value in zip(paths, values, strict=False)
                if value is not None
            }
        return bool(reply), {}

    def load(self, context_id: str) -> ContextRecord | None:
        """Read a context by id, ``None`` when absent or expired.

        The hash and the segment list are read in one ``MULTI``/``EXEC`` (one round trip, one
        atomic view); the segments are the first ``_count`` of the list (docs/protocol.md,
        "Incremental checkpoints"). A record written before incremental checkpoints loads with
        ``base=""`` and no segments.

        Raises:
            DeserializationError: the list holds fewer segments than the record counts (lost,
                e.g. evicted), naming the run.
            StorageError: Redis failed.
        """
        with storage_errors("context load"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(self._keys.context(context_id))
            pipe.lrange(self._keys.context_segments(context_id), 0, -1)
            found, listed = pipe.execute()
        return _record_of(context_id, found, listed)

    def delete(self, context_id: str) -> bool:
        """Delete a context with its segment list and index entries (one script).

        Returns:
            ``True`` when a record was deleted.

        Raises:
            StorageError: Redis failed.
        """
        shard = shard_of(context_id)
        with storage_errors("context delete"):
            deleted = self._scripts(
                "context_delete",
                [
                    self._keys.context(context_id),
                    self._keys.context_pages(shard),
                    self._keys.context_segments(context_id),
                ],
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

    def page(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        statuses: Collection[str] | None = None,
        reactor: str | None = None,
        created_from: float | None = None,
        created_to: float | None = None,
    ) -> RunPage:
        """List top-level runs newest first (``created_at``, then id) with keyset paging; the
        filters follow docs/protocol.md, "Filtered pages".

        The sixteen shards' page sets are merged lazily: each shard is read a chunk at a time
        (one ``context_page`` script per chunk, which also drops stale entries), so a filtered
        page reads about as many rows as it examines.

        Raises:
            ValueError: the cursor or a filter is malformed, or ``limit`` is below 1.
        """
        run_filter = RunPageFilter.of(
            statuses=statuses, reactor=reactor, created_from=created_from, created_to=created_to
        )
        with storage_errors("context page"):
            return collect_page(
                self._page_entries, lambda _key, row: row, cursor=cursor, limit=limit,
                run_filter=run_filter,
            )

    def _shard_page(self, shard: int, after: str, count: int) -> list[tuple[str, RunSummary]]:
        """Up to ``count`` live entries of one shard's page set strictly after ``after``."""
        flat: list[str] = self._scripts(
            "context_page",
            [self._keys.context_pages(shard)],
            [self._keys.context_record_prefix(shard), after, count],
        )
        return [(flat[i], _summary(flat[i + 1 : i + 8])) for i in range(0, len(flat), 8)]

    def _page_entries(
        self, after: str | None, chunk: int
    ) -> Iterator[tuple[str, RunSummary]]:
        """Every shard's entries after ``after``, merged in key order, read ``chunk`` per
        shard at a time."""
        buffers: list[list[tuple[str, RunSummary]]] = []
        done: list[bool] = []
        heads: list[tuple[str, int]] = []
        for shard in range(SHARDS):
            rows = self._shard_page(shard, after or "", chunk)
            rows.reverse()  # pop() from the end gives the smallest key
            buffers.append(rows)
            done.append(len(rows) < chunk)
            if rows:
                heapq.heappush(heads, (rows[-1][0], shard))
        while heads:
            key, shard = heapq.heappop(heads)
            buffer = buffers[shard]
            entry = buffer.pop()
            if not buffer and not done[shard]:
                refill = self._shard_page(shard, key, chunk)
                refill.reverse()
                buffer.extend(refill)
                done[shard] = len(refill) < chunk
            if buffer:
                heapq.heappush(heads, (buffer[-1][0], shard))
            yield entry


class RedisLockingContextStore(RedisContextStore):
    """A :class:`RedisContextStore` that also takes and releases a run's liveness lock inside
    its context scripts, one round trip each
    (:class:`~reactor.ports.capabilities.LocksWithContexts`; docs/protocol.md, "Optional fast
    paths"): ``context_save`` acquires the lock first and fences the save with the new token
    (``save_taking``) or releases it after writing (``save_releasing``),
    ``context_append`` releases it once the segment is appended (``append_releasing``) and
    ``context_take`` acquires it and reads the record (``load_taking``), with the run's claims
    at the paths asked for (``load_taking_claims``,
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenTaking`); ``context_append`` also reads
    them once it appended (``append_reading_claims``,
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenAppending`). The lock operations
    are :data:`lock.lua`'s own (``_common.lua``'s ``lock_call``), on the lock store's keys.

    Used on a single Redis server only: on a cluster the lock hash ``P:lock:<key>`` and the
    record live on different slots, which one script cannot touch, so a cluster storage keeps
    the plain :class:`RedisContextStore` (the engine makes the compositions).
    """

    def save_taking(self, record: ContextRecord, claim: LockClaim) -> int:
        """Take ``claim`` and, only when granted, save ``record`` fenced with the new token,
        in one script (:meth:`reactor.ports.capabilities.LocksWithContexts.save_taking`).

        Returns:
            The new fencing token; 0 when another owner holds the lock (nothing written).

        Raises:
            ContextTooLargeError: the record exceeds ``max_document_bytes`` (nothing sent).
            StaleWriterError: the record's stored fence is higher than the new token (nothing
                written; the lock taken is released again in the same script).
            StorageError: Redis failed.
        """
        return self._save(
            record, None, ("take", claim.key, claim.owner, ttl_arg(claim.ttl), None)
        )

    def load_taking(
        self, context_id: str, claim: LockClaim
    ) -> tuple[int, ContextRecord | None]:
        """Take ``claim`` and, only when granted, read the record, in one script
        (:meth:`reactor.ports.capabilities.LocksWithContexts.load_taking`).

        Returns:
            ``(token, record or None)``; ``(0, None)`` when another owner holds the lock.

        Raises:
            DeserializationError: the list holds fewer segments than the record counts (the
                lock is released again first).
            StorageError: Redis failed.
        """
        token, record, _ = self.load_taking_claims(context_id, claim, ())
        return token, record

    def load_taking_claims(
        self, context_id: str, claim: LockClaim, step_paths: Sequence[str]
    ) -> tuple[int, ContextRecord | None, dict[str, str]]:
        """Take ``claim`` and, only when granted, read the record and the run's claims at
        ``step_paths``, in one script
        (:meth:`reactor.ports.capabilities.ReadsClaimsWhenTaking.load_taking_claims`).

        Returns:
            ``(token, record or None, {step_path: payload} for the claimed paths)``;
            ``(0, None, {})`` when another owner holds the lock.

        Raises:
            DeserializationError: the list holds fewer segments than the record counts (the
                lock is released again first).
            StorageError: Redis failed.
        """
        lock_key = self._keys.lock(claim.key)
        paths = list(dict.fromkeys(step_paths))
        with storage_errors("context load"):
            reply = self._scripts(
                "context_take",
                [lock_key, self._keys.context(context_id),
                 self._keys.context_segments(context_id),
                 *(self._keys.interrupt(context_id, path) for path in paths)],
                [claim.owner, ttl_arg(claim.ttl), RETENTION_ARG],
            )
        token = int(reply[0])
        if not token:
            return 0, None, {}
        flat = reply[1]
        found = dict(zip(flat[::2], flat[1::2], strict=True))
        values = reply[3] if len(reply) > 3 else []
        claims = {
            path: str(value) for path, value in zip(paths, values, strict=False)
            if value is not None
        }
        try:
            return token, _record_of(context_id, found, reply[2]), claims
        except DeserializationError:
            with storage_errors("lock release"):
                self._scripts("lock", [lock_key], ["release", claim.owner, RETENTION_ARG])
            raise

    def append_reading_claims(
        self, delta: ContextDelta, fence: Fence | None, step_paths: Sequence[str]
    ) -> tuple[bool, dict[str, str]]:
        """:meth:`append` and, once appended, a read of the run's claims at ``step_paths``,
        in one script
        (:meth:`reactor.ports.capabilities.ReadsClaimsWhenAppending.append_reading_claims`).

        Returns:
            ``(appended, {step_path: payload} for the claimed paths)``; ``(False, {})`` when
            nothing was written (as :meth:`append`).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as :meth:`append`.
        """
        return self._append_reading(delta, fence, release=False, claim_paths=step_paths)

    def append_releasing(
        self, delta: ContextDelta, fence: Fence, *, announce: str | None = None
    ) -> bool:
        """:meth:`append` fenced with ``fence`` and, once appended, the release of its lock
        and the ``PUBLISH`` of the status on signal channel ``announce`` (when given), in one
        script (:meth:`reactor.ports.capabilities.LocksWithContexts.append_releasing`).

        Returns:
            As :meth:`append` (``False``: nothing written, nothing released).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as :meth:`append`.
        """
        return self._append(delta, fence, release=True, announce=announce)

    def save_releasing(
        self, record: ContextRecord, fence: Fence, *, announce: str | None = None
    ) -> None:
        """:meth:`save` fenced with ``fence``, then the release of its lock and the
        ``PUBLISH`` of the status on ``announce`` (when given), in one script
        (:meth:`reactor.ports.capabilities.LocksWithContexts.save_releasing`).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as :meth:`save`.
        """
        self._save(record, fence, ("drop", fence.key, fence.owner, "", announce))


def _record_of(
    context_id: str, found: dict[str, str], listed: Sequence[str]
) -> ContextRecord | None:
    """The record read as a hash and a segment list (``None``: absent or expired).

    Raises:
        DeserializationError: the list holds fewer segments than the record counts.
    """
    if not found or "id" not in found:
        return None
    count = int(found.get("_count", 0))
    if len(listed) < count:
        raise DeserializationError(
            f"stored run {context_id!r} has {len(listed)} of its {count} segments"
        )
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
        base=found.get("base", ""),
        segments=tuple(listed[:count]),
    )
