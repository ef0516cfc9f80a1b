"""Parsing and validating ``mongodb://`` and ``mongodb+srv://`` URLs for the MongoDB adapter.

The database name comes from the URL path (``mongodb://host/mydb``; default ``reactor``).
Options that belong to reactor, not to the driver, are taken out of the query string before
the URI reaches :class:`pymongo.MongoClient`:

* ``prefix`` -- collection-name prefix (default ``reactor_``);
* ``clock`` -- ``server`` (default) or ``application`` (see ``reactor_mongodb._clock``);
* ``clock_skew_budget`` -- with ``clock=application``: the largest difference in seconds (>= 0,
  default 1) between the clocks of processes sharing the database; holders shorten their lease
  deadlines by it (docs/coordination.md "Clock skew");
* ``gc_grace`` -- seconds (>= 0) between logical expiry and TTL-index deletion (default 60);
* ``visibility_timeout`` -- the router's default lease in seconds (> 0);
* ``queue`` -- the router's queue name (default ``default``).

Every other query option must be a MongoDB connection-string option pymongo knows; it is
validated here (name and value) and passed to the driver unchanged. Unknown options and bad
values raise :class:`reactor.ConfigurationError` at construction, never at first use.

Bounded failure (docs/adapters/mongodb.md "Timeouts"): unless the URL sets them, the driver
URI gets ``serverSelectionTimeoutMS=5000``, ``connectTimeoutMS=5000`` and
``socketTimeoutMS=10000`` (:data:`DEFAULT_TIMEOUTS_MS`), so an unreachable server fails an
operation with ``StorageError`` / ``RouterError`` after about 5 s instead of pymongo's 30 s,
and a silent one after 10 s instead of never.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from reactor.model.errors import ConfigurationError
from reactor.ports.urls import is_secret_option, redact_url

__all__ = [
    "DEFAULT_TIMEOUTS_MS",
    "REACTOR_OPTIONS",
    "MongoURL",
    "float_option",
    "parse_url",
]

#: Query options consumed by reactor (never passed to the driver).
REACTOR_OPTIONS = frozenset(
    {"prefix", "clock", "clock_skew_budget", "gc_grace", "visibility_timeout", "queue"}
)

#: Driver timeouts (milliseconds) added to the URI unless the URL sets them (any case).
DEFAULT_TIMEOUTS_MS: Mapping[str, int] = {
    "serverSelectionTimeoutMS": 5000,
    "connectTimeoutMS": 5000,
    "socketTimeoutMS": 10000,
}

_CLOCKS = ("server", "application")


@dataclass(frozen=True)
class MongoURL:
    """A parsed adapter URL.

    Attributes:
        client_uri: the URI for the driver (reactor options removed, default timeouts added).
        database: the database name.
        options: the reactor options found in the query string.
    """

    client_uri: str
    database: str
    options: dict[str, str] = field(default_factory=dict)


def _check_hosts(scheme: str, netloc: str, url: str) -> None:
    """Reject a missing host, a bad port, or a port on a ``mongodb+srv`` host."""
    from pymongo.errors import PyMongoError
    from pymongo.uri_parser import split_hosts

    hosts = netloc.rpartition("@")[2]
    if not hosts:
        raise ConfigurationError(f"MongoDB URL {redact_url(url)!r} names no host")
    try:
        nodes = split_hosts(unquote(hosts))
    except (PyMongoError, ValueError) as exc:
        raise ConfigurationError(
            f"bad host list {hosts!r} in MongoDB URL {redact_url(url)!r}: {exc}"
        ) from exc
    if scheme == "mongodb+srv" and (len(nodes) != 1 or ":" in hosts):
        raise ConfigurationError(
            f"a mongodb+srv:// URL names exactly one host name without a port: {redact_url(url)!r}"
        )


def _check_driver_options(pairs: list[tuple[str, str]], url: str) -> None:
    """Validate every driver option (name and value) the way pymongo will, without warnings."""
    from pymongo.errors import PyMongoError
    from pymongo.uri_parser import split_options

    for name, value in pairs:
        try:
            split_options(urlencode([(name, value)]), validate=True, warn=False)
        except (PyMongoError, ValueError, TypeError) as exc:
            shown = "***" if is_secret_option(name) else value
            raise ConfigurationError(
                f"MongoDB URL option {name}={shown!r} is not accepted ({exc}); reactor's own "
                f"options are {', '.join(sorted(REACTOR_OPTIONS))}, every other option must be "
                f"a MongoDB connection-string option: {redact_url(url)!r}"
            ) from exc
    if pairs:
        try:
            split_options(urlencode(pairs), validate=True, warn=False)
        except (PyMongoError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"conflicting MongoDB URL options in {redact_url(url)!r}: {exc}"
            ) from exc


def _check_reactor_options(options: dict[str, str]) -> None:
    """Validate the values of reactor's own options (numbers, clock mode)."""
    clock = options.get("clock")
    if clock is not None and clock not in _CLOCKS:
        raise ConfigurationError(f"option clock={clock!r} must be 'server' or 'application'")
    if "gc_grace" in options:
        float_option(options, "gc_grace", 60.0, minimum=0.0)
    if "clock_skew_budget" in options:
        float_option(options, "clock_skew_budget", 1.0, minimum=0.0)
    if "visibility_timeout" in options:
        float_option(options, "visibility_timeout", 30.0, positive=True)


def parse_url(url: str, *, default_database: str = "reactor") -> MongoURL:
    """Split an adapter URL into the driver URI, database name and reactor options.

    Validates everything that can be checked without a server: the scheme, the host list and
    ports, the database name, every query option's name and value.

    Args:
        url: e.g. ``"mongodb://127.0.0.1:27017/app?prefix=rx_&directConnection=true"``.
        default_database: used when the URL has no path.

    Returns:
        The parsed URL; ``client_uri`` carries :data:`DEFAULT_TIMEOUTS_MS` for every timeout
        the URL does not set.

    Raises:
        ConfigurationError: the URL is not ``mongodb://`` or ``mongodb+srv://``; it has no
            host or a bad port; the database name is invalid; an option is unknown (neither
            reactor's nor pymongo's) or has a bad value (e.g. a negative timeout).
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"malformed MongoDB URL {redact_url(url)!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("mongodb", "mongodb+srv"):
        raise ConfigurationError(f"not a MongoDB URL: {redact_url(url)!r}")
    _check_hosts(scheme, parts.netloc, url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = {k: v for k, v in pairs if k in REACTOR_OPTIONS}
    driver = [(k, v) for k, v in pairs if k not in REACTOR_OPTIONS]
    _check_reactor_options(options)
    _check_driver_options(driver, url)
    database = unquote(parts.path.lstrip("/")) or default_database
    if any(ch in database for ch in '/\\. "$\x00') or len(database) > 63:
        raise ConfigurationError(
            f"invalid MongoDB database name {database!r} in {redact_url(url)!r}"
        )
    present = {k.lower() for k, _ in driver}
    driver += [(k, str(v)) for k, v in DEFAULT_TIMEOUTS_MS.items() if k.lower() not in present]
    client_uri = urlunsplit((parts.scheme, parts.netloc, "/", urlencode(driver), ""))
    return MongoURL(client_uri=client_uri, database=database, options=options)


def float_option(
    options: dict[str, str],
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> float:
    """Read a numeric reactor option.

    Args:
        options: the reactor options of a parsed URL.
        name: the option name.
        default: returned when the option is absent or empty.
        minimum: the smallest accepted value (inclusive), if any.
        positive: require a value > 0.

    Returns:
        The value as a finite float.

    Raises:
        ConfigurationError: the value is not a finite number or is out of range.
    """
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"option {name}={raw!r} must be a number") from exc
    if not math.isfinite(value):
        raise ConfigurationError(f"option {name}={raw!r} must be a finite number")
    if positive and value <= 0:
        raise ConfigurationError(f"option {name}={raw!r} must be > 0")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"option {name}={raw!r} must be >= {minimum:g}")
    return value
