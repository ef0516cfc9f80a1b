"""Worker readers of an ``async_step`` back off with their wait (docs/workers.md, "Async
steps", "Readers back off"), so parked readers never crowd out the units they wait for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.engine import async_step
from reactor.engine.async_step import READER_BACKOFF_MAX, reader_park_delay
from reactor.engine.env import make_env
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.context import Context
from reactor.model.status import RunStatus


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = config.configure(
        storage=MemoryStorage(clock=ManualClock()), router=LocalRouter(),
        lock_snooze_base_delay=0.2, lock_snooze_jitter=0, async_park_timeout=None,
    )
    yield runtime
    config.reset()


@pytest.mark.parametrize(
    ("base", "waited", "expected"),
    [(0.2, 0.0, 0.2), (0.2, 0.5, 0.2), (0.2, 40.0, 10.0), (0.2, 10_000.0, READER_BACKOFF_MAX),
     (45.0, 40.0, 45.0), (0.2, -3.0, 0.2)],
)
def test_the_park_delay_is_the_base_or_a_quarter_of_the_wait_at_most_30_s(
    base: float, waited: float, expected: float
) -> None:
    assert reader_park_delay(base, waited) == pytest.approx(expected)


def test_a_reader_waiting_long_parks_longer_than_the_snooze(rt: Runtime) -> None:
    env = make_env(rt)
    ctx = Context(context_id="r1", reactor="readers", status=RunStatus.RUNNING)
    now = env.now()
    assert async_step._park(env, ctx, "unit", dispatched_at=now).delay == pytest.approx(0.2)
    assert async_step._park(env, ctx, "unit", dispatched_at=now - 100).delay == pytest.approx(25)
    assert async_step._park(env, ctx, "unit", dispatched_at=now - 900).delay == pytest.approx(30)
