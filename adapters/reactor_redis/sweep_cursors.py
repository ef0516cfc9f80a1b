"""Each sweeper's scan cursor on Redis: one string ``P:sweep_cursor:<sweeper>`` per sweeper.

Semantics: :class:`reactor.ports.SweepCursorStore` (docs/workers.md, "Sweep cursors and
dispatch leases"). A save is ``SET`` with the ``context_ttl`` expiry (last writer wins); saving
``None`` deletes the key, so the next tick starts over.
"""

from __future__ import annotations

from reactor_redis._base import Client, storage_errors, to_us
from reactor_redis.keys import Keys

__all__ = ["RedisSweepCursorStore"]


class RedisSweepCursorStore:
    """:class:`reactor.ports.SweepCursorStore` on Redis.

    Args:
        client: the shared redis-py client.
        keys: the key builder.
        ttl: seconds a saved cursor lives after its last save (``None`` = forever).
    """

    def __init__(self, client: Client, keys: Keys, *, ttl: float | None) -> None:
        self._client = client
        self._keys = keys
        self._px = None if ttl is None else max(to_us(ttl) // 1000, 1)

    def load(self, sweeper: str) -> str | None:
        """The cursor saved for ``sweeper``, ``None`` when none (or it expired).

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("sweep cursor load"):
            value = self._client.get(self._keys.sweep_cursor(sweeper))
        return None if value is None else str(value)

    def save(self, sweeper: str, cursor: str | None) -> None:
        """Save ``sweeper``'s cursor (last writer wins); ``None`` means "start over".

        Raises:
            StorageError: Redis failed.
        """
        key = self._keys.sweep_cursor(sweeper)
        with storage_errors("sweep cursor save"):
            if cursor is None:
                self._client.delete(key)
            else:
                self._client.set(key, cursor, px=self._px)
