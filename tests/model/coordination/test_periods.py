"""Unit tests of periods: first-wins markers and calendar buckets (docs/protocol.md#periods)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reactor.model.coordination import periods
from reactor.model.records import PeriodMarker


def _ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_item_33_mark_then_marker_names_the_claimer() -> None:
    assert periods.marker(None, 0.0) is None
    s, ok = periods.mark(None, 10.0, 120, "ctx-1")
    assert ok is True
    assert periods.marker(s, 11.0) == PeriodMarker("ctx-1", 10.0)
    legacy, _ = periods.mark(None, 10.0, 120)
    assert periods.marker(legacy, 11.0) == PeriodMarker(None, 10.0)


def test_first_mark_wins() -> None:
    s, _ = periods.mark(None, 10.0, 120, "first")
    s2, ok = periods.mark(s, 20.0, 120, "second")
    assert ok is False
    assert s2 is s
    assert periods.marker(s2, 21.0) == PeriodMarker("first", 10.0)


def test_marker_expires_and_can_be_claimed_again() -> None:
    s, _ = periods.mark(None, 0.0, 10, "a")
    assert periods.marker(s, 10.0) is None
    s, ok = periods.mark(s, 10.0, 10, "b")
    assert ok is True
    assert periods.marker(s, 10.0) == PeriodMarker("b", 10.0)


def test_ttl_none_keeps_the_marker_forever() -> None:
    s, _ = periods.mark(None, 0.0, None, "a")
    assert periods.marker(s, 1e12) is not None
    assert s is not None and periods.expiry(s) is None


@pytest.mark.parametrize(
    ("every", "expected"),
    [
        ("minute", "2024-03-05T14-07"),
        ("hour", "2024-03-05T14"),
        ("day", "2024-03-05"),
        ("week", "2024-W10"),
        ("month", "2024-03"),
        ("year", "2024"),
    ],
)
def test_bucket_formats(every: str, expected: str) -> None:
    assert periods.bucket(every, _ts(2024, 3, 5, 14, 7, 59) + 0.5) == expected


def test_integer_bucket_is_epoch_div_n() -> None:
    assert periods.bucket(60, 125.9) == "i2"
    assert periods.bucket(3600, 7199.0) == "i1"


def test_iso_week_year_differs_from_calendar_year() -> None:
    assert periods.bucket("week", _ts(2024, 12, 30)) == "2025-W01"
    assert periods.bucket("week", _ts(2021, 1, 3)) == "2020-W53"


def test_buckets_are_utc() -> None:
    assert periods.bucket("day", _ts(2024, 1, 1, 23, 59, 59)) == "2024-01-01"
    assert periods.bucket("day", _ts(2024, 1, 2)) == "2024-01-02"


def test_period_and_ttl_seconds() -> None:
    assert [periods.period_seconds(e) for e in ("minute", "hour", "day", "week")] == [
        60,
        3600,
        86400,
        604800,
    ]
    assert periods.period_seconds("month") == 31 * 86400
    assert periods.period_seconds("year") == 366 * 86400
    assert periods.period_seconds(90) == 90
    assert periods.ttl_seconds("hour") == 7200


def test_bucket_key() -> None:
    assert periods.bucket_key("daily-report", "year", _ts(2024, 6, 1)) == "daily-report:2024"


@pytest.mark.parametrize("every", ["fortnight", 0, -5, True])
def test_unknown_period_raises(every: str | int) -> None:
    with pytest.raises(ValueError):
        periods.bucket(every, 0.0)
    with pytest.raises(ValueError):
        periods.period_seconds(every)
