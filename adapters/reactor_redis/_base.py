"""Shared plumbing of the Redis sub-stores: the client type, error wrapping, Lua scripts, units.

Times cross the Python/Lua border as integer **microseconds** (strings, formatted with
``%.0f`` in Lua) so nothing is rounded by Lua's ``%.14g`` number formatting; Python converts
to epoch seconds (``float``) at the edge. Durations are sent as integer microseconds too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib.resources import files
from typing import Any, TypeAlias

import redis

from reactor.model.errors import RouterError, StorageError

__all__ = [
    "Client",
    "RedisScripts",
    "from_us",
    "router_errors",
    "storage_errors",
    "to_us",
    "ttl_arg",
]

#: A redis-py client: ``redis.Redis`` or ``redis.RedisCluster`` (decode_responses=True).
Client: TypeAlias = Any


def to_us(seconds: float) -> int:
    """Seconds to whole microseconds (rounded)."""
    return round(seconds * 1_000_000)


def from_us(value: str | bytes | int | float) -> float:
    """Microseconds (as Lua returns them: a decimal string) to seconds."""
    return float(value) / 1_000_000


def ttl_arg(ttl: float | None) -> str:
    """A TTL argument for the scripts: microseconds, or ``"-1"`` for "no expiry".

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number (a TTL of 0 would
            mean ``EXPIRE key 0``, which never happens: ARCHITECTURE §2).
    """
    if ttl is None:
        return "-1"
    if isinstance(ttl, bool) or not (ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return str(max(to_us(ttl), 1))


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Wrap redis-py exceptions raised inside the block in :class:`StorageError` (chained).

    Args:
        what: the operation, for the message.
    """
    try:
        yield
    except redis.RedisError as exc:
        raise StorageError(f"redis {what} failed: {exc}") from exc


@contextmanager
def router_errors(what: str) -> Iterator[None]:
    """Wrap redis-py exceptions raised inside the block in :class:`RouterError` (chained)."""
    try:
        yield
    except redis.RedisError as exc:
        raise RouterError(f"redis {what} failed: {exc}") from exc


@cache
def _source(name: str) -> str:
    scripts = files("reactor_redis") / "scripts"
    common = (scripts / "_common.lua").read_text(encoding="utf-8")
    return common + "\n" + (scripts / f"{name}.lua").read_text(encoding="utf-8")


class RedisScripts:
    """Lazily registered Lua scripts (``scripts/<name>.lua``, each prefixed by ``_common.lua``).

    Args:
        client: the redis-py client the scripts run on.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._loaded: dict[str, Any] = {}

    def __call__(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` (EVALSHA, loading it on first use).

        Raises:
            redis.RedisError: the server failed (callers wrap it).
        """
        script = self._loaded.get(name)
        if script is None:
            script = self._client.register_script(_source(name))
            self._loaded[name] = script
        return script(keys=keys, args=args)
