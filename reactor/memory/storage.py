"""``MemoryStorage``: the embedded default storage and the reference implementation.

It is :class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor.memory.documents.MemoryDocumentStore` with a
:class:`reactor.memory.signals.MemorySignalStore`: every semantic comes from the generic
stores, the memory store only supplies atomicity (one ``threading.Lock``).
State lives in the process and is lost when it exits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from reactor.generic.storage import GenericStorage
from reactor.memory.documents import MemoryDocumentStore
from reactor.memory.signals import MemorySignalStore
from reactor.ports.clock import Clock
from reactor.ports.storage import Capabilities

__all__ = ["MEMORY_CAPABILITIES", "MemoryStorage"]

#: What the memory storage offers: working signals, unbounded documents, the process clock.
MEMORY_CAPABILITIES = Capabilities(signals=True, max_document_bytes=None, clock="application")


class MemoryStorage(GenericStorage):
    """In-process :class:`reactor.ports.Storage`.

    Args:
        context_ttl: retention in seconds of durable run state after its last write
            (default 86400).
        clock: the store clock, epoch seconds: a callable or a :class:`~reactor.ports.Clock`
            (default ``None``: the system clock, read at call time); pass a
            :class:`reactor.memory.clock.ManualClock` in tests.
        documents: an existing document store to share (its clock wins over ``clock``).

    Attributes:
        documents: the underlying :class:`MemoryDocumentStore` (for probes and tests).
        signals: the :class:`MemorySignalStore`.
    """

    #: Nothing leaves the process (docs/protocol.md, "Capabilities").
    keeps_data_in_process: ClassVar[Literal[True]] = True

    documents: MemoryDocumentStore
    signals: MemorySignalStore

    def __init__(
        self,
        *,
        context_ttl: float = 86400.0,
        clock: Callable[[], float] | Clock | None = None,
        documents: MemoryDocumentStore | None = None,
    ) -> None:
        store = documents if documents is not None else MemoryDocumentStore(clock=clock)
        super().__init__(
            store,
            context_ttl=context_ttl,
            signals=MemorySignalStore(),
            capabilities=MEMORY_CAPABILITIES,
        )

    def advance(self, seconds: float) -> None:
        """Move a manual clock forward by ``seconds`` (tests only).

        Raises:
            TypeError: the storage was not built on a :class:`ManualClock`.
        """
        self.documents.advance(seconds)

    def reset(self) -> None:
        """Drop every stored document (a test helper)."""
        self.documents.clear()
