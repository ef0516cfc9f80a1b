"""The PostgreSQL context store: an incremental checkpoint in one statement
(docs/adapters/postgres.md, "Storage").

:class:`PostgresContextStore` is the generic
:class:`reactor.generic.contexts.DocumentContextStore` — same documents, same stored format —
with two changes, each **one statement** (one round trip, one commit:
:meth:`reactor_postgres.documents.PostgresDocumentStore.write_together`): ``append``, the write
every step of a run makes, sends the new piece, the head's compare-and-set and, when due, the
run's listing row together; and a run's first ``save`` sends its pieces, its head and its
listing row together. The head an append compares against comes from the store's memory of
the head *it* wrote last for that run (its version and value), so a running run's checkpoint
reads nothing.

The memory is only a guess: the compare-and-set on the version is what decides. When another
writer moved the head (a take-over, a whole save, a cancel), the version differs, nothing is
written, the guess is forgotten and the append reads the head and tries again, exactly as the
generic store would. A head remembered past its retention is never used (the statement also
refuses an expired row). A transactional step's checkpoint may remember a head that its
rollback then discards: the next append's compare-and-set fails once and reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from reactor.generic import attempts
from reactor.generic.contexts import (
    CONTEXT_PAGES,
    CONTEXT_SEGMENTS,
    CONTEXTS,
    DocumentContextStore,
    head_scan_index,
)
from reactor.model.records import ContextDelta, ContextRecord, Fence
from reactor_postgres.documents import PostgresDocumentStore

__all__ = ["PostgresContextStore"]

#: Heads remembered per store (the runs this process checkpointed last); older ones are
#: forgotten first.
REMEMBERED_HEADS = 4096


class PostgresContextStore(DocumentContextStore):
    """:class:`reactor.ports.ContextStore` on PostgreSQL: the generic store whose append is
    one statement in the steady state.

    Args:
        documents: the PostgreSQL document store.
        context_ttl: retention in seconds after each save (``None`` = keep forever).
        max_document_bytes: as the generic store (``None``: unbounded).
    """

    def __init__(
        self,
        documents: PostgresDocumentStore,
        *,
        context_ttl: float | None = 86400.0,
        max_document_bytes: int | None = None,
    ) -> None:
        super().__init__(documents, context_ttl=context_ttl,
                         max_document_bytes=max_document_bytes)
        self._documents = documents
        self._heads: OrderedDict[str, tuple[str, dict[str, Any], float | None]] = OrderedDict()
        self._heads_lock = threading.Lock()

    def append(self, delta: ContextDelta, *, fence: Fence | None = None) -> bool:
        """Append one incremental checkpoint (``AppendsContexts.append``): the
        piece and the head in one statement, against the remembered head when there is one.

        Returns:
            ``True`` when appended; ``False`` (nothing written) when the stored head is
            absent, expired, inline, or has another base or count.

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence.
            ContextTooLargeError: the stored size with this segment exceeds
                ``max_document_bytes`` (nothing written).
            StorageError: PostgreSQL failed.
        """
        piece = self.piece_key(delta)
        for _ in attempts():
            remembered = self._recall(delta.context_id)
            if remembered is None:
                current = self._documents.read(CONTEXTS, delta.context_id)
                version, head = current.version, current.value
            else:
                version, head = remembered
            step = self.advance(head, delta, fence, piece)
            if step is None:
                if remembered is not None:  # our own last head does not fit: read the stored
                    self._forget(delta.context_id)
                    continue
                return False
            if version is None:
                return False
            expires_at = self._contexts.expiry()
            moved, page = self.page_writes(head, step.head, due=step.page_due)
            written = self._documents.write_together(
                CONTEXTS, delta.context_id, step.head,
                expected_version=version, expires_at=expires_at,
                index=head_scan_index(step.head),
                inserts=[(CONTEXT_SEGMENTS, piece,
                          {"text": delta.segment, "prev": step.prev}, self._outliving())],
                upserts=[] if page is None or moved is not None else [(CONTEXT_PAGES, *page)],
            )
            if written is None:
                self._forget(delta.context_id)
                continue
            self._remember(delta.context_id, written, step.head, expires_at)
            if moved is not None:  # the run's page key changed: the generic way
                self.write_page(head, step.head, due=step.page_due)
            return True
        raise self._contexts.contention(delta.context_id)

    def save(self, record: ContextRecord, *, fence: Fence | None = None) -> None:
        """Write a whole context (:meth:`reactor.ports.ContextStore.save`). A run's first save
        (nothing stored under its id) is one statement — its pieces, its head and its listing
        row — and its head is remembered for the first append; any other save is the generic
        store's (read, compare-and-set, drop the replaced pieces).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: the record exceeds ``max_document_bytes``.
            StorageError: PostgreSQL failed.
        """
        self._forget(record.context_id)
        pieces, value = self.plan_save(record)
        stamped = self.stamp_head(value, None, fence)
        assert not isinstance(stamped, int)  # nothing stored: no fence to be lower than
        head, page_due = stamped
        _, page = self.page_writes(None, head, due=page_due)
        expires_at = self._contexts.expiry()
        outliving = self._outliving()
        written = self._documents.write_together(
            CONTEXTS, record.context_id, head, expected_version=None, expires_at=expires_at,
            index=head_scan_index(head),
            inserts=[(CONTEXT_SEGMENTS, key, piece, outliving) for key, piece in pieces],
            upserts=[] if page is None else [(CONTEXT_PAGES, *page)],
        )
        if written is None:  # a head is stored (or an expired one lingers): the generic way
            super().save(record, fence=fence)
            return
        self._remember(record.context_id, written, head, expires_at)

    def delete(self, context_id: str) -> bool:
        """As the generic store's ``delete`` (the head remembered for the run is forgotten)."""
        self._forget(context_id)
        return super().delete(context_id)

    # ------------------------------------------------------------------ remembered heads

    def _recall(self, context_id: str) -> tuple[str, Mapping[str, Any]] | None:
        """The version and value of the head this store wrote last for ``context_id``, while
        it is live by the store clock; ``None`` otherwise."""
        with self._heads_lock:
            found = self._heads.get(context_id)
        if found is None:
            return None
        version, head, expires_at = found
        if expires_at is not None and expires_at <= self._documents.now():
            self._forget(context_id)
            return None
        return version, head

    def _remember(
        self, context_id: str, version: str, head: dict[str, Any], expires_at: float | None
    ) -> None:
        with self._heads_lock:
            self._heads[context_id] = (version, head, expires_at)
            self._heads.move_to_end(context_id)
            while len(self._heads) > REMEMBERED_HEADS:
                self._heads.popitem(last=False)

    def _forget(self, context_id: str) -> None:
        with self._heads_lock:
            self._heads.pop(context_id, None)
