"""Step Result Records on Redis (docs/protocol.md#step-results).

Each record is a hash ``P:{sr:NN}:r:<context id>:<step>`` (``s`` = status, ``j`` = the
record as JSON) with a native TTL of ``context_ttl``, re-stamped on every put. Beside it in the
same shard slot, one sorted set per status (member ``<context id>:<step>``, scored by expiry)
makes the step sweeper's ``scan(status="dispatched")`` an indexed query that filters before
its limit. A put is one script (record, index move, TTL). Scans are keyset-paged shard by
shard (:mod:`reactor_redis._scan`; docs/workers.md, "Sweep cursors and dispatch leases").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactor.model.records import ScanPage, StepResultRecord
from reactor.ports.serialization import record_from_json, record_to_json
from reactor_redis._base import Client, RedisScripts, storage_errors, ttl_arg
from reactor_redis._scan import BUDGET, IndexTrimmer, sharded_scan
from reactor_redis.keys import Keys, shard_of

__all__ = ["RedisStepResultStore"]

_STATUSES = ("dispatched", "completed")


class RedisStepResultStore:
    """:class:`reactor.ports.StepResultStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder of this namespace.
        context_ttl: retention in seconds after each put (``None`` = never expire).
    """

    def __init__(
        self, client: Client, scripts: RedisScripts, keys: Keys, *, context_ttl: float | None
    ) -> None:
        self._client = client
        self._scripts = scripts
        self._keys = keys
        self._ttl = ttl_arg(context_ttl)
        #: Trims expired members from the status indexes at the start of scans (sweep ticks).
        self.trimmer = IndexTrimmer(scripts, keys.step_index_prefix, _STATUSES)

    def put(self, record: StepResultRecord) -> None:
        """Write a record (last writer wins); re-stamps its TTL and moves its status index.

        Raises:
            TypeError: ``record.data`` holds a value that is not JSON-native.
            StorageError: Redis failed.
        """
        text = record_to_json(record)
        shard = shard_of(record.context_id)
        with storage_errors("step result put"):
            self._scripts(
                "step_put",
                [self._keys.step_result(record.context_id, record.step_name)],
                [
                    self._ttl,
                    self._keys.step_index_prefix(shard),
                    f"{record.context_id}:{record.step_name}",
                    record.status,
                    text,
                ],
            )

    def get(self, context_id: str, step_name: str) -> StepResultRecord | None:
        """The record of ``step_name`` owned by ``context_id``, ``None`` when absent/expired."""
        with storage_errors("step result get"):
            text = self._client.hget(self._keys.step_result(context_id, step_name), "j")
        return None if text is None else record_from_json(StepResultRecord, text)

    def scan(
        self, *, status: str | None = None, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[StepResultRecord]:
        """List records, ``status`` filtering before ``limit`` (indexed, shard by shard).

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``(shard, status, expiry score, last member examined)`` (docs/workers.md, "Sweep
        cursors and dispatch leases").

        Args:
            status: ``"dispatched"``, ``"completed"`` or ``None`` for all.
            limit: the maximum number of records.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            The records with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: Redis failed.
        """
        if cursor is None:
            with storage_errors("step result index trim"):
                self.trimmer.maybe_trim()
        statuses = _STATUSES if status is None else (status,)

        def fetch(
            shard: int, todo: Sequence[str], score: str, member: str, want: int
        ) -> Sequence[Any]:
            reply: Sequence[Any] = self._scripts(
                "step_scan",
                [self._keys.step_index_prefix(shard) + "routing"],
                [
                    self._keys.step_index_prefix(shard),
                    f"{self._keys.step_shard(shard)}:r:",
                    want,
                    BUDGET,
                    score,
                    member,
                    *todo,
                ],
            )
            return reply

        def rows_of(texts: Sequence[Any]) -> list[StepResultRecord]:
            return [record_from_json(StepResultRecord, t) for t in texts]

        with storage_errors("step result scan"):
            return sharded_scan(statuses, limit, cursor, fetch, rows_of)
