"""The contract suite's clock checks name the likely mistake: a clock off by a whole number of
quarter hours is local time handled as UTC (docs/writing-an-adapter.md, "Scans, expiry and the
clock")."""

from __future__ import annotations

import time

import pytest
from reactor_contract._support import CLOCK_TOLERANCE, clock_offset_diagnosis
from reactor_contract.test_documents import DocumentsContract
from reactor_contract.test_surface import SurfaceContract

from reactor.memory import MemoryStorage


@pytest.mark.parametrize(
    ("offset", "words"),
    [
        (-7200.0, "UTC+02:00"),  # Paris summer time read as UTC: the clock is 2 h behind
        (5 * 3600 + 1800 + 3.0, "UTC-05:30"),  # 5 h 30 ahead, a few seconds of drift
        (-(5 * 3600 + 45 * 60), "UTC+05:45"),  # Nepal
    ],
)
def test_a_whole_number_of_quarter_hours_is_diagnosed_as_local_time(
    offset: float, words: str
) -> None:
    text = clock_offset_diagnosis(1_700_000_000.0 + offset, 1_700_000_000.0, CLOCK_TOLERANCE)
    assert "a whole number of quarter hours" in text and words in text
    assert "local time" in text and "time.time()" in text


def test_other_offsets_are_not_called_a_time_zone() -> None:
    assert "quarter" not in clock_offset_diagnosis(1_700_000_500.0, 1_700_000_000.0, 60.0)
    assert "milliseconds" in clock_offset_diagnosis(1.7e12, 1.7e9, 60.0)


@pytest.mark.parametrize("offset", [-3600.0, 2 * 3600.0])
def test_the_clock_checks_fail_with_the_diagnosis(offset: float) -> None:
    """A storage whose clock is local time in a UTC+1 (UTC-2) zone read as UTC fails the
    surface and documents clock checks with the diagnosis in the message."""
    storage = MemoryStorage(clock=lambda: time.time() + offset)
    try:
        with pytest.raises(AssertionError, match="whole number of quarter hours"):
            SurfaceContract().test_clock_is_epoch_seconds_and_never_runs_backwards(storage)
        with pytest.raises(AssertionError, match="whole number of quarter hours"):
            DocumentsContract().test_now_is_epoch_seconds(storage.documents, storage)
    finally:
        storage.close()


def test_a_utc_clock_passes_the_clock_checks() -> None:
    storage = MemoryStorage()
    try:
        SurfaceContract().test_clock_is_epoch_seconds_and_never_runs_backwards(storage)
        DocumentsContract().test_now_is_epoch_seconds(storage.documents, storage)
    finally:
        storage.close()
