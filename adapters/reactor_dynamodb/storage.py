"""``DynamoStorage``: the whole storage protocol on one DynamoDB table.

:class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor_dynamodb.documents.DynamoDocumentStore`: every semantic comes from the generic
stores (docs/protocol.md#document-stores); DynamoDB supplies atomicity (conditional
``PutItem``/``DeleteItem`` on a version attribute). DynamoDB has no server clock, so
``capabilities.clock`` is ``"application"`` (see the skew budget in
:mod:`reactor_dynamodb.documents`), and no pub/sub, so ``capabilities.signals`` is ``False``
(waiters poll the durable records).
"""

from __future__ import annotations

from reactor.generic.contexts import PIECE_RESERVE_BYTES
from reactor.generic.storage import GenericStorage
from reactor.ports.storage import Capabilities
from reactor_dynamodb.documents import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    MAX_ITEM_BYTES,
    DynamoDocumentStore,
)

__all__ = ["DYNAMO_CAPABILITIES", "DynamoStorage"]

#: Bytes of a context's limit given up beyond the pieces' own fields: AWS counts DynamoDB's
#: 400 KB as 409,600 bytes, moto (the test server) as 405,000, and a declared limit must hold
#: on both (docs/writing-an-adapter.md, "Capabilities").
CONTEXT_RESERVE_BYTES = PIECE_RESERVE_BYTES + MAX_ITEM_BYTES - 405_000

#: What the DynamoDB storage offers with the default document limit.
DYNAMO_CAPABILITIES = Capabilities(
    signals=False, max_document_bytes=DEFAULT_MAX_DOCUMENT_BYTES - CONTEXT_RESERVE_BYTES,
    clock="application",
    clock_skew=1.0,
)


class DynamoStorage(GenericStorage):
    """A :class:`reactor.ports.Storage` on DynamoDB.

    Args:
        documents: the document store (owns the boto3 client when built from a URL).
        context_ttl: retention in seconds of durable run state after its last write.

    Attributes:
        documents: the underlying :class:`DynamoDocumentStore` (for probes and tests).
    """

    documents: DynamoDocumentStore

    def __init__(self, documents: DynamoDocumentStore, *, context_ttl: float = 86400.0) -> None:
        super().__init__(
            documents,
            context_ttl=context_ttl,
            capabilities=Capabilities(
                signals=False,
                # a context is stored as pieces: the item limit less their own fields
                max_document_bytes=documents.max_document_bytes - CONTEXT_RESERVE_BYTES,
                clock="application",
                clock_skew=documents.clock_skew_budget,
            ),
        )
