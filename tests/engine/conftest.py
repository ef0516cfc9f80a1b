"""Fixtures for the engine tests: the in-memory runtime, a recorded sleep, an event log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.engine import retries


@pytest.fixture(autouse=True)
def runtime() -> Iterator[Runtime]:
    """A fresh in-memory storage (``memory://``) for every test."""
    rt = config.configure(storage="memory://", router="inline://")
    yield rt
    config.reset()


@pytest.fixture(autouse=True)
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every retry wait (seconds), recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(retries, "sleep", recorded.append)
    return recorded


@pytest.fixture
def events() -> list[str]:
    """A shared log user code appends to, to assert call order."""
    return []
