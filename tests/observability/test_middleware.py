"""The middleware API (docs/observability.md, "Middleware"): registration, order, what the hooks
see, and failures that never break a run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reactor import (
    ConfigurationError,
    Failure,
    Input,
    Reactor,
    Success,
    config,
    fail,
    input,
    result,
    step,
)
from reactor.config import Runtime
from reactor.engine import observe
from reactor.engine.env import make_env
from reactor.middleware import (
    NO_HOOKS,
    LogContext,
    Middleware,
    RollbackEvent,
    RunEvent,
    StepEvent,
    current_log_context,
    enable_log_context,
)
from reactor.model.context import Context
from reactor.observability import OpenTelemetryMiddleware


@step(x=input("x"))
def first(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


@step(y=result("first"))
def second(inputs: Any, ctx: Any) -> int:
    if inputs.y < 0:
        fail("negative", retryable=False)
    return int(inputs.y) * 2


class Pair(Reactor, name="obs.pair"):
    x = Input(int)
    first = first
    second = second
    returns = "second"


@pytest.fixture
def inline() -> Iterator[Callable[..., Runtime]]:
    def build(*middleware: Any) -> Runtime:
        return config.configure(storage="memory://", router="inline://",
                                middleware=list(middleware))

    config.reset()
    yield build
    config.reset()
    enable_log_context(False)


class Recorder(Middleware):
    """Records what it sees, tagged with its label."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    @contextmanager
    def _scope(self, what: str) -> Iterator[None]:
        self.log.append(f"{self.label}>{what}")
        try:
            yield
        finally:
            self.log.append(f"{self.label}<{what}")

    def run(self, event: RunEvent) -> Any:
        return self._scope(f"run:{event.status or ''}")

    def step(self, event: StepEvent) -> Any:
        return self._scope(f"step:{event.step}")


def test_scopes_enter_in_registration_order_and_exit_in_reverse(
    inline: Callable[..., Runtime],
) -> None:
    log: list[str] = []
    inline(Recorder("a", log), Recorder("b", log))
    outcome = Pair.run(x=1)
    assert isinstance(outcome, Success) and outcome.value == 4
    assert log == [
        "a>run:", "b>run:",
        "a>step:first", "b>step:first", "b<step:first", "a<step:first",
        "a>step:second", "b>step:second", "b<step:second", "a<step:second",
        "b<run:", "a<run:",
    ]


def test_events_carry_outcomes_when_the_scopes_exit(inline: Callable[..., Runtime]) -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    class Outcomes(Middleware):
        @contextmanager
        def _after(self, event: RunEvent | StepEvent | RollbackEvent) -> Iterator[None]:
            yield
            what = (f"{event.action} {event.step}" if isinstance(event, StepEvent)
                    else type(event).__name__)
            seen.append((what, event.status, event.error_type))

        def run(self, event: RunEvent) -> Any:
            return self._after(event)

        def step(self, event: StepEvent) -> Any:
            return self._after(event)

        def rollback(self, event: RollbackEvent) -> Any:
            return self._after(event)

    inline(Outcomes())
    assert isinstance(Pair.run(x=-6), Failure)
    assert seen == [
        ("run first", "completed", None),
        ("run second", "failed", "Failure"),
        ("compensate second", "skipped", None),  # no compensate declared
        ("undo first", "skipped", None),  # no undo declared
        ("RollbackEvent", "completed", "Failure"),
        ("RunEvent", "failed", "Failure"),
    ]


class Boom(Middleware):
    """Fails in every hook, in every way a hook can fail."""

    @property
    def name(self) -> str:
        return "boom"

    def run(self, event: RunEvent) -> Any:
        raise RuntimeError("run hook broke")

    @contextmanager
    def _breaks_on_exit(self) -> Iterator[None]:
        yield
        raise RuntimeError("step hook broke on exit")

    def step(self, event: StepEvent) -> Any:
        return self._breaks_on_exit()

    def rollback(self, event: RollbackEvent) -> Any:
        @contextmanager
        def swallow() -> Iterator[None]:
            try:
                yield
            except BaseException:
                pass  # a middleware cannot swallow the engine's exceptions

        return swallow()


def test_a_failing_middleware_never_breaks_a_run_and_is_logged_once_per_failure(
    inline: Callable[..., Runtime], caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    inline(Boom(), Recorder("after", log))
    caplog.set_level(logging.WARNING, logger="reactor.middleware")
    outcome = Pair.run(x=1)
    assert isinstance(outcome, Success) and outcome.value == 4
    failures = [r for r in caplog.records if "event=middleware_failed" in r.getMessage()]
    assert [r.getMessage() for r in failures] == [
        "event=middleware_failed middleware=boom hook=run error=RuntimeError: run hook broke",
        "event=middleware_failed middleware=boom hook=step "
        "error=RuntimeError: step hook broke on exit",
        "event=middleware_failed middleware=boom hook=step "
        "error=RuntimeError: step hook broke on exit",
    ]
    assert all(r.exc_info is not None for r in failures)  # with the traceback
    # the middleware registered after it saw everything
    assert log[0] == "after>run:" and log[-1] == "after<run:"
    assert isinstance(Pair.run(x=-5), Failure)  # a failure is not swallowed by a middleware


def test_with_no_middleware_the_engine_builds_no_event(inline: Callable[..., Runtime]) -> None:
    runtime = inline()
    assert runtime.hooks is NO_HOOKS and not runtime.hooks.active
    env = make_env(runtime)
    assert observe.run(env, Context(context_id="r", reactor="x"), "start") is observe.NULL
    enable_log_context()
    assert observe.run(env, Context(context_id="r", reactor="x"), "start") is not observe.NULL


def test_the_log_context_follows_the_innermost_scope(inline: Callable[..., Runtime]) -> None:
    seen: list[LogContext | None] = []

    @step()
    def look(inputs: Any, ctx: Any) -> None:
        seen.append(current_log_context())

    class Look(Reactor, name="obs.look"):
        work = look

    inline()
    Look.run()
    assert seen == [None]  # off by default
    enable_log_context()
    outcome = Look.run()
    assert seen[1] == LogContext(run_id=outcome.run_id, reactor="obs.look", step="work")
    assert current_log_context() is None


def test_middleware_by_name_and_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config.reset()
    try:
        runtime = config.configure(storage="memory://", router="inline://", middleware=["otel"])
        assert [type(m) for m in runtime.middleware] == [OpenTelemetryMiddleware]
        assert runtime.settings.middleware == ("otel",)
        monkeypatch.setenv("REACTOR_MIDDLEWARE", "otel")
        runtime = config.configure(storage="memory://", router="inline://")
        assert [type(m) for m in runtime.middleware] == [OpenTelemetryMiddleware]
        runtime = config.configure(storage="memory://", router="inline://", middleware=[])
        assert runtime.middleware == () and runtime.settings.middleware == ()
        runtime = config.configure(storage="memory://", router="inline://", middleware="otel")
        assert [type(m) for m in runtime.middleware] == [OpenTelemetryMiddleware]
    finally:
        config.reset()


@pytest.mark.parametrize(("given", "message"), [
    ([Middleware(), 3], "middleware[1]: expected a reactor.middleware.Middleware"),
    ([""], "middleware[0]: expected a reactor.middleware.Middleware"),
    (Middleware(), "takes a list of reactor.middleware.Middleware objects"),
    (["no-such"], "middleware: no middleware registered as 'no-such'"),
])
def test_a_bad_middleware_argument_is_refused_naming_it(given: Any, message: str) -> None:
    config.reset()
    try:
        before = config.configure(storage="memory://", router="inline://")
        with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace(
                "]", r"\]").replace(".", r"\.")):
            config.configure(storage="memory://", router="inline://", middleware=given)
        assert config.current() is before  # the previous runtime is kept
    finally:
        config.reset()
