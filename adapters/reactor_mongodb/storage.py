"""``MongoStorage``: the whole storage protocol on MongoDB.

:class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor_mongodb.documents.MongoDocumentStore`: every semantic comes from the generic
stores (ARCHITECTURE §4); MongoDB supplies atomicity (single-document compare-and-set) and the
clock (the server's, calibrated: ``reactor_mongodb._clock``). Signals are absent for now
(``capabilities.signals`` is ``False``: waiters poll the durable records); change streams are
the planned fast path.
"""

from __future__ import annotations

from reactor.generic.storage import GenericStorage
from reactor.ports.storage import Capabilities
from reactor_mongodb.documents import DEFAULT_MAX_DOCUMENT_BYTES, MongoDocumentStore

__all__ = ["MONGO_CAPABILITIES", "MongoStorage", "capabilities_for"]

#: What the MongoDB storage offers with the default document limit.
MONGO_CAPABILITIES = Capabilities(
    signals=False, max_document_bytes=DEFAULT_MAX_DOCUMENT_BYTES, clock="server"
)


def capabilities_for(documents: MongoDocumentStore) -> Capabilities:
    """The capabilities of a storage over ``documents`` (its limit and clock kind)."""
    clock = "application" if documents.clock_kind == "application" else "server"
    return Capabilities(signals=False, max_document_bytes=documents.max_document_bytes, clock=clock)


class MongoStorage(GenericStorage):
    """A :class:`reactor.ports.Storage` on MongoDB.

    Args:
        documents: the document store (owns the pymongo client when built from a URL).
        context_ttl: retention in seconds of durable run state after its last write.

    Attributes:
        documents: the underlying :class:`MongoDocumentStore` (for probes and tests).
    """

    documents: MongoDocumentStore

    def __init__(self, documents: MongoDocumentStore, *, context_ttl: float = 86400.0) -> None:
        super().__init__(
            documents, context_ttl=context_ttl, capabilities=capabilities_for(documents)
        )
