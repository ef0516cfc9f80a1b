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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reactor.errors import ConfigurationError
from reactor.ports.urls import UrlOptions, redact_url

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

#: How messages name an option.
_LABEL = "Redis URL option"

#: Reads one present driver option (``reader(options, name)``); an empty value is refused.
_Reader = Callable[[UrlOptions, str], Any]


def _seconds(options: UrlOptions, name: str) -> float:
    return options.number(name, 0.0, exclusive_minimum=0, unit="seconds", allow_empty=False)


def _count(minimum: int) -> _Reader:
    return lambda options, name: options.integer(name, minimum, minimum=minimum, allow_empty=False)


def _flag(options: UrlOptions, name: str) -> bool:
    return options.boolean(name, False, allow_empty=False)


def _text(options: UrlOptions, name: str) -> str:
    return options.text(name, "", allow_empty=False)


def _cert_reqs(options: UrlOptions, name: str) -> str:
    choices = ("none", "optional", "required")
    return options.choice(name, "required", choices, ignore_case=True, allow_empty=False)


#: redis-py options accepted in the query of every Redis URL, with their value readers.
DRIVER_OPTIONS: dict[str, _Reader] = {
    "db": _count(0),
    "socket_connect_timeout": _seconds,
    "socket_keepalive": _flag,
    "health_check_interval": _count(0),
    "max_connections": _count(1),
    "client_name": _text,
}

#: redis-py TLS options, accepted with ``rediss://`` only.
SSL_OPTIONS: dict[str, _Reader] = {
    "ssl_cert_reqs": _cert_reqs,
    "ssl_ca_certs": _text,
    "ssl_certfile": _text,
    "ssl_keyfile": _text,
    "ssl_check_hostname": _flag,
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
        options: reactor's own options as given (``prefix``, ``queue``, ...), with typed
            readers (:class:`reactor.ports.urls.UrlOptions`).
        driver: the validated redis-py keyword arguments (``db`` and the timeouts excluded).
    """

    scheme: str
    host: str
    port: int
    username: str | None
    password: str | None
    db: int
    socket_timeout: float
    options: UrlOptions = field(default_factory=UrlOptions)
    driver: dict[str, Any] = field(default_factory=dict)
    socket_connect_timeout: float | None = None

    def visibility_timeout(self, default: float) -> float:
        """The ``visibility_timeout`` option in seconds, ``default`` when absent.

        Raises:
            ConfigurationError: the option is not a number > 0.
        """
        return self.options.number(
            "visibility_timeout", float(default), exclusive_minimum=0, unit="seconds"
        )


def _database(raw: str, url: str) -> int:
    """A database index (the URL path or the ``db`` option): an integer >= 0."""
    return UrlOptions({"db": raw}, url=url, label=_LABEL).integer(
        "db", 0, minimum=0, allow_empty=False
    )


def _db(path: str, query_db: str | None, url: str) -> int:
    raw_path = unquote(path).strip("/")
    db = _database(raw_path, url) if raw_path else 0
    if query_db is not None:
        from_query = _database(query_db, url)
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
    readers = {**DRIVER_OPTIONS, **(SSL_OPTIONS if scheme == "rediss" else {})}
    query = UrlOptions.parse(
        parts.query, url=url, label=_LABEL, accepted=REACTOR_OPTIONS | readers.keys()
    )
    options = UrlOptions(
        {name: raw for name, raw in query.items() if name in REACTOR_OPTIONS}, url=url, label=_LABEL
    )
    driver: dict[str, Any] = {}
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):  # a repeat is read too
        if name in readers:
            driver[name] = readers[name](UrlOptions({name: raw}, url=url, label=_LABEL), name)
    query_db = next((v for k, v in parse_qsl(parts.query) if k == "db"), None)
    driver.pop("db", None)
    db = _db(parts.path, query_db, url)
    if scheme == "redis+cluster" and db != 0:
        raise ConfigurationError(
            f"a Redis Cluster has only database 0, got {db} in {redact_url(url)!r}"
        )
    timeout = options.number(
        "socket_timeout", DEFAULT_SOCKET_TIMEOUT, exclusive_minimum=0, unit="seconds"
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
