"""The queue overview and dead letters (docs/dashboard.md, "Queues"; docs/workers.md,
"Dead letters").

What a router can tell is read through its optional capabilities, checked with ``isinstance``
(docs/protocol.md, "Inspection capabilities"): :class:`~reactor.ports.inspection.QueueInspector`
for depth, delayed, in-flight and dead-letter counts, and
:class:`~reactor.ports.router.DeadLetterAdmin` for paging, requeuing and purging dead letters.
A router without them shows ``unknown`` and lists its dead letters without paging. Every body
is masked with :func:`reactor.model.masking.mask_job_body`, as ``reactor dead-letters`` does.
"""

from __future__ import annotations

import json
from typing import Any

from reactor.dashboard.errors import BackendUnavailable, BadRequest, NotFound
from reactor.dashboard.stored import check_id
from reactor.errors import ReactorError
from reactor.model.masking import mask_job_body
from reactor.ports.inspection import QueueInspector
from reactor.ports.router import DeadLetter, DeadLetterAdmin, Router

__all__ = ["dead_letter_page", "dead_letter_view", "get_dead_letter", "queue_overview"]


def queue_overview(router: Router) -> dict[str, Any]:
    """The router's kind, its counts (``None`` where it cannot tell) and its capabilities."""
    stats: dict[str, Any] | None = None
    error = None
    if isinstance(router, QueueInspector):
        try:
            found = router.queue_stats()
        except ReactorError as exc:
            error = f"the router failed: {exc}"
        else:
            stats = {name: getattr(found, name) for name in
                     ("ready", "delayed", "in_flight", "dead_letters", "consumers")}
    return {
        "router": type(router).__name__,
        "stats": stats,
        "stats_error": error,
        "inspectable": isinstance(router, QueueInspector),
        "dead_letter_admin": isinstance(router, DeadLetterAdmin),
    }


def dead_letter_view(letter: DeadLetter) -> dict[str, Any]:
    """One dead letter as shown: its body masked, and the job's kind and run when readable."""
    body = mask_job_body(letter.body) if letter.body_encoding == "text" else letter.body
    job: dict[str, Any] | None = None
    if letter.body_encoding == "text":
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            found = parsed.get("payload")
            payload: dict[str, Any] = found if isinstance(found, dict) else {}
            run = payload.get("context_id") or payload.get("root_context_id")
            job = {"id": parsed.get("id"), "kind": parsed.get("kind"),
                   "attempt": parsed.get("attempt"),
                   "run_id": run if isinstance(run, str) else None}
    return {
        "id": letter.id or None,
        "at": letter.at,
        "reason": letter.reason,
        "body": body,
        "body_encoding": letter.body_encoding,
        "job": job,
    }


def dead_letter_page(router: Router, cursor: str | None, limit: int) -> dict[str, Any]:
    """One page of dead letters, oldest first.

    Returns:
        ``{"dead_letters": [...], "next_cursor": str | None, "pageable": bool}``.

    Raises:
        BadRequest: a cursor for a router that cannot page, or one it cannot place.
        BackendUnavailable: the router failed.
    """
    try:
        if isinstance(router, DeadLetterAdmin):
            letters = router.dead_letters(limit=limit, cursor=cursor)
        elif cursor is not None:
            raise BadRequest("this router cannot page its dead letters", code="bad_cursor")
        else:
            letters = router.dead_letters(limit=limit)
    except ValueError as exc:
        raise BadRequest(f"bad dead-letter cursor: {exc}", code="bad_cursor") from None
    except ReactorError as exc:
        raise BackendUnavailable(f"the router failed: {exc}") from exc
    pageable = isinstance(router, DeadLetterAdmin)
    more = pageable and len(letters) >= limit and bool(letters[-1].id)
    return {
        "dead_letters": [dead_letter_view(letter) for letter in letters],
        "next_cursor": letters[-1].id if more else None,
        "pageable": pageable,
    }


def get_dead_letter(router: Router, letter_id: str) -> dict[str, Any]:
    """One dead letter.

    Raises:
        BadRequest: the router has no dead-letter administration, or the id is malformed.
        NotFound: no such letter.
    """
    check_id(letter_id, "dead-letter id")
    if not isinstance(router, DeadLetterAdmin):
        raise BadRequest("this router has no dead-letter administration", code="unsupported")
    try:
        letter = router.get_dead_letter(letter_id)
    except ReactorError as exc:
        raise BackendUnavailable(f"the router failed: {exc}") from exc
    if letter is None:
        raise NotFound(f"no dead letter {letter_id!r}", code="dead_letter_not_found")
    return dead_letter_view(letter)
