"""Fixtures shared by the Redis adapter tests."""

from __future__ import annotations

import pytest

from tests.adapters.redis.round_trips import RoundTrips


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    """A round-trip counter installed for the test."""
    return RoundTrips(monkeypatch)
