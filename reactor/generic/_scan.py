"""Keyset-paged sweeper scans over one or several indexes of a :class:`DocumentStore` collection.

The sweepers' scans (``ContextStore.scan``, ``StepResultStore.scan``, ``MapStore.scan``,
``MapRollbackStore.scan``) walk indexed documents in ``(index, key)`` order and hand back a
:class:`~reactor.model.records.ScanPage` whose ``next_cursor`` is
:func:`~reactor.ports.serialization.encode_scan_cursor` of ``(index label, last key examined)``
(the label of the "every document" index ``None`` is ``""``). docs/workers.md, "Sweep cursors
and dispatch leases", defines the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from reactor.generic._durable import require_after
from reactor.model.records import ScanPage
from reactor.ports.documents import DocumentStore
from reactor.ports.serialization import decode_scan_cursor, encode_scan_cursor

__all__ = ["keyset_scan"]

T = TypeVar("T")


def _label(index: str | None) -> str:
    return "" if index is None else index


def keyset_scan(
    documents: DocumentStore,
    collection: str,
    indexes: Sequence[str | None],
    *,
    limit: int,
    cursor: str | None,
    decode: Callable[[Mapping[str, Any]], T | None],
) -> ScanPage[T]:
    """Read up to ``limit`` rows from ``indexes`` of ``collection``, starting after ``cursor``.

    Args:
        documents: the document store.
        collection: the collection scanned.
        indexes: the ``index`` values to walk (``None``: every document); walked in ascending
            order of their labels, each in ascending key order.
        limit: the maximum number of rows; ``<= 0`` reads nothing and hands ``cursor`` back.
        cursor: ``None`` to start at the first index, else a ``next_cursor`` of an earlier
            page over the same collection.
        decode: turns a stored value into a row, or ``None`` to drop it (a filter); a dropped
            document still moves the cursor.

    Returns:
        The rows and the cursor after the last document examined; ``next_cursor`` is ``None``
        once every index was read to its end.

    Raises:
        ValueError: ``cursor`` is malformed.
        StorageError: the document store failed, or returned keys that do not advance (its
            ``after`` is broken: paging on would loop forever).
    """
    if limit <= 0:
        return ScanPage((), cursor)
    walk = sorted(dict.fromkeys(indexes), key=_label)
    start_label, after = "", None
    if cursor is not None:
        start_label, start_key = decode_scan_cursor(cursor, 2)
        after = start_key
    rows: list[T] = []
    for index in walk:
        label = _label(index)
        if cursor is not None and label < start_label:
            continue
        position = after if (cursor is not None and label == start_label) else None
        while True:
            want = limit - len(rows)
            found = documents.scan(collection, index=index, after=position, limit=want)
            if found:
                require_after(collection, position, found[0][0])
            for _key, value in found:
                row = decode(value)
                if row is not None:
                    rows.append(row)
            if found:
                last = found[-1][0]
                require_after(collection, position, last)
                position = last
            if len(found) < want:
                break  # this index is exhausted
            if len(rows) >= limit:
                return ScanPage(rows, encode_scan_cursor(label, position or ""))
    return ScanPage(rows, None)
