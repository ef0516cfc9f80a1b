"""URL parsing and boto3 client construction shared by the DynamoDB storage and SQS router.

URLs:

* ``dynamodb://TABLE?region=us-east-1&endpoint_url=http://127.0.0.1:5055&prefix=app-``
* ``sqs://QUEUE?region=us-east-1&endpoint_url=...&visibility_timeout=30&prefix=app-``

Options (:data:`OPTIONS`; anything else raises :class:`reactor.ConfigurationError`
naming it, as does a bad value or an option given twice): ``region`` (else the standard chain:
``AWS_REGION``/``AWS_DEFAULT_REGION``/config), ``endpoint_url`` (an ``http(s)://host[:port]``
URL: moto, LocalStack; else ``AWS_ENDPOINT_URL[_DYNAMODB|_SQS]`` or AWS), ``prefix``
(namespacing inside the table / queue names), ``create`` (``true`` by default: create a missing
table or queue), ``max_attempts`` (attempts per request, the first included, with botocore
"standard" retries; default :data:`DEFAULT_MAX_ATTEMPTS`), ``connect_timeout`` and
``read_timeout`` (seconds, defaults :data:`DEFAULT_CONNECT_TIMEOUT` and
:data:`DEFAULT_READ_TIMEOUT`); storage only
``clock_skew_budget``; router only ``visibility_timeout``.

Bounded failure (docs/adapters/dynamodb.md "Timeouts"): with the defaults an unreachable
endpoint (connection refused, or no answer to the TCP handshake) raises ``StorageError`` /
``RouterError`` after at most ``max_attempts`` connection attempts of ``connect_timeout`` each
plus botocore's backoff between them (under 1 + 2 s): about 3 s when refused, 12 s at worst.

The credentials always come from the standard AWS chain (environment, shared files, instance
role); they are never read from the URL.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reactor.model.errors import ConfigurationError
from reactor.ports.urls import redact_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_READ_TIMEOUT",
    "OPTIONS",
    "AwsURL",
    "bool_option",
    "float_option",
    "make_client",
    "parse_url",
]

#: botocore attempts per request (the first one included) unless ``max_attempts`` says otherwise.
DEFAULT_MAX_ATTEMPTS = 3
#: Seconds to establish a connection unless ``connect_timeout`` says otherwise.
DEFAULT_CONNECT_TIMEOUT = 3.0
#: Seconds to wait for a reply per service unless ``read_timeout`` says otherwise. SQS long
#: polls last up to 20 s, so its reads must be allowed longer.
DEFAULT_READ_TIMEOUT: Mapping[str, float] = {"dynamodb": 10.0, "sqs": 30.0}

_COMMON = frozenset(
    {"region", "endpoint_url", "prefix", "create", "max_attempts", "connect_timeout",
     "read_timeout"}
)  # fmt: skip
#: The accepted query options of each scheme.
OPTIONS: Mapping[str, frozenset[str]] = {
    "dynamodb": _COMMON | {"clock_skew_budget"},
    "sqs": _COMMON | {"visibility_timeout"},
}
#: botocore's own region-name rule (``botocore.utils.validate_region_name``).
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$")
_TABLE = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")

_session_lock = threading.Lock()
_session: Any = None


@dataclass(frozen=True)
class AwsURL:
    """A parsed ``dynamodb://`` or ``sqs://`` URL.

    Attributes:
        scheme: ``dynamodb`` or ``sqs``.
        name: the table or queue name (the URL's host part).
        options: every query option.
    """

    scheme: str
    name: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def region(self) -> str | None:
        """The ``region`` option, ``None`` for the standard chain."""
        return self.options.get("region") or None

    @property
    def endpoint_url(self) -> str | None:
        """The ``endpoint_url`` option, ``None`` for the default endpoint."""
        return self.options.get("endpoint_url") or None


def _check_endpoint(raw: str) -> None:
    try:
        parts = urlsplit(raw)
        _ = parts.port
    except ValueError as exc:
        raise ConfigurationError(
            f"option endpoint_url={redact_url(raw)!r} is malformed: {exc}"
        ) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"option endpoint_url={redact_url(raw)!r} must be an http(s)://host[:port] URL"
        )


def _check_values(url: AwsURL) -> None:
    options = url.options
    region = options.get("region")
    if region and not _REGION.match(region):
        raise ConfigurationError(f"option region={region!r} is not an AWS region name")
    if options.get("endpoint_url"):
        _check_endpoint(options["endpoint_url"])
    bool_option(url, "create", True)
    attempts = float_option(url, "max_attempts", DEFAULT_MAX_ATTEMPTS)
    if attempts != int(attempts) or attempts < 1:
        raise ConfigurationError(
            f"option max_attempts={options['max_attempts']!r} must be a whole number >= 1"
        )
    for name in ("connect_timeout", "read_timeout", "visibility_timeout"):
        if float_option(url, name, 1.0) <= 0:
            raise ConfigurationError(f"option {name}={options[name]!r} must be > 0 seconds")
    if float_option(url, "clock_skew_budget", 0.0) < 0:
        raise ConfigurationError(
            f"option clock_skew_budget={options['clock_skew_budget']!r} must be >= 0 seconds"
        )


def parse_url(url: str, scheme: str) -> AwsURL:
    """Parse and validate an adapter URL (no request is sent).

    Args:
        url: the URL.
        scheme: the expected scheme (``dynamodb`` or ``sqs``).

    Returns:
        The parsed URL.

    Raises:
        ConfigurationError: wrong scheme; no table/queue name or an invalid table name; an
            unknown option (the message names it) or one given twice; a bad value (a region
            that is not a region name, an endpoint that is not ``http(s)://host[:port]``, a
            non-numeric or non-positive timeout, ``max_attempts`` below 1, a non-boolean
            ``create``).
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"malformed {scheme}:// URL {redact_url(url)!r}: {exc}") from exc
    if parts.scheme.lower() != scheme:
        raise ConfigurationError(f"not a {scheme}:// URL: {redact_url(url)!r}")
    name = unquote(parts.netloc or parts.path.lstrip("/"))
    what = "table" if scheme == "dynamodb" else "queue"
    if not name:
        raise ConfigurationError(f"{redact_url(url)!r} names no {what}")
    if scheme == "dynamodb" and not _TABLE.match(name):
        raise ConfigurationError(
            f"invalid DynamoDB table name {name!r} in {redact_url(url)!r} "
            "(3-255 of A-Z a-z 0-9 _ . -)"
        )
    options: dict[str, str] = {}
    accepted = OPTIONS[scheme]
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in accepted:
            raise ConfigurationError(
                f"unknown {scheme}:// URL option {key!r} in {redact_url(url)!r} "
                f"(accepted: {', '.join(sorted(accepted))})"
            )
        if key in options:
            raise ConfigurationError(f"option {key!r} is given twice in {redact_url(url)!r}")
        options[key] = value
    parsed = AwsURL(scheme=scheme, name=name, options=options)
    _check_values(parsed)
    return parsed


def float_option(url: AwsURL, name: str, default: float) -> float:
    """A numeric option.

    Returns:
        The value, ``default`` when absent or empty.

    Raises:
        ConfigurationError: the value is not a finite number.
    """
    raw = url.options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"option {name}={raw!r} must be a number") from exc
    if not math.isfinite(value):
        raise ConfigurationError(f"option {name}={raw!r} must be a finite number")
    return value


def bool_option(url: AwsURL, name: str, default: bool) -> bool:
    """A boolean option (``true/false/1/0/yes/no``).

    Raises:
        ConfigurationError: the value is not a boolean.
    """
    raw = url.options.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"option {name}={raw!r} must be true or false")


def make_client(service: str, url: AwsURL) -> Any:
    """A boto3 client for ``service`` with bounded retries and timeouts.

    botocore "standard" retries (throttling and transient errors back off with jitter), at most
    ``max_attempts`` attempts, ``connect_timeout`` / ``read_timeout`` seconds per attempt (module
    docstring for the defaults). One botocore session is shared per process (creating one reads
    the service models from disk); every call returns a new client, owned by the caller.

    Raises:
        ConfigurationError: boto3 is not installed, or botocore refused the configuration (no
            region anywhere in the URL or the AWS chain, an invalid region or endpoint).
    """
    global _session
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError
    except ImportError as exc:  # pragma: no cover - extra missing
        raise ConfigurationError(
            "the DynamoDB/SQS adapters need boto3: pip install 'reactor-saga[dynamodb]'"
        ) from exc
    attempts = int(float_option(url, "max_attempts", DEFAULT_MAX_ATTEMPTS))
    config = Config(
        retries={"mode": "standard", "total_max_attempts": attempts},
        connect_timeout=float_option(url, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        read_timeout=float_option(url, "read_timeout", DEFAULT_READ_TIMEOUT[service]),
    )
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        try:
            return _session.client(
                service, region_name=url.region, endpoint_url=url.endpoint_url, config=config
            )
        except (BotoCoreError, ValueError) as exc:
            raise ConfigurationError(f"cannot configure the {service} client: {exc}") from exc
