"""Filtered run pages: the filters of :meth:`reactor.ports.ContextStore.page` and the one
paging loop every store shares (docs/protocol.md#contexts, "Filtered pages").

A store hands :func:`collect_page` an iterator over its page index (page keys in ascending
order, strictly after a position) and a reader that turns one index entry into a listing row;
the loop applies the cursor, the filters, the limit and the examination budget the protocol
defines, so every adapter answers a filtered page the same way:

* the time range bounds the walk itself: it starts just below ``created_to`` and ends at the
  first key older than ``created_from`` (``next_cursor`` is then ``None``);
* a status or reactor filter skips rows without shortening the page, but one call examines at
  most :data:`PAGE_FILTER_BUDGET` index entries (or ``limit``, when larger); a page may then
  hold fewer rows than ``limit``, even none, and still carry a cursor: only ``None`` means the
  end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TypeVar

from reactor.model.records import RunPage, RunSummary
from reactor.ports.serialization import decode_page_cursor, encode_page_cursor, page_key_bound

__all__ = ["PAGE_FILTER_BUDGET", "RunPageFilter", "collect_page"]

#: Index entries one filtered page examines at most (or ``limit``, when larger).
PAGE_FILTER_BUDGET = 500

_Raw = TypeVar("_Raw")


def _seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"page {name} must be a finite number of epoch seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RunPageFilter:
    """What a run page keeps (docs/protocol.md#contexts, "Filtered pages").

    Attributes:
        statuses: only runs whose status is one of these; ``None``: every status.
        reactor: only runs of this registered reactor name; ``None``: every reactor.
        created_from: only runs created at or after these epoch seconds.
        created_to: only runs created before these epoch seconds.
    """

    statuses: frozenset[str] | None = None
    reactor: str | None = None
    created_from: float | None = None
    created_to: float | None = None

    @classmethod
    def of(
        cls,
        *,
        statuses: Collection[str] | None = None,
        reactor: str | None = None,
        created_from: float | None = None,
        created_to: float | None = None,
    ) -> RunPageFilter:
        """Check and build a filter from ``page``'s keyword arguments.

        Raises:
            ValueError: ``statuses`` is a bare string or holds a non-string, ``reactor`` is
                not a string, or a bound is not a finite number.
        """
        if statuses is not None and (
            isinstance(statuses, str) or not all(isinstance(s, str) for s in statuses)
        ):
            raise ValueError(f"page statuses must be a collection of strings: {statuses!r}")
        if reactor is not None and not isinstance(reactor, str):
            raise ValueError(f"page reactor must be a string, got {reactor!r}")
        return cls(
            statuses=None if statuses is None else frozenset(statuses),
            reactor=reactor,
            created_from=_seconds("created_from", created_from),
            created_to=_seconds("created_to", created_to),
        )

    @property
    def selective(self) -> bool:
        """Whether rows are skipped by status or reactor (the walk is then budgeted)."""
        return self.statuses is not None or self.reactor is not None

    def start_after(self) -> str | None:
        """The index position the walk starts after (from ``created_to``), or ``None``."""
        return None if self.created_to is None else page_key_bound(self.created_to)

    def past_end(self, key: str) -> bool:
        """Whether page key ``key`` belongs to a run created before ``created_from``."""
        return self.created_from is not None and key > page_key_bound(self.created_from)

    def matches(self, row: RunSummary) -> bool:
        """Whether ``row`` passes the status and reactor filters."""
        if self.statuses is not None and row.status not in self.statuses:
            return False
        return self.reactor is None or row.reactor == self.reactor


def collect_page(
    entries: Callable[[str | None, int], Iterator[tuple[str, _Raw]]],
    read: Callable[[str, _Raw], RunSummary | None],
    *,
    cursor: str | None,
    limit: int,
    run_filter: RunPageFilter,
) -> RunPage:
    """Build one run page from a store's page index (see the module docstring).

    Args:
        entries: ``entries(after, chunk)`` iterates the index entries strictly after ``after``
            (``None``: from the start) in ascending key order, fetching about ``chunk`` at a
            time; each entry is ``(page key, whatever the store keeps)``.
        read: turns an entry into its listing row, or ``None`` to drop it (a stale entry).
        cursor: the caller's cursor, or ``None``.
        limit: rows per page (>= 1).
        run_filter: the filters.

    Returns:
        The page; ``next_cursor`` names the last entry examined when more may follow.

    Raises:
        ValueError: ``cursor`` is malformed or ``limit`` is below 1.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"page limit must be >= 1, got {limit!r}")
    after = None if cursor is None else decode_page_cursor(cursor)
    start = run_filter.start_after()
    if start is not None and (after is None or start > after):
        after = start
    budget = max(limit, PAGE_FILTER_BUDGET) if run_filter.selective else limit
    chunk = min(budget, max(limit, 100)) + 1 if run_filter.selective else limit + 1
    rows: list[RunSummary] = []
    walk = entries(after, chunk)
    for examined, (key, raw) in enumerate(walk, start=1):
        if run_filter.past_end(key):
            return RunPage(runs=tuple(rows), next_cursor=None)
        row = read(key, raw)
        if row is not None and run_filter.matches(row):
            rows.append(row)
        if len(rows) >= limit or examined >= budget:
            following = next(walk, None)
            more = following is not None and not run_filter.past_end(following[0])
            return RunPage(runs=tuple(rows), next_cursor=encode_page_cursor(key) if more else None)
    return RunPage(runs=tuple(rows), next_cursor=None)
