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
    "CONTEXT_TTL",
    "HOUR",
    "SUITE_DOC",
    "TTL_SLACK",
    "assert_ttl",
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
