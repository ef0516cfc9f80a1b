"""First-writer-wins claims on Redis (docs/protocol.md#claims).

One string key per claim (correlation ids, idempotency keys as SHA-256 digests of the user key,
interrupt resumes holding their payload, attempt counters), each with a native TTL of
``context_ttl`` re-stamped on every write, by ``scripts/claim.lua`` (check and write in one
script). Interrupt keys of one run share the hash tag ``{int:<context id>}`` so
:meth:`RedisClaimStore.interrupt_resumes` is one ``MGET`` even on a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactor_redis._base import Client, RedisScripts, storage_errors, ttl_arg
from reactor_redis.keys import Keys

__all__ = ["RedisClaimStore"]


class RedisClaimStore:
    """:class:`reactor.ports.ClaimStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
        context_ttl: retention in seconds after each write (``None`` = never expire).
    """

    def __init__(
        self, client: Client, scripts: RedisScripts, keys: Keys, *, context_ttl: float | None
    ) -> None:
        self._client = client
        self._scripts = scripts
        self._keys = keys
        self._ttl = ttl_arg(context_ttl)

    def _claim(self, key: str, op: str, *args: str) -> Any:
        with storage_errors(f"claim {op}"):
            return self._scripts("claim", [key], [self._ttl, op, *args])

    def _get(self, key: str) -> str | None:
        with storage_errors("claim read"):
            value = self._client.get(key)
        return None if value is None else str(value)

    def claim_correlation_id(self, correlation_id: str, context_id: str) -> str | None:
        """Map a correlation id to a run, first writer wins (same id: re-stamps, ``None``).

        Returns:
            ``None`` when ``context_id`` holds it now; else the other holder's context id.
        """
        other = self._claim(self._keys.correlation(correlation_id), "correlation", context_id)
        return None if other is None else str(other)

    def correlation_context(self, correlation_id: str) -> str | None:
        """The run holding a correlation id."""
        return self._get(self._keys.correlation(correlation_id))

    def release_correlation_id(self, correlation_id: str) -> bool:
        """Delete a correlation mapping; ``True`` when something was deleted."""
        with storage_errors("correlation release"):
            return bool(self._client.delete(self._keys.correlation(correlation_id)))

    def claim_idempotency_key(self, reactor: str, key: str, context_id: str) -> str | None:
        """Claim a run idempotency key for ``reactor``.

        Returns:
            ``None`` when this call claimed it; otherwise the holder's context id (the caller's
            own id when it claims twice).
        """
        holder = self._claim(self._keys.idempotency(reactor, key), "nx", context_id)
        return None if holder is None else str(holder)

    def release_idempotency_key(self, reactor: str, key: str, context_id: str) -> bool:
        """Compare-and-delete: only the holder ``context_id`` releases; ``True`` on success."""
        return bool(self._claim(self._keys.idempotency(reactor, key), "release", context_id))

    def reclaim_idempotency_key(
        self, reactor: str, key: str, from_context_id: str, to_context_id: str
    ) -> bool:
        """Move the key from one holder to another (compare-and-set); re-stamps retention."""
        return bool(
            self._claim(
                self._keys.idempotency(reactor, key), "reclaim", from_context_id, to_context_id
            )
        )

    def claim_interrupt_resume(self, context_id: str, step_path: str, payload: str) -> bool:
        """Claim an interrupt's resume (NX per run and step path), holding the payload."""
        holder = self._claim(self._keys.interrupt(context_id, step_path), "nx", payload)
        return holder is None

    def interrupt_resumes(self, context_id: str, step_paths: Sequence[str]) -> dict[str, str]:
        """``{step_path: payload}`` for the claimed step paths only."""
        paths = list(dict.fromkeys(step_paths))
        if not paths:
            return {}
        with storage_errors("interrupt resumes"):
            values = self._client.mget([self._keys.interrupt(context_id, p) for p in paths])
        return {p: str(v) for p, v in zip(paths, values, strict=True) if v is not None}

    def increment_interrupt_attempts(self, context_id: str, step_path: str) -> int:
        """Count an invalid resume attempt; returns the new count (re-stamps retention)."""
        return int(self._claim(self._keys.interrupt_attempts(context_id, step_path), "incr"))
