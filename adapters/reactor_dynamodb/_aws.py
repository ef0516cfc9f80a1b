"""URL parsing and boto3 client construction shared by the DynamoDB storage and SQS router.

URLs:

* ``dynamodb://TABLE?region=us-east-1&endpoint_url=http://127.0.0.1:5055&prefix=app-``
* ``sqs://QUEUE?region=us-east-1&endpoint_url=...&visibility_timeout=30&prefix=app-``

Options: ``region`` (else the standard chain: ``AWS_REGION``/``AWS_DEFAULT_REGION``/config),
``endpoint_url`` (moto, LocalStack; else ``AWS_ENDPOINT_URL[_DYNAMODB|_SQS]`` or AWS),
``prefix`` (namespacing inside the table / queue names), ``create`` (``true`` by default:
create a missing table or queue), ``max_attempts`` (botocore retries, default 10). The
credentials always come from the standard AWS chain (environment, shared files, instance
role); they are never read from the URL.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from reactor.model.errors import ConfigurationError

__all__ = ["AwsURL", "bool_option", "float_option", "make_client", "parse_url"]

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


def parse_url(url: str, scheme: str) -> AwsURL:
    """Parse an adapter URL.

    Args:
        url: the URL.
        scheme: the expected scheme (``dynamodb`` or ``sqs``).

    Raises:
        ConfigurationError: wrong scheme or no table/queue name.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != scheme:
        raise ConfigurationError(f"not a {scheme}:// URL: {url!r}")
    name = unquote(parts.netloc or parts.path.lstrip("/"))
    if not name:
        raise ConfigurationError(f"{url!r} names no {'table' if scheme == 'dynamodb' else 'queue'}")
    return AwsURL(scheme=scheme, name=name, options=dict(parse_qsl(parts.query)))


def float_option(url: AwsURL, name: str, default: float) -> float:
    """A numeric option.

    Raises:
        ConfigurationError: the value is not a number.
    """
    raw = url.options.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"option {name}={raw!r} must be a number") from exc


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
    """A boto3 client for ``service`` with standard retries (throttling backs off).

    One botocore session is shared per process (creating one reads the service models from
    disk); every call returns a new client, owned by the caller.

    Raises:
        ConfigurationError: boto3 is not installed.
    """
    global _session
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:  # pragma: no cover - extra missing
        raise ConfigurationError(
            "the DynamoDB/SQS adapters need boto3: pip install 'reactor-saga[dynamodb]'"
        ) from exc
    attempts = int(float_option(url, "max_attempts", 10))
    config = Config(
        retries={"mode": "standard", "max_attempts": attempts},
        connect_timeout=5,
        read_timeout=30,
    )
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client(
            service, region_name=url.region, endpoint_url=url.endpoint_url, config=config
        )
