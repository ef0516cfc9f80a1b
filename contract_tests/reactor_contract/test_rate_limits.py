"""Multi-window fixed-window rate limits (docs/protocol.md#rate-limits).

Windows here are long (hours, or 10^9 s) so a bucket boundary never falls inside a test: the
outcome never depends on sub-second timing. Where a boundary could matter the test re-runs
itself once when the bucket changed under it.

The clock-skew test (docs/coordination.md#clock-skew) runs two clients whose clocks disagree on
one backend, through the optional :class:`reactor_contract.probe.ClockProbe` capability and an
injected manual clock (no sleeping). It skips, with a reason in the conformance table, on a
server clock (nothing to skew) or when the probe cannot inject a clock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from reactor.memory.clock import ManualClock
from reactor.model.coordination.rate_limits import MIN_RETRY_AFTER
from reactor.model.records import RateDecision, RateWindow
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, teach, uid
from reactor_contract.plugin import SERVER_CLOCK
from reactor_contract.probe import ClockProbe, Probe

__all__ = ["SERVER_CLOCK", "UNSKEWABLE", "RateLimitsContract", "fastest_clock_decisions"]

#: A window so long that ``floor(now / seconds)`` is constant for decades.
EON = 1e9
#: Skip reason listed in the conformance table as a gap (:data:`SERVER_CLOCK`, from the plugin,
#: is not one: a server clock is stronger than the skew test's premise).
UNSKEWABLE = "capability: the probe cannot inject a clock (no ClockProbe.with_clock result)"
#: The skew scenario: 1 admission per 4 s, clients at +0.9 s and -0.9 s (inside the 1 s budget)
#: taking turns every 0.25 s for 40 s of true time.
SKEW = 0.9
SKEW_WINDOW = RateWindow("four", 4.0, 1)
SKEW_STEP, SKEW_HITS = 0.25, 160


def _bucket(storage: Storage, seconds: float) -> int:
    return math.floor(storage.now() / seconds)


def fastest_clock_decisions(
    readings: Sequence[float], window: RateWindow
) -> list[tuple[bool, int | None]]:
    """The no-skew decisions of a textbook fixed-window limiter on the fastest clock.

    Args:
        readings: the callers' clocks at each hit, epoch seconds, in the order of the hits.
        window: the one window every hit names.

    Returns:
        ``(allowed, window_index)`` per hit, judged at the running maximum of ``readings``
        (the newest time any caller has seen), counting admissions per bucket number.
    """
    counts: Counter[int] = Counter()
    fastest = -math.inf
    out: list[tuple[bool, int | None]] = []
    for now in readings:
        fastest = max(fastest, now)
        bucket = math.floor(fastest / window.seconds)
        if counts[bucket] >= window.limit:
            out.append((False, 0))
        else:
            counts[bucket] += 1
            out.append((True, None))
    return out


def _clocked(storage: Storage, probe: Probe, clock: Callable[[], float]) -> Storage:
    """A second storage on ``storage``'s records judged by ``clock``; skips when impossible."""
    if storage.capabilities.clock == "server":
        pytest.skip(SERVER_CLOCK)
    built = probe.with_clock(clock) if isinstance(probe, ClockProbe) else None
    if built is None:
        pytest.skip(UNSKEWABLE)
    return built


class RateLimitsContract:
    """:class:`reactor.ports.RateLimitStore` behaviour every adapter must show."""

    reactor_concern = "rate_limits"

    @pytest.mark.obligations(
        "O-rate_limits-1",
        "O-rate_limits-2",
        "O-rate_limits-4",
        "O-rate_limits-9",
    )
    def test_all_windows_or_none(self, storage: Storage) -> None:
        for _attempt in range(2):
            start = _bucket(storage, HOUR)
            key = uid("rate")
            windows = [RateWindow("hour", HOUR, 2), RateWindow("day", 24 * HOUR, 1)]
            first = storage.rate_limits.hit(key, windows)
            second = storage.rate_limits.hit(key, windows)
            hour_count = storage.rate_limits.count(key, windows[0])
            day_count = storage.rate_limits.count(key, windows[1])
            if _bucket(storage, HOUR) != start:
                continue  # an hour boundary passed mid-test: run it again
            assert first == RateDecision(allowed=True, retry_after=0.0, window_index=None)
            assert second.allowed is False and second.window_index == 1
            assert 0 < second.retry_after <= 24 * HOUR
            assert hour_count == 1, "a denial must not charge the windows before the denier"
            assert day_count == 1
            return
        pytest.fail("two hour boundaries passed during one test")

    @pytest.mark.obligations("O-rate_limits-3", "O-rate_limits-4", "O-rate_limits-9")
    def test_exactly_limit_admissions_per_bucket(self, storage: Storage) -> None:
        key = uid("rate")
        window = RateWindow("eon", EON, 3)
        decisions = [storage.rate_limits.hit(key, [window]) for _ in range(5)]
        assert [d.allowed for d in decisions] == [True, True, True, False, False]
        assert all(d.window_index == 0 for d in decisions[3:])
        assert all(0 < d.retry_after <= EON for d in decisions[3:])
        assert storage.rate_limits.count(key, window) == 3

    @pytest.mark.obligations("O-rate_limits-5")
    def test_retry_after_points_at_the_bucket_rollover(self, storage: Storage) -> None:
        key = uid("rate")
        window = RateWindow("eon", EON, 0)
        now = storage.now()
        decision = storage.rate_limits.hit(key, [window])
        expected = EON - (now % EON)
        assert decision.allowed is False and decision.window_index == 0
        assert expected - 5 <= decision.retry_after <= expected + 1

    @pytest.mark.obligations("O-rate_limits-3", "O-rate_limits-2", "O-rate_limits-4")
    def test_a_zero_limit_denies_without_charging(self, storage: Storage) -> None:
        key = uid("rate")
        open_window, closed = RateWindow("a", EON, 10), RateWindow("b", EON, 0)
        decision = storage.rate_limits.hit(key, [open_window, closed])
        assert decision.allowed is False and decision.window_index == 1
        assert storage.rate_limits.count(key, open_window) == 0

    @pytest.mark.obligations("O-rate_limits-4")
    def test_first_denying_window_is_reported(self, storage: Storage) -> None:
        key = uid("rate")
        windows = [RateWindow("a", EON, 1), RateWindow("b", 2 * EON, 1)]
        storage.rate_limits.hit(key, windows)
        assert storage.rate_limits.hit(key, windows).window_index == 0

    @pytest.mark.obligations("O-rate_limits-7", "O-rate_limits-9")
    def test_windows_are_counted_separately_by_name_and_length(self, storage: Storage) -> None:
        key = uid("rate")
        a, b = RateWindow("a", EON, 5), RateWindow("b", EON, 5)
        storage.rate_limits.hit(key, [a])
        storage.rate_limits.hit(key, [a])
        storage.rate_limits.hit(key, [b])
        assert storage.rate_limits.count(key, a) == 2
        assert storage.rate_limits.count(key, b) == 1

    @pytest.mark.obligations("O-rate_limits-10", "O-rate_limits-9")
    def test_keys_are_independent(self, storage: Storage) -> None:
        window = RateWindow("eon", EON, 1)
        a, b = uid("rate"), uid("rate")
        assert storage.rate_limits.hit(a, [window]).allowed is True
        assert storage.rate_limits.hit(b, [window]).allowed is True
        assert storage.rate_limits.count(uid("rate"), window) == 0

    @pytest.mark.obligations("O-rate_limits-11")
    def test_counters_live_at_most_twice_their_window(self, storage: Storage, probe: Probe) -> None:
        key = uid("rate")
        storage.rate_limits.hit(key, [RateWindow("hour", HOUR, 5)])
        ttl = probe.ttl("rate_limit", key)
        assert ttl is not None and 0 < ttl <= 2 * HOUR + 1

    @pytest.mark.obligations("O-rate_limits-13", "O-rate_limits-5")
    def test_skewed_clients_are_decided_as_on_the_fastest_clock(
        self, storage: Storage, probe: Probe
    ) -> None:
        # A manual "true" clock from the next 4 s boundary of the real time (backends that
        # garbage-collect by the wall clock, mongomock, must see current expiries).
        start = (math.floor(storage.now() / SKEW_WINDOW.seconds) + 1) * SKEW_WINDOW.seconds
        true_times = [start + k * SKEW_STEP for k in range(SKEW_HITS)]
        true = ManualClock(start)
        fast = _clocked(storage, probe, lambda: true() + SKEW)
        try:
            slow = _clocked(storage, probe, lambda: true() - SKEW)
            try:
                key = uid("rate")
                readings, decisions = [], []
                for k, at in enumerate(true_times):
                    true.set(at)
                    client, offset = (fast, SKEW) if k % 2 == 0 else (slow, -SKEW)
                    readings.append(true() + offset)
                    decisions.append(client.rate_limits.hit(key, [SKEW_WINDOW]))
                late = slow.rate_limits.count(key, SKEW_WINDOW)
            finally:
                slow.close()
        finally:
            fast.close()
        expected = fastest_clock_decisions(readings, SKEW_WINDOW)
        assert [(d.allowed, d.window_index) for d in decisions] == expected
        admitted = sum(d.allowed for d in decisions)
        no_skew = sum(a for a, _ in fastest_clock_decisions(true_times, SKEW_WINDOW))
        span = true_times[-1] - true_times[0]
        bound = SKEW_WINDOW.limit * (math.ceil((span + 2 * SKEW) / SKEW_WINDOW.seconds) + 1)
        assert (no_skew, admitted, bound) == (10, 11, 12)
        assert all(
            0 < d.retry_after <= SKEW_WINDOW.seconds + 2 * SKEW for d in decisions if not d.allowed
        )
        assert late == 1, "the slow client must read the fast client's newer bucket"

    @pytest.mark.obligations("O-rate_limits-12")
    def test_expired_counters_admit_again(self, storage: Storage, probe: Probe) -> None:
        key = uid("rate")
        window = RateWindow("eon", EON, 1)
        storage.rate_limits.hit(key, [window])
        assert storage.rate_limits.hit(key, [window]).allowed is False
        probe.expire("rate_limit", key)
        assert storage.rate_limits.count(key, window) == 0
        assert storage.rate_limits.hit(key, [window]).allowed is True

    @pytest.mark.obligations("O-rate_limits-8")
    def test_a_window_listed_twice_is_charged_twice(self, storage: Storage) -> None:
        key = uid("rate")
        window = RateWindow("eon", EON, 5)
        assert storage.rate_limits.hit(key, [window, window]).allowed is True
        charged = storage.rate_limits.count(key, window)
        assert charged == 2, teach(
            "rate_limits",
            "a window listed twice in one hit is charged twice (windows are identified by "
            f"name and length; got a count of {charged} after one hit)",
            "windows collected into a set or a dict before charging, so a repeated window "
            "is charged once",
            'docs/protocol.md, "Rate limits"',
        )

    @pytest.mark.obligations("O-rate_limits-6")
    def test_retry_after_is_never_below_its_minimum(self, storage: Storage, probe: Probe) -> None:
        """A denial 10 ms before its bucket ends says to retry in MIN_RETRY_AFTER (0.1 s), not
        in 10 ms; judged through an injected clock (docs/coordination.md#clock-skew), so it
        skips on a server clock."""
        window = RateWindow("four", 4.0, 0)
        end = (math.floor(storage.now() / window.seconds) + 2) * window.seconds
        clocked = _clocked(storage, probe, ManualClock(end - 0.01))
        try:
            decision = clocked.rate_limits.hit(uid("rate"), [window])
        finally:
            clocked.close()
        assert decision.allowed is False and decision.window_index == 0
        assert abs(decision.retry_after - MIN_RETRY_AFTER) < 1e-3, teach(
            "rate_limits",
            f"retry_after is at least {MIN_RETRY_AFTER} s, also 10 ms before the bucket ends "
            f"(got {decision.retry_after})",
            "retry_after computed as the time left in the bucket without the minimum",
            'docs/coordination.md, "Clock skew"',
        )


class TestRateLimits(RateLimitsContract):
    """The rate-limits contract against ``--reactor-storage``."""
