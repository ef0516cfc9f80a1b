"""Obligations of the contexts concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_CONTEXTS = 'docs/protocol.md, "Contexts"'
_PAGES = 'docs/protocol.md, "Filtered pages"'
_CHECKPOINTS = 'docs/protocol.md, "Incremental checkpoints"'
_FAST = 'docs/protocol.md, "Optional fast paths"'

OBLIGATIONS: tuple[Obligation, ...] = (
    # ---- save, load, delete, retention ---------------------------------------------------
    Obligation(
        "O-contexts-1",
        "save(record) then load(context_id) returns an equal ContextRecord: ids, reactor, "
        "status, created_at/updated_at, parent_context_id, root_context_id, dispatched_child, "
        "base and segments exactly as saved, and the document as the very text saved (kept "
        "verbatim, escapes included, never parsed).",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-2",
        "load(context_id) of a run never saved returns None.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-3",
        "An unfenced save always writes: a later save of the same id replaces the earlier "
        "record, and load returns the last one written (last writer wins).",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-4",
        "delete(context_id) returns True when a record was deleted and False when none is "
        "stored; afterwards load returns None and scan no longer lists the run.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-5",
        "delete removes the record's segments with it: an append to the deleted run returns "
        "False, and a new save of the id loads with only its own segments.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-6",
        "Every save stamps the record's retention to context_ttl seconds, re-stamping it on "
        "each later save.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-7",
        "A context whose expiry has passed is absent for load and scan, whether or not the "
        "backend deleted it; a new save of its id writes it afresh.",
        'docs/protocol.md, "Conventions"',
    ),
    # ---- fenced saves ----------------------------------------------------------------------
    Obligation(
        "O-contexts-8",
        "save(record, fence=F) when the stored fencing token is greater than F.token raises "
        "StaleWriterError (a LockLost naming the run, the token and the stored token) and "
        "writes nothing: load, the scan index and the page entry keep the stored run.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-9",
        "save(record, fence=F) when the stored token is at most F.token writes the record "
        "and stores F.token as the record's fencing token (an equal token saves again; a "
        "lower fenced save is refused from then on).",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-10",
        "A record with no stored fencing token (only ever saved unfenced) accepts the first "
        "fenced save, whatever its token.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-11",
        "save(record) with fence=None always writes and leaves the stored fencing token as it "
        "was: a fenced save below it is still refused afterwards.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-12",
        "The fence comparison and the write of a fenced save are one atomic operation: of "
        "fenced saves racing on one run, the record of the highest token is the one stored, "
        "and a lower-token save is never written after it.",
        _CONTEXTS,
        checked="probabilistic",
        how="8 threads save one run with distinct tokens, "
        "each round on fresh keys, at least 20 rounds and up to 300 within 1 s, the "
        "threads released together with the thread switch interval cut to 1 µs "
        "(test_concurrency.race_rounds); a check-then-write store loses when a lower "
        "token's write lands after the highest one's check.",
    ),
    Obligation(
        "O-contexts-13",
        "A save of a document larger than the backend allows raises ContextTooLargeError and "
        "writes nothing.",
        _CONTEXTS,
    ),
    # ---- scan: the run sweeper's input -------------------------------------------------------
    Obligation(
        "O-contexts-14",
        "scan lists top-level runs; async_reactor children (dispatched_child) only when "
        "include_dispatched_children is true; map elements and composed children never, nor "
        "any record of another sub-store.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-15",
        "A scan row is the RunSummary of the stored run: its context_id, reactor, status, "
        "created_at, updated_at, parent_context_id and dispatched_child as saved.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-16",
        "scan's statuses filter applies before the limit: a page holds only runs of those "
        "statuses, and matching runs behind non-matching ones are listed within the limit.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-17",
        "A scan page holds at most limit rows.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-contexts-18",
        "scan follows the status of the latest write: a run saved with a new status is "
        "listed under that status only.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-19",
        "scan is keyset paged: each next_cursor differs from every earlier one of the walk, "
        "None ends it, and a run present for a whole pass (cursor=None to next_cursor=None) "
        "is listed at least once in it.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-20",
        "A scan cursor continues strictly after its position even when the run it points "
        "after was deleted, re-saved or changed status meanwhile: the walk skips no run "
        "present for the whole pass.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-contexts-21",
        "scan with a malformed cursor raises ValueError.",
        'docs/protocol.md, "Conventions"',
    ),
    # ---- page: listings -----------------------------------------------------------------------
    Obligation(
        "O-contexts-22",
        "page lists top-level runs only (never map elements or composed children), newest "
        "first by created_at then run id, each run once across the pages; the last page's "
        "next_cursor is None (a single page carries none).",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-23",
        "page with a malformed cursor raises ValueError, filtered or not.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-24",
        "page with a limit below 1 raises ValueError.",
        _CONTEXTS,
    ),
    Obligation(
        "O-contexts-25",
        "page(statuses=...) lists only the runs whose current status is one of them, newest "
        "first; a run whose status changed is listed under its new status only.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-26",
        "page(reactor=...) lists only the runs of that registered reactor.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-27",
        "page(created_from=, created_to=) lists the runs created in [created_from, "
        "created_to), newest first, starting just below created_to, and its next_cursor is "
        "None once the walk reaches a run created before created_from.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-28",
        "page's filters combine (a run must match every filter given), and a filtered page "
        "still never lists map elements.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-29",
        "A filtered page holds at most limit rows and may hold fewer, even none, and still "
        "carry a cursor; a walk that keeps its filters lists every matching run exactly once, "
        "newest first, also across an index longer than one call examines.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-30",
        "A page cursor is a position: it continues strictly after its entry whatever the "
        "filters of the next call.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-31",
        "page raises ValueError for statuses given as a bare string, a non-string reactor, "
        "or a created_from/created_to bound that is not a finite number.",
        _PAGES,
    ),
    Obligation(
        "O-contexts-32",
        "The listing never shows a run that load no longer returns: a run deleted or expired, "
        "finished or not, is not listed by page (a finished run's summary expires with its "
        "run; a summary whose run has expired or been deleted is dropped).",
        'docs/workers.md, "Run listings after a crash"',
    ),
    # ---- incremental checkpoints -------------------------------------------------------------
    Obligation(
        "O-contexts-33",
        "append(delta) to the record it extends (same base, exactly position - 1 segments) "
        "returns True, appends the segment after the earlier ones and sets status and "
        "updated_at; load returns the base document with its segments, oldest first.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-34",
        "The scan index and the page entry follow the status an append sets.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-35",
        "append returns False and writes nothing when the record is absent, has another base "
        "(a record written without one, base \"\", included) or does not hold exactly "
        "position - 1 segments.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-36",
        "append to an expired record returns False and writes nothing.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-37",
        "append(delta, fence=F) with a stale fencing token raises StaleWriterError and writes "
        "nothing; a fenced append that succeeds raises the stored token to F.token.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-38",
        "A successful append re-stamps the retention of the record and its segments to "
        "context_ttl.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-39",
        "save replaces everything: the stored base, document and segments become the saved "
        "record's, appends against the old base return False, and a record saved as load "
        "returned it is stored back exactly.",
        _CHECKPOINTS,
    ),
    Obligation(
        "O-contexts-40",
        "An append that would take the context (document and segments) past the backend's "
        "limit raises ContextTooLargeError and writes nothing.",
        'docs/protocol.md, "Capabilities"',
    ),
    Obligation(
        "O-contexts-41",
        "append is one atomic conditional write: of appends racing at one position exactly "
        "one returns True, and the record holds exactly that segment.",
        _CHECKPOINTS,
        checked="probabilistic",
        how="8 threads append at position 1 of one run, "
        "each round on fresh keys, at least 20 rounds and up to 300 within 1 s, the "
        "threads released together with the thread switch interval cut to 1 µs "
        "(test_concurrency.race_rounds); a read-then-write append loses when two "
        "racers both read the record before either writes.",
    ),
    # ---- the lock-with-record fast paths (LocksWithContexts), native or composed ---------------
    Obligation(
        "O-contexts-42",
        "save_taking(record, claim) on a free lock takes it for claim.owner with the claim's "
        "TTL, saves the record fenced with the granted token and returns that token (>= 1).",
        _FAST,
    ),
    Obligation(
        "O-contexts-43",
        "save_taking when another owner holds the lock returns 0, writes nothing and leaves "
        "the lock with its holder.",
        _FAST,
    ),
    Obligation(
        "O-contexts-44",
        "load_taking(context_id, claim) returns (0, None) when another owner holds the lock; "
        "otherwise it takes the lock with the claim's TTL and returns (token, the record), "
        "the record None when absent.",
        _FAST,
    ),
    Obligation(
        "O-contexts-45",
        "append_releasing(delta, fence) releases the lock only when it appended: an append "
        "that returns False leaves the lock held.",
        _FAST,
    ),
    Obligation(
        "O-contexts-46",
        "save_releasing(record, fence) saves the record, then releases the lock.",
        _FAST,
    ),
    Obligation(
        "O-contexts-47",
        "A *_releasing write with a stale fence raises StaleWriterError and releases nothing: "
        "the newer holder keeps its lock.",
        _FAST,
    ),
    Obligation(
        "O-contexts-48",
        "Given announce, a *_releasing write that wrote publishes the run's status on that "
        "channel after the release; a refused append publishes nothing.",
        _FAST,
    ),
    Obligation(
        "O-contexts-49",
        "A save_taking whose fenced save is refused (the record's stored fence is higher than "
        "the granted token) raises StaleWriterError, writes nothing and leaves the lock as it "
        "found it: taken and released again.",
        _FAST,
    ),
    Obligation(
        "O-contexts-50",
        "Whole saves of one run racing with the same base leave one of the saved records "
        "whole, document and segments (last writer wins): a save never drops a piece of a "
        "chain another save of that base wrote.",
        'docs/protocol.md, "Incremental checkpoints"',
        "probabilistic",
        "8 threads released together per round, at least 20 rounds with the thread switch "
        "interval cut to 1 µs (test_concurrency.race_rounds); a store that drops its base's "
        "pieces by prefix loses a concurrent writer's piece whenever its drop lands between "
        "the other's piece write and head write.",
    ),
)
