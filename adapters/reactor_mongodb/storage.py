"""``MongoStorage``: the whole storage protocol on MongoDB.

:class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor_mongodb.documents.MongoDocumentStore`: every semantic comes from the generic stores
(docs/protocol.md#document-stores); MongoDB supplies atomicity (single-document compare-and-set) and
the clock (the server's, calibrated: ``reactor_mongodb._clock``). Signals use change streams
(:mod:`reactor_mongodb.signals`) where the server supports them -- asked once, at construction, for
at most ``PROBE_TIMEOUT`` (1 s) -- and are otherwise absent (``capabilities.signals`` is ``False``:
waiters poll the durable records). When the server cannot be reached in time, signals are declared
and the signal store settles support on first use (degrading to polling if the server refuses change
streams).
"""

from __future__ import annotations

from reactor.generic.contexts import PIECE_RESERVE_BYTES
from reactor.generic.storage import GenericStorage
from reactor.ports.storage import Capabilities
from reactor_mongodb.documents import DEFAULT_MAX_DOCUMENT_BYTES, MongoDocumentStore
from reactor_mongodb.signals import (
    PROBE_TIMEOUT,
    SIGNALS,
    MongoSignalStore,
    change_streams_supported,
)

__all__ = ["MONGO_CAPABILITIES", "MongoStorage", "capabilities_for"]

#: What the MongoDB storage offers with the default document limit.
MONGO_CAPABILITIES = Capabilities(
    signals=False, max_document_bytes=DEFAULT_MAX_DOCUMENT_BYTES - PIECE_RESERVE_BYTES,
    clock="server",
)


def capabilities_for(documents: MongoDocumentStore, *, signals: bool = False) -> Capabilities:
    """The capabilities of a storage over ``documents`` (its limit and clock kind).

    Args:
        documents: the document store.
        signals: whether change-stream signals are available (see
            :func:`reactor_mongodb.signals.change_streams_supported`).
    """
    clock = "application" if documents.clock_kind == "application" else "server"
    return Capabilities(
        # a context is stored as pieces: the document store's limit less their own fields
        signals=signals, max_document_bytes=documents.max_document_bytes - PIECE_RESERVE_BYTES,
        clock=clock,
        clock_skew=documents.clock_skew_budget if clock == "application" else 0.0,
    )


class MongoStorage(GenericStorage):
    """A :class:`reactor.ports.Storage` on MongoDB.

    Construction opens and closes one change stream on ``<prefix>signals`` to learn whether
    the server supports them (one round trip, at most ``probe_timeout`` seconds); without
    support ``signals`` is ``None``. An unreachable server costs construction at most
    ``probe_timeout`` and leaves the question to the signal store (module docstring).

    Args:
        documents: the document store (owns the pymongo client when built from a URL).
        context_ttl: retention in seconds of durable run state after its last write.
        probe_timeout: the longest wait in seconds for the change-stream support probe.

    Attributes:
        documents: the underlying :class:`MongoDocumentStore` (for probes and tests).
    """

    documents: MongoDocumentStore

    def __init__(
        self,
        documents: MongoDocumentStore,
        *,
        context_ttl: float = 86400.0,
        probe_timeout: float = PROBE_TIMEOUT,
    ) -> None:
        collection = documents.database[documents.collection_name(SIGNALS)]
        supported = change_streams_supported(collection, probe_timeout)
        signals = None if supported is False else MongoSignalStore(collection, supported=supported)
        super().__init__(
            documents,
            context_ttl=context_ttl,
            signals=signals,
            capabilities=capabilities_for(documents, signals=signals is not None),
        )
        self._signal_store = signals

    def close(self) -> None:
        """Close open signal subscriptions, then the document store; idempotent."""
        if self._signal_store is not None:
            self._signal_store.close_all()
        super().close()
