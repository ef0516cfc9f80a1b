"""The runs list: filters, cursor paging (docs/dashboard.md, "Runs list").

Filters are passed to the storage's own filtered pages (docs/protocol.md, "Filtered pages"),
so they work on every backend and a time range never walks the newest runs first. A filtered
store page may come back short with a cursor; :func:`list_runs` asks again, up to
:data:`MAX_STORE_PAGES` store pages per call, so a list usually fills up, and hands the last
cursor on otherwise: an empty list with a cursor means "nothing yet, keep going".
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reactor.dashboard.errors import BackendUnavailable, BadRequest
from reactor.errors import StorageError
from reactor.model.records import RunSummary
from reactor.model.status import RunStatus
from reactor.ports.storage import Storage

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_STORE_PAGES", "RunQuery", "list_runs", "parse_time"]

#: Rows per list by default, and at most.
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: Store pages one list call reads at most.
MAX_STORE_PAGES = 5

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_time(text: str, field: str, now: float | None = None) -> float:
    """A time filter as epoch seconds.

    Args:
        text: epoch seconds (``"1700000000"``), an ISO 8601 date or date-time (UTC when it has
            no offset), or an age (``"10m"``, ``"2h"``, ``"3d"``, ``"1w"``: that long ago).
        field: the parameter's name, for the error.
        now: the current epoch seconds (default ``time.time()``).

    Raises:
        BadRequest: none of these forms.
    """
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            raise BadRequest(f"{field}: not a finite time", code="bad_filter")
        return seconds
    match = _AGO.match(value)
    if match:
        current = time.time() if now is None else now
        return current - float(match.group(1)) * _UNIT[match.group(2)]
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadRequest(
            f"{field}: expected epoch seconds, an ISO 8601 date/time or an age like 2h",
            code="bad_filter",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class RunQuery:
    """One runs-list request.

    Attributes:
        statuses: only these statuses (``None``: all).
        reactor: only this reactor name.
        created_from: only runs created at or after (epoch seconds).
        created_to: only runs created before (epoch seconds).
        cursor: where to continue, or ``None``.
        limit: rows wanted.
    """

    statuses: tuple[str, ...] | None = None
    reactor: str | None = None
    created_from: float | None = None
    created_to: float | None = None
    cursor: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(
        cls,
        *,
        status: list[str] | None = None,
        reactor: str | None = None,
        created_from: str | None = None,
        created_to: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> RunQuery:
        """Check the query parameters (``status`` may repeat or hold ``a,b``; empty values
        mean "no filter").

        Raises:
            BadRequest: an unknown status, a bad time, a limit outside 1..500.
        """
        wanted: list[str] = []
        for value in status or []:
            for name in value.split(","):
                if not name.strip():
                    continue
                try:
                    wanted.append(RunStatus.parse(name.strip()).value)
                except ValueError:
                    known = ", ".join(s.value for s in RunStatus)
                    raise BadRequest(f"unknown status {name.strip()!r} (one of: {known})",
                                     code="bad_filter") from None
        if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}", code="bad_filter")
        return cls(
            statuses=tuple(dict.fromkeys(wanted)) or None,
            reactor=reactor.strip() or None if reactor else None,
            created_from=parse_time(created_from, "from") if created_from else None,
            created_to=parse_time(created_to, "to") if created_to else None,
            cursor=cursor or None,
            limit=limit,
        )

    def filters(self) -> dict[str, str]:
        """The filters as query parameters (for links that keep them)."""
        out: dict[str, str] = {}
        if self.statuses:
            out["status"] = ",".join(self.statuses)
        if self.reactor:
            out["reactor"] = self.reactor
        if self.created_from is not None:
            out["from"] = repr(self.created_from)
        if self.created_to is not None:
            out["to"] = repr(self.created_to)
        return out


def row_view(row: RunSummary) -> dict[str, Any]:
    """One listing row as shown."""
    return {
        "run_id": row.context_id,
        "reactor": row.reactor,
        "status": row.status,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def list_runs(storage: Storage, query: RunQuery) -> dict[str, Any]:
    """One page of the runs list, newest first.

    Returns:
        ``{"runs": [...], "next_cursor": str | None}``.

    Raises:
        BadRequest: the cursor is malformed.
        BackendUnavailable: the storage failed.
    """
    rows: list[RunSummary] = []
    cursor = query.cursor
    for _ in range(MAX_STORE_PAGES):
        try:
            page = storage.contexts.page(
                cursor=cursor, limit=query.limit - len(rows),
                statuses=query.statuses, reactor=query.reactor,
                created_from=query.created_from, created_to=query.created_to,
            )
        except ValueError as exc:
            raise BadRequest(f"bad cursor or filter: {exc}", code="bad_cursor") from None
        except StorageError as exc:
            raise BackendUnavailable(f"the storage failed: {exc}") from exc
        rows.extend(page.runs)
        cursor = page.next_cursor
        if cursor is None or len(rows) >= query.limit:
            break
    return {"runs": [row_view(r) for r in rows], "next_cursor": cursor}
