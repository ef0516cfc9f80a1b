"""Re-entrant owner-tokened TTL locks on Redis (docs/protocol.md#locks).

Each lock is a hash ``P:lock:<key>`` ``{o: owner, n: count, x: expiry µs or -1, f: fencing
token}``; every operation is one call of ``scripts/lock.lua``, a line-by-line twin of
:mod:`reactor.model.coordination.locks` judged by the server clock (``TIME``). The stored
``x`` is the logical expiry; ``PEXPIREAT`` (or ``PERSIST`` for no TTL) only collects garbage,
at ``x`` plus :data:`~reactor.model.coordination.fencing.FENCE_RETENTION`. A release at count
0 leaves a tombstone ``{x: release µs, f: token}`` (no owner) for that retention, so the next
acquisition's token ``max(f + 1, TIME in µs)`` is greater than every earlier one
(docs/coordination.md#fencing-tokens).

Hot path: one ``EVALSHA`` per call on a pre-bound script, the key built by one string
concatenation, no context manager and no intermediate lists (benchmarks/redis_lock.py).
"""

from __future__ import annotations

import redis

from reactor.errors import StorageError
from reactor.model.coordination.fencing import FENCE_RETENTION
from reactor.model.records import LockInfo
from reactor_redis._base import Client, RedisScripts, from_us, to_us, ttl_arg
from reactor_redis.keys import Keys

__all__ = ["RETENTION_ARG", "RedisLockStore"]

#: :data:`~reactor.model.coordination.fencing.FENCE_RETENTION` as the scripts' µs argument.
RETENTION_ARG = str(to_us(FENCE_RETENTION))


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

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        """Take the lock or re-enter it (count + 1, TTL reset).

        Args:
            key: the lock key.
            owner: the owner token.
            ttl: seconds until the lock lapses, ``None`` for no expiry.

        Returns:
            The holder's fencing token (>= 1) when ``owner`` holds the lock now: greater than
            every earlier token of ``key`` for a fresh acquisition, unchanged on re-entry
            (docs/coordination.md#fencing-tokens); 0 when another owner holds it.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
            StorageError: Redis failed.
        """
        ttl_us = ttl_arg(ttl)
        try:
            return int(
                self._run(1, self._prefix + key, "acquire", owner, ttl_us, RETENTION_ARG)
            )
        except redis.RedisError as exc:
            raise StorageError(f"redis lock acquire failed: {exc}") from exc

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count when ``owner`` holds the lock; else ``False``.

        At 0 the hash becomes a tombstone that keeps the fencing token for ``FENCE_RETENTION``
        seconds (docs/coordination.md#fencing-tokens).

        Raises:
            StorageError: Redis failed.
        """
        try:
            return bool(self._run(1, self._prefix + key, "release", owner, RETENTION_ARG) == 1)
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
            return bool(
                self._run(1, self._prefix + key, "extend", owner, ttl_us, RETENTION_ARG) == 1
            )
        except redis.RedisError as exc:
            raise StorageError(f"redis lock extend failed: {exc}") from exc

    def held(self, key: str) -> bool:
        """Whether anyone holds the lock.

        Raises:
            StorageError: Redis failed.
        """
        return self.info(key) is not None

    def info(self, key: str) -> LockInfo | None:
        """The holder (owner, count, expiry, fencing token), or ``None`` when not held.

        Raises:
            StorageError: Redis failed.
        """
        try:
            found = self._run(1, self._prefix + key, "info")
        except redis.RedisError as exc:
            raise StorageError(f"redis lock info failed: {exc}") from exc
        if not isinstance(found, list):
            return None
        owner, count, expiry, token = found
        x = int(expiry)
        return LockInfo(
            owner=str(owner),
            count=int(count),
            expires_at=None if x < 0 else from_us(x),
            token=int(token),
        )
