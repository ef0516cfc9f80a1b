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

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from reactor.errors import ConfigurationError
from reactor.ports.urls import UrlOptions, redact_url

__all__ = [
    "DEFAULT_TIMEOUTS_MS",
    "REACTOR_OPTIONS",
    "MongoURL",
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
#: How messages name an option.
_LABEL = "MongoDB URL option"


@dataclass(frozen=True)
class MongoURL:
    """A parsed adapter URL.

    Attributes:
        client_uri: the URI for the driver (reactor options removed, default timeouts added).
        database: the database name.
        options: the reactor options found in the query string, with typed readers
            (:class:`reactor.ports.urls.UrlOptions`).
    """

    client_uri: str
    database: str
    options: UrlOptions

    def clock(self, default: str = "server") -> str:
        """The ``clock`` option: ``"server"`` or ``"application"`` (``default`` when absent).

        Raises:
            ConfigurationError: any other value, the empty one included.
        """
        return self.options.choice("clock", default, _CLOCKS, allow_empty=False)

    def gc_grace(self) -> float:
        """The ``gc_grace`` option in seconds (default 60).

        Raises:
            ConfigurationError: not a finite number >= 0.
        """
        return self.options.number("gc_grace", 60.0, minimum=0, unit="seconds")

    def clock_skew_budget(self, default: float = 1.0) -> float:
        """The ``clock_skew_budget`` option in seconds (``default`` when absent).

        Raises:
            ConfigurationError: not a finite number >= 0.
        """
        return self.options.number("clock_skew_budget", default, minimum=0, unit="seconds")

    def visibility_timeout(self, default: float = 30.0) -> float:
        """The router's ``visibility_timeout`` option in seconds (``default`` when absent).

        Raises:
            ConfigurationError: not a finite number > 0.
        """
        return self.options.number(
            "visibility_timeout", default, exclusive_minimum=0, unit="seconds"
        )


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
            raise UrlOptions([(name, value)], url=url, label=_LABEL).invalid(
                name,
                f"is not accepted ({exc}); reactor's own options are "
                f"{', '.join(sorted(REACTOR_OPTIONS))}, every other option must be a MongoDB "
                "connection-string option",
            ) from exc
    if pairs:
        try:
            split_options(urlencode(pairs), validate=True, warn=False)
        except (PyMongoError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"conflicting MongoDB URL options in {redact_url(url)!r}: {exc}"
            ) from exc


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
    options = UrlOptions(((k, v) for k, v in pairs if k in REACTOR_OPTIONS), url=url, label=_LABEL)
    driver = [(k, v) for k, v in pairs if k not in REACTOR_OPTIONS]
    _check_driver_options(driver, url)
    database = unquote(parts.path.lstrip("/")) or default_database
    if any(ch in database for ch in '/\\. "$\x00') or len(database) > 63:
        raise ConfigurationError(
            f"invalid MongoDB database name {database!r} in {redact_url(url)!r}"
        )
    present = {k.lower() for k, _ in driver}
    driver += [(k, str(v)) for k, v in DEFAULT_TIMEOUTS_MS.items() if k.lower() not in present]
    client_uri = urlunsplit((parts.scheme, parts.netloc, "/", urlencode(driver), ""))
    parsed = MongoURL(client_uri=client_uri, database=database, options=options)
    _ = parsed.clock(), parsed.gc_grace(), parsed.clock_skew_budget(), parsed.visibility_timeout()
    return parsed

