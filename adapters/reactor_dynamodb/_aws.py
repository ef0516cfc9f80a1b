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

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from reactor.errors import ConfigurationError
from reactor.ports.urls import UrlOptions, redact_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_READ_TIMEOUT",
    "OPTIONS",
    "AwsURL",
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
        options: every query option, with typed readers whose errors name the URL
            (:class:`reactor.ports.urls.UrlOptions`).
    """

    scheme: str
    name: str
    options: UrlOptions

    @property
    def region(self) -> str | None:
        """The ``region`` option, ``None`` for the standard chain."""
        return self.options.get("region") or None

    @property
    def endpoint_url(self) -> str | None:
        """The ``endpoint_url`` option, ``None`` for the default endpoint."""
        return self.options.get("endpoint_url") or None

    @property
    def create(self) -> bool:
        """The ``create`` option: create a missing table or queue (default ``True``).

        Raises:
            ConfigurationError: the value is not a boolean.
        """
        return self.options.boolean("create", True)

    @property
    def max_attempts(self) -> int:
        """The ``max_attempts`` option: attempts per request, the first included (default
        :data:`DEFAULT_MAX_ATTEMPTS`; ``2.0`` and ``1e1`` are whole numbers too).

        Raises:
            ConfigurationError: the value is not a whole number >= 1.
        """
        attempts = self.options.number("max_attempts", DEFAULT_MAX_ATTEMPTS)
        if attempts < 1 or not attempts.is_integer():
            raise self.options.invalid("max_attempts", "must be a whole number >= 1")
        return int(attempts)

    @property
    def clock_skew_budget(self) -> float:
        """The storage's ``clock_skew_budget`` option in seconds (default 1).

        Raises:
            ConfigurationError: the value is not a finite number >= 0.
        """
        return self.options.number("clock_skew_budget", 1.0, minimum=0, unit="seconds")

    def seconds(self, name: str, default: float) -> float:
        """A duration option (``connect_timeout``, ``read_timeout``, ``visibility_timeout``).

        Args:
            name: the option.
            default: seconds, returned when the option is absent or empty.

        Returns:
            The duration in seconds.

        Raises:
            ConfigurationError: the value is not a finite number > 0.
        """
        return self.options.number(name, default, exclusive_minimum=0, unit="seconds")


def _check_endpoint(options: UrlOptions) -> None:
    try:
        parts = urlsplit(options["endpoint_url"])
        _ = parts.port
    except ValueError as exc:
        raise options.invalid("endpoint_url", f"is malformed: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise options.invalid("endpoint_url", "must be an http(s)://host[:port] URL")


def _check_values(url: AwsURL) -> None:
    options = url.options
    region = options.get("region")
    if region and not _REGION.match(region):
        raise options.invalid("region", "is not an AWS region name")
    if options.get("endpoint_url"):
        _check_endpoint(options)
    _ = url.create, url.max_attempts, url.clock_skew_budget
    for name in ("connect_timeout", "read_timeout", "visibility_timeout"):
        url.seconds(name, 1.0)


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
    options = UrlOptions.parse(
        parts.query, url=url, label=f"{scheme}:// URL option", accepted=OPTIONS[scheme],
        repeated=False,
    )
    parsed = AwsURL(scheme=scheme, name=name, options=options)
    _check_values(parsed)
    return parsed


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
    config = Config(
        retries={"mode": "standard", "total_max_attempts": url.max_attempts},
        connect_timeout=url.seconds("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        read_timeout=url.seconds("read_timeout", DEFAULT_READ_TIMEOUT[service]),
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
