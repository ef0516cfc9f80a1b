"""``RedisStorage``: every sub-store of :class:`reactor.ports.Storage` on one redis-py client.

Build it with :func:`reactor_redis.storage_from_url` (``redis://``, ``rediss://``,
``redis+cluster://``) or directly from a client. The sub-stores share the client (a
thread-safe connection pool) and the lazily loaded Lua scripts; ``now()`` is the server's
clock, calibrated from ``TIME`` once a minute (:class:`reactor.ports.clock.CalibratedClock`:
the local clock plus the measured offset, so a timestamp costs no round trip); every expiry
and TTL a script decides reads the server's ``TIME`` inside the script itself.
"""

from __future__ import annotations

from redis.cluster import RedisCluster

from reactor.model.status import RunStatus
from reactor.ports.clock import CalibratedClock
from reactor.ports.storage import Capabilities
from reactor_redis._base import Client, RedisScripts, close_client, storage_errors
from reactor_redis.claims import RedisClaimStore
from reactor_redis.contexts import RedisContextStore, RedisLockingContextStore
from reactor_redis.keys import SHARDS, Keys
from reactor_redis.locks import RedisLockStore
from reactor_redis.map_rollbacks import RedisMapRollbackStore
from reactor_redis.maps import RedisMapStore
from reactor_redis.ordered_locks import RedisOrderedLockStore
from reactor_redis.periods import RedisPeriodStore
from reactor_redis.rate_limits import RedisRateLimitStore
from reactor_redis.schedules import RedisScheduleStore
from reactor_redis.semaphores import RedisSemaphoreStore
from reactor_redis.signals import RedisSignalStore
from reactor_redis.step_results import RedisStepResultStore
from reactor_redis.sweep_cursors import RedisSweepCursorStore

__all__ = ["RedisStorage"]


class RedisStorage:
    """The Redis storage adapter (docs/protocol.md#storage).

    Args:
        client: a redis-py ``Redis`` or ``RedisCluster`` created with ``decode_responses=True``.
        prefix: the key namespace (default ``"reactor"``).
        context_ttl: retention of durable run state in seconds after its last write
            (default 86400; ``None`` = never expire).
        owns_client: close the client in :meth:`close`.
        clock_refresh: seconds between calibrations of :meth:`now` against ``TIME``
            (default 60).

    Attributes:
        sweep_cursors: the sweepers' saved scan cursors (:class:`reactor.ports.SweepCursorStore`;
            docs/workers.md, "Sweep cursors and dispatch leases").
        schedules: the stored schedules (:class:`reactor.ports.ScheduleStore`;
            docs/schedules.md), :mod:`reactor_redis.schedules`.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "reactor",
        context_ttl: float | None = 86400.0,
        owns_client: bool = True,
        clock_refresh: float = 60.0,
    ) -> None:
        self.client = client
        self._clock = CalibratedClock(
            self._server_time, resolution=1e-6, refresh_seconds=clock_refresh
        )
        self.keys = Keys(prefix)
        self.context_ttl = context_ttl
        self._owns = owns_client
        self._closed = False
        scripts = RedisScripts(client)
        keys = self.keys
        # One script may touch the lock and the record only on a single server (the lock hash
        # and the record live on different cluster slots).
        contexts = (
            RedisContextStore if isinstance(client, RedisCluster) else RedisLockingContextStore
        )
        self.contexts: RedisContextStore = contexts(
            client, scripts, keys, context_ttl=context_ttl
        )
        self.step_results = RedisStepResultStore(client, scripts, keys, context_ttl=context_ttl)
        self.maps = RedisMapStore(client, scripts, keys, context_ttl=context_ttl)
        self.map_rollbacks = RedisMapRollbackStore(client, scripts, keys, context_ttl=context_ttl)
        self.claims = RedisClaimStore(client, scripts, keys, context_ttl=context_ttl)
        self.locks = RedisLockStore(client, scripts, keys)
        self.semaphores = RedisSemaphoreStore(client, scripts, keys)
        self.rate_limits = RedisRateLimitStore(client, scripts, keys)
        self.periods = RedisPeriodStore(client, scripts, keys)
        self.ordered_locks = RedisOrderedLockStore(client, scripts, keys)
        self.signals = RedisSignalStore(client, keys)
        self.sweep_cursors = RedisSweepCursorStore(client, keys, ttl=context_ttl)
        self.schedules = RedisScheduleStore(client, scripts, keys)
        self.capabilities = Capabilities(signals=True, max_document_bytes=None, clock="server")

    def now(self) -> float:
        """The server clock in epoch seconds: the local clock plus the offset measured by the
        last calibration against ``TIME`` (one round trip, once per ``clock_refresh``
        seconds); never decreasing within this process.

        Raises:
            StorageError: Redis failed during a due calibration.
        """
        return self._clock.now()

    def _server_time(self) -> float:
        """One ``TIME`` round trip, in epoch seconds.

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("TIME"):
            seconds, micros = self.client.time()
        return int(seconds) + int(micros) / 1_000_000

    def ping(self) -> None:
        """One ``PING`` round trip (``reactor ping``; :class:`reactor.ports.inspection.Pingable`).

        Raises:
            StorageError: Redis cannot be reached.
        """
        with storage_errors("ping"):
            self.client.ping()

    def sweep_index_sizes(self) -> dict[str, int]:
        """``ZCARD`` of the indexes the sweepers walk (``reactor info``;
        :class:`reactor.ports.inspection.SweepIndexInspector`): ``runs`` (running and rolling
        back, top-level and dispatched children, over the 16 shards), ``steps`` (dispatched
        async steps), ``maps`` (active maps) and ``map_rollbacks`` (started rollbacks).
        Members that expired but were not trimmed yet are counted.

        Raises:
            StorageError: Redis failed.
        """
        run_indexes = [
            prefix + status
            for prefix in ("", "child:")
            for status in (RunStatus.RUNNING.value, RunStatus.ROLLING_BACK.value)
        ]
        keys = self.keys
        with storage_errors("sweep index sizes"):
            runs = sum(
                int(self.client.zcard(keys.context_index_prefix(shard) + name))
                for shard in range(SHARDS) for name in run_indexes
            )
            steps = sum(
                int(self.client.zcard(keys.step_index_prefix(shard) + "dispatched"))
                for shard in range(SHARDS)
            )
            maps = int(self.client.zcard(keys.active_maps()))
            rollbacks = int(self.client.zcard(keys.started_rollbacks()))
        return {"runs": runs, "steps": steps, "maps": maps, "map_rollbacks": rollbacks}

    def close(self) -> None:
        """Close the client's connections (when owned); idempotent."""
        if self._closed:
            return
        self._closed = True
        self.signals.close_all()
        if self._owns:
            close_client(self.client)
