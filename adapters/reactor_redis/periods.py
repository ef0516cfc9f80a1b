"""Once-per-bucket markers on Redis, mark-if-absent (docs/protocol.md#periods).

A marker is a hash ``{c: context id, a: marked µs, x: expiry µs or -1}``; ``scripts/period.lua``
marks only when no live marker exists (:mod:`reactor.model.coordination.periods`).
"""

from __future__ import annotations

from reactor.model.coordination import deadline
from reactor.model.records import PeriodMarker
from reactor_redis._base import Client, RedisScripts, from_us, storage_errors, ttl_arg
from reactor_redis.keys import Keys

__all__ = ["RedisPeriodStore"]


class RedisPeriodStore:
    """:class:`reactor.ports.PeriodStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._scripts = scripts
        self._keys = keys

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        """Mark ``key`` if absent; ``True`` when this call won.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
        """
        deadline(0.0, ttl)
        with storage_errors("period mark"):
            won = self._scripts(
                "period", [self._keys.period(key)], ["mark", ttl_arg(ttl), context_id or ""]
            )
        return bool(won)

    def marker(self, key: str) -> PeriodMarker | None:
        """The marker, ``None`` when unmarked or expired."""
        with storage_errors("period marker"):
            found = self._scripts("period", [self._keys.period(key)], ["marker", "-1", ""])
        if not isinstance(found, list):
            return None
        return PeriodMarker(context_id=str(found[0]) or None, marked_at=from_us(found[1]))
