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
  Since incremental checkpoints (docs/protocol.md, "Incremental checkpoints") it is the
  run's small *head*: the record's fields without the document, plus ``_count`` (segments
  after the base), ``_last`` (the key of the newest piece) and ``_bytes`` (the stored size).
  A head written before then holds its whole ``document`` inline and no pieces.
* collection ``context_segments``, key = ``<context id>/<base>/<position, 8 digits>/<nonce>``,
  index = the context id: the run's *pieces*, ``{"text": str, "prev": str}`` -- the base
  document at position 0 and one segment per append. Each piece names the key of the one
  before it (``prev``; ``""`` for the base) and the head names the newest, so a load reads the
  head, lists the run's pieces (one indexed scan) and walks the chain back from ``_last``:
  a piece written by a writer whose head write then failed (a crash, a lost fence) is never
  on the chain. Pieces are written before the head that counts them and never rewritten
  (their keys hold a fresh nonce), so a reader sees either the old head and chain or the new.
  A piece keeps the expiry it was written with; an append that finds the oldest piece within
  half of ``context_ttl`` of expiring re-stamps them all first (``_oldest`` in the head), so a
  live run's pieces never lapse before its head.
* collection ``context_pages``, key = ``<inverted created_at in µs, 17 digits>:<context id>``,
  one small summary document per top-level run. Ascending key order is newest-first, which
  gives :meth:`DocumentContextStore.page` its keyset paging; the cursor is the base64url of the
  last key of a page (``page``). A summary is written only when the run's status (or page
  key) changes; a listing shows the context's own ``updated_at`` for unfinished runs.

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

import dataclasses
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    StaleWriterError,
    StorageError,
)
from reactor.generic._durable import DurableCollection, Mutation, attempts, require_after
from reactor.generic._scan import keyset_scan
from reactor.model.ids import random_hex
from reactor.model.records import (
    ContextDelta,
    ContextRecord,
    Fence,
    RunPage,
    RunSummary,
    ScanPage,
)
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.documents import DocumentStore
from reactor.ports.run_pages import RunPageFilter, collect_page
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
    "CONTEXT_SEGMENTS",
    "FENCE_FIELD",
    "OLDEST_PIECE_FIELD",
    "PAGE_UNTIL_FIELD",
    "PIECE_RESERVE_BYTES",
    "Advance",
    "DocumentContextStore",
    "context_page_key",
    "head_scan_index",
]

#: Collection of context documents.
CONTEXTS = "contexts"
#: Collection of newest-first page summaries of top-level runs.
CONTEXT_PAGES = "context_pages"
#: The field of a context document holding its fence: the largest fencing token any fenced save
#: carried (absent when none did). Not part of :class:`ContextRecord` (loads ignore it).
FENCE_FIELD = "_fence"

#: Collection of the base documents and segments of runs (see the module docstring).
CONTEXT_SEGMENTS = "context_segments"
#: Bytes a piece document adds around the text it holds: its field names and the key of the
#: piece before it (which holds the context id). A document store that bounds whole encoded
#: documents by N bytes stores every context of at most ``N - PIECE_RESERVE_BYTES`` bytes
#: whose text needs no escaping in the store's encoding, so that is the context limit its
#: storage declares (``Capabilities.max_document_bytes``; docs/writing-an-adapter.md,
#: "Capabilities").
PIECE_RESERVE_BYTES = 1024
_COUNT, _LAST, _BYTES = "_count", "_last", "_bytes"
#: Head fields: the expiry the run's oldest piece, and its page summary, were last written
#: with (each is rewritten when within half of ``context_ttl`` of it).
OLDEST_PIECE_FIELD = _OLDEST = "_oldest"
PAGE_UNTIL_FIELD = _PAGE_UNTIL = "_page_until"
#: Page-summary field: ``True`` on the summary of a finished run written to expire with its
#: head. Summaries of finished runs written before it was (with no expiry, or one that
#: outlived the run) lack it, and the listing checks them against their run once.
EXPIRES_WITH_RUN_FIELD = _WITH_RUN = "_with_run"
#: Loads retried when a piece vanished because a whole save replaced the chain meanwhile.
_LOAD_ATTEMPTS = 3
#: Record fields kept in pieces, not in the head.
_NOT_IN_HEAD = ("document", "segments")
_SUMMARY_FIELDS = frozenset(f.name for f in dataclasses.fields(RunSummary))

_KNOWN_STATUSES: tuple[str, ...] = tuple(s.value for s in RunStatus)
_OTHER = "~other"
_CHILD = "child:"


def _status_bucket(status: str) -> str:
    return status if status in _KNOWN_STATUSES else _OTHER


def head_scan_index(head: Mapping[str, Any]) -> str | None:
    """The ``index`` a context head document is written with (from its record's fields:
    status bucket, top-level or dispatched child; ``None``: never listed by scans)."""
    bucket = _status_bucket(str(head.get("status")))
    if head.get("parent_context_id") is None:
        return bucket
    if head.get("dispatched_child"):
        return _CHILD + bucket
    return None


def _base_prefix(context_id: str, base: str) -> str:
    """The key prefix of the pieces of one base of a run."""
    return f"{context_id}/{base or '-'}/"


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
    """The :data:`CONTEXT_PAGES` document of a stored context head: the fields of
    :class:`RunSummary`, marked :data:`EXPIRES_WITH_RUN_FIELD` when the run is finished."""
    summary = {k: v for k, v in context.items() if k in _SUMMARY_FIELDS}
    if summary.get("status") in TERMINAL_STATUSES:
        summary[_WITH_RUN] = True
    return summary


def _summary(value: Mapping[str, Any]) -> RunSummary:
    return record_from_dict(RunSummary, value)


#: The :data:`CONTEXT_PAGES` key of a top-level run: ``context_page_key(created_at, id)``
#: (:func:`reactor.ports.serialization.page_key`).
context_page_key = page_key
#: Kept for callers of the former names; see :mod:`reactor.ports.serialization`.
encode_cursor = encode_page_cursor
decode_cursor = decode_page_cursor


@dataclasses.dataclass(frozen=True)
class Advance:
    """What one append makes of a context head (:meth:`DocumentContextStore.advance`).

    Attributes:
        head: the new head document (newest piece, count, size, status, fence, page stamp).
        prev: the key of the head's newest piece before the append (the new piece's ``prev``).
        page_due: whether the run's page summary must be rewritten after the head
            (:meth:`DocumentContextStore.write_page`).
    """

    head: dict[str, Any]
    prev: str
    page_due: bool


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
        self._pieces = DurableCollection(documents, CONTEXT_SEGMENTS, context_ttl)
        self._max_document_bytes = max_document_bytes

    def save(self, record: ContextRecord, *, fence: Fence | None = None) -> None:
        """Write a whole context and re-stamp its retention to ``context_ttl``, unless fenced
        off.

        Writes the base piece, then the head (the fence check and the head write are one
        compare-and-set on its version, so no save can slip in between: the rule of
        :meth:`reactor.ports.ContextStore.save`; docs/workers.md, "Stale writers and fenced
        saves"), then drops the pieces of the previous base (only the replaced chain when the
        base is unchanged: a concurrent save of that base keeps its pieces) and writes the
        page summary when the status or page key changed.

        Args:
            record: the context to write (its base document and segments).
            fence: the writer's hold on the lock guarding the record; ``None`` = unfenced
                (always written, the stored fence kept).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence (nothing written).
            ContextTooLargeError: ``record.document`` exceeds ``max_document_bytes``.
            StorageError: the backend failed.
        """
        pieces, value = self.plan_save(record)
        written: list[str] = []
        for key, piece_value in pieces:
            self._write_piece(key, piece_value["text"], prev=piece_value["prev"])
            written.append(key)
        index = head_scan_index(value)
        head: dict[str, Any] = {}  # the head as finally written (its page expiry stamped)
        page_due = [False]

        def write(
            previous: Mapping[str, Any] | None,
        ) -> Mutation[tuple[Mapping[str, Any] | None, int]]:
            stamped = self.stamp_head(value, previous, fence)
            if isinstance(stamped, int):
                return None, None, (previous, stamped)
            new, page_due[0] = stamped
            head.clear()
            head.update(new)
            return new, index, (previous, -1)

        previous, refused_by = self._contexts.update(record.context_id, write)
        if refused_by >= 0:
            assert fence is not None
            for key in written:
                self._pieces.delete(key)
            raise StaleWriterError.refused(
                record.context_id, key=fence.key, token=fence.token, stored_token=refused_by
            )
        if previous is not None and previous.get(_LAST):
            old_base = str(previous.get("base") or "")
            prefix = _base_prefix(record.context_id, old_base)
            if old_base != record.base:
                # Every piece of the base this save replaced (orphans of failed appends
                # included): no other save writes under a base it did not read.
                self._drop_pieces(prefix, keep=set(written))
            else:
                # The same base (a record saved back as loaded, a base of ""): another save
                # of this base may be writing its chain right now, so only the chain this
                # save replaced goes.
                self._drop_chain(prefix, str(previous[_LAST]), keep=set(written))
        self.write_page(previous, head, due=page_due[0])

    def plan_save(
        self, record: ContextRecord
    ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
        """What a whole save of ``record`` writes, without writing: its pieces (the base
        document, then each segment, each naming the one before) and its head document before
        the fence and the page stamp (:meth:`stamp_head`). An adapter that writes them in
        one request (the PostgreSQL storage) uses this with writes of its own.

        Returns:
            ``([(piece key, {"text", "prev"}), ...], head)``.

        Raises:
            ContextTooLargeError: the record exceeds ``max_document_bytes``.
        """
        size = record.stored_bytes
        self._check_size(record.context_id, size)
        prev = ""
        pieces: list[tuple[str, dict[str, Any]]] = []
        for position, text in enumerate((record.document, *record.segments)):
            key = self._piece_key(record.context_id, record.base, position)
            pieces.append((key, {"text": text, "prev": prev}))
            prev = key
        head = {k: v for k, v in record_to_dict(record).items() if k not in _NOT_IN_HEAD}
        head.update({
            _COUNT: len(record.segments), _LAST: prev, _BYTES: size,
            _OLDEST: self._outliving(),
        })
        return pieces, head

    def stamp_head(
        self, head: Mapping[str, Any], previous: Mapping[str, Any] | None, fence: Fence | None
    ) -> tuple[dict[str, Any], bool] | int:
        """The head a whole save writes over ``previous`` (``None``: nothing stored): the fence
        kept or raised, the page summary's expiry stamped.

        Returns:
            ``(new head, whether the page summary is due)``; or the stored fencing token when
            ``fence`` is lower than it (the save is refused: nothing may be written).
        """
        stored = _stored_fence(previous)
        if fence is not None and fence.token < stored:
            return stored
        token = stored if fence is None else fence.token
        new = dict(head)
        if token:
            new[FENCE_FIELD] = token
        return new, self._stamp_page(previous, new)

    def append(self, delta: ContextDelta, *, fence: Fence | None = None) -> bool:
        """Append one incremental checkpoint (``AppendsContexts.append``).

        Reads the head, writes the segment as a new piece naming the head's newest piece, then
        compare-and-sets the head (fence, base and count checked against what was read, so the
        append is atomic for readers: the chain only grows through the head). The page
        summary is written only when the status changes.

        Returns:
            ``True`` when appended; ``False`` (nothing counted) when the head is absent, has
            another base or count.

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence.
            ContextTooLargeError: the stored size with this segment exceeds
                ``max_document_bytes`` (nothing written).
            StorageError: the backend failed.
        """
        documents = self._contexts.documents
        piece = self.piece_key(delta)
        written_prev: str | None = None
        for _ in attempts():
            current = documents.read(CONTEXTS, delta.context_id)
            step = self.advance(current.value, delta, fence, piece)
            if step is None:
                return False
            if written_prev != step.prev:
                if written_prev is not None:
                    return False  # the chain moved under us: not this writer's view
                self._write_piece(piece, delta.segment, prev=step.prev)
                written_prev = step.prev
            if documents.write(
                CONTEXTS,
                delta.context_id,
                step.head,
                expected_version=current.version,
                expires_at=self._contexts.expiry(),
                index=head_scan_index(step.head),
            ):
                self.write_page(current.value, step.head, due=step.page_due)
                return True
        raise self._contexts.contention(delta.context_id)

    def piece_key(self, delta: ContextDelta) -> str:
        """A fresh key for the piece holding ``delta``'s segment (one per append call)."""
        return self._piece_key(delta.context_id, delta.base, delta.position)

    def advance(
        self,
        head: Mapping[str, Any] | None,
        delta: ContextDelta,
        fence: Fence | None,
        piece: str,
    ) -> Advance | None:
        """What appending ``delta`` as piece ``piece`` makes of the stored ``head``: the new
        head (status, count, newest piece, size, fence, page stamp), without writing it. The
        pieces are renewed first when they would not outlive the new head (a write).

        An adapter that writes the piece and the head in one request (the PostgreSQL
        storage) uses this with the writes of its own (docs/protocol.md, "Incremental
        checkpoints").

        Returns:
            ``None`` when ``head`` is absent, expired, an inline (older) record, or has another
            base or count.

        Raises:
            StaleWriterError: ``fence.token`` is lower than the stored fence.
            ContextTooLargeError: the stored size with this segment exceeds
                ``max_document_bytes``.
            StorageError: renewing the pieces failed.
        """
        if head is None or _LAST not in head:
            return None  # absent, expired, or an inline (older) record: save it whole
        stored = _stored_fence(head)
        if fence is not None and fence.token < stored:
            raise StaleWriterError.refused(
                delta.context_id, key=fence.key, token=fence.token, stored_token=stored
            )
        if head.get("base") != delta.base or head.get(_COUNT) != delta.position - 1:
            return None
        oldest = head.get(_OLDEST)
        head_until = self._contexts.expiry()
        if head_until is not None and isinstance(oldest, int | float) and (
            oldest < head_until
        ):  # the pieces must outlive the head this append writes
            oldest = self._renew_pieces(_base_prefix(delta.context_id, delta.base))
        total = int(head.get(_BYTES, 0)) + len(delta.segment.encode("utf-8"))
        self._check_size(delta.context_id, total)
        new = dict(head)
        new.update(
            status=delta.status,
            updated_at=float(delta.updated_at),
            **{_COUNT: delta.position, _LAST: piece, _BYTES: total, _OLDEST: oldest},
        )
        if fence is not None:
            new[FENCE_FIELD] = fence.token
        page_due = self._stamp_page(head, new)
        return Advance(head=new, prev=str(head[_LAST]), page_due=page_due)

    def load(self, context_id: str) -> ContextRecord | None:
        """Read a context by id, ``None`` when absent or expired: the head, and the base and
        segments on the chain from its newest piece.

        Raises:
            DeserializationError: a piece on the chain is missing or malformed (expired or
                deleted under a live head), naming the run.
            StorageError: the backend failed.
        """
        lost: DeserializationError | None = None
        lost_at: Any = None
        for _ in range(_LOAD_ATTEMPTS):
            head = self._contexts.get(context_id)
            if head is None:
                return None
            if _LAST not in head:  # written before incremental checkpoints: document inline
                return record_from_dict(ContextRecord, head)
            if lost is not None and head.get(_LAST) == lost_at:
                raise lost  # the head did not move: the piece is really gone
            try:
                texts = self._chain(
                    context_id, str(head.get("base") or ""), str(head[_LAST]),
                    int(head.get(_COUNT, 0)),
                )
            except DeserializationError as exc:  # a whole save replaced the chain meanwhile?
                lost, lost_at = exc, head.get(_LAST)
                continue
            return record_from_dict(
                ContextRecord, {**head, "document": texts[0], "segments": texts[1:]}
            )
        assert lost is not None
        raise lost

    def delete(self, context_id: str) -> bool:
        """Delete a context, its pieces and its page summary; ``True`` when a live context was
        deleted."""
        previous = self._contexts.get(context_id)
        deleted = self._contexts.delete(context_id)
        self._drop_pieces(context_id + "/", keep=set())
        if previous is not None and previous.get("parent_context_id") is None:
            self._pages.delete(page_key(float(previous["created_at"]), context_id))
        return deleted

    # ------------------------------------------------------------------ pieces and pages

    def _check_size(self, context_id: str, size: int) -> None:
        limit = self._max_document_bytes
        if limit is not None and size > limit:
            raise ContextTooLargeError(
                f"context {context_id} is {size} bytes, over the "
                f"{limit}-byte document limit of this storage",
                size_bytes=size,
                limit_bytes=limit,
            )

    @staticmethod
    def _piece_key(context_id: str, base: str, position: int) -> str:
        return f"{_base_prefix(context_id, base)}{position:08d}/{random_hex(6)}"

    def _outliving(self) -> float | None:
        """The expiry pieces and page summaries are written with: twice ``context_ttl`` from
        now, so they outlive every head written until they are renewed (a head lives
        ``context_ttl`` after its last write; they are renewed when they would not)."""
        ttl = self._pieces.ttl
        return None if ttl is None else self._pieces.documents.now() + 2 * ttl

    def _write_piece(self, key: str, text: str, *, prev: str) -> None:
        """Insert a piece under its fresh key (nothing can be stored there: one write)."""
        if not self._pieces.documents.write(
            CONTEXT_SEGMENTS,
            key,
            {"text": text, "prev": prev},
            expected_version=None,
            expires_at=self._outliving(),
        ):
            raise StorageError(f"context piece {key} already exists (nonce collision)")

    def _pieces_under(
        self, prefix: str, *, expected: int = 16
    ) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """The pieces whose key starts with ``prefix``, in key order: a key-range read of the
        collection, as consistent as the store's reads (no secondary index involved). The
        store has no upper key bound, so pages stay small (``expected`` + 2 keys, the first
        page usually the last): a page never reads far into other runs' pieces."""
        for key, value in self._pieces.scan(after=prefix, page_size=max(expected, 1) + 2):
            if not key.startswith(prefix):
                return
            yield key, value

    def _chain(self, context_id: str, base: str, last: str, count: int) -> list[str]:
        """The texts of the chain ending at ``last``: the base first, then ``count`` segments."""
        pieces = dict(self._pieces_under(_base_prefix(context_id, base), expected=count + 1))
        texts: list[str] = []
        key = last
        while key:
            value = pieces.get(key)
            text = None if value is None else value.get("text")
            if not isinstance(text, str) or len(texts) > count:
                raise DeserializationError(
                    f"stored run {context_id!r} lost piece {key!r} of its checkpoint chain"
                )
            texts.append(text)
            key = str(value.get("prev") or "") if value is not None else ""
        if len(texts) != count + 1:
            raise DeserializationError(
                f"stored run {context_id!r} has {len(texts) - 1} of its {count} segments"
            )
        texts.reverse()
        return texts

    def _renew_pieces(self, prefix: str) -> float | None:
        """Re-stamp every piece under ``prefix`` (the current base's) to outlive the head
        (pieces are not re-stamped by every append: this runs once per ``context_ttl`` of a
        run's life) and return their new expiry."""
        renewed = self._outliving()
        for key, value in list(self._pieces_under(prefix)):
            self._pieces.put(key, value, expires_at=renewed)
        return renewed

    def _drop_chain(self, prefix: str, last: str, *, keep: set[str]) -> None:
        """Delete the pieces of the chain ending at ``last`` (all under ``prefix``) but
        ``keep``: another chain under the same prefix is left whole."""
        pieces = dict(self._pieces_under(prefix))
        key, seen = last, set()
        while key and key not in seen:
            seen.add(key)
            value = pieces.get(key)
            if key not in keep:
                self._pieces.delete(key)
            key = "" if value is None else str(value.get("prev") or "")

    def _drop_pieces(self, prefix: str, *, keep: set[str]) -> None:
        """Delete the pieces under ``prefix`` but ``keep``."""
        for key, _ in list(self._pieces_under(prefix)):
            if key not in keep:
                self._pieces.delete(key)

    def _stamp_page(self, previous: Mapping[str, Any] | None, head: dict[str, Any]) -> bool:
        """Decide whether the write of ``head`` (over ``previous``) rewrites the run's page
        summary: for a top-level run, when it is new, its status or page key changed, or the
        summary would expire within half of ``context_ttl`` (a summary is not re-stamped by
        every write). Stamps the summary's new expiry into ``head`` (or carries the old one).

        A summary of a run that is not finished outlives its head (twice ``context_ttl``, so
        the listing never misses a live run between renewals); the summary of a finished run
        expires with its head (the head's own expiry), so it never lists a run that ``load``
        no longer returns (docs/workers.md, "Run listings after a crash").

        Returns:
            Whether :meth:`write_page` must write the summary.
        """
        if head.get("parent_context_id") is not None:
            return False
        if head.get("status") in TERMINAL_STATUSES:
            head[_PAGE_UNTIL] = self._contexts.expiry()
            return True
        due = (
            previous is None
            or previous.get("parent_context_id") is not None
            or previous.get("status") != head.get("status")
            or previous.get("created_at") != head.get("created_at")
            or _PAGE_UNTIL not in previous
        )
        until = None if previous is None else previous.get(_PAGE_UNTIL)
        head_until = self._contexts.expiry()
        if not due and head_until is not None and isinstance(until, int | float):
            due = until < head_until  # the summary must outlive the head being written
        head[_PAGE_UNTIL] = self._outliving() if due else until
        return due

    def write_page(
        self, previous: Mapping[str, Any] | None, head: Mapping[str, Any], *, due: bool
    ) -> None:
        """Move the page summary of a top-level run when its key changed and write it when
        :meth:`_stamp_page` decided so (``due``; ``head[_PAGE_UNTIL]`` is the new expiry)."""
        moved, put = self.page_writes(previous, head, due=due)
        if moved is not None:
            self._pages.delete(moved)
        if put is not None:
            key, summary, expires_at = put
            self._pages.put(key, summary, expires_at=expires_at)

    def page_writes(
        self, previous: Mapping[str, Any] | None, head: Mapping[str, Any], *, due: bool
    ) -> tuple[str | None, tuple[str, dict[str, Any], float | None] | None]:
        """What :meth:`write_page` writes to ``CONTEXT_PAGES``: the key of a summary to
        delete (the run's page key changed) and the ``(key, summary, expires_at)`` to put;
        ``None`` for either when there is nothing to do."""
        context_id = str(head["context_id"])
        new_key = (
            page_key(float(head["created_at"]), context_id)
            if head.get("parent_context_id") is None
            else None
        )
        old_key = (
            page_key(float(previous["created_at"]), context_id)
            if previous is not None and previous.get("parent_context_id") is None
            else None
        )
        moved = old_key if old_key is not None and old_key != new_key else None
        put = None
        if new_key is not None and (due or old_key != new_key):
            put = (new_key, _page_summary(head), head.get(_PAGE_UNTIL))
        return moved, put

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

    def page(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        statuses: Collection[str] | None = None,
        reactor: str | None = None,
        created_from: float | None = None,
        created_to: float | None = None,
    ) -> RunPage:
        """List top-level runs newest first (by ``created_at``, then id) with keyset paging.

        Every top-level run (no parent) appears exactly once across pages; dispatched
        children and map elements are not listed. The filters follow docs/protocol.md,
        "Filtered pages" (:func:`reactor.ports.run_pages.collect_page`).

        Args:
            cursor: ``None`` for the first page, else the previous page's ``next_cursor``.
            limit: rows per page (>= 1).
            statuses: only runs in one of these statuses.
            reactor: only runs of this registered reactor name.
            created_from: only runs created at or after these epoch seconds.
            created_to: only runs created before these epoch seconds.

        Returns:
            The page; ``next_cursor`` is ``None`` on the last page.

        Raises:
            ValueError: ``cursor`` or a filter is malformed, or ``limit`` is below 1.
            StorageError: the document store returned a key that is not strictly after the
                cursor (its ``after`` is broken: paging on would never end).
        """
        run_filter = RunPageFilter.of(
            statuses=statuses, reactor=reactor, created_from=created_from, created_to=created_to
        )
        return collect_page(
            self._page_entries, self._verified, cursor=cursor, limit=limit, run_filter=run_filter
        )

    def _page_entries(
        self, after: str | None, chunk: int
    ) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """The page index from ``after`` on, ``chunk`` summaries per document-store scan."""
        while True:
            found = self._pages.documents.scan(CONTEXT_PAGES, after=after, limit=chunk)
            if found:
                require_after(CONTEXT_PAGES, after, found[0][0])
            yield from found
            if len(found) < chunk:
                return
            after = found[-1][0]

    def _verified(self, key: str, value: Mapping[str, Any]) -> RunSummary | None:
        """The listing row of page summary ``value`` (stored under ``key``), checked against
        its context when the summary is not terminal (docs/workers.md, "Run listings after a
        crash").

        A terminal summary written to expire with its run is final and shown as stored; one
        written before that rule (no :data:`EXPIRES_WITH_RUN_FIELD`) is checked once: dropped
        when its run is gone, else rewritten to expire with it. Any other is shown with its
        context's own values (a summary is written only when the status changes, so its
        ``updated_at`` lags); when the status differs too, the writer died between its context
        write and its summary write, and the summary is repaired -- by a compare-and-set that
        only ever moves it forward (a newer summary written meanwhile is kept). A summary whose
        context is gone (expired or deleted) is dropped and removed. Returns ``None`` for a
        dropped row.
        """
        summary = _summary(value)
        if summary.status in TERMINAL_STATUSES and value.get(_WITH_RUN) is True:
            return summary
        context = self._contexts.get(summary.context_id)
        if summary.status in TERMINAL_STATUSES and context is not None:
            # an older summary of a live finished run: from now on it expires with the run
            self._pages.update(key, lambda stored: (
                (None, None, None) if stored is None or stored.get(_WITH_RUN) is True
                else ({**stored, _WITH_RUN: True}, None, None)
            ))  # re-stamped to context_ttl from now: it outlives its run by less than that
            return summary
        if context is None:
            self._pages.delete(
                key, when=lambda stored: stored.get("updated_at") == value.get("updated_at")
            )
            return None
        fresh = _page_summary(context)
        if fresh.get("status") == value.get("status"):
            return _summary(fresh)  # summaries move only with the status: show its last write
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
