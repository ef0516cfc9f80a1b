"""DynamoDB storage and SQS router for reactor (boto3).

Registered through entry points exactly like a third-party adapter (docs/architecture.md,
"Repository layout"):

* ``reactor.storages``: ``dynamodb`` -> :func:`storage_from_url`
* ``reactor.routers``: ``sqs`` -> :func:`router_from_url`
* ``reactor.probes`` / ``reactor.router_probes``: :mod:`reactor_dynamodb.probe`

URLs (options in :mod:`reactor_dynamodb._aws`):

* ``dynamodb://TABLE?region=us-east-1&endpoint_url=http://127.0.0.1:5055&prefix=app-``
* ``sqs://QUEUE?region=us-east-1&endpoint_url=...&visibility_timeout=30``

Credentials come from the standard AWS chain (environment, shared files, instance roles).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from reactor.errors import ConfigurationError, StorageError
from reactor.ports.urls import redact_url
from reactor_dynamodb._aws import make_client, parse_url
from reactor_dynamodb.admin import create_table, documents_from_url
from reactor_dynamodb.documents import DynamoDocumentStore
from reactor_dynamodb.router import SQSRouter
from reactor_dynamodb.storage import DYNAMO_CAPABILITIES, DynamoStorage

__all__ = [
    "DYNAMO_CAPABILITIES",
    "DynamoDocumentStore",
    "DynamoStorage",
    "SQSRouter",
    "create_table",
    "router_from_url",
    "storage_from_url",
]


def storage_from_url(url: str, *, context_ttl: float = 86400.0, **_ignored: Any) -> DynamoStorage:
    """The ``reactor.storages`` factory for ``dynamodb://TABLE?...``.

    Creates the table (with its GSI and TTL setting) when it does not exist, unless the URL
    says ``create=false``. An existing table's TTL setting is verified on every start and
    enabled on ``expires_at`` when it is off (:meth:`DynamoDocumentStore.ensure_ttl`); when
    that is impossible (e.g. no ``dynamodb:UpdateTimeToLive`` permission) a warning is logged
    and the storage starts anyway.

    Args:
        url: ``dynamodb://TABLE?region=...&endpoint_url=...&prefix=...&create=true``.
        context_ttl: retention of durable run state in seconds.
        **_ignored: other engine settings (accepted and ignored).

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad value.
        StorageError: the table could not be described or created (an unreachable endpoint
            within the bounded time of :mod:`reactor_dynamodb._aws`).
    """
    parsed = parse_url(url, "dynamodb")
    client = make_client("dynamodb", parsed)
    documents = documents_from_url(parsed, client)
    try:
        client.describe_table(TableName=parsed.name)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code != "ResourceNotFoundException" or not parsed.create:
            client.close()
            raise StorageError(f"DynamoDB table {parsed.name!r} is not usable: {exc}") from exc
        documents.ensure_table()
    except BotoCoreError as exc:
        client.close()
        raise StorageError(f"DynamoDB is not reachable: {exc}") from exc
    else:
        documents.ensure_ttl()  # an existing table: verify TTL on every start (warns only)
    return DynamoStorage(documents, context_ttl=context_ttl)


def router_from_url(url: str, *, visibility_timeout: float = 30.0, **_ignored: Any) -> SQSRouter:
    """The ``reactor.routers`` factory for ``sqs://QUEUE?...``.

    Args:
        url: ``sqs://QUEUE?region=...&endpoint_url=...&visibility_timeout=30&prefix=...``.
        visibility_timeout: the default lease in seconds (the URL option wins).
        **_ignored: other engine settings (accepted and ignored).

    Raises:
        ConfigurationError: a malformed URL, an unknown option or a bad value (a
            ``visibility_timeout`` outside (0, 43200] s, an invalid queue name).
        RouterError: the queues could not be found or created (an unreachable endpoint
            within the bounded time of :mod:`reactor_dynamodb._aws`).
    """
    parsed = parse_url(url, "sqs")
    client = make_client("sqs", parsed)
    try:
        return SQSRouter(
            client,
            parsed.name,
            prefix=parsed.options.get("prefix", ""),
            visibility_timeout=parsed.seconds("visibility_timeout", visibility_timeout),
            create=parsed.create,
            owns_client=True,
        )
    except ValueError as exc:
        client.close()
        raise ConfigurationError(
            f"bad SQS router configuration in {redact_url(url)!r}: {exc}"
        ) from exc
    except Exception:
        client.close()
        raise
