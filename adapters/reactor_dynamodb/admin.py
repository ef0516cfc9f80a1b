"""Deploy-time administration of the DynamoDB storage (``reactor dynamodb create-table``).

:func:`create_table` is what ``reactor dynamodb create-table URL`` runs
(:mod:`reactor_dynamodb.cli`): it creates the table of a ``dynamodb://`` URL with its sparse
GSI and TTL setting (:meth:`DynamoDocumentStore.ensure_table`), so deploy scripts need not
rely on the storage factory's create-on-first-use.
"""

from __future__ import annotations

from reactor_dynamodb._aws import float_option, make_client, parse_url
from reactor_dynamodb.documents import DynamoDocumentStore

__all__ = ["create_table"]


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
    client = make_client("dynamodb", parsed)
    documents = DynamoDocumentStore(
        client,
        parsed.name,
        prefix=parsed.options.get("prefix", ""),
        clock_skew_budget=float_option(parsed, "clock_skew_budget", 1.0),
        owns_client=True,
    )
    try:
        return documents.ensure_table(wait=wait)
    finally:
        documents.close()
