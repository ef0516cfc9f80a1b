"""Deploy-time administration of the DynamoDB storage (``reactor dynamodb create-table``).

:func:`create_table` is what ``reactor dynamodb create-table URL`` runs
(:mod:`reactor_dynamodb.cli`): it creates the table of a ``dynamodb://`` URL with its sparse
GSI and TTL setting (:meth:`DynamoDocumentStore.ensure_table`), so deploy scripts need not
rely on the storage factory's create-on-first-use.
"""

from __future__ import annotations

from typing import Any

from reactor_dynamodb._aws import AwsURL, make_client, parse_url
from reactor_dynamodb.documents import DynamoDocumentStore

__all__ = ["create_table", "documents_from_url"]


def documents_from_url(parsed: AwsURL, client: Any) -> DynamoDocumentStore:
    """A :class:`DynamoDocumentStore` on the table of a parsed ``dynamodb://`` URL (``prefix``
    and ``clock_skew_budget`` from the URL). No request is sent.

    Args:
        parsed: the URL (:func:`reactor_dynamodb._aws.parse_url`).
        client: a boto3 DynamoDB client (:func:`reactor_dynamodb._aws.make_client`); the store
            owns it and closes it on ``close()``.
    """
    return DynamoDocumentStore(
        client,
        parsed.name,
        prefix=parsed.options.get("prefix", ""),
        clock_skew_budget=parsed.clock_skew_budget,
        owns_client=True,
    )


def create_table(url: str, *, wait: bool = True) -> bool:
    """Create the table named by a storage URL, its GSI and TTL setting; idempotent.

    Args:
        url: ``dynamodb://TABLE?region=...&endpoint_url=...`` (the storage URL; credentials
            from the standard AWS chain).
        wait: block until the table is ``ACTIVE`` (up to about two minutes).

    Returns:
        ``True`` when this call created the table, ``False`` when it already existed (its TTL
        setting is still ensured).

    Raises:
        ConfigurationError: a malformed URL or option.
        StorageError: a DynamoDB request failed.
    """
    parsed = parse_url(url, "dynamodb")
    documents = documents_from_url(parsed, make_client("dynamodb", parsed))
    try:
        return documents.ensure_table(wait=wait)
    finally:
        documents.close()
