"""When a schedule ticks: cron in a time zone across daylight-saving changes, periods, jitter
(docs/schedules.md, "When a schedule ticks")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from reactor.schedules.ticks import TickRule, jitter_for, tick_text

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def _ticks(rule: TickRule, start: datetime, count: int) -> list[str]:
    moment = start.timestamp()
    out = []
    for _ in range(count):
        tick = rule.after(moment)
        assert tick is not None
        out.append(tick_text(tick))
        moment = tick
    return out


def test_a_daily_0230_in_paris_runs_once_at_0300_on_the_spring_forward_day() -> None:
    # 2030-03-31: 02:00 CET jumps to 03:00 CEST, 02:30 does not exist there (Debian cron's
    # rule, the library's: the first minute after the gap)
    rule = TickRule("30 2 * * *", None, "Europe/Paris")
    assert _ticks(rule, datetime(2030, 3, 29, 12, tzinfo=PARIS), 3) == [
        "2030-03-30T01:30:00Z",   # 02:30 CET
        "2030-03-31T01:00:00Z",   # 03:00 CEST: once, at the end of the gap
        "2030-04-01T00:30:00Z",   # 02:30 CEST
    ]


def test_a_daily_0230_in_paris_runs_once_on_the_fall_back_day() -> None:
    # 2030-10-27: 03:00 CEST falls back to 02:00 CET, 02:30 happens twice: one run, the first
    rule = TickRule("30 2 * * *", None, "Europe/Paris")
    ticks = _ticks(rule, datetime(2030, 10, 26, 12, tzinfo=PARIS), 3)
    assert ticks == ["2030-10-27T00:30:00Z", "2030-10-28T01:30:00Z", "2030-10-29T01:30:00Z"]


def test_new_york_spring_forward_and_fall_back() -> None:
    rule = TickRule("30 2 * * *", None, "America/New_York")
    # 2030-03-10: 02:00 EST -> 03:00 EDT
    assert _ticks(rule, datetime(2030, 3, 9, 12, tzinfo=NEW_YORK), 2) == [
        "2030-03-10T07:00:00Z", "2030-03-11T06:30:00Z",
    ]
    # 2030-11-03: 02:00 EDT -> 01:00 EST; 02:30 exists once (EST)
    assert _ticks(rule, datetime(2030, 11, 2, 12, tzinfo=NEW_YORK), 2) == [
        "2030-11-03T07:30:00Z", "2030-11-04T07:30:00Z",
    ]


def test_an_hourly_cron_follows_real_time_across_both_changes() -> None:
    rule = TickRule("0 * * * *", None, "Europe/Paris")
    # the skipped hour has no tick: 01:00 CET then 03:00 CEST, one hour apart in UTC
    assert _ticks(rule, datetime(2030, 3, 31, 0, 30, tzinfo=PARIS), 3) == [
        "2030-03-31T00:00:00Z", "2030-03-31T01:00:00Z", "2030-03-31T02:00:00Z",
    ]
    # the repeated hour ticks twice, an hour apart: 02:00 CEST and 02:00 CET
    assert _ticks(rule, datetime(2030, 10, 27, 0, 30, tzinfo=PARIS), 4) == [
        "2030-10-26T23:00:00Z", "2030-10-27T00:00:00Z", "2030-10-27T01:00:00Z",
        "2030-10-27T02:00:00Z",
    ]


def test_ticks_are_strictly_increasing_in_utc_across_a_year_of_paris_half_hours() -> None:
    rule = TickRule("*/30 * * * *", None, "Europe/Paris")
    moment = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    end = datetime(2031, 1, 1, tzinfo=UTC).timestamp()
    count = 0
    while True:
        tick = rule.after(moment)
        assert tick is not None and tick > moment
        if tick >= end:
            break
        assert tick - moment == 1800  # real time: every half hour, the DST days included
        moment, count = tick, count + 1
    assert count == 365 * 48 - 1


def test_before_and_at_or_before_walk_back_over_the_dst_days() -> None:
    rule = TickRule("30 2 * * *", None, "Europe/Paris")
    after_spring = datetime(2030, 4, 1, 12, tzinfo=PARIS).timestamp()
    latest = rule.at_or_before(after_spring)
    assert latest is not None and tick_text(latest) == "2030-04-01T00:30:00Z"
    assert rule.at_or_before(latest) == latest
    earlier = rule.before(latest)
    assert earlier is not None and tick_text(earlier) == "2030-03-31T01:00:00Z"
    after_fall = datetime(2030, 10, 28, 12, tzinfo=PARIS).timestamp()
    walked = []
    tick = rule.at_or_before(after_fall)
    for _ in range(3):
        assert tick is not None
        walked.append(tick_text(tick))
        tick = rule.before(tick)
    assert walked == ["2030-10-28T01:30:00Z", "2030-10-27T00:30:00Z", "2030-10-26T00:30:00Z"]


def test_a_period_ticks_on_its_multiples_since_the_epoch() -> None:
    rule = TickRule(None, 60, "UTC")
    assert rule.after(120.0) == 180.0
    assert rule.after(150.5) == 180.0
    assert rule.at_or_before(180.0) == 180.0
    assert rule.at_or_before(179.9) == 120.0
    assert rule.before(180.0) == 120.0
    assert TickRule.period(timedelta(hours=1)) == 3600


def test_jitter_is_deterministic_in_range_and_spreads_ticks() -> None:
    values = [jitter_for("nightly", float(t), 30.0) for t in range(0, 60_000, 60)]
    assert all(0.0 <= v < 30.0 for v in values)
    assert values == [jitter_for("nightly", float(t), 30.0) for t in range(0, 60_000, 60)]
    assert len({round(v, 6) for v in values}) > 900  # spread, not one value
    assert sum(values) / len(values) == pytest.approx(15.0, abs=1.5)
    assert jitter_for("nightly", 60.0, 30.0) != jitter_for("weekly", 60.0, 30.0)
    assert jitter_for("nightly", 60.0, 0.0) == 0.0


def test_tick_text_is_iso_utc() -> None:
    assert tick_text(0.0) == "1970-01-01T00:00:00Z"
    assert tick_text(1.5) == "1970-01-01T00:00:01.500000Z"
