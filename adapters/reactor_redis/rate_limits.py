"""Multi-window fixed-window rate limits on Redis (docs/protocol.md#rate-limits).

One hash per rate-limit key holding three numeric fields per window id ``W`` (window ids from
:func:`reactor.model.coordination.rate_limits.window_id`): ``W`` (count), ``W|b`` (bucket) and
``W|x`` (expiry µs); ``scripts/rate_limit.lua`` checks
every window and charges all of them or none, exactly as
:func:`reactor.model.coordination.rate_limits.hit`, on the server clock.

Hot path: one ``EVALSHA`` on a pre-bound script; each window's script arguments are computed
once per distinct :class:`RateWindow` (a frozen, hashable value) and cached; an admission
returns a shared immutable :class:`RateDecision` (benchmarks/redis_rate_limit.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from reactor.errors import StorageError
from reactor.model.coordination.rate_limits import window_id
from reactor.model.records import RateDecision, RateWindow
from reactor_redis._base import Client, RedisScripts, from_us, to_us
from reactor_redis.keys import Keys

__all__ = ["RedisRateLimitStore"]

_ALLOWED = RateDecision(allowed=True)
#: Bound on the per-store cache of window arguments (cleared, not evicted, when full).
_MAX_CACHED_WINDOWS = 1024


class RedisRateLimitStore:
    """:class:`reactor.ports.RateLimitStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    __slots__ = ("_count", "_prefix", "_run", "_window_args")

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._run = scripts.get("rate_limit").run
        self._count = scripts.get("rate_limit_count").run
        self._prefix = keys.rate_limit("")
        self._window_args: dict[RateWindow, tuple[bytes, bytes, bytes]] = {}

    def _args(self, window: RateWindow) -> tuple[bytes, bytes, bytes]:
        """``(window id, seconds µs, limit)`` for the script, encoded once per window value.

        Pre-encoded ``bytes`` pass through redis-py's encoder untouched.
        """
        found = self._window_args.get(window)
        if found is None:
            found = (
                window_id(window).encode("utf-8"),
                b"%d" % max(to_us(window.seconds), 1),
                b"%d" % int(window.limit),
            )
            if len(self._window_args) >= _MAX_CACHED_WINDOWS:
                self._window_args.clear()
            self._window_args[window] = found
        return found

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        """Check every window and charge all of them only if all admit (one script).

        Raises:
            StorageError: Redis failed.
        """
        if len(windows) == 1:
            args: tuple[bytes, ...] = self._args(windows[0])
        else:
            args = tuple(a for w in windows for a in self._args(w))
        try:
            found = self._run(1, self._prefix + key, *args)
        except redis.RedisError as exc:
            raise StorageError(f"redis rate limit hit failed: {exc}") from exc
        if found == 1:
            return _ALLOWED
        return RateDecision(
            allowed=False, retry_after=from_us(found[1]), window_index=int(found[2])
        )

    def count(self, key: str, window: RateWindow) -> int:
        """Admissions charged in the current bucket of ``window``.

        Raises:
            StorageError: Redis failed.
        """
        try:
            return int(self._count(1, self._prefix + key, *self._args(window)[:2]))
        except redis.RedisError as exc:
            raise StorageError(f"redis rate limit count failed: {exc}") from exc
