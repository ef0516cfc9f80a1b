"""Parsing and validating ``postgresql://`` and ``postgres://`` URLs (docs/adapters/postgres.md,
"URL").

reactor's own options are taken out of the query string before the rest reaches libpq:

* ``schema`` -- the PostgreSQL schema holding every table of the deployment (default
  ``reactor``): a lower-case identifier, ``[a-z_][a-z0-9_]*``, at most 63 characters;
* ``prefix`` -- a namespace inside the schema (default none): documents are stored under
  ``<prefix>:<collection>``, jobs under queue ``<prefix>:<queue>``;
* ``queue`` -- the router's queue name (default ``default``);
* ``visibility_timeout`` -- the router's default lease in seconds (> 0);
* ``context_ttl`` -- retention of durable run state in seconds (> 0; else the engine setting);
* ``pool_max_size`` -- the connection pool's largest size (whole number >= 1, default 10);
* ``poll_ceiling`` -- the router's longest idle wait between two claims when no notification
  arrives, in seconds (> 0, default 1);
* ``clock`` -- ``server`` (default: the server's ``clock_timestamp()``, calibrated) or
  ``application`` (the process's system clock);
* ``clock_skew_budget`` -- with ``clock=application``: the largest difference in seconds
  (>= 0, default 1) between the clocks of the processes sharing the schema; holders shorten
  their lease deadlines by it (docs/coordination.md#clock-skew);
* ``migrate`` -- ``auto`` (default: the first operation brings the schema up to date) or
  ``never`` (the first operation only checks it and refuses an outdated one: the schema is
  migrated by ``reactor migrate``, e.g. with a role allowed DDL; docs/adapters/postgres.md,
  "Schema and migration").

Every other option must be a libpq connection parameter (``sslmode``, ``application_name``,
``connect_timeout`` ...): libpq itself judges its name and value here, so an unknown option or
a bad value raises :class:`reactor.ConfigurationError` at construction, never at first use.
Unless the URL sets it, ``connect_timeout=5`` is added (an unreachable server fails an
operation after about 5 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from reactor.errors import ConfigurationError
from reactor.ports.urls import UrlOptions, redact_url

__all__ = ["REACTOR_OPTIONS", "SCHEMES", "PostgresURL", "parse_url"]

#: The URL schemes this adapter answers to.
SCHEMES = ("postgresql", "postgres")

#: Query options consumed by reactor (never passed to libpq).
REACTOR_OPTIONS = frozenset(
    {"schema", "prefix", "queue", "visibility_timeout", "context_ttl", "pool_max_size",
     "poll_ceiling", "clock", "clock_skew_budget", "migrate"}
)

#: How messages name an option.
_LABEL = "PostgreSQL URL option"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: The longest ``prefix``/``queue`` accepted (they are stored in indexed text columns).
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class PostgresURL:
    """A parsed adapter URL.

    Attributes:
        conninfo: the URI for libpq (reactor options removed, ``connect_timeout`` added).
        schema: the schema holding the tables.
        prefix: the namespace inside the schema (``""`` = none).
        queue: the router's queue name.
        options: reactor's options with typed readers (:class:`reactor.ports.urls.UrlOptions`).
    """

    conninfo: str
    schema: str
    prefix: str
    queue: str
    options: UrlOptions

    def visibility_timeout(self, default: float = 30.0) -> float:
        """The ``visibility_timeout`` option in seconds (``default`` when absent).

        Raises:
            ConfigurationError: not a finite number > 0.
        """
        return self.options.number(
            "visibility_timeout", default, exclusive_minimum=0, unit="seconds",
            allow_empty=False,
        )

    def context_ttl(self, default: float = 86400.0) -> float:
        """The ``context_ttl`` option in seconds (``default`` when absent).

        Raises:
            ConfigurationError: not a finite number > 0.
        """
        return self.options.number(
            "context_ttl", default, exclusive_minimum=0, unit="seconds", allow_empty=False
        )

    def pool_max_size(self) -> int:
        """The ``pool_max_size`` option (default 10).

        Raises:
            ConfigurationError: not a whole number between 1 and 1000.
        """
        return self.options.integer("pool_max_size", 10, minimum=1, maximum=1000,
                                    allow_empty=False)

    def clock(self) -> str:
        """The ``clock`` option: ``"server"`` (default) or ``"application"``.

        Raises:
            ConfigurationError: any other value, the empty one included.
        """
        return self.options.choice("clock", "server", ("server", "application"),
                                   allow_empty=False)

    def migrate(self) -> str:
        """The ``migrate`` option: ``"auto"`` (default) or ``"never"``.

        Raises:
            ConfigurationError: any other value, the empty one included.
        """
        return self.options.choice("migrate", "auto", ("auto", "never"), allow_empty=False)

    def clock_skew_budget(self) -> float:
        """The ``clock_skew_budget`` option in seconds (default 1).

        Raises:
            ConfigurationError: not a finite number >= 0.
        """
        return self.options.number("clock_skew_budget", 1.0, minimum=0, unit="seconds",
                                   allow_empty=False)

    def poll_ceiling(self) -> float:
        """The ``poll_ceiling`` option in seconds (default 1).

        Raises:
            ConfigurationError: not a finite number > 0 and <= 60.
        """
        return self.options.number(
            "poll_ceiling", 1.0, exclusive_minimum=0, maximum=60, unit="seconds",
            allow_empty=False,
        )


def _name(options: UrlOptions, name: str, default: str) -> str:
    """A ``prefix``/``queue`` value: printable text without NUL, at most MAX_NAME_CHARS."""
    value = options.text(name, default)
    if "\x00" in value or not value.isprintable():
        raise options.invalid(name, "must be printable text without NUL or control characters")
    if len(value) > MAX_NAME_CHARS:
        raise options.invalid(name, f"must be at most {MAX_NAME_CHARS} characters")
    return value


#: libpq's ``sslmode`` values.
_SSLMODES = frozenset({"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})


def _check_value(name: str, value: str) -> None:
    """The values libpq parses without judging, judged here (it would refuse them only when
    connecting): ``connect_timeout`` and ``keepalives*`` whole seconds, ``sslmode``.

    Raises:
        ValueError: a bad value.
    """
    if name == "connect_timeout" or name.startswith("keepalives"):
        if not (value.isascii() and value.isdigit()):
            raise ValueError("must be a whole number >= 0")
    elif name == "sslmode" and value not in _SSLMODES:
        raise ValueError(f"must be one of {', '.join(sorted(_SSLMODES))}")


def _check_libpq(uri: str, driver: list[tuple[str, str]], url: str) -> None:
    """Let libpq judge the connection parameters (names and values), without connecting."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    for name, value in driver:
        single = "postgresql:///?" + urlencode([(name, value)], quote_via=quote)
        try:
            conninfo_to_dict(single)
            _check_value(name, value)
        except (psycopg.Error, ValueError) as exc:
            raise UrlOptions([(name, value)], url=url, label=_LABEL).invalid(
                name,
                f"is not accepted ({str(exc).strip()}); reactor's own options are "
                f"{', '.join(sorted(REACTOR_OPTIONS))}, every other option must be a libpq "
                "connection parameter",
            ) from exc
    try:
        conninfo_to_dict(uri)
    except psycopg.Error as exc:
        raise ConfigurationError(
            f"malformed PostgreSQL URL {redact_url(url)!r}: {str(exc).strip()}"
        ) from exc


def parse_url(url: str) -> PostgresURL:
    """Split an adapter URL into the libpq URI and reactor's options.

    Validates everything that can be checked without a server: the scheme, the port, the
    ``schema`` identifier, the ``prefix`` and ``queue`` texts, reactor's numeric options and,
    through libpq, every other query option's name and value.

    Args:
        url: e.g. ``"postgresql://reactor@127.0.0.1:5432/app?schema=reactor&prefix=t1"``.

    Returns:
        The parsed URL.

    Raises:
        ConfigurationError: not a ``postgresql://``/``postgres://`` URL; a bad port; a bad
            ``schema``, ``prefix``, ``queue`` or numeric option (the message names the
            option); an option that is neither reactor's nor libpq's, or a value libpq
            refuses.
    """
    if not isinstance(url, str):
        raise ConfigurationError(f"a PostgreSQL URL must be a str, got {type(url).__name__}")
    if "\x00" in url:
        raise ConfigurationError("a PostgreSQL URL must not contain NUL characters")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise ConfigurationError(f"malformed PostgreSQL URL {redact_url(url)!r}: {exc}") from exc
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigurationError(
            f"not a PostgreSQL URL (postgresql:// or postgres://): {redact_url(url)!r}"
        )
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    mine = [(k, v) for k, v in pairs if k in REACTOR_OPTIONS]
    seen: set[str] = set()
    for name, _value in mine:
        if name in seen:
            raise UrlOptions(mine, url=url, label=_LABEL).invalid(name, "is given twice")
        seen.add(name)
    options = UrlOptions(mine, url=url, label=_LABEL)
    driver = [(k, v) for k, v in pairs if k not in REACTOR_OPTIONS]
    if not any(k == "connect_timeout" for k, _ in driver):
        driver.append(("connect_timeout", "5"))
    # quote_via=quote: libpq decodes %20 in a URI, never "+"
    conninfo = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(driver, quote_via=quote), "")
    )
    _check_libpq(conninfo, driver, url)
    schema = options.text("schema", "reactor", allow_empty=False)
    if not _IDENTIFIER.fullmatch(schema):
        raise options.invalid(
            "schema", "must be a lower-case identifier [a-z_][a-z0-9_]* of at most 63 characters"
        )
    parsed = PostgresURL(
        conninfo=conninfo,
        schema=schema,
        prefix=_name(options, "prefix", ""),
        queue=_name(options, "queue", "default") or "default",
        options=options,
    )
    _ = (parsed.visibility_timeout(), parsed.context_ttl(), parsed.pool_max_size(),
         parsed.poll_ceiling(), parsed.clock(), parsed.clock_skew_budget(), parsed.migrate())
    return parsed
