"""Unit tests of the rate-limit model (docs/protocol.md#rate-limits)."""

from __future__ import annotations

import pytest

from reactor.model.coordination import rate_limits
from reactor.model.coordination.rate_limits import RateCounters, WindowCounter, window_id
from reactor.model.records import RateDecision, RateWindow

MINUTE = RateWindow("minute", 60, 2)
HOUR = RateWindow("hour", 3600, 1)


def test_item_32_two_windows_all_or_none() -> None:
    now = 7200.0 + 30  # 30 s into a minute bucket, 30 s into an hour bucket
    s, first = rate_limits.hit(None, now, [MINUTE, HOUR])
    assert first == RateDecision(True, 0.0, None)
    s2, second = rate_limits.hit(s, now + 1, [MINUTE, HOUR])
    assert second.allowed is False
    assert second.window_index == 1  # 0-based: the hour window
    assert second.retry_after == pytest.approx(3600 - 31)
    assert s2 is s  # a denial charges nothing
    assert rate_limits.count(s2, now + 1, MINUTE) == 1
    assert rate_limits.count(s2, now + 1, HOUR) == 1


def test_counter_lives_twice_the_window_from_its_first_hit() -> None:
    s, _ = rate_limits.hit(None, 90.0, [MINUTE])
    assert s == RateCounters({window_id(MINUTE): WindowCounter(1, 1, 210.0)})
    s, _ = rate_limits.hit(s, 100.0, [MINUTE])
    assert s == RateCounters({window_id(MINUTE): WindowCounter(1, 2, 210.0)})
    assert rate_limits.expiry(s) == 210.0


def test_limit_per_bucket_and_rollover() -> None:
    s, a = rate_limits.hit(None, 60.0, [MINUTE])
    s, b = rate_limits.hit(s, 61.0, [MINUTE])
    s, c = rate_limits.hit(s, 119.5, [MINUTE])
    assert (a.allowed, b.allowed, c.allowed) == (True, True, False)
    assert c.window_index == 0
    assert c.retry_after == pytest.approx(0.5)
    s, d = rate_limits.hit(s, 120.0, [MINUTE])  # a new bucket
    assert d.allowed is True
    assert rate_limits.count(s, 120.0, MINUTE) == 1


def test_retry_after_is_at_least_the_minimum() -> None:
    window = RateWindow("w", 1.0, 0)
    _, decision = rate_limits.hit(None, 0.99999, [window])
    assert decision.retry_after == rate_limits.MIN_RETRY_AFTER
    _, decision = rate_limits.hit(None, 5.0, [window])
    assert decision.retry_after == pytest.approx(1.0)  # at a boundary a whole window remains


def test_first_denying_window_wins_in_order() -> None:
    full = RateWindow("a", 10, 0)
    also_full = RateWindow("b", 10, 0)
    _, decision = rate_limits.hit(None, 0.0, [RateWindow("ok", 10, 5), full, also_full])
    assert decision.window_index == 1


def test_other_windows_survive_and_expired_counters_are_dropped() -> None:
    second = RateWindow("second", 1, 10)
    s, _ = rate_limits.hit(None, 0.0, [second, MINUTE])
    s, _ = rate_limits.hit(s, 30.0, [MINUTE])  # `second`'s counter expired at 2.0
    assert s is not None and set(s.windows) == {window_id(MINUTE)}
    assert rate_limits.count(s, 30.0, MINUTE) == 2


def test_windows_are_identified_by_name_and_length() -> None:
    a = RateWindow("x", 60, 1)
    b = RateWindow("x", 30, 1)
    s, _ = rate_limits.hit(None, 0.0, [a])
    assert rate_limits.count(s, 0.0, b) == 0
    assert rate_limits.hit(s, 0.0, [b])[1].allowed is True


def test_no_windows_is_allowed_and_changes_nothing() -> None:
    assert rate_limits.hit(None, 0.0, []) == (None, RateDecision(True))


def test_count_of_unknown_or_stale_bucket_is_zero() -> None:
    assert rate_limits.count(None, 0.0, MINUTE) == 0
    s, _ = rate_limits.hit(None, 0.0, [MINUTE])
    assert rate_limits.count(s, 60.0, MINUTE) == 0
