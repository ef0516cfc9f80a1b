"""Counting semaphores as per-holder leases on Redis (docs/protocol.md#semaphores).

Two keys under the hash tag ``{sem:<key>}``: a hash ``{l: limit}`` and a sorted set of holder
tokens scored by their lease expiry (µs). ``scripts/semaphore.lua`` drops expired leases by
score, then applies :mod:`reactor.model.coordination.semaphores`; both keys' native expiry
follows the longest lease (garbage collection only), so a dead holder never leaks a slot.
"""

from __future__ import annotations

from reactor.model.coordination.semaphores import check_arguments as _check
from reactor.model.records import SemaphoreState
from reactor_redis._base import Client, RedisScripts, from_us, storage_errors, to_us
from reactor_redis.keys import Keys

__all__ = ["RedisSemaphoreStore"]


class RedisSemaphoreStore:
    """:class:`reactor.ports.SemaphoreStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._scripts = scripts
        self._keys = keys

    def _run(self, op: str, key: str, *args: object) -> object:
        with storage_errors(f"semaphore {op}"):
            return self._scripts(
                "semaphore",
                [self._keys.semaphore(key), self._keys.semaphore_holders(key)],
                [op, *args],
            )

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        """Lease a slot for ``holder`` while fewer than ``limit`` live leases exist.

        Raises:
            ValueError: ``limit`` < 0 or ``lease`` not a positive finite number of seconds.
        """
        _check(limit, lease)
        return bool(self._run("acquire", key, holder, max(to_us(lease), 1), int(limit)))

    def release(self, key: str, holder: str) -> bool:
        """Remove ``holder``'s lease; ``False`` when it holds none."""
        return bool(self._run("release", key, holder))

    def extend(self, key: str, holder: str, lease: float) -> bool:
        """Renew ``holder``'s live lease to ``lease`` seconds from now.

        Raises:
            ValueError: ``lease`` is not a positive finite number of seconds.
        """
        _check(None, lease)
        return bool(self._run("extend", key, holder, max(to_us(lease), 1)))

    def state(self, key: str) -> SemaphoreState | None:
        """Limit and live holders, ``None`` when unused or empty."""
        found = self._run("state", key)
        if not isinstance(found, list):
            return None
        holders = {str(found[i]): from_us(found[i + 1]) for i in range(1, len(found), 2)}
        return SemaphoreState(limit=int(found[0]), holders=holders)

    def reset(self, key: str) -> None:
        """Drop every lease."""
        self._run("reset", key)
