"""Parsing ``mongodb://`` and ``mongodb+srv://`` URLs for the MongoDB adapter.

The database name comes from the URL path (``mongodb://host/mydb``; default ``reactor``).
Options that belong to reactor, not to the driver, are taken out of the query string before
the URI reaches :class:`pymongo.MongoClient` (which would warn about unknown options):

* ``prefix`` -- collection-name prefix (default ``reactor_``);
* ``clock`` -- ``server`` (default) or ``application`` (see ``reactor_mongodb._clock``);
* ``gc_grace`` -- seconds between logical expiry and TTL-index deletion (default 60);
* ``visibility_timeout`` -- the router's default lease in seconds;
* ``queue`` -- the router's queue name (default ``default``).

Every other query option is passed to the driver unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from reactor.model.errors import ConfigurationError

__all__ = ["REACTOR_OPTIONS", "MongoURL", "parse_url"]

#: Query options consumed by reactor (never passed to the driver).
REACTOR_OPTIONS = frozenset({"prefix", "clock", "gc_grace", "visibility_timeout", "queue"})


@dataclass(frozen=True)
class MongoURL:
    """A parsed adapter URL.

    Attributes:
        client_uri: the URI for the driver (reactor options removed).
        database: the database name.
        options: the reactor options found in the query string.
    """

    client_uri: str
    database: str
    options: dict[str, str] = field(default_factory=dict)


def parse_url(url: str, *, default_database: str = "reactor") -> MongoURL:
    """Split an adapter URL into the driver URI, database name and reactor options.

    Args:
        url: e.g. ``"mongodb://127.0.0.1:27017/app?prefix=rx_&directConnection=true"``.
        default_database: used when the URL has no path.

    Raises:
        ConfigurationError: the URL is not ``mongodb://`` or ``mongodb+srv://``, or the database
            name is invalid.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("mongodb", "mongodb+srv"):
        raise ConfigurationError(f"not a MongoDB URL: {url!r}")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = {k: v for k, v in pairs if k in REACTOR_OPTIONS}
    driver = [(k, v) for k, v in pairs if k not in REACTOR_OPTIONS]
    database = unquote(parts.path.lstrip("/")) or default_database
    if any(ch in database for ch in '/\\. "$') or len(database) > 63:
        raise ConfigurationError(f"invalid MongoDB database name {database!r} in {url!r}")
    client_uri = urlunsplit((parts.scheme, parts.netloc, "/", urlencode(driver), ""))
    return MongoURL(client_uri=client_uri, database=database, options=options)


def float_option(options: dict[str, str], name: str, default: float) -> float:
    """Read a numeric reactor option.

    Raises:
        ConfigurationError: the value is not a number.
    """
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"option {name}={raw!r} must be a number") from exc
