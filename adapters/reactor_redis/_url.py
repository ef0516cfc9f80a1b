"""Parsing and validating the Redis adapter's URLs (``redis://``, ``rediss://``, ``redis+cluster://``).

Every query option is checked at construction; a bad one raises
:class:`reactor.ConfigurationError` naming it (docs/adapters/redis.md "URL options"):

* reactor's options: ``prefix``, ``socket_timeout`` (seconds > 0, default
  :data:`DEFAULT_SOCKET_TIMEOUT`), router only ``queue``, ``visibility_timeout`` (seconds > 0),
  ``consumer``;
* redis-py connection options (:data:`DRIVER_OPTIONS`): ``db`` (also the URL path; an integer
  >= 0, and only 0 on a cluster), ``socket_connect_timeout`` (seconds > 0, default the
  ``socket_timeout``), ``socket_keepalive`` (boolean), ``health_check_interval`` (whole seconds
  >= 0), ``max_connections`` (integer > 0), ``client_name``; with ``rediss://`` also
  ``ssl_cert_reqs`` (``none``/``optional``/``required``), ``ssl_ca_certs``, ``ssl_certfile``,
  ``ssl_keyfile`` (paths) and ``ssl_check_hostname`` (boolean).

Anything else (an unknown option, a misspelling) is refused instead of reaching redis-py, which
would raise a raw ``TypeError`` on every later operation. A ``db`` index beyond the server's
``databases`` setting cannot be judged without a round trip: it fails at first use with
``StorageError`` / ``RouterError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reactor.model.errors import ConfigurationError
from reactor.ports.urls import redact_url

__all__ = [
    "DEFAULT_SOCKET_TIMEOUT",
    "DRIVER_OPTIONS",
    "REACTOR_OPTIONS",
    "SSL_OPTIONS",
    "RedisURL",
    "parse_url",
]

#: Seconds before a socket operation on a silent server fails.
DEFAULT_SOCKET_TIMEOUT = 5.0

#: Query options reactor consumes itself.
REACTOR_OPTIONS = frozenset({"prefix", "socket_timeout", "queue", "visibility_timeout", "consumer"})

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"Redis URL option {name}={raw!r} must be a number") from exc
    if not (math.isfinite(value) and value > 0):
        raise ConfigurationError(f"Redis URL option {name}={raw!r} must be > 0 seconds")
    return value


def _int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"Redis URL option {name}={raw!r} must be an integer") from exc
    if value < minimum:
        raise ConfigurationError(f"Redis URL option {name}={raw!r} must be >= {minimum}")
    return value


def _bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigurationError(f"Redis URL option {name}={raw!r} must be true or false")


def _text(name: str, raw: str) -> str:
    if not raw:
        raise ConfigurationError(f"Redis URL option {name}= must not be empty")
    return raw


def _cert_reqs(name: str, raw: str) -> str:
    if raw.lower() not in ("none", "optional", "required"):
        raise ConfigurationError(
            f"Redis URL option {name}={raw!r} must be none, optional or required"
        )
    return raw.lower()


#: redis-py options accepted in the query of every Redis URL, with their value parsers.
DRIVER_OPTIONS: dict[str, Callable[[str, str], Any]] = {
    "db": lambda name, raw: _int(name, raw, 0),
    "socket_connect_timeout": _positive_float,
    "socket_keepalive": _bool,
    "health_check_interval": lambda name, raw: _int(name, raw, 0),
    "max_connections": lambda name, raw: _int(name, raw, 1),
    "client_name": _text,
}

#: redis-py TLS options, accepted with ``rediss://`` only.
SSL_OPTIONS: dict[str, Callable[[str, str], Any]] = {
    "ssl_cert_reqs": _cert_reqs,
    "ssl_ca_certs": _text,
    "ssl_certfile": _text,
    "ssl_keyfile": _text,
    "ssl_check_hostname": _bool,
}


@dataclass(frozen=True)
class RedisURL:
    """A validated Redis adapter URL.

    Attributes:
        scheme: ``redis``, ``rediss`` or ``redis+cluster``.
        host: the server (or cluster seed node) host name.
        port: the port (6379 when absent).
        username: the ACL user, if any.
        password: the password, if any.
        db: the database index (0 when absent).
        socket_timeout: seconds before a socket operation on a silent server fails.
        options: reactor's own options as given (``prefix``, ``queue``, ...), unparsed.
        driver: the validated redis-py keyword arguments (``db`` and the timeouts excluded).
    """

    scheme: str
    host: str
    port: int
    username: str | None
    password: str | None
    db: int
    socket_timeout: float
    options: dict[str, str] = field(default_factory=dict)
    driver: dict[str, Any] = field(default_factory=dict)
    socket_connect_timeout: float | None = None

    def visibility_timeout(self, default: float) -> float:
        """The ``visibility_timeout`` option in seconds, ``default`` when absent.

        Raises:
            ConfigurationError: the option is not a number > 0.
        """
        raw = self.options.get("visibility_timeout")
        return float(default) if not raw else _positive_float("visibility_timeout", raw)


def _db(path: str, query_db: str | None, url: str) -> int:
    raw_path = unquote(path).strip("/")
    db = _int("db", raw_path, 0) if raw_path else 0
    if query_db is not None:
        from_query = _int("db", query_db, 0)
        if raw_path and from_query != db:
            raise ConfigurationError(
                f"Redis URL {redact_url(url)!r} names two databases ({db}, {from_query})"
            )
        db = from_query
    return db


def parse_url(url: str) -> RedisURL:
    """Parse and validate a Redis adapter URL (no round trip).

    Args:
        url: e.g. ``"redis://user:pw@127.0.0.1:6379/0?prefix=app&socket_timeout=2"``.

    Returns:
        The validated URL.

    Raises:
        ConfigurationError: not a Redis scheme; no host; a bad port; a database that is not an
            integer >= 0 (or not 0 on a cluster); an unknown query option (the message names
            it); a bad option value (a negative or non-numeric timeout, a non-boolean flag).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"malformed Redis URL {redact_url(url)!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "redis+cluster"):
        raise ConfigurationError(f"not a Redis URL: {redact_url(url)!r}")
    if not parts.hostname:
        raise ConfigurationError(f"Redis URL {redact_url(url)!r} names no host")
    options: dict[str, str] = {}
    driver: dict[str, Any] = {}
    accepted = {**DRIVER_OPTIONS, **(SSL_OPTIONS if scheme == "rediss" else {})}
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):
        if name in REACTOR_OPTIONS:
            options[name] = raw
        elif name in accepted:
            driver[name] = accepted[name](name, raw)
        else:
            known = sorted(REACTOR_OPTIONS | set(accepted))
            raise ConfigurationError(
                f"unknown Redis URL option {name!r} in {redact_url(url)!r} "
                f"(accepted: {', '.join(known)})"
            )
    query_db = next((v for k, v in parse_qsl(parts.query) if k == "db"), None)
    driver.pop("db", None)
    db = _db(parts.path, query_db, url)
    if scheme == "redis+cluster" and db != 0:
        raise ConfigurationError(
            f"a Redis Cluster has only database 0, got {db} in {redact_url(url)!r}"
        )
    raw_timeout = options.get("socket_timeout")
    timeout = (
        _positive_float("socket_timeout", raw_timeout) if raw_timeout else DEFAULT_SOCKET_TIMEOUT
    )
    connect_timeout = driver.pop("socket_connect_timeout", None)
    parsed = RedisURL(
        scheme=scheme,
        host=parts.hostname,
        port=port or 6379,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        db=db,
        socket_timeout=timeout,
        options=options,
        driver=driver,
        socket_connect_timeout=connect_timeout,
    )
    parsed.visibility_timeout(30.0)  # validate now, not at the router's construction
    return parsed
