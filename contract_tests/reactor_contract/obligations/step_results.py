"""Obligations of the step_results concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_STEPS = 'docs/protocol.md, "Step results"'
_SCANS = 'docs/protocol.md, "Conventions"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-step_results-1",
        "put(record) then get(context_id, step_name) returns an equal StepResultRecord: "
        "status, outcome, root_context_id, reactor, dispatched_at, updated_at, parked_until, "
        "waiting, contention_attempts and data exactly as written (timestamps at full float "
        "precision, data's JSON values unchanged).",
        _STEPS,
    ),
    Obligation(
        "O-step_results-2",
        "put is last writer wins and rewrites the whole record: get returns the last record "
        "put, with no field kept or merged from an earlier one.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-3",
        "Records are keyed by the owning context id and the step name: a record of one "
        "(context, step) is never returned for another context or another step.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-4",
        "get of a record never put returns None.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-5",
        "Every put stamps the record's retention to context_ttl seconds, re-stamping it on "
        "each later put.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-6",
        "A record whose expiry has passed is absent for get and for scan, with or without a "
        "status filter.",
        _SCANS,
    ),
    Obligation(
        "O-step_results-7",
        "scan lists the stored records, each row carrying every field of the record exactly "
        "as get returns it (no projection).",
        _STEPS,
    ),
    Obligation(
        "O-step_results-8",
        "scan's status filter applies before the limit, and a page holds at most limit rows.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-9",
        "scan follows the status of the latest put: a record rewritten with a new status is "
        "listed under that status only.",
        _STEPS,
    ),
    Obligation(
        "O-step_results-10",
        "scan is keyset paged: each next_cursor differs from every earlier one of the walk, "
        "None ends it, and a record present for a whole pass (cursor=None to "
        "next_cursor=None) is listed in it.",
        _SCANS,
    ),
    Obligation(
        "O-step_results-11",
        "Only a next_cursor of None ends a scan: a page short of its limit (expired records "
        "skipped, even an empty page) still carries a cursor while live records follow.",
        _SCANS,
    ),
    Obligation(
        "O-step_results-12",
        "A scan cursor continues strictly after its position even when the record it points "
        "after was rewritten meanwhile (a later expiry, a new status): the walk skips no "
        "record present for the whole pass.",
        'docs/workers.md, "Sweep cursors and dispatch leases"',
    ),
    Obligation(
        "O-step_results-13",
        "scan with a malformed cursor raises ValueError.",
        _SCANS,
    ),
)
