"""Multi-window fixed-window rate limits on Redis (storage-protocol.md §2.10).

One hash per rate-limit key, ``window id -> "bucket|count|expiry µs"`` (window ids from
:func:`reactor.model.coordination.rate_limits.window_id`); ``scripts/rate_limit.lua`` checks
every window and charges all of them or none, exactly as
:func:`reactor.model.coordination.rate_limits.hit`, on the server clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from reactor.model.coordination.rate_limits import window_id
from reactor.ports.records import RateDecision, RateWindow
from reactor_redis._base import Client, RedisScripts, from_us, storage_errors, to_us
from reactor_redis.keys import Keys

__all__ = ["RedisRateLimitStore"]


def _args(windows: Sequence[RateWindow]) -> list[object]:
    out: list[object] = []
    for w in windows:
        out += [window_id(w), max(to_us(w.seconds), 1), int(w.limit)]
    return out


class RedisRateLimitStore:
    """:class:`reactor.ports.RateLimitStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._scripts = scripts
        self._keys = keys

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        """Check every window and charge all of them only if all admit (one script)."""
        with storage_errors("rate limit hit"):
            found = self._scripts(
                "rate_limit", [self._keys.rate_limit(key)], ["hit", *_args(windows)]
            )
        if int(found[0]) == 1:
            return RateDecision(allowed=True)
        return RateDecision(
            allowed=False, retry_after=from_us(found[1]), window_index=int(found[2])
        )

    def count(self, key: str, window: RateWindow) -> int:
        """Admissions charged in the current bucket of ``window``."""
        with storage_errors("rate limit count"):
            return int(
                self._scripts(
                    "rate_limit", [self._keys.rate_limit(key)], ["count", *_args([window])]
                )
            )
