"""Obligations of the map_rollbacks concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_ROLLBACKS = 'docs/protocol.md, "Map rollbacks"'
_JOBS = 'docs/protocol.md, "Rollback jobs: lock before read"'
_CONVENTIONS = 'docs/protocol.md, "Conventions"'
_RACE = (
    "8 threads released together by a barrier (every racer spinning until all are awake) with "
    "the thread switch interval cut to 1 µs, on a fresh rollback each round, at least 20 "
    "rounds and up to 300 within a 1 s budget (reactor_contract.test_concurrency.race_rounds)"
)

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-map_rollbacks-1",
        "start(metadata) of a map that never rolled back returns (True, metadata) and stores "
        "it: metadata(map_id) reads back an equal MapRollbackMetadata (total an int).",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-2",
        "start(metadata) of a rollback that exists returns (False, the first caller's "
        "metadata) and changes nothing.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-3",
        "start is atomic: of concurrent starts of one rollback exactly one returns True, and "
        "every caller reads the winner's metadata.",
        _ROLLBACKS,
        checked="probabilistic",
        how=_RACE + "; each racer starts the rollback with its own total",
    ),
    Obligation(
        "O-map_rollbacks-4",
        "metadata(map_id) of a map that never rolled back returns None.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-5",
        "claim_positions(map_id, count) adds count to the claim offset and returns "
        "range(stop - count, min(stop, total)) with stop the offset after the addition; the "
        "stored offset is not clipped to total (four claims of 2 against a total of 5 return "
        "0..2, 2..4, 4..5 and an empty range, and the offset then reads 8).",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-6",
        "offset(map_id) returns the claim offset, 0 when no position was ever claimed.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-7",
        "claim_positions is atomic: concurrent claims never return one position twice, and "
        "together they claim every position once (8 claims of 2 of a total of 16 leave the "
        "offset at 16).",
        _ROLLBACKS,
        checked="probabilistic",
        how=_RACE + "; each racer claims 2 positions of a rollback of 16",
    ),
    Obligation(
        "O-map_rollbacks-8",
        "put_outcome(map_id, position, outcome) is first writer wins per position: True for "
        "the first outcome, False for every later one, which changes nothing (the stored "
        "outcome, the summary counts and the indexes seen stay as they were).",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-9",
        "put_outcome is atomic: of concurrent outcomes for one position exactly one returns "
        "True, it is the one stored, and only its index is marked seen and counted.",
        _ROLLBACKS,
        checked="probabilistic",
        how=_RACE + "; each racer stores an outcome naming its own index (plus one 8-thread "
        "barrier race in test_losing_outcomes_never_count_twice)",
    ),
    Obligation(
        "O-map_rollbacks-10",
        "outcome(map_id, position) returns the stored outcome, None for a position without "
        "one; a job checking whether its position is settled reads the outcome any earlier "
        "put_outcome stored.",
        _JOBS,
    ),
    Obligation(
        "O-map_rollbacks-11",
        "Every outcome kind (undone, failed, not_needed, element_in_flight, "
        "context_unavailable) round-trips with its index (None kept as None) and its failures "
        "text verbatim.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-12",
        "count_outcomes(map_id) returns how many positions are settled (0 for a map that never "
        "rolled back) and outcome_positions(map_id) the settled positions in ascending numeric "
        "order.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-13",
        "outcomes(map_id, page_size=) yields every stored (position, outcome) once, in numeric "
        "position order, whatever the page size ([] for a map that never rolled back).",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-14",
        "indexes_seen(map_id, indexes) returns, aligned with indexes, whether a stored outcome "
        "named each element index; an outcome whose index is None marks none ([] for no "
        "indexes).",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-15",
        "handed_off(map_id) is False until mark_handed_off(map_id) is called and True after; "
        "mark_handed_off is idempotent.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-16",
        "claim_signal(map_id) returns True to exactly one caller ever and False to every later "
        "call.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-17",
        "claim_signal is atomic: of concurrent callers exactly one gets True.",
        _ROLLBACKS,
        checked="probabilistic",
        how=_RACE,
    ),
    Obligation(
        "O-map_rollbacks-18",
        "claim_signal takes the rollback out of scan for good: a later start (the owner "
        "re-entering) returns (False, metadata) and does not list it again.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-19",
        "summary(map_id) returns the total, the settled count, outstanding = total - settled "
        "and failed = the outcomes of FAILED_ROLLBACK_OUTCOMES (failed, element_in_flight, "
        "context_unavailable; never undone or not_needed); None when the map never rolled back.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-20",
        "scan() lists the metadata of every rollback from start until claim_signal, never a "
        "plain map, and at most limit rows a page.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-21",
        "The rollback scan is keyset paged: following next_cursor until None lists every "
        "started rollback exactly once.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-map_rollbacks-22",
        "Every rollback write (start, claim_positions, put_outcome...) stamps what it "
        "writes with the context_ttl retention, re-stamping an older record.",
        _ROLLBACKS,
    ),
    Obligation(
        "O-map_rollbacks-23",
        "An expired rollback reads as absent: metadata and summary None, no outcomes, no "
        "index seen, not handed off, not in scan, and start succeeds again.",
        _CONVENTIONS,
    ),
)
