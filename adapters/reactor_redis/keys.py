"""Key layout of the Redis adapter: namespacing under a prefix, hash tags per aggregate.

Every key starts with the configurable prefix (default ``"reactor"``). Keys that a multi-key
Lua script touches together share one Redis Cluster hash tag ``{...}`` so each script runs in
one slot (ruby_reactor's Redis adapter uses the same trick for ordered locks):

================  ===============================================  ==========================
concern           keys                                             hash tag
================  ===============================================  ==========================
contexts          ``P:{ctx:NN}:c:<id>``, ``:i:<index>``, ``:pages``  one of 16 shards
step results      ``P:{sr:NN}:r:<ctx>:<step>``, ``:i:<status>``      one of 16 shards
maps              ``P:{map:<id>}:<aggregate>``                     the map id
map scan indexes  ``P:{maps}:active``, ``P:{maps}:rollbacks``      one slot
interrupts        ``P:{int:<ctx>}:r:<path>``, ``:a:<path>``        the context id
semaphores        ``P:{sem:<k>}``, ``P:{sem:<k>}:h``               the semaphore key
ordered locks     ``P:{ol:<k>}``, ``P:{ol:<k>}:t``                 the ordered-lock key
router            ``P:{q:<queue>}:stream|:delayed|:dead``          the queue name
schedules         ``P:{schedules}:docs|:versions|:names``          one slot
================  ===============================================  ==========================

A context's segment list (its incremental checkpoints, docs/protocol.md, "Incremental
checkpoints") is ``P:{ctx:NN}:s:<id>``, in its record's shard (its own ``:s:`` family, so no
context id can name it as a record).

Contexts and step results are spread over :data:`SHARDS` shards (``crc32(context id) % 16``)
so the index sets a save updates live in the record's slot (a save is one script) while the
records still spread over a cluster.
"""

from __future__ import annotations

import hashlib
import zlib

__all__ = ["MAP_AGGREGATES", "ROLLBACK_AGGREGATES", "SHARDS", "Keys"]

#: Number of shards of the context and step-result index families.
SHARDS = 16

#: Forward map aggregates, in the fixed order every map script receives them as ``KEYS``.
MAP_AGGREGATES: tuple[str, ...] = (
    "metadata",
    "counter",
    "offset",
    "failed",
    "owner_signal",
    "results",
    "elements",
)
#: Rollback aggregates of a map, following :data:`MAP_AGGREGATES` in ``KEYS``.
ROLLBACK_AGGREGATES: tuple[str, ...] = (
    "metadata",
    "offset",
    "outcomes",
    "indexes",
    "handed_off",
    "signal",
    "failed",
)


def shard_of(identifier: str) -> int:
    """The shard (``0 .. SHARDS-1``) of a context id: ``crc32(utf-8) % SHARDS``."""
    return zlib.crc32(identifier.encode("utf-8")) % SHARDS


class Keys:
    """Builds every key of one namespace.

    Args:
        prefix: the namespace prefix (no trailing colon), e.g. ``"reactor"``.
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "reactor") -> None:
        self.prefix = prefix

    # contexts --------------------------------------------------------------------------
    def context_shard(self, shard: int) -> str:
        """The common stem of one context shard (``P:{ctx:NN}``)."""
        return f"{self.prefix}:{{ctx:{shard:02d}}}"

    def context(self, context_id: str) -> str:
        """The hash holding one context record."""
        return f"{self.context_shard(shard_of(context_id))}:c:{context_id}"

    def context_segments(self, context_id: str) -> str:
        """The list of one context's segments, oldest first, in its record's shard
        (docs/protocol.md, "Incremental checkpoints")."""
        return f"{self.context_shard(shard_of(context_id))}:s:{context_id}"

    def context_index_prefix(self, shard: int) -> str:
        """Prefix of the per-index sorted sets of a shard (append the index name)."""
        return f"{self.context_shard(shard)}:i:"

    def context_record_prefix(self, shard: int) -> str:
        """Prefix of the context hashes of a shard (append the context id)."""
        return f"{self.context_shard(shard)}:c:"

    def context_pages(self, shard: int) -> str:
        """The lexicographic sorted set of newest-first page keys of a shard."""
        return f"{self.context_shard(shard)}:pages"

    # step results ----------------------------------------------------------------------
    def step_shard(self, shard: int) -> str:
        """The common stem of one step-result shard (``P:{sr:NN}``)."""
        return f"{self.prefix}:{{sr:{shard:02d}}}"

    def step_result(self, context_id: str, step_name: str) -> str:
        """The hash of one Step Result Record."""
        return f"{self.step_shard(shard_of(context_id))}:r:{context_id}:{step_name}"

    def step_index_prefix(self, shard: int) -> str:
        """Prefix of the per-status sorted sets of a shard (append the status)."""
        return f"{self.step_shard(shard)}:i:"

    # maps --------------------------------------------------------------------------------
    def map_keys(self, map_id: str) -> list[str]:
        """Every key of one map: forward aggregates then rollback aggregates (one slot)."""
        stem = f"{self.prefix}:{{map:{map_id}}}"
        return [f"{stem}:{name}" for name in MAP_AGGREGATES] + [
            f"{stem}:rb:{name}" for name in ROLLBACK_AGGREGATES
        ]

    def map_key(self, map_id: str, aggregate: str) -> str:
        """One forward aggregate of a map (see :data:`MAP_AGGREGATES`)."""
        return f"{self.prefix}:{{map:{map_id}}}:{aggregate}"

    def rollback_key(self, map_id: str, aggregate: str) -> str:
        """One rollback aggregate of a map (see :data:`ROLLBACK_AGGREGATES`)."""
        return f"{self.prefix}:{{map:{map_id}}}:rb:{aggregate}"

    def active_maps(self) -> str:
        """Sorted set of map ids with metadata (the map sweeper's scan index)."""
        return f"{self.prefix}:{{maps}}:active"

    def started_rollbacks(self) -> str:
        """Sorted set of map ids whose rollback started (the rollback scan index)."""
        return f"{self.prefix}:{{maps}}:rollbacks"

    def schedules(self) -> str:
        """The common stem of the stored schedules (``P:{schedules}``: one slot)."""
        return f"{self.prefix}:{{schedules}}"

    def sweep_cursor(self, sweeper: str) -> str:
        """A sweeper's saved scan cursor (string; docs/workers.md, "Sweep cursors and dispatch
        leases")."""
        return f"{self.prefix}:sweep_cursor:{sweeper}"

    # claims --------------------------------------------------------------------------------
    def correlation(self, correlation_id: str) -> str:
        """A correlation-id claim (string: the context id)."""
        return f"{self.prefix}:cor:{correlation_id}"

    def idempotency(self, reactor: str, key: str) -> str:
        """A run idempotency key claim; the user key is stored as its SHA-256 digest."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return f"{self.prefix}:idem:{reactor}:{digest}"

    def interrupt(self, context_id: str, step_path: str) -> str:
        """An interrupt resume claim (string: the payload)."""
        return f"{self.prefix}:{{int:{context_id}}}:r:{step_path}"

    def interrupt_attempts(self, context_id: str, step_path: str) -> str:
        """The invalid-resume attempt counter of an interrupt."""
        return f"{self.prefix}:{{int:{context_id}}}:a:{step_path}"

    # coordination ------------------------------------------------------------------------
    def lock(self, key: str) -> str:
        """A lock hash ``{o: owner, n: count, x: expiry µs or -1, f: fencing token}``."""
        return f"{self.prefix}:lock:{key}"

    def semaphore(self, key: str) -> str:
        """A semaphore's limit hash; its holders live in ``<this>:h``."""
        return f"{self.prefix}:{{sem:{key}}}"

    def semaphore_holders(self, key: str) -> str:
        """A semaphore's lease sorted set (holder token -> expiry µs)."""
        return f"{self.semaphore(key)}:h"

    def rate_limit(self, key: str) -> str:
        """A rate-limit hash (per window id ``W``: ``W`` count, ``W|b`` bucket, ``W|x`` expiry)."""
        return f"{self.prefix}:rate:{key}"

    def period(self, key: str) -> str:
        """A period marker hash ``{c: context id, a: marked µs, x: expiry µs or -1}``."""
        return f"{self.prefix}:period:{key}"

    def ordered_lock(self, key: str) -> str:
        """An ordered lock's field hash; its timers live in ``<this>:t``."""
        return f"{self.prefix}:{{ol:{key}}}"

    def ordered_timers(self, key: str) -> str:
        """An ordered lock's timer hash (nonce -> assigned/heartbeat µs)."""
        return f"{self.ordered_lock(key)}:t"

    # signals and router ------------------------------------------------------------------
    def channel(self, channel: str) -> str:
        """A pub/sub channel."""
        return f"{self.prefix}:sig:{channel}"

    def queue(self, name: str) -> tuple[str, str, str]:
        """``(stream, delayed sorted set, dead-letter stream)`` of one router queue."""
        stem = f"{self.prefix}:{{q:{name}}}"
        return f"{stem}:stream", f"{stem}:delayed", f"{stem}:dead"
