"""Re-entrant owner-tokened TTL locks on Redis (storage-protocol.md §2.8).

Each lock is a hash ``P:lock:<key>`` ``{o: owner, n: count, x: expiry µs or -1}``; every
operation is one call of ``scripts/lock.lua``, a line-by-line twin of
:mod:`reactor.model.coordination.locks` judged by the server clock (``TIME``). The stored
``x`` is the logical expiry; ``PEXPIREAT`` (or ``PERSIST`` for no TTL) only collects garbage.

Hot path: one ``EVALSHA`` per call on a pre-bound script, the key built by one string
concatenation, no context manager and no intermediate lists (benchmarks/redis_lock.py).
"""

from __future__ import annotations

import redis

from reactor.model.errors import StorageError
from reactor.ports.records import LockInfo
from reactor_redis._base import Client, RedisScripts, from_us, ttl_arg
from reactor_redis.keys import Keys

__all__ = ["RedisLockStore"]


class RedisLockStore:
    """:class:`reactor.ports.LockStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    __slots__ = ("_prefix", "_run")

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._run = scripts.get("lock").run
        self._prefix = keys.lock("")

    def acquire(self, key: str, owner: str, ttl: float | None) -> bool:
        """Take the lock or re-enter it (count + 1, TTL reset); ``True`` when held now.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
            StorageError: Redis failed.
        """
        ttl_us = ttl_arg(ttl)
        try:
            return bool(self._run(1, self._prefix + key, "acquire", owner, ttl_us) == 1)
        except redis.RedisError as exc:
            raise StorageError(f"redis lock acquire failed: {exc}") from exc

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count (delete at 0) when ``owner`` holds the lock; else ``False``.

        Raises:
            StorageError: Redis failed.
        """
        try:
            return bool(self._run(1, self._prefix + key, "release", owner) == 1)
        except redis.RedisError as exc:
            raise StorageError(f"redis lock release failed: {exc}") from exc

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        """Set the remaining TTL to ``ttl`` when ``owner`` holds the lock; else ``False``.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
            StorageError: Redis failed.
        """
        ttl_us = ttl_arg(ttl)
        try:
            return bool(self._run(1, self._prefix + key, "extend", owner, ttl_us) == 1)
        except redis.RedisError as exc:
            raise StorageError(f"redis lock extend failed: {exc}") from exc

    def held(self, key: str) -> bool:
        """Whether anyone holds the lock.

        Raises:
            StorageError: Redis failed.
        """
        return self.info(key) is not None

    def info(self, key: str) -> LockInfo | None:
        """The holder, or ``None``.

        Raises:
            StorageError: Redis failed.
        """
        try:
            found = self._run(1, self._prefix + key, "info")
        except redis.RedisError as exc:
            raise StorageError(f"redis lock info failed: {exc}") from exc
        if not isinstance(found, list):
            return None
        owner, count, expiry = found
        x = int(expiry)
        return LockInfo(
            owner=str(owner), count=int(count), expires_at=None if x < 0 else from_us(x)
        )
