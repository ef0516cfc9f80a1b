"""Redis storage and router for reactor (redis-py): ``redis://``, ``rediss://``, ``redis+cluster://``.

Configure with URLs (ARCHITECTURE §6)::

    reactor.configure(storage="redis://127.0.0.1:6379/0?prefix=myapp",
                      router="redis://127.0.0.1:6379/0?queue=jobs")

Query options understood by both factories (everything else in the query goes to redis-py):

* ``prefix`` -- key namespace (default ``"reactor"``);
* ``socket_timeout`` -- seconds before a silent server raises (default 5; a stopped server then
  raises :class:`reactor.StorageError` / :class:`reactor.RouterError` instead of hanging);
* router only: ``queue`` (default ``"jobs"``), ``visibility_timeout`` (seconds; default the
  ``visibility_timeout`` setting), ``consumer`` (default a random name per router).

Settings passed as keyword arguments (``context_ttl``, ``visibility_timeout``, ...) are used
when relevant and unknown ones are ignored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from reactor_redis._base import Client, cluster_client
from reactor_redis.keys import Keys
from reactor_redis.router import RedisRouter
from reactor_redis.storage import RedisStorage

__all__ = [
    "DEFAULT_SOCKET_TIMEOUT",
    "Keys",
    "RedisRouter",
    "RedisStorage",
    "client_from_url",
    "router_from_url",
    "storage_from_url",
]

#: Seconds before a socket operation on a silent server fails.
DEFAULT_SOCKET_TIMEOUT = 5.0

_OURS = frozenset({"prefix", "socket_timeout", "queue", "visibility_timeout", "consumer"})


def _split(url: str) -> tuple[str, dict[str, str], str]:
    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    passthrough = {k: v for k, v in options.items() if k not in _OURS}
    scheme = parts.scheme.lower()
    client_scheme = "redis" if scheme == "redis+cluster" else scheme
    rebuilt = urlunsplit(
        (client_scheme, parts.netloc, parts.path, urlencode(passthrough), parts.fragment)
    )
    return scheme, options, rebuilt


def client_from_url(url: str) -> Client:
    """Build a redis-py client (``decode_responses=True``) from a reactor Redis URL.

    ``redis+cluster://host:port`` builds a ``RedisCluster`` seeded from that node. Connection
    errors are retried once (redis-py reconnects after a server restart); timeouts are not.

    Raises:
        ValueError: the scheme is not a Redis scheme.
    """
    scheme, options, rebuilt = _split(url)
    if scheme not in ("redis", "rediss", "redis+cluster"):
        raise ValueError(f"not a Redis URL: {url!r}")
    timeout = float(options.get("socket_timeout", DEFAULT_SOCKET_TIMEOUT))
    retry = Retry(
        ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(redis.ConnectionError,)
    )
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
    }
    if scheme == "redis+cluster":
        return cluster_client(rebuilt, common)
    return redis.Redis.from_url(rebuilt, **common)


def storage_from_url(url: str, **settings: Any) -> RedisStorage:
    """The ``reactor.storages`` factory for ``redis://``, ``rediss://`` and ``redis+cluster://``.

    Args:
        url: e.g. ``"redis://127.0.0.1:6379/0?prefix=app&socket_timeout=2"``.
        **settings: engine settings; ``context_ttl`` (seconds) is used, others ignored.
    """
    _scheme, options, _rebuilt = _split(url)
    ttl = settings.get("context_ttl", 86400.0)
    return RedisStorage(
        client_from_url(url),
        prefix=options.get("prefix") or "reactor",
        context_ttl=None if ttl is None else float(ttl),
    )


def router_from_url(url: str, **settings: Any) -> RedisRouter:
    """The ``reactor.routers`` factory for ``redis://``, ``rediss://`` and ``redis+cluster://``.

    Args:
        url: e.g. ``"redis://127.0.0.1:6379/0?queue=jobs&visibility_timeout=30"``.
        **settings: engine settings; ``visibility_timeout`` (seconds) is the default lease.
    """
    _scheme, options, _rebuilt = _split(url)
    raw = options.get("visibility_timeout") or settings.get("visibility_timeout", 30.0)
    visibility = float(raw)
    return RedisRouter(
        client_from_url(url),
        prefix=options.get("prefix") or "reactor",
        queue=options.get("queue") or "jobs",
        visibility_timeout=visibility,
        consumer=options.get("consumer") or None,
    )
