"""Obligations of the rate_limits concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_RATE = 'docs/protocol.md, "Rate limits"'
_SKEW = 'docs/coordination.md, "Clock skew"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-rate_limits-1",
        "hit(key, windows) admits only when every window has room in its bucket: it returns "
        "RateDecision(allowed=True, retry_after=0.0, window_index=None) and charges every "
        "window once.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-2",
        "A denial charges no window (all or none): the windows listed before the denying one "
        "are not charged either.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-3",
        "A window admits exactly its limit of hits per bucket and denies every further hit in "
        "that bucket; a limit of 0 denies every hit.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-4",
        "A denial returns allowed=False with window_index the 0-based index of the first "
        "denying window in the order given.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-5",
        "A denial's retry_after is the seconds, on the caller's clock, until the bucket it was "
        "judged in ends ((bucket + 1) * seconds - now): positive and at most the window's "
        "length plus twice the clock skew.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-6",
        "retry_after is never below its minimum of 0.1 s, also for a hit just before its "
        "bucket ends.",
        _SKEW,
    ),
    Obligation(
        "O-rate_limits-7",
        "Windows are identified by name and length together: two windows of one length with "
        "different names are counted separately.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-8",
        "A window listed twice in one hit is charged twice.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-9",
        "count(key, window) returns the admissions charged in the window's current bucket, "
        "and 0 for a key or window never charged.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-10",
        "Rate-limit keys are independent: hits on one key never charge another.",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-11",
        "A window's counter lives at most twice the window's length (its record's TTL is "
        "positive and at most 2 x seconds).",
        _RATE,
    ),
    Obligation(
        "O-rate_limits-12",
        "A counter whose expiry passed reads as 0 and admits again.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-rate_limits-13",
        "A key's clock never goes back: with callers whose clocks disagree (within the "
        "budget) the decisions are those of one no-skew fixed-window limiter reading the "
        "newest time any caller has shown; a caller whose clock is behind is counted in the "
        "newest stored bucket and a denial that reached a newer bucket records it.",
        _SKEW,
    ),
    Obligation(
        "O-rate_limits-14",
        "hit is atomic: hits racing on one key admit exactly the limit in total, and count() "
        "then reads the limit.",
        _RATE,
        checked="probabilistic",
        how="test_concurrency runs one race: 16 threads released together by a barrier and a "
        "spin until all are awake, with the thread switch interval cut to 1 us, each hitting "
        "one key 3 times (48 hits for a limit of 10). A read-then-write hit over-admits when "
        "two of the 48 interleave between the read and the write, which most such races of "
        "an in-process adapter and nearly all of a network one do; one race per run, so a "
        "rarely interleaving adapter may pass a run.",
    ),
    Obligation(
        "O-rate_limits-15",
        "On any sequence of hit and count calls (windows of different names, lengths and "
        "limits) and expiries, the store answers what the pure model "
        "reactor.model.coordination.rate_limits answers.",
        'docs/writing-an-adapter.md, "Native fast paths"',
        checked="probabilistic",
        how="test_model draws 30 random sequences of up to 30 operations on 2 keys and 3 "
        "windows per run (hypothesis) and compares every answer with the model's (times "
        "within 1 s); a divergence that only a rare sequence reaches may escape one run.",
    ),
)
