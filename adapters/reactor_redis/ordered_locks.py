"""Ordered locks on Redis (docs/protocol.md#ordered-locks).

Two keys under the hash tag ``{ol:<key>}``: a hash of the five logical fields, each with its
own expiry (``n``/``nx`` next nonce, ``c``/``cx`` cursor, ``f``/``fx`` first failed, ``e``/``ex``
epoch, ``tx`` the timers' expiry), and a hash of liveness timers (nonce -> µs).
``scripts/ordered_lock.lua`` loads the live fields, runs a function-by-function twin of
:mod:`reactor.model.coordination.ordered_locks` and writes the result back, all atomically.

Epochs increase forever (docs/coordination.md#fencing-tokens): a fresh batch's epoch is
``max(stored e + 1, TIME in µs)``, where the stored ``e`` is read even when its ``ex`` has
passed; the field hash's native expiry is its longest-lived field's plus
:data:`~reactor.model.coordination.fencing.FENCE_RETENTION`, and ``reset`` leaves ``e`` behind
lapsed at the reset instant for that retention.
"""

from __future__ import annotations

from typing import Any

from reactor.model.coordination import deadline
from reactor.model.records import OrderedGate, OrderedGateState, OrderedLockState, OrderedTicket
from reactor_redis._base import Client, RedisScripts, from_us, storage_errors, to_us, ttl_arg
from reactor_redis.keys import Keys
from reactor_redis.locks import RETENTION_ARG

__all__ = ["RedisOrderedLockStore"]

_GATES: frozenset[str] = frozenset({"go", "poison_advance", "wait", "stale", "drained_go"})


class RedisOrderedLockStore:
    """:class:`reactor.ports.OrderedLockStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._scripts = scripts
        self._keys = keys

    def _run(self, key: str, op: str, *args: object) -> Any:
        with storage_errors(f"ordered lock {op}"):
            return self._scripts(
                "ordered_lock",
                [self._keys.ordered_lock(key), self._keys.ordered_timers(key)],
                [op, *args, RETENTION_ARG],
            )

    def assign(self, key: str, *, ttl: float) -> OrderedTicket:
        """Take the next nonce; a fresh batch gets a new epoch.

        Args:
            key: the ordered-lock key.
            ttl: seconds the lock's fields live after this call.

        Returns:
            The ticket ``(nonce, epoch)``; a fresh batch's epoch is greater than every earlier
            epoch of ``key``, also after idle expiry or :meth:`reset`
            (docs/coordination.md#fencing-tokens).

        Raises:
            ValueError: ``ttl`` is not a positive finite number.
            StorageError: Redis failed.
        """
        deadline(0.0, ttl)
        found = self._run(key, "assign", ttl_arg(ttl))
        assert isinstance(found, list)
        return OrderedTicket(nonce=int(found[0]), epoch=int(found[1]))

    def can_proceed(
        self, key: str, ticket: OrderedTicket, *, poison_pill_timeout: float
    ) -> OrderedGate:
        """Ask whether ``ticket`` may run now (heartbeats; drains dead blockers)."""
        found = self._run(
            key, "can_proceed", ticket.nonce, ticket.epoch, to_us(poison_pill_timeout)
        )
        assert isinstance(found, list)
        state = str(found[0])
        if state not in _GATES:
            raise AssertionError(f"unexpected ordered-lock gate {state!r}")
        gate: OrderedGateState = state  # type: ignore[assignment]
        return OrderedGate(
            state=gate,
            retry_after=from_us(found[1]),
            last_completed=int(found[2]),
            first_failed=int(found[3]),
        )

    def advance(self, key: str, ticket: OrderedTicket, *, failed: bool, ttl: float) -> int:
        """Complete ``ticket``; returns the cursor after the call.

        Raises:
            ValueError: ``ttl`` is not a positive finite number.
        """
        deadline(0.0, ttl)
        found = self._run(
            key, "advance", ticket.nonce, ticket.epoch, "1" if failed else "0", ttl_arg(ttl)
        )
        return int(found)

    def heartbeat(self, key: str, ticket: OrderedTicket) -> bool:
        """Restamp ``ticket``'s timer; ``False`` when fenced or the timer is gone."""
        return bool(self._run(key, "heartbeat", ticket.nonce, ticket.epoch))

    def skip(self, key: str, nonce: int) -> int:
        """Force the cursor to ``nonce``; returns the cursor."""
        return int(self._run(key, "skip", nonce))

    def reset(self, key: str) -> None:
        """Delete everything, epoch included (:meth:`peek` reads zeros).

        The last epoch stays behind, lapsed, for ``FENCE_RETENTION`` seconds so the next batch
        gets a greater one (docs/coordination.md#fencing-tokens).

        Raises:
            StorageError: Redis failed.
        """
        self._run(key, "reset")

    def peek(self, key: str) -> OrderedLockState:
        """Read the state without changing it (all zeros when drained)."""
        found = self._run(key, "peek")
        assert isinstance(found, list)
        in_flight = {int(found[i]): from_us(found[i + 1]) for i in range(4, len(found), 2)}
        return OrderedLockState(
            next_nonce=int(found[0]),
            last_completed=int(found[1]),
            first_failed=int(found[2]),
            epoch=int(found[3]),
            in_flight=dict(sorted(in_flight.items())),
        )
