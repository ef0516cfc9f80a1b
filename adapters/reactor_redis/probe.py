"""The contract-suite probe of the Redis adapter (``reactor.probes`` / ``reactor.router_probes``).

It reads and rewrites the adapter's keys directly (never through a sub-store), addressed by
concern and key as :mod:`reactor_contract.probe` documents. Logical expiry fields (locks,
periods, semaphore leases, rate-limit windows, ordered-lock fields) are rewritten together with
the native TTL, so "lapse now" behaves exactly like a real lapse: a lapsed lock or ordered lock
keeps its hash (and so its fencing token or epoch) for ``FENCE_RETENTION`` seconds, as the
scripts do (docs/coordination.md#fencing-tokens). The member ``"fence"`` of ``lock`` and
``ordered_lock`` stands for the whole record, retained fence included: expiring it is the
native garbage collection that follows the retention.
"""

from __future__ import annotations

import math
from typing import Any

from reactor.model.coordination.fencing import FENCE_RETENTION
from reactor_redis._base import Client, to_us
from reactor_redis.keys import MAP_AGGREGATES, ROLLBACK_AGGREGATES
from reactor_redis.router import RedisRouter
from reactor_redis.storage import RedisStorage

__all__ = ["RedisProbe", "RedisRouterProbe", "probe_for", "router_probe_for"]

_ALIASES = {
    "meta": "metadata",
    "slots": "results",
    "result": "results",
    "element_contexts": "elements",
    "element_ids": "elements",
    "owner_signalled": "owner_signal",
    "failed_context": "failed",
    "failed_context_id": "failed",
    "dispatch_offset": "offset",
    "signalled": "signal",
    "outcome": "outcomes",
    "indexes_seen": "indexes",
    "handoff": "handed_off",
    "slot": "results",
    "element": "elements",
}

#: Ordered-lock field members -> the hash field holding the value (its expiry is ``<f>x``).
_ORDERED = {"next": "n", "cursor": "c", "first_failed": "f", "epoch": "e", "timers": "t"}
#: The member naming a whole lock / ordered-lock record, its retained fence included.
_FENCE = "fence"
_RETENTION_US = to_us(FENCE_RETENTION)


def _split(key: str) -> tuple[str, str]:
    head, sep, tail = key.partition(":")
    if not sep:
        raise KeyError(f"probe key {key!r} must look like '<a>:<b>'")
    return head, tail


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _namespace_keys(client: Client, prefix: str) -> list[str]:
    """Every key under ``<prefix>:``, on every primary of a cluster, sorted."""
    pattern = _glob_escape(f"{prefix}:") + "*"
    return sorted({k if isinstance(k, str) else k.decode() for k in client.scan_iter(
        match=pattern, count=1000)})


def _purge_keys(client: Client, prefix: str) -> int:
    """Delete every key under ``<prefix>:`` (one ``UNLINK`` per key: a cluster's keys of one
    namespace live in many slots); returns how many were deleted."""
    return sum(int(client.unlink(key)) for key in _namespace_keys(client, prefix))


class RedisProbe:
    """A :class:`reactor_contract.probe.Probe` for :class:`RedisStorage`.

    Args:
        storage: the storage under test.
    """

    def __init__(self, storage: RedisStorage) -> None:
        self._storage = storage
        self._client: Client = storage.client
        self._keys = storage.keys

    # DriverProbe -----------------------------------------------------------------------------
    def driver_clients(self) -> list[tuple[object, str]]:
        """The redis-py client every sub-store sends its commands through: ``storage.client``
        (docs/contract-suite.md, "Faults injected at the driver")."""
        return [(self._storage, "client")]

    # key resolution ------------------------------------------------------------------------
    def _physical(self, concern: str, key: str, member: str | None) -> list[str]:
        k = self._keys
        if concern == "context":
            return [k.context(key)]
        if concern == "step_result":
            ctx, step = _split(key)
            return [k.step_result(ctx, step)]
        if concern in ("map", "map_rollback"):
            names = MAP_AGGREGATES if concern == "map" else ROLLBACK_AGGREGATES
            build = k.map_key if concern == "map" else k.rollback_key
            if member is None:
                return [build(key, name) for name in names]
            head = member.split(":", 1)[0]
            name = _ALIASES.get(head, head)
            if name not in names:
                raise KeyError(f"unknown {concern} aggregate {member!r}")
            return [build(key, name)]
        if concern == "idempotency":
            reactor, user_key = _split(key)
            return [k.idempotency(reactor, user_key)]
        if concern == "correlation":
            return [k.correlation(key)]
        if concern == "interrupt":
            ctx, path = _split(key)
            if member == "attempts":
                return [k.interrupt_attempts(ctx, path)]
            if member is not None:
                raise KeyError(f"unknown interrupt member {member!r}")
            return [k.interrupt(ctx, path), k.interrupt_attempts(ctx, path)]
        if concern == "lock":
            return [k.lock(key)]
        if concern == "semaphore":
            return [k.semaphore(key), k.semaphore_holders(key)]
        if concern == "rate_limit":
            return [k.rate_limit(key)]
        if concern == "period":
            return [k.period(key)]
        if concern == "ordered_lock":
            return [k.ordered_lock(key), k.ordered_timers(key)]
        raise KeyError(f"unknown probe concern {concern!r}")

    # CleanupProbe ----------------------------------------------------------------------------
    def purge_namespace(self) -> int:
        """Delete every key of the storage's prefix (``<prefix>:*``), fence tombstones and
        indexes included (docs/contract-suite.md, "Cleanup: nothing left behind")."""
        return _purge_keys(self._client, self._keys.prefix)

    def leftovers(self) -> list[str]:
        """Every key still under ``<prefix>:``, sorted."""
        return _namespace_keys(self._client, self._keys.prefix)

    def _now_us(self) -> int:
        seconds, micros = self._client.time()
        return int(seconds) * 1_000_000 + int(micros)

    def _dump(self, key: str) -> Any:
        kind = self._client.type(key)
        if kind == "none":
            return None
        if kind == "string":
            return self._client.get(key)
        if kind == "hash":
            return self._client.hgetall(key)
        if kind == "list":
            return self._client.lrange(key, 0, -1)
        if kind == "set":
            return sorted(self._client.smembers(key))
        if kind == "zset":
            return dict(self._client.zrange(key, 0, -1, withscores=True))
        return f"<{kind}>"

    # Probe protocol ------------------------------------------------------------------------
    def raw(self, concern: str, key: str) -> object | None:
        """``{redis key: stored value}`` of the record's keys, ``None`` when none is stored."""
        found = {}
        for name in self._physical(concern, key, None):
            value = self._dump(name)
            if value is not None:
                found[name] = value
        return found or None

    def ttl(self, concern: str, key: str, member: str | None = None) -> float | None:
        """Smallest remaining lifetime (seconds) of the record's keys; ``inf`` when none expires.

        Logical expiries stored beside the value (locks, periods, semaphore leases) win over
        the native TTL.

        Raises:
            KeyError: unknown concern or member.
        """
        now = self._now_us()
        if concern == "semaphore" and member is not None:
            score = self._client.zscore(self._keys.semaphore_holders(key), member)
            if score is None or score <= now:
                return None
            return (float(score) - now) / 1_000_000
        if concern in ("lock", "ordered_lock") and member == _FENCE:
            pttl = int(self._client.pttl(self._physical(concern, key, None)[0]))
            return None if pttl == -2 else math.inf if pttl == -1 else pttl / 1000
        if concern == "ordered_lock" and member is not None:
            field = _ORDERED.get(member)
            if field is None:
                raise KeyError(f"ordered_lock has no member {member!r} with a TTL")
            x = self._client.hget(self._keys.ordered_lock(key), field + "x")
            if x is None:
                return None
            x_us = int(x)
            if x_us < 0:
                return math.inf
            return None if x_us <= now else (x_us - now) / 1_000_000
        if concern in ("lock", "period"):
            name = self._physical(concern, key, None)[0]
            x = self._client.hget(name, "x")
            if x is None:
                return None
            x_us = int(x)
            if x_us < 0:
                return math.inf
            return None if x_us <= now else (x_us - now) / 1_000_000
        best: float | None = None
        for name in self._physical(concern, key, member):
            pttl = int(self._client.pttl(name))
            if pttl == -2:
                continue
            value = math.inf if pttl == -1 else pttl / 1000
            best = value if best is None else min(best, value)
        return best

    def expire(
        self, concern: str, key: str, member: str | None = None, *, after: float = 0.0
    ) -> None:
        """Make the record (or one member) lapse ``after`` seconds from now.

        Raises:
            KeyError: unknown concern or member.
        """
        now = self._now_us()
        at_us = now + max(round(after * 1_000_000), 0)
        scoped = concern in ("map", "map_rollback", "interrupt")
        names = self._physical(concern, key, member if scoped else None)
        if concern in ("lock", "ordered_lock") and member == _FENCE:
            for name in names:
                if after <= 0:
                    self._client.delete(name)
                elif self._client.exists(name):
                    self._client.pexpire(name, max(math.ceil(after * 1000), 1))
            return
        if concern == "lock":
            if member is not None:
                raise KeyError(f"lock has no member {member!r}")
            name = names[0]
            if self._client.hget(name, "o") is None:
                return  # absent or released: nothing holds it
            self._client.hset(name, "x", str(at_us))
            self._client.pexpireat(name, max(math.ceil((at_us + _RETENTION_US) / 1000), 1))
            return
        if concern == "semaphore" and member is not None:
            holders = self._keys.semaphore_holders(key)
            if self._client.zscore(holders, member) is not None:
                self._client.zadd(holders, {member: at_us}, xx=True)
            return
        if concern == "ordered_lock" and member is not None:
            if member.isdigit():
                timers = self._keys.ordered_timers(key)
                if not self._client.hexists(timers, member):
                    raise KeyError(f"ordered-lock nonce {member} has no timer")
                self._client.hset(timers, member, "1")
                return
            field = _ORDERED.get(member)
            if field is None:
                raise KeyError(f"ordered_lock has no member {member!r}")
            self._shift_ordered(key, [field], at_us)
            return
        if concern == "ordered_lock":
            self._shift_ordered(key, list(_ORDERED.values()), at_us)
            return
        if after <= 0:
            self._client.delete(*names)
            return
        for name in names:
            if not self._client.exists(name):
                continue
            if concern == "period":
                self._client.hset(name, "x", str(at_us))
            elif concern == "semaphore" and name.endswith(":h"):
                for token in self._client.zrange(name, 0, -1):
                    self._client.zadd(name, {token: at_us})
            elif concern == "rate_limit":
                for field in self._client.hkeys(name):
                    if str(field).endswith("|x"):
                        self._client.hset(name, field, str(at_us))
            self._client.pexpire(name, max(math.ceil(after * 1000), 1))

    def _shift_ordered(self, key: str, fields: list[str], at_us: int) -> None:
        """Move the expiry of some ordered-lock fields to ``at_us`` (the native TTL follows).

        As the script does, the field hash is collected ``FENCE_RETENTION`` after its
        longest-lived field and the timers hash with that field.
        """
        main, timers = self._keys.ordered_lock(key), self._keys.ordered_timers(key)
        for field in fields:
            if self._client.hexists(main, field + "x"):
                self._client.hset(main, field + "x", str(at_us))
        expiries = [
            int(x) for f in _ORDERED.values() if (x := self._client.hget(main, f + "x")) is not None
        ]
        if not expiries:
            return
        if min(expiries) < 0:
            self._client.persist(main)
            self._client.persist(timers)
            return
        latest_us = max(expiries)
        for name, at in ((main, latest_us + _RETENTION_US), (timers, latest_us)):
            if self._client.exists(name):
                self._client.pexpireat(name, max(math.ceil(at / 1000), 1))


class RedisRouterProbe:
    """A :class:`reactor_contract.probe.RouterProbe` for :class:`RedisRouter`.

    Args:
        router: the router under test.
    """

    def __init__(self, router: RedisRouter) -> None:
        self._router = router

    def driver_clients(self) -> list[tuple[object, str]]:
        """The router's redis-py client, ``router.primitive.client`` (docs/contract-suite.md,
        "Faults injected at the driver")."""
        return [(self._router.primitive, "client")]

    def inject_raw(self, body: str | bytes) -> None:
        """Append ``body`` (text or any bytes, stored byte for byte) to the queue's stream
        unvalidated."""
        self._router.inject_raw(body)

    def _prefix(self) -> str:
        stream: str = self._router.primitive._keys[0]  # "<prefix>:{q:<name>}:stream"
        return stream[: stream.index(":{q:")]

    def purge_namespace(self) -> int:
        """Delete every key of the router's prefix: its queue's stream, delayed set, leases
        and dead letters (docs/contract-suite.md, "Cleanup: nothing left behind")."""
        return _purge_keys(self._router.client, self._prefix())

    def leftovers(self) -> list[str]:
        """Every key still under the router's prefix, sorted."""
        return _namespace_keys(self._router.client, self._prefix())


def probe_for(storage: RedisStorage) -> RedisProbe:
    """The ``reactor.probes`` factory."""
    return RedisProbe(storage)


def router_probe_for(router: RedisRouter) -> RedisRouterProbe:
    """The ``reactor.router_probes`` factory."""
    return RedisRouterProbe(router)
