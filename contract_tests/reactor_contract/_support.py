"""Helpers shared by the contract test modules (record builders, TTL checks, bounded polls)."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reactor.model.records import (
    ContextRecord,
    MapMetadata,
    MapRollbackMetadata,
    StepResultRecord,
)

__all__ = [
    "ADAPTER_DOC",
    "CLOCK_TOLERANCE",
    "CONTEXT_TTL",
    "HOUR",
    "SUITE_DOC",
    "TTL_SLACK",
    "assert_ttl",
    "clock_offset_diagnosis",
    "context",
    "eventually",
    "map_metadata",
    "rollback_metadata",
    "step_result",
    "teach",
    "uid",
    "walk_scan",
]

T = TypeVar("T")

#: One hour in seconds: the TTL the suite uses wherever a test must not depend on timing.
HOUR = 3600.0
#: The ``context_ttl`` setting the suite passes to every storage factory (two hours, not the
#: 24 h default, so a factory that ignores the setting is caught).
CONTEXT_TTL = 7200.0
#: Seconds a measured TTL may fall short of the expected one (test run time, clock reads).
TTL_SLACK = 5.0


#: Where the suite's failure messages point (docs/contract-suite.md, docs/writing-an-adapter.md).
SUITE_DOC = "docs/contract-suite.md"
ADAPTER_DOC = "docs/writing-an-adapter.md"


def teach(concern: str, rule: str, mistake: str, where: str) -> str:
    """A failure message that teaches: the concern, the rule broken (one sentence), the adapter
    mistake that usually breaks it and the documentation section that states the rule.

    Args:
        concern: the conformance-table row (``"sweeps"``, ``"step_results"``...).
        rule: the rule, one sentence.
        mistake: the likely adapter mistake.
        where: e.g. ``'docs/workers.md, "Sweep cursors and dispatch leases"'``.

    Returns:
        ``"<concern>: <rule> (likely mistake: <mistake>; see <where>)"``.
    """
    return f"{concern}: {rule} (likely mistake: {mistake}; see {where})"


#: How far an adapter's ``now()`` may be from this process's ``time.time()``, in seconds (a
#: server clock on another host may drift; a clock in milliseconds, or local time read as UTC,
#: is off by far more).
CLOCK_TOLERANCE = 120.0
#: A time zone's offset from UTC is a whole number of quarter hours (UTC+5:45, UTC-3:30...).
QUARTER_HOUR = 900.0


def clock_offset_diagnosis(now: float, reference: float, tolerance: float) -> str:
    """What an adapter clock reading ``now`` when ``time.time()`` read ``reference`` most
    likely means, for a failure message of the clock checks (docs/writing-an-adapter.md,
    "Scans, expiry and the clock").

    Args:
        now: the adapter's ``now()``, supposedly epoch seconds.
        reference: this process's ``time.time()`` at about the same moment, epoch seconds.
        tolerance: how far from a whole number of quarter hours still counts as one, seconds.

    Returns:
        For an offset within ``tolerance`` of a non-zero whole number of quarter hours:
        ``"off by -2 h 00 min, a whole number of quarter hours: local time (UTC+02:00) read
        as UTC ..."``; for a ratio near 1000: milliseconds; otherwise a plain description.
    """
    offset = now - reference
    if reference > 0 and 500 < now / reference < 2000:
        return f"x{now / reference:.4g}: a clock in milliseconds instead of seconds"
    quarters = round(offset / QUARTER_HOUR)
    if quarters and abs(offset - quarters * QUARTER_HOUR) <= tolerance:
        minutes = abs(quarters) * 15
        sign = "-" if offset < 0 else "+"
        zone = "+" if offset < 0 else "-"  # a clock behind UTC is a zone east of it, read as UTC
        return (
            f"off by {sign}{minutes // 60} h {minutes % 60:02d} min, a whole number of quarter "
            f"hours: local time of a UTC{zone}{minutes // 60:02d}:{minutes % 60:02d} zone "
            "handled as UTC, or UTC handled as local time (likely mistake: a naive datetime "
            "(datetime.now(), datetime.utcnow()) turned into epoch seconds with .timestamp() "
            "or time.mktime, or a server clock read in its time zone; use time.time() or an "
            "aware datetime in UTC)"
        )
    return f"off by {offset:+.3f} s"


def uid(prefix: str = "k") -> str:
    """A fresh unique key such as ``"lock-3f2a9c1e"`` (tests never share keys)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def assert_ttl(actual: float | None, expected: float, *, slack: float = TTL_SLACK) -> None:
    """Assert a remaining TTL is ``expected`` seconds, give or take the time the test took.

    ``math.inf`` expects "never expires" exactly.
    """
    assert actual is not None, f"expected a TTL of about {expected}s, the record is absent"
    if math.isinf(expected):
        assert math.isinf(actual), f"expected no expiry, got a TTL of {actual}s"
        return
    assert expected - slack <= actual <= expected + 1.0, (
        f"expected a TTL of about {expected}s, got {actual}s"
    )


def eventually(
    check: Callable[[], T | None], *, timeout: float, interval: float = 0.05
) -> T | None:
    """Poll ``check`` until it returns a truthy value or ``timeout`` seconds pass.

    A bounded poll, never a blind sleep: it returns as soon as the condition holds.

    Returns:
        The first truthy value, or the last value seen when the deadline passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def context(
    context_id: str | None = None,
    *,
    reactor: str = "orders",
    status: str = "running",
    document: str = '{"steps":{}}',
    created_at: float = 1_700_000_000.0,
    updated_at: float | None = None,
    parent: str | None = None,
    root: str | None = None,
    dispatched_child: bool = False,
) -> ContextRecord:
    """A :class:`ContextRecord` with sensible defaults."""
    return ContextRecord(
        context_id=context_id or str(uuid.uuid4()),
        reactor=reactor,
        status=status,
        document=document,
        created_at=created_at,
        updated_at=created_at if updated_at is None else updated_at,
        parent_context_id=parent,
        root_context_id=root,
        dispatched_child=dispatched_child,
    )


def step_result(
    context_id: str,
    step_name: str = "charge",
    *,
    status: Any = "dispatched",
    outcome: str | None = None,
    **extra: Any,
) -> StepResultRecord:
    """A :class:`StepResultRecord` for ``context_id``'s ``step_name``."""
    fields: dict[str, Any] = {
        "root_context_id": context_id,
        "reactor": "orders",
        "dispatched_at": 1_700_000_000.0,
        "updated_at": 1_700_000_001.0,
    }
    fields.update(extra)
    return StepResultRecord(
        context_id=context_id, step_name=step_name, status=status, outcome=outcome, **fields
    )


def map_metadata(map_id: str | None = None, *, count: int = 5, **extra: Any) -> MapMetadata:
    """A :class:`MapMetadata` with every field set to a distinguishable value."""
    fields: dict[str, Any] = {
        "parent_context_id": "parent-ctx",
        "parent_reactor": "orders",
        "step_name": "ship_each",
        "element_reactor": "ship_one",
        "owner_context_id": "owner-ctx",
        "owner_reactor": "orders",
        "batch_size": 2,
        "atomic": True,
        "created_at": 1_700_000_000.5,
    }
    fields.update(extra)
    return MapMetadata(map_id=map_id or uid("map"), count=count, **fields)


def rollback_metadata(map_id: str, *, total: int = 5, **extra: Any) -> MapRollbackMetadata:
    """A :class:`MapRollbackMetadata` for ``map_id``."""
    fields: dict[str, Any] = {
        "batch_size": 2,
        "step_name": "ship_each",
        "owner_context_id": "owner-ctx",
        "owner_reactor": "orders",
        "element_reactor": "ship_one",
        "started_at": 1_700_000_002.25,
        "kind": "undo",
    }
    fields.update(extra)
    return MapRollbackMetadata(map_id=map_id, total=total, **fields)


def walk_scan(scan: Callable[..., Sequence[T]], *, limit: int, **filters: Any) -> list[list[T]]:
    """Page through a sweeper scan from ``cursor=None`` to ``next_cursor=None``.

    Checks on the way that every cursor advances (never one seen before) and that the walk
    ends within 100 pages (docs/workers.md, "Sweep cursors and dispatch leases").

    Args:
        scan: a store's bound ``scan`` method.
        limit: rows per page.
        **filters: further keyword arguments of ``scan``.

    Returns:
        The pages' rows, page by page.
    """
    pages: list[list[T]] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = scan(limit=limit, cursor=cursor, **filters)
        assert len(page) <= limit, f"a page of {len(page)} rows for limit={limit}"
        pages.append(list(page))
        following = getattr(page, "next_cursor", "<missing>")
        if following is None:
            return pages
        assert isinstance(following, str), f"next_cursor must be a str or None: {following!r}"
        assert following not in seen, f"next_cursor {following!r} does not advance"
        assert len(pages) < 100, "the scan did not end within 100 pages"
        seen.add(following)
        cursor = following
