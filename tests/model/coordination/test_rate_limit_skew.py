"""Rate limits under clock skew: a key's clock never goes back (docs/coordination.md#clock-skew).

Clients whose clocks differ share one rate-limit key. The pure model judges every window in its
*effective* bucket, ``max(own bucket, newest stored bucket)``, so a caller whose clock is behind
is counted in the newest bucket and never reopens an older one. Checked here:

* unit cases of the rule (denials, counts, ``retry_after``, the bucket a denial records);
* the deterministic scenario of the report: two clients at +0.9 s and -0.9 s alternating on a
  1-per-4 s limit for 40 s are decided exactly as one client on the fastest clock would be
  (the model before the rule admitted 70 of those 160 hits instead of 11);
* hypothesis properties: decisions equal a textbook fixed-window limiter driven by the running
  maximum of the callers' clocks (any skew), and with every clock within ``s < W / 2`` of true
  time each bucket admits at most ``limit``, buckets are never revisited, and an interval of
  true time of length ``L`` admits at most ``limit x (ceil((L + 2s) / W) + 1)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactor.model.coordination import rate_limits
from reactor.model.coordination.rate_limits import (
    MIN_RETRY_AFTER,
    RateCounters,
    WindowCounter,
    bucket_of,
    effective_bucket,
    window_id,
)
from reactor.model.records import RateDecision, RateWindow

FOUR = RateWindow("four", 4.0, 1)
START = 1_700_000_000.0  # a multiple of 4: the scenario starts on a bucket boundary


# -- a textbook fixed-window limiter: one clock, counts by bucket number, nothing expires -----


@dataclass
class FixedWindowOracle:
    """The no-skew reference: ``{(window id, bucket): admissions}`` on a single clock."""

    counts: Counter[tuple[str, int]] = field(default_factory=Counter)

    def hit(self, now: float, windows: Sequence[RateWindow]) -> tuple[bool, int | None]:
        """``(allowed, 0-based index of the first full window)`` at ``now``; charge if allowed."""
        keys = [(window_id(w), bucket_of(w, now)) for w in windows]
        for index, (window, key) in enumerate(zip(windows, keys, strict=True)):
            if self.counts[key] >= window.limit:
                return False, index
        for key in keys:
            self.counts[key] += 1
        return True, None

    def count(self, now: float, window: RateWindow) -> int:
        """Admissions in ``window``'s bucket at ``now``."""
        return self.counts[(window_id(window), bucket_of(window, now))]


def bucket_bound(length: float, skew: float, seconds: float) -> int:
    """Buckets of ``seconds`` that a closed interval of length ``length + 2 x skew`` can touch."""
    return math.ceil((length + 2 * skew) / seconds) + 1


# -- unit cases -------------------------------------------------------------------------------


def test_a_caller_behind_is_counted_in_the_newer_stored_bucket() -> None:
    window = RateWindow("w", 4.0, 2)
    s, fast = rate_limits.hit(None, 4.5, [window])  # bucket 1
    s, slow = rate_limits.hit(s, 3.5, [window])  # its own bucket 0 is older: counted in 1
    assert fast.allowed and slow.allowed
    assert s == RateCounters({window_id(window): WindowCounter(1, 2, 12.5)})
    assert rate_limits.count(s, 3.5, window) == 2
    assert effective_bucket(s, 3.5, window) == 1
    assert effective_bucket(s, 9.0, window) == 2  # a caller ahead moves on to its own bucket


def test_a_newer_stored_bucket_is_never_overwritten_by_an_older_one() -> None:
    s, first = rate_limits.hit(None, 4.5, [FOUR])
    s2, denied = rate_limits.hit(s, 3.5, [FOUR])
    assert first.allowed is True
    assert denied == RateDecision(False, pytest.approx(8.0 - 3.5), 0)  # type: ignore[arg-type]
    assert s2 is s  # nothing charged, nothing to record


def test_retry_after_counts_to_the_end_of_the_effective_bucket_on_the_callers_clock() -> None:
    assert rate_limits.retry_after(FOUR, 3.5) == pytest.approx(0.5)
    assert rate_limits.retry_after(FOUR, 3.5, 1) == pytest.approx(4.5)
    assert rate_limits.retry_after(FOUR, 7.99, 1) == MIN_RETRY_AFTER


def test_a_denial_records_the_newest_bucket_of_every_window() -> None:
    short, long = RateWindow("short", 10.0, 1), RateWindow("long", 100.0, 1)
    s, first = rate_limits.hit(None, 5.0, [short, long])
    s, fast = rate_limits.hit(s, 10.5, [short, long])  # short rolled over, long is full
    assert first.allowed is True
    assert (fast.allowed, fast.window_index) == (False, 1)
    assert s is not None
    assert s.windows[window_id(short)] == WindowCounter(1, 0, 30.5)  # empty, but remembered
    assert rate_limits.count(s, 10.5, short) == 0
    _, slow = rate_limits.hit(s, 9.0, [short, long])
    # as on the fastest clock (10.5): short is free in bucket 1, long is the full one
    assert (slow.allowed, slow.window_index) == (False, 1)
    assert slow.retry_after == pytest.approx(100.0 - 9.0)


def test_a_denial_that_reaches_no_new_bucket_writes_nothing() -> None:
    s, _ = rate_limits.hit(None, 1.0, [FOUR])
    again, denied = rate_limits.hit(s, 2.0, [FOUR])
    assert denied.allowed is False and again is s


def test_a_denial_records_an_empty_counter_of_an_uncharged_window() -> None:
    closed = RateWindow("closed", 4.0, 0)
    s, denied = rate_limits.hit(None, 1.0, [closed])
    assert denied.allowed is False
    assert s == RateCounters({window_id(closed): WindowCounter(0, 0, 9.0)})
    assert rate_limits.hit(s, 2.0, [closed])[0] is s


def test_a_lapsed_newer_bucket_is_ignored() -> None:
    s = RateCounters({window_id(FOUR): WindowCounter(5, 1, 10.0)})  # expired at 10
    assert rate_limits.count(s, 10.0, FOUR) == 0
    s2, decision = rate_limits.hit(s, 10.0, [FOUR])
    assert decision.allowed is True
    assert s2 == RateCounters({window_id(FOUR): WindowCounter(2, 1, 18.0)})


def test_the_bound_is_reached() -> None:
    """3 admissions in 2.3 s of true time at +-0.9 s skew: ceil((2.3 + 1.8) / 4) + 1 = 3."""
    skew = 0.9
    hits = [(4.85, 4.85 - skew), (4.95, 4.95 + skew), (7.15, 7.15 + skew)]
    state: RateCounters | None = None
    for _true, now in hits:
        state, decision = rate_limits.hit(state, now, [FOUR])
        assert decision.allowed is True
    length = hits[-1][0] - hits[0][0]
    assert bucket_bound(length, skew, FOUR.seconds) == 3
    assert bucket_bound(length, 0.0, FOUR.seconds) == 2  # what one true clock could admit


# -- the deterministic scenario ---------------------------------------------------------------


def alternate(
    offsets: Sequence[float], step: float, duration: float, start: float = START
) -> list[tuple[float, float]]:
    """``(true time, caller's reading)`` of hits every ``step`` s, clients taking turns."""
    hits = []
    k = 0
    while k * step < duration:
        true = start + k * step
        hits.append((true, true + offsets[k % len(offsets)]))
        k += 1
    return hits


def fastest_clock_decisions(
    readings: Sequence[float], windows: Sequence[RateWindow]
) -> list[tuple[bool, int | None]]:
    """The no-skew decisions on the running maximum of the readings (the fastest clock)."""
    oracle, fastest = FixedWindowOracle(), -math.inf
    out = []
    for now in readings:
        fastest = max(fastest, now)
        out.append(oracle.hit(fastest, windows))
    return out


def test_two_skewed_clients_are_decided_as_on_the_fastest_clock() -> None:
    skew, duration = 0.9, 40.0
    hits = alternate([+skew, -skew], 0.25, duration)
    state: RateCounters | None = None
    decisions = []
    for _true, now in hits:
        state, decision = rate_limits.hit(state, now, [FOUR])
        decisions.append(decision)
        if not decision.allowed:
            assert 0 < decision.retry_after <= FOUR.seconds + 2 * skew
    got = [(d.allowed, d.window_index) for d in decisions]
    assert got == fastest_clock_decisions([now for _t, now in hits], [FOUR])
    admitted = sum(d.allowed for d in decisions)
    no_skew = sum(
        allowed for allowed, _ in fastest_clock_decisions([t for t, _now in hits], [FOUR])
    )
    span = hits[-1][0] - hits[0][0]
    assert no_skew == 10  # ten 4 s buckets in 40 s of true time
    assert admitted == 11  # the fastest clock reaches into an eleventh bucket
    assert admitted <= FOUR.limit * bucket_bound(span, skew, FOUR.seconds) == 12


# -- properties ---------------------------------------------------------------------------------

WINDOWS = st.lists(
    st.builds(
        RateWindow,
        name=st.sampled_from(["x", "y", "z"]),
        seconds=st.sampled_from([1.0, 2.5, 4.0, 10.0]),
        limit=st.integers(min_value=0, max_value=3),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda w: (w.name, w.seconds),
)
STEPS = st.lists(
    st.tuples(st.integers(min_value=0, max_value=2), st.floats(min_value=0.0, max_value=3.0)),
    max_size=60,
)


@given(
    WINDOWS,
    st.lists(st.floats(min_value=-30.0, max_value=30.0), min_size=3, max_size=3),
    STEPS,
)
def test_decisions_equal_the_no_skew_decisions_on_the_fastest_clock(
    windows: list[RateWindow], offsets: list[float], steps: list[tuple[int, float]]
) -> None:
    """Any skew, one window list per key: the model is the oracle on ``max(readings so far)``."""
    state: RateCounters | None = None
    oracle, fastest, true = FixedWindowOracle(), -math.inf, START
    for client, step in steps:
        true += step
        now = true + offsets[client]
        for window in windows:  # the read-only count already sees the newest bucket
            assert rate_limits.count(state, now, window) == oracle.count(max(fastest, now), window)
        fastest = max(fastest, now)
        state, decision = rate_limits.hit(state, now, windows)
        allowed, index = oracle.hit(fastest, windows)
        assert (decision.allowed, decision.window_index) == (allowed, index)
        if index is not None:
            bucket = bucket_of(windows[index], fastest)
            expected = max((bucket + 1) * windows[index].seconds - now, MIN_RETRY_AFTER)
            assert decision.retry_after == pytest.approx(expected)


@given(
    WINDOWS,
    st.floats(min_value=0.0, max_value=0.499),
    st.lists(st.floats(min_value=-1.0, max_value=1.0), min_size=3, max_size=3),
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2),
            st.floats(min_value=0.0, max_value=3.0),
            st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=3),
        ),
        max_size=60,
    ),
)
def test_with_skew_below_half_a_window_the_bound_holds(
    windows: list[RateWindow],
    fraction: float,
    unit_offsets: list[float],
    steps: list[tuple[int, float, list[int]]],
) -> None:
    """Clocks within ``s < W / 2`` of true time, any window subsets per hit: the exact bound."""
    skew = fraction * min(w.seconds for w in windows)
    offsets = [u * skew for u in unit_offsets]
    state: RateCounters | None = None
    true = START
    admitted: dict[str, list[tuple[float, int]]] = {window_id(w): [] for w in windows}
    for client, step, picks in steps:
        true += step
        now = true + offsets[client]
        chosen = list(dict.fromkeys(windows[i % len(windows)] for i in picks))
        buckets = [effective_bucket(state, now, w) for w in chosen]
        state, decision = rate_limits.hit(state, now, chosen)
        if decision.allowed:
            for window, bucket in zip(chosen, buckets, strict=True):
                assert bucket_of(window, true - skew) <= bucket <= bucket_of(window, true + skew)
                admitted[window_id(window)].append((true, bucket))
    for window in windows:
        hits = admitted[window_id(window)]
        buckets = [b for _t, b in hits]
        assert buckets == sorted(buckets), "a bucket was revisited"
        assert all(n <= window.limit for n in Counter(buckets).values())
        for i in range(len(hits)):  # every interval's admissions: a run hits[i..j]
            for j in range(i, len(hits)):
                length = hits[j][0] - hits[i][0]
                assert j - i + 1 <= window.limit * bucket_bound(length, skew, window.seconds)
