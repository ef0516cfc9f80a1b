"""``GenericStorage``: the whole :class:`reactor.ports.Storage` over one ``DocumentStore``.

An adapter that implements the versioned-document primitive (``reactor/ports/documents.py``)
gets a complete, contract-conforming storage by constructing :class:`GenericStorage`
(docs/protocol.md#document-stores). Any sub-store can be replaced by a native fast path
through the keyword arguments of the same name; the replacement must satisfy the same sub-protocol.
"""

from __future__ import annotations

from reactor.generic.claims import DocumentClaimStore
from reactor.generic.contexts import DocumentContextStore
from reactor.generic.locks import DocumentLockStore
from reactor.generic.map_rollbacks import DocumentMapRollbackStore
from reactor.generic.maps import DocumentMapStore
from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.generic.periods import DocumentPeriodStore
from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.generic.schedules import DocumentScheduleStore
from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.generic.step_results import DocumentStepResultStore
from reactor.generic.sweep_cursors import DocumentSweepCursorStore
from reactor.ports.documents import DocumentStore
from reactor.ports.storage import (
    Capabilities,
    ClaimStore,
    ContextStore,
    LockStore,
    MapRollbackStore,
    MapStore,
    OrderedLockStore,
    PeriodStore,
    RateLimitStore,
    ScheduleStore,
    SemaphoreStore,
    SignalStore,
    StepResultStore,
    SweepCursorStore,
)

__all__ = ["GenericStorage"]


class GenericStorage:
    """A :class:`reactor.ports.Storage` assembled from the generic stores over ``documents``.

    Args:
        documents: the versioned-document primitive every sub-store shares.
        context_ttl: retention in seconds of durable run state after its last write
            (contexts, step results, maps, rollbacks, claims); default 86400 (24 h).
        signals: an optional pub/sub; ``None`` when the backend has none (waiters then poll).
        capabilities: what the adapter offers; ``max_document_bytes`` also bounds contexts.
        contexts, step_results, maps, map_rollbacks, claims, locks, semaphores, rate_limits,
            periods, ordered_locks: native replacements for the generic sub-stores.
        sweep_cursors: a native replacement for the sweepers' cursor records
            (:class:`reactor.ports.SweepCursorStore`; docs/workers.md, "Sweep cursors and
            dispatch leases").
        schedules: a native replacement for the stored schedules
            (:class:`reactor.ports.ScheduleStore`; docs/schedules.md).

    Attributes:
        sweep_cursors: where the sweepers keep their scan cursors between ticks.
        schedules: where schedules and the schedulers' state are kept (docs/protocol.md,
            "Schedules").

    Raises:
        ValueError: ``context_ttl`` is not positive.
    """

    def __init__(
        self,
        documents: DocumentStore,
        *,
        context_ttl: float = 86400.0,
        signals: SignalStore | None = None,
        capabilities: Capabilities = Capabilities(),
        contexts: ContextStore | None = None,
        step_results: StepResultStore | None = None,
        maps: MapStore | None = None,
        map_rollbacks: MapRollbackStore | None = None,
        claims: ClaimStore | None = None,
        locks: LockStore | None = None,
        semaphores: SemaphoreStore | None = None,
        rate_limits: RateLimitStore | None = None,
        periods: PeriodStore | None = None,
        ordered_locks: OrderedLockStore | None = None,
        sweep_cursors: SweepCursorStore | None = None,
        schedules: ScheduleStore | None = None,
    ) -> None:
        if not context_ttl > 0:
            raise ValueError(f"context_ttl must be > 0 seconds, got {context_ttl!r}")
        self.documents = documents
        self.context_ttl = float(context_ttl)
        self.capabilities = capabilities
        self.signals = signals
        ttl = self.context_ttl
        self.contexts: ContextStore = (
            contexts
            if contexts is not None
            else DocumentContextStore(
                documents, context_ttl=ttl, max_document_bytes=capabilities.max_document_bytes
            )
        )
        self.step_results: StepResultStore = (
            step_results
            if step_results is not None
            else DocumentStepResultStore(documents, context_ttl=ttl)
        )
        self.maps: MapStore = (
            maps if maps is not None else DocumentMapStore(documents, context_ttl=ttl)
        )
        self.map_rollbacks: MapRollbackStore = (
            map_rollbacks
            if map_rollbacks is not None
            else DocumentMapRollbackStore(documents, context_ttl=ttl)
        )
        self.claims: ClaimStore = (
            claims if claims is not None else DocumentClaimStore(documents, context_ttl=ttl)
        )
        self.locks: LockStore = locks if locks is not None else DocumentLockStore(documents)
        self.semaphores: SemaphoreStore = (
            semaphores if semaphores is not None else DocumentSemaphoreStore(documents)
        )
        self.rate_limits: RateLimitStore = (
            rate_limits if rate_limits is not None else DocumentRateLimitStore(documents)
        )
        self.periods: PeriodStore = (
            periods if periods is not None else DocumentPeriodStore(documents)
        )
        self.ordered_locks: OrderedLockStore = (
            ordered_locks if ordered_locks is not None else DocumentOrderedLockStore(documents)
        )
        self.sweep_cursors: SweepCursorStore = (
            sweep_cursors
            if sweep_cursors is not None
            else DocumentSweepCursorStore(documents, ttl=ttl)
        )
        self.schedules: ScheduleStore = (
            schedules if schedules is not None else DocumentScheduleStore(documents)
        )
        self._closed = False

    def now(self) -> float:
        """The store's clock in epoch seconds (the document store's clock)."""
        return self.documents.now()

    def close(self) -> None:
        """Close the document store; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.documents.close()
