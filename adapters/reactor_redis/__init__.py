"""Redis storage and router for reactor (redis-py): ``redis://``, ``rediss://``, ``redis+cluster://``.

Configure with URLs (docs/adapters/redis.md)::

    reactor.configure(storage="redis://127.0.0.1:6379/0?prefix=myapp",
                      router="redis://127.0.0.1:6379/0?queue=jobs")

Query options (validated at construction by :mod:`reactor_redis._url`; an unknown option or a
bad value raises :class:`reactor.ConfigurationError` naming it):

* ``prefix`` -- key namespace (default ``"reactor"``);
* ``socket_timeout`` -- seconds before a silent server raises (default 5; a stopped server then
  raises :class:`reactor.StorageError` / :class:`reactor.RouterError` instead of hanging);
* router only: ``queue`` (default ``"jobs"``), ``visibility_timeout`` (seconds; default the
  ``visibility_timeout`` setting), ``consumer`` (default a random name per router);
* redis-py connection options: ``db``, ``socket_connect_timeout``, ``socket_keepalive``,
  ``health_check_interval``, ``max_connections``, ``client_name``, and with ``rediss://`` the
  ``ssl_*`` options listed in :mod:`reactor_redis._url`.

Settings passed as keyword arguments (``context_ttl``, ``visibility_timeout``, ...) are used
when relevant and unknown ones are ignored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from reactor_redis._base import Client, cluster_client
from reactor_redis._url import DEFAULT_SOCKET_TIMEOUT, RedisURL, parse_url
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


def _client(parsed: RedisURL) -> Client:
    """A redis-py client for a validated URL (no round trip: redis-py connects lazily)."""
    retry = Retry(
        ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(redis.ConnectionError,)
    )
    connect = parsed.socket_connect_timeout
    common: dict[str, Any] = {
        **parsed.driver,
        "decode_responses": True,
        "socket_timeout": parsed.socket_timeout,
        "socket_connect_timeout": parsed.socket_timeout if connect is None else connect,
        "retry": retry,
    }
    userinfo = ""
    if parsed.username or parsed.password:
        userinfo = quote(parsed.username or "", safe="")
        if parsed.password:
            userinfo += ":" + quote(parsed.password, safe="")
        userinfo += "@"
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    if parsed.scheme == "redis+cluster":
        return cluster_client(f"redis://{userinfo}{host}:{parsed.port}", common)
    return redis.Redis.from_url(
        f"{parsed.scheme}://{userinfo}{host}:{parsed.port}/{parsed.db}", **common
    )


def client_from_url(url: str) -> Client:
    """Build a redis-py client (``decode_responses=True``) from a reactor Redis URL.

    ``redis+cluster://host:port`` builds a ``RedisCluster`` seeded from that node. Connection
    errors are retried once (redis-py reconnects after a server restart); timeouts are not.
    Nothing is sent to the server here.

    Raises:
        ConfigurationError: not a Redis scheme, or a malformed URL, option or value
            (:func:`reactor_redis._url.parse_url`).
    """
    return _client(parse_url(url))


def storage_from_url(url: str, **settings: Any) -> RedisStorage:
    """The ``reactor.storages`` factory for ``redis://``, ``rediss://`` and ``redis+cluster://``.

    Args:
        url: e.g. ``"redis://127.0.0.1:6379/0?prefix=app&socket_timeout=2"``.
        **settings: engine settings; ``context_ttl`` (seconds) is used, others ignored.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad value. A ``db`` index
            the server does not have is only detected at first use (``StorageError``).
    """
    parsed = parse_url(url)
    ttl = settings.get("context_ttl", 86400.0)
    return RedisStorage(
        _client(parsed),
        prefix=parsed.options.get("prefix") or "reactor",
        context_ttl=None if ttl is None else float(ttl),
    )


def router_from_url(url: str, **settings: Any) -> RedisRouter:
    """The ``reactor.routers`` factory for ``redis://``, ``rediss://`` and ``redis+cluster://``.

    Args:
        url: e.g. ``"redis://127.0.0.1:6379/0?queue=jobs&visibility_timeout=30"``.
        **settings: engine settings; ``visibility_timeout`` (seconds) is the default lease.

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad value. A ``db`` index
            the server does not have is only detected at first use (``RouterError``).
    """
    parsed = parse_url(url)
    options = parsed.options
    visibility = parsed.visibility_timeout(settings.get("visibility_timeout", 30.0))
    return RedisRouter(
        _client(parsed),
        prefix=options.get("prefix") or "reactor",
        queue=options.get("queue") or "jobs",
        visibility_timeout=visibility,
        consumer=options.get("consumer") or None,
    )
