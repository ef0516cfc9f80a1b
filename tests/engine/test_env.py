"""The execution environment: the runtime, its clock and the retry wait."""

from __future__ import annotations

from reactor import config
from reactor.config import Runtime
from reactor.engine.env import make_env, wait_for_signal
from reactor.memory import MemoryStorage
from reactor.ports import SYSTEM_CLOCK
from tests.fake_clock import FakeClock


def test_defaults_come_from_the_current_runtime_and_its_clock(
    runtime: Runtime, fake_clock: FakeClock, sleeps: list[float]
) -> None:
    env = make_env()
    assert env.runtime is config.current() is runtime
    assert env.clock is runtime.clock is fake_clock
    env.sleep(1.5)  # the retry wait is the runtime clock's sleep
    assert sleeps == [1.5] and fake_clock.monotonic() == 1.5
    assert env.now() > 0


def test_an_explicit_sleep_replaces_the_clocks_for_retry_waits_only(
    runtime: Runtime, fake_clock: FakeClock
) -> None:
    waits: list[float] = []
    env = make_env(runtime, waits.append)
    env.sleep(2)
    assert waits == [2] and fake_clock.sleeps == []
    assert env.clock is fake_clock  # coordination and reader waits keep the clock
    assert env.storage is runtime.storage and env.settings is runtime.settings


def test_a_runtime_configured_without_a_clock_uses_the_system_clock() -> None:
    runtime = config.configure(storage="memory://", router="inline://")
    assert runtime.clock is SYSTEM_CLOCK
    assert make_env(runtime).clock is SYSTEM_CLOCK


def test_a_signal_wait_is_used_on_the_system_clock_only(fake_clock: FakeClock) -> None:
    signals = MemoryStorage().signals
    subscription = signals.subscribe("channel")
    signals.publish("channel", "done")
    wait_for_signal(fake_clock, subscription, 0.5)  # a fake clock: its sleep, not the signal
    assert fake_clock.sleeps == [0.5]
    assert subscription.get(0) == "done"  # the message was left alone
    signals.publish("channel", "again")
    wait_for_signal(SYSTEM_CLOCK, subscription, 30.0)  # returns on the message at once
    assert subscription.get(0) is None and fake_clock.sleeps == [0.5]
    subscription.close()
    wait_for_signal(fake_clock, None, 0.25)  # no subscription: the clock's sleep
    assert fake_clock.sleeps == [0.5, 0.25]
