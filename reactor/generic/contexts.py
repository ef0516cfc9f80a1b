"""Run contexts over a :class:`reactor.ports.DocumentStore` (docs/protocol.md#contexts).

Layout (all documents re-stamped to ``now + context_ttl`` on every save,
docs/protocol.md#conventions):

* collection ``contexts``, key = context id: the whole :class:`ContextRecord`. Its ``index``
  is what makes the run sweeper's scan an indexed query (``scan``):

  - a top-level run (no parent) is indexed as ``<status>``;
  - a dispatched ``async_reactor`` child is indexed as ``child:<status>``;
  - any other child (map elements, compose children) has no index, so no scan ever walks the
    elements of a fan-out map.

  A status outside :class:`reactor.model.status.RunStatus` is indexed under the catch-all
  ``~other`` (resp. ``child:~other``) so an unscoped scan still finds it.
* collection ``context_pages``, key = ``<inverted created_at in µs, 17 digits>:<context id>``,
  one small summary document per top-level run. Ascending key order is newest-first, which
  gives :meth:`DocumentContextStore.page` its keyset paging; the cursor is the base64url of the
  last key of a page (``page``).

The two documents of one run are written one after the other (context first). A crash in
between leaves the page summary one save behind: the next save repairs it, and
:meth:`DocumentContextStore.page` verifies every row whose summary is not terminal against its
context document and repairs it on read, so a crash between a run's *final* save and its
summary write never leaves the listing showing a finished run as unfinished (docs/workers.md,
"Run listings after a crash"). Contexts have a single writer by protocol (docs/workers.md,
"Stale writers and fenced saves"), so no cross-document transaction is needed;
a writer that lost its lock is refused by the fence stored on the context document itself
(:data:`FENCE_FIELD`, checked in the same compare-and-set as the write: docs/workers.md,
"Stale writers and fenced saves").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from reactor.errors import ContextTooLargeError, StaleWriterError
from reactor.generic._durable import DurableCollection, Mutation, require_after
from reactor.generic._scan import keyset_scan
from reactor.model.records import ContextRecord, Fence, RunPage, RunSummary, ScanPage
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.documents import DocumentStore
from reactor.ports.serialization import (
    decode_page_cursor,
    encode_page_cursor,
    page_key,
    record_from_dict,
    record_to_dict,
)

__all__ = [
    "CONTEXTS",
    "CONTEXT_PAGES",
    "FENCE_FIELD",
    "DocumentContextStore",
    "context_page_key",
]

#: Collection of context documents.
CONTEXTS = "contexts"
#: Collection of newest-first page summaries of top-level runs.
CONTEXT_PAGES = "context_pages"
#: The field of a context document holding its fence: the largest fencing token any fenced save
#: carried (absent when none did). Not part of :class:`ContextRecord` (loads ignore it).
FENCE_FIELD = "_fence"

_KNOWN_STATUSES: tuple[str, ...] = tuple(s.value for s in RunStatus)
_OTHER = "~other"
_CHILD = "child:"


def _status_bucket(status: str) -> str:
    return status if status in _KNOWN_STATUSES else _OTHER


def _scan_index(record: ContextRecord) -> str | None:
    """The ``index`` of a context document (``None``: never listed by scans)."""
    bucket = _status_bucket(record.status)
    if record.parent_context_id is None:
        return bucket
    if record.dispatched_child:
        return _CHILD + bucket
    return None


def _stored_fence(value: Mapping[str, Any] | None) -> int:
    """The fence stored on a context document (0 when none: absent, old or never fenced)."""
    if value is None:
        return 0
    raw = value.get(FENCE_FIELD)
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


def _page_summary(context: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`CONTEXT_PAGES` document of a stored context document: everything but the
    document body, the root id and the fence."""
    return {
        k: v for k, v in context.items() if k not in ("document", "root_context_id", FENCE_FIELD)
    }


def _summary(value: Mapping[str, Any]) -> RunSummary:
    return record_from_dict(RunSummary, value)


#: The :data:`CONTEXT_PAGES` key of a top-level run: ``context_page_key(created_at, id)``
#: (:func:`reactor.ports.serialization.page_key`).
context_page_key = page_key
#: Kept for callers of the former names; see :mod:`reactor.ports.serialization`.
encode_cursor = encode_page_cursor
decode_cursor = decode_page_cursor


class DocumentContextStore:
    """:class:`reactor.ports.ContextStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        context_ttl: retention in seconds after each save (``None`` = keep forever).
        max_document_bytes: refuse contexts whose UTF-8 ``document`` is larger than this
            (:class:`ContextTooLargeError`, nothing written); ``None`` = unbounded.
    """

    def __init__(
        self,
        documents: DocumentStore,
        *,
        context_ttl: float | None = 86400.0,
        max_document_bytes: int | None = None,
    ) -> None:
        self._contexts = DurableCollection(documents, CONTEXTS, context_ttl)
        self._pages = DurableCollection(documents, CONTEXT_PAGES, context_ttl)
        self._max_document_bytes = max_document_bytes

    def save(self, record: ContextRecord, *, fence: Fence | None = None) -> None:
        """Write a context and re-stamp its retention to ``context_ttl``, unless fenced off.

        The stored document carries the record's fence (:data:`FENCE_FIELD`, the largest token
        of any fenced save); the fence check and the write are one compare-and-set on the
        document's version, so no save can slip in between (the rule:
        :meth:`reactor.ports.ContextStore.save`; docs/workers.md, "Stale writers and fenced
        saves").

        Args:
            record: the context to write.
            fence: the writer's hold on the lock guarding the record; ``None`` = unfenced
                (always written, the stored fence kept).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: ``record.document`` exceeds ``max_document_bytes``.
            StorageError: the backend failed.
        """
        limit = self._max_document_bytes
        if limit is not None:
            size = len(record.document.encode("utf-8"))
            if size > limit:
                raise ContextTooLargeError(
                    f"context {record.context_id} is {size} bytes, over the "
                    f"{limit}-byte document limit of this storage",
                    size_bytes=size,
                    limit_bytes=limit,
                )
        value = record_to_dict(record)
        index = _scan_index(record)

        def write(
            previous: Mapping[str, Any] | None,
        ) -> Mutation[tuple[Mapping[str, Any] | None, int]]:
            stored = _stored_fence(previous)
            if fence is not None and fence.token < stored:
                return None, None, (previous, stored)
            token = stored if fence is None else fence.token
            new = dict(value)
            if token:
                new[FENCE_FIELD] = token
            return new, index, (previous, -1)

        previous, refused_by = self._contexts.update(record.context_id, write)
        if refused_by >= 0:
            assert fence is not None
            raise StaleWriterError.refused(
                record.context_id, key=fence.key, token=fence.token, stored_token=refused_by
            )
        new_key = (
            page_key(record.created_at, record.context_id)
            if (record.parent_context_id is None)
            else None
        )
        if previous is not None and previous.get("parent_context_id") is None:
            old_key = page_key(float(previous["created_at"]), record.context_id)
            if old_key != new_key:
                self._pages.delete(old_key)
        if new_key is not None:
            self._pages.put(new_key, _page_summary(value))

    def load(self, context_id: str) -> ContextRecord | None:
        """Read a context by id, ``None`` when absent or expired."""
        value = self._contexts.get(context_id)
        return None if value is None else record_from_dict(ContextRecord, value)

    def delete(self, context_id: str) -> bool:
        """Delete a context (and its page summary); ``True`` when a live context was deleted."""
        previous = self._contexts.get(context_id)
        deleted = self._contexts.delete(context_id)
        if previous is not None and previous.get("parent_context_id") is None:
            self._pages.delete(page_key(float(previous["created_at"]), context_id))
        return deleted

    def scan(
        self,
        *,
        statuses: Collection[str] | None = None,
        limit: int = 1000,
        include_dispatched_children: bool = False,
        cursor: str | None = None,
    ) -> ScanPage[RunSummary]:
        """List top-level runs for the run sweeper.

        Keyset-paged over the scan indexes (each status bucket is an indexed query of its own),
        walked in ``(index, context id)`` order; the cursor is
        :func:`~reactor.ports.serialization.encode_scan_cursor` of ``(index, last context id
        examined)`` (docs/workers.md, "Sweep cursors and dispatch leases").

        Args:
            statuses: only runs in these statuses; applied before ``limit``.
            limit: the maximum number of rows.
            include_dispatched_children: also list ``async_reactor`` children; map elements and
                compose children are never listed.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            Summaries in scan order, with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: the backend failed.
        """
        if statuses is None:
            wanted: list[str] | None = None
            buckets = [*_KNOWN_STATUSES, _OTHER]
        else:
            wanted = list(dict.fromkeys(statuses))
            buckets = list(dict.fromkeys(_status_bucket(s) for s in wanted))
        prefixes = ["", _CHILD] if include_dispatched_children else [""]
        indexes = [prefix + bucket for prefix in prefixes for bucket in buckets]

        def decode(value: Mapping[str, Any]) -> RunSummary | None:
            if wanted is not None and value.get("status") not in wanted:
                return None
            return _summary(value)

        return keyset_scan(
            self._contexts.documents, CONTEXTS, indexes, limit=limit, cursor=cursor, decode=decode
        )

    def page(self, *, cursor: str | None = None, limit: int = 50) -> RunPage:
        """List top-level runs newest first (by ``created_at``, then id) with keyset paging.

        Every top-level run (no parent) appears exactly once across pages; dispatched
        children and map elements are not listed.

        Args:
            cursor: ``None`` for the first page, else the previous page's ``next_cursor``.
            limit: rows per page (>= 1).

        Returns:
            The page; ``next_cursor`` is ``None`` on the last page.

        Raises:
            ValueError: ``cursor`` is malformed or ``limit`` is below 1.
            StorageError: the document store returned a key that is not strictly after the
                cursor (its ``after`` is broken: paging on would never end).
        """
        if limit < 1:
            raise ValueError(f"page limit must be >= 1, got {limit!r}")
        after = None if cursor is None else decode_page_cursor(cursor)
        found = self._pages.documents.scan(CONTEXT_PAGES, after=after, limit=limit + 1)
        if found:
            require_after(CONTEXT_PAGES, after, found[0][0])
        rows = found[:limit]
        more = len(found) > limit
        runs = []
        for key, value in rows:
            summary = self._verified(key, value)
            if summary is not None:
                runs.append(summary)
        return RunPage(
            runs=tuple(runs),
            next_cursor=encode_page_cursor(rows[-1][0]) if more else None,
        )

    def _verified(self, key: str, value: Mapping[str, Any]) -> RunSummary | None:
        """The listing row of page summary ``value`` (stored under ``key``), checked against
        its context when the summary is not terminal (docs/workers.md, "Run listings after a
        crash").

        A terminal summary is final and shown as stored. Any other is one save behind when a
        writer died between its context write and its summary write: the context's own values
        are shown and the summary is repaired -- by a compare-and-set that only ever moves it
        forward (a newer summary written meanwhile is kept). A summary whose context is gone
        (expired or deleted) is dropped and removed. Returns ``None`` for a dropped row.
        """
        summary = _summary(value)
        if summary.status in TERMINAL_STATUSES:
            return summary
        context = self._contexts.get(summary.context_id)
        if context is None:
            self._pages.delete(
                key, when=lambda stored: stored.get("updated_at") == value.get("updated_at")
            )
            return None
        fresh = _page_summary(context)
        if fresh.get("status") == value.get("status") and fresh.get("updated_at") == value.get(
            "updated_at"
        ):
            return summary
        if context.get("parent_context_id") is not None or page_key(
            float(context["created_at"]), summary.context_id
        ) != key:
            return summary  # not this row's run any more (re-created): leave it to its writer

        def repair(
            stored: Mapping[str, Any] | None,
        ) -> Mutation[None]:
            if stored is None or float(stored.get("updated_at", 0)) >= float(
                fresh.get("updated_at", 0)
            ):
                return None, None, None
            return fresh, None, None

        self._pages.update(key, repair)
        return _summary(fresh)
