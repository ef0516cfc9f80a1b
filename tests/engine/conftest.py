"""Fixtures for the engine tests: the in-memory runtime on a fake clock, its recorded waits, an
event log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from tests.fake_clock import FakeClock


@pytest.fixture
def fake_clock() -> FakeClock:
    """The runtime's clock: waits are recorded and move it, nothing really sleeps."""
    return FakeClock()


@pytest.fixture(autouse=True)
def runtime(fake_clock: FakeClock) -> Iterator[Runtime]:
    """A fresh in-memory storage (``memory://``) on :func:`fake_clock` for every test."""
    rt = config.configure(storage="memory://", router="inline://", clock=fake_clock)
    yield rt
    config.reset()


@pytest.fixture(autouse=True)
def sleeps(fake_clock: FakeClock) -> list[float]:
    """Every wait of the engine on the runtime's clock (seconds), recorded instead of slept."""
    return fake_clock.sleeps


@pytest.fixture
def events() -> list[str]:
    """A shared log user code appends to, to assert call order."""
    return []
