"""Re-entrant owner-tokened TTL locks on Redis (storage-protocol.md §2.8).

Each lock is a hash ``P:lock:<key>`` ``{o: owner, n: count, x: expiry µs or -1}``; every
operation is one call of ``scripts/lock.lua``, a line-by-line twin of
:mod:`reactor.model.coordination.locks` judged by the server clock (``TIME``). The stored
``x`` is the logical expiry; ``PEXPIREAT`` (or ``PERSIST`` for no TTL) only collects garbage.
"""

from __future__ import annotations

from reactor.model.coordination._expiry import deadline
from reactor.ports.records import LockInfo
from reactor_redis._base import Client, RedisScripts, from_us, storage_errors, ttl_arg
from reactor_redis.keys import Keys

__all__ = ["RedisLockStore"]


class RedisLockStore:
    """:class:`reactor.ports.LockStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._scripts = scripts
        self._keys = keys

    def _run(self, op: str, key: str, owner: str = "", ttl: str = "-1") -> object:
        with storage_errors(f"lock {op}"):
            return self._scripts("lock", [self._keys.lock(key)], [op, owner, ttl])

    def acquire(self, key: str, owner: str, ttl: float | None) -> bool:
        """Take the lock or re-enter it (count + 1, TTL reset); ``True`` when held now.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
        """
        deadline(0.0, ttl)
        return bool(self._run("acquire", key, owner, ttl_arg(ttl)))

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count (delete at 0) when ``owner`` holds the lock; else ``False``."""
        return bool(self._run("release", key, owner))

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        """Set the remaining TTL to ``ttl`` when ``owner`` holds the lock; else ``False``.

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
        """
        deadline(0.0, ttl)
        return bool(self._run("extend", key, owner, ttl_arg(ttl)))

    def held(self, key: str) -> bool:
        """Whether anyone holds the lock."""
        return self.info(key) is not None

    def info(self, key: str) -> LockInfo | None:
        """The holder, or ``None``."""
        found = self._run("info", key)
        if not isinstance(found, list):
            return None
        owner, count, expiry = found
        x = int(expiry)
        expires_at = None if x < 0 else from_us(x)
        return LockInfo(owner=str(owner), count=int(count), expires_at=expires_at)
