"""The execution environment: runtime and sleep hook resolution."""

from __future__ import annotations

from reactor import config
from reactor.config import Runtime
from reactor.engine import retries
from reactor.engine.env import make_env


def test_defaults_come_from_the_current_runtime_and_the_module_hook(
    runtime: Runtime, sleeps: list[float]
) -> None:
    env = make_env()
    assert env.runtime is config.current() is runtime
    env.sleep(1.5)  # resolved at call time through reactor.engine.retries.sleep
    assert sleeps == [1.5]
    assert env.now() > 0


def test_explicit_runtime_and_sleep(runtime: Runtime) -> None:
    waits: list[float] = []
    env = make_env(runtime, waits.append)
    env.sleep(2)
    assert waits == [2] and env.storage is runtime.storage and env.settings is runtime.settings
    assert retries.default_sleep is not env.sleep
