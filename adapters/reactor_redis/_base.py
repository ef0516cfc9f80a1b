"""Shared plumbing of the Redis sub-stores: the client type, error wrapping, Lua scripts, units.

Times cross the Python/Lua border as integer **microseconds** (strings, formatted with
``%.0f`` in Lua) so nothing is rounded by Lua's ``%.14g`` number formatting; Python converts
to epoch seconds (``float``) at the edge. Durations are sent as integer microseconds too.
"""

from __future__ import annotations

import hashlib
import math
import weakref
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any, TypeAlias

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import parse_url
from redis.exceptions import NoScriptError

from reactor.errors import RouterError, StorageError
from reactor.ports.driver_errors import close_quietly, translate_errors

__all__ = [
    "Client",
    "RedisScript",
    "RedisScripts",
    "close_client",
    "cluster_client",
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
            mean ``EXPIRE key 0``, which never happens: docs/protocol.md#conventions).
    """
    if ttl is None:
        return "-1"
    if isinstance(ttl, bool) or not (ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return str(max(to_us(ttl), 1))


def storage_errors(what: str) -> translate_errors:
    """A context manager that re-raises redis-py exceptions as :class:`StorageError`
    (chained; reactor's own errors pass through: docs/protocol.md, "Adapter toolkit").

    Args:
        what: the operation, for the message (``"redis <what> failed: ..."``).
    """
    return translate_errors(redis.RedisError, what=f"redis {what}", into=StorageError)


def router_errors(what: str) -> translate_errors:
    """Like :func:`storage_errors`, raising :class:`RouterError`.

    Args:
        what: the operation, for the message (``"redis <what> failed: ..."``).
    """
    return translate_errors(redis.RedisError, what=f"redis {what}", into=RouterError)


@cache
def _source(name: str) -> str:
    scripts = files("reactor_redis") / "scripts"
    common = (scripts / "_common.lua").read_text(encoding="utf-8")
    return common + "\n" + (scripts / f"{name}.lua").read_text(encoding="utf-8")


class RedisScript:
    """One Lua script bound to a client: a lean ``EVALSHA`` (``SCRIPT LOAD`` on ``NOSCRIPT``).

    The SHA-1 is computed once at construction (no round trip); each call is exactly one
    ``EVALSHA`` command, plus a ``SCRIPT LOAD`` and a retry the first time a server (or a
    restarted one) does not know the script. This replaces redis-py's ``Script.__call__``,
    which rebuilds the argument tuple and imports ``Pipeline`` on every call, and skips the
    ``evalsha`` wrapper layers by calling ``execute_command`` directly.

    Args:
        client: the redis-py client the script runs on (``Redis`` or ``RedisCluster``).
        source: the Lua source (UTF-8).
    """

    __slots__ = ("_client", "_execute", "_source", "sha")

    def __init__(self, client: Client, source: str) -> None:
        self._client = client
        self._execute = client.execute_command
        self._source = source
        self.sha = hashlib.sha1(source.encode("utf-8")).hexdigest()

    def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script with ``keys`` and ``args``; returns the decoded reply.

        Raises:
            redis.RedisError: the server failed (callers wrap it).
        """
        return self.run(len(keys), *keys, *args)

    def run(self, numkeys: int, *keys_and_args: Any) -> Any:
        """Run the script: the first ``numkeys`` positional values are keys, the rest args.

        The hot-path form (no intermediate lists): ``script.run(1, key, op, owner)``.

        Raises:
            redis.RedisError: the server failed (callers wrap it).
        """
        try:
            return self._execute("EVALSHA", self.sha, numkeys, *keys_and_args)
        except NoScriptError:
            self.sha = self._client.script_load(self._source)
            return self._execute("EVALSHA", self.sha, numkeys, *keys_and_args)


class RedisScripts:
    """The Lua scripts of one client (``scripts/<name>.lua``, each prefixed by ``_common.lua``).

    Scripts are bound on first use and cached; :meth:`get` returns the bound
    :class:`RedisScript` for a store to keep (the hot paths call it directly).

    Args:
        client: the redis-py client the scripts run on.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._loaded: dict[str, RedisScript] = {}

    def get(self, name: str) -> RedisScript:
        """The bound script ``name`` (created on first request; no round trip)."""
        script = self._loaded.get(name)
        if script is None:
            script = RedisScript(self._client, _source(name))
            self._loaded[name] = script
        return script

    def __call__(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` (one EVALSHA; loaded on ``NOSCRIPT``).

        Raises:
            redis.RedisError: the server failed (callers wrap it).
        """
        return self.get(name).run(len(keys), *keys, *args)


#: The seed-node client each RedisCluster was discovered through (see :func:`cluster_client`).
_SEEDS: weakref.WeakKeyDictionary[Any, redis.Redis] = weakref.WeakKeyDictionary()


def cluster_client(url: str, options: dict[str, Any]) -> RedisCluster:
    """Build a ``RedisCluster`` from ``redis://host:port`` whose seed connection we can close.

    redis-py discovers the cluster through a temporary client to the startup node and then
    drops it without closing it, which leaks a socket (a ``ResourceWarning`` at garbage
    collection). Passing our own seed client makes redis-py use it, and :func:`close_client`
    closes it with the cluster.

    Args:
        url: ``redis://[user:password@]host:port`` of any cluster node.
        options: client options (timeouts, retry, ``decode_responses``).
    """
    parsed = parse_url(url)  # type: ignore[no-untyped-call]
    host, port = str(parsed.pop("host")), int(parsed.pop("port", 6379))
    parsed.pop("db", None)
    seed_node = ClusterNode(host, port)  # type: ignore[no-untyped-call]
    seed = redis.Redis(host=host, port=port, **parsed, **options)
    seed_node.redis_connection = seed
    client = RedisCluster(startup_nodes=[seed_node], **parsed, **options)
    _SEEDS[client] = seed
    return client


def close_client(client: Client) -> None:
    """Close a redis-py client and all its connections (a cluster's seed too); never raises.

    A ``RedisCluster`` has its node pools disconnected rather than ``close()``-d: redis-py's
    cluster ``close()`` drops the default node, after which a keyless command (``TIME``) raises
    ``AttributeError`` instead of a ``RedisError``, so a late call on a closed storage escaped
    as an untyped error. Disconnected, it behaves as a closed ``redis.Redis`` does (sockets
    released, reconnects on use; docs/contract-suite.md, "Rules: driver errors").
    """
    seed = _SEEDS.pop(client, None)
    for closable in (client, seed):
        if isinstance(closable, RedisCluster):
            close_quietly(closable.disconnect_connection_pools)
        elif closable is not None:
            close_quietly(closable.close)
