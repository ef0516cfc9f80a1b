"""``TestEnvironment``: an isolated runtime installed and restored untouched; settings."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from reactor import ConfigurationError, config
from reactor.config import Runtime
from reactor.memory import InlineRouter, LocalRouter, MemoryStorage
from reactor.ports import SYSTEM_CLOCK, Clock
from reactor.testing import TestEnvironment, assert_completed
from tests.testing.reactors import CALLS, Order


class _RecordingStorage(MemoryStorage):
    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


class _RecordingRouter(LocalRouter):
    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


@pytest.fixture
def previous() -> Iterator[Runtime]:
    """A runtime of the test's own, active before the environment is entered."""
    config.reset()
    runtime = config.configure(storage=_RecordingStorage(), router=_RecordingRouter(workers=0))
    yield runtime
    config.reset()


def test_the_previous_runtime_comes_back_untouched(previous: Runtime) -> None:
    CALLS.clear()
    environ = dict(os.environ)
    with TestEnvironment() as env:
        assert config.current() is env.runtime
        assert env.runtime is not previous
        assert isinstance(env.storage, MemoryStorage) and env.storage is not previous.storage
        outcome = Order.run()
        assert_completed(outcome)
    assert config.current() is previous
    assert isinstance(previous.storage, _RecordingStorage) and not previous.storage.closed
    assert isinstance(previous.router, _RecordingRouter) and not previous.router.closed
    assert dict(os.environ) == environ
    with pytest.raises(Exception, match="no stored run"):  # stored in the environment only
        Order.find(outcome.run_id or "")


def test_no_previous_runtime_is_restored_as_none() -> None:
    config.reset()
    with TestEnvironment() as env:
        assert config.current() is env.runtime
    assert config.runtime._current is None  # the next current() configures the defaults lazily


def test_the_test_clock_is_the_runtimes_clock_inside_and_the_previous_one_after(
    previous: Runtime,
) -> None:
    with TestEnvironment() as env:
        assert config.current().clock is env.clock
        assert isinstance(env.clock, Clock)
    assert config.current() is previous and previous.clock is SYSTEM_CLOCK


def test_a_runtime_configured_inside_is_closed_and_the_previous_restored(
    previous: Runtime,
) -> None:
    with TestEnvironment():
        inner = config.configure(storage=_RecordingStorage(), router=_RecordingRouter())
    assert config.current() is previous
    assert isinstance(inner.storage, _RecordingStorage) and inner.storage.closed
    assert isinstance(inner.router, _RecordingRouter) and inner.router.closed
    assert isinstance(previous.storage, _RecordingStorage) and not previous.storage.closed


def test_environments_nest() -> None:
    config.reset()
    with TestEnvironment() as outer:
        with TestEnvironment() as inner:
            assert config.current() is inner.runtime
        assert config.current() is outer.runtime
    assert config.runtime._current is None


def test_an_environment_is_entered_once() -> None:
    env = TestEnvironment()
    with env, pytest.raises(RuntimeError, match="entered once"):
        env.start()
    with pytest.raises(RuntimeError, match="entered once"):
        env.start()
    env.close()  # idempotent


def test_settings_are_explicit_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_CONTEXT_TTL", "5")
    with TestEnvironment(context_lock_ttl=7) as env:
        assert env.settings.context_lock_ttl == 7
        assert env.settings.context_ttl == 86400.0  # the environment variable is not read
    with pytest.raises(ConfigurationError, match="no_such_setting"):
        TestEnvironment(no_such_setting=1)
    with pytest.raises(ValueError, match="jobs"):
        TestEnvironment(jobs="threads")  # type: ignore[arg-type]


def test_the_router_matches_the_job_mode() -> None:
    with TestEnvironment() as queued:
        assert isinstance(queued.router, LocalRouter)
        assert queued.router.workers == 0 and not queued.router.has_consumers
    with TestEnvironment(jobs="inline") as inline:
        assert isinstance(inline.router, InlineRouter)


def test_redacted_inputs_need_no_key_in_the_environment() -> None:
    """The storage and router count as in-process (docs/security.md): no key is needed."""
    from reactor import Input, Reactor, step

    class Secretive(Reactor, name="tests.testing.secretive"):
        token = Input(str, redact=True)

        @step
        def use(inputs: object, ctx: object) -> str:
            return "ok"

    with TestEnvironment():
        started = time.monotonic()
        assert Secretive.run(token="t").success
        assert time.monotonic() - started < 30
