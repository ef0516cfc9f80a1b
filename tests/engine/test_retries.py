"""Retries and backoff with an injected sleep (docs/concepts.md, "Retries")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.dsl import (
    Input,
    Retries,
    result,
    step,
)
from reactor.engine.retries import attempt_with_retries
from reactor.errors import InputValidationError
from reactor.model.results import Failure, Success
from reactor.model.signals import fail


def _flaky(events: list[str], failures: int, **fail_kwargs: Any) -> Any:
    """A step body that fails ``failures`` times, then succeeds."""

    def run(inputs: Any, ctx: Any) -> str:
        events.append(f"attempt {ctx.attempt}")
        if ctx.attempt <= failures:
            fail(f"transient {ctx.attempt}", **fail_kwargs)
        return "ok"

    return run


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        ("exponential", [0.5, 1.0, 2.0]),
        ("linear", [0.5, 1.0, 1.5]),
        ("fixed", [0.5, 0.5, 0.5]),
    ],
)
def test_backoff_delays_go_through_the_sleep_hook(
    backoff: Any, expected: list[float], sleeps: list[float], events: list[str]
) -> None:
    class R(Reactor):
        s = step(_flaky(events, 3), retries=Retries(max_attempts=4, backoff=backoff,
                                                    base_delay=0.5))

    r = R.run()
    assert isinstance(r, Success) and r.value == {"s": "ok"}
    assert sleeps == expected
    assert events == ["attempt 1", "attempt 2", "attempt 3", "attempt 4"]
    trace = R.find(r.run_id or "").trace
    assert [(e.type, e.attempt) for e in trace] == [
        ("retry", 1), ("retry", 2), ("retry", 3), ("run", 4)
    ]


def test_per_run_sleep_hook_overrides_the_module_hook(sleeps: list[float]) -> None:
    mine: list[float] = []
    events: list[str] = []

    class R(Reactor):
        s = step(_flaky(events, 1), retries=Retries(max_attempts=2, base_delay=2))

    assert R.execute({}, sleep=mine.append).success
    assert (mine, sleeps) == ([2.0], [])


def test_no_retries_means_one_attempt(sleeps: list[float], events: list[str]) -> None:
    class R(Reactor):
        s = step(_flaky(events, 1))

    assert isinstance(R.run(), Failure)
    assert events == ["attempt 1"] and sleeps == []


def test_attempts_exhausted_then_compensate_once(sleeps: list[float], events: list[str]) -> None:
    class R(Reactor):
        s = step(_flaky(events, 9), retries=Retries(max_attempts=3, base_delay=0.1))

        @s.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate {error}")

    r = R.run()
    assert isinstance(r, Failure) and r.error == "transient 3"
    assert events == ["attempt 1", "attempt 2", "attempt 3", "compensate transient 3"]
    assert len(sleeps) == 2


def test_retryable_false_stops_at_once(sleeps: list[float], events: list[str]) -> None:
    class R(Reactor):
        s = step(_flaky(events, 9, retryable=False), retries=Retries(max_attempts=5))

    assert isinstance(R.run(), Failure)
    assert events == ["attempt 1"] and sleeps == []


def test_exception_with_retryable_false_attribute_stops_at_once(sleeps: list[float]) -> None:
    class Permanent(Exception):
        retryable = False

    calls: list[int] = []

    class R(Reactor):
        @step(retries=Retries(max_attempts=5, base_delay=0))
        def s(inputs: Any, ctx: Any) -> None:
            calls.append(ctx.attempt)
            raise Permanent("card stolen")

    r = R.run()
    assert isinstance(r, Failure) and not r.is_retryable
    assert calls == [1] and sleeps == []


def test_validation_errors_are_never_retried(sleeps: list[float], events: list[str]) -> None:
    class Typed(Step):
        n = Input(int, gt=0)
        retries = Retries(max_attempts=5)

        def run(self) -> None:
            events.append("body")

    class R(Reactor):
        bad = step(lambda inputs, ctx: -1)
        typed = step(Typed, n=result("bad"))

    r = R.run()
    assert isinstance(r, Failure) and isinstance(r.error, InputValidationError)
    assert events == [] and sleeps == []


def test_step_level_retries_override_the_class_policy(sleeps: list[float]) -> None:
    attempts: list[int] = []

    class Flaky(Step):
        retries = Retries(max_attempts=5, base_delay=9)

        def run(self) -> str:
            assert self.context is not None
            attempts.append(self.context.attempt)
            if self.context.attempt < 2:
                raise ConnectionError("reset")
            return "ok"

    class R(Reactor):
        s = step(Flaky, retries=Retries(max_attempts=2, backoff="fixed", base_delay=0.01))

    assert R.run().success
    assert attempts == [1, 2] and sleeps == [0.01]


def test_the_contract_is_enforced_on_every_attempt(sleeps: list[float]) -> None:
    validations: list[int] = []

    class Typed(Step):
        n = Input(int)
        retries = Retries(max_attempts=3, base_delay=0)

        def run(self) -> None:
            raise RuntimeError("flaky")

    class R(Reactor):
        typed = step(Typed, n=1)

    from reactor.dsl.inputs import InputContract

    original = InputContract.validate

    def counting(self: InputContract, values: Any, step_name: str | None = None) -> Any:
        validations.append(1)
        return original(self, values, step_name)

    mp = pytest.MonkeyPatch()
    mp.setattr(InputContract, "validate", counting)
    try:
        assert isinstance(R.run(), Failure)
    finally:
        mp.undo()
    assert len(validations) == 3 + 1  # reactor inputs once, then the step's on each attempt


def test_attempt_with_retries_reports_attempts_used() -> None:
    waits: list[float] = []
    results = iter([Failure("a"), Failure("b"), Success(1)])
    outcome, used = attempt_with_retries(
        Retries(max_attempts=3, base_delay=1), lambda n: next(results),
        on_retry=lambda n, d, f: None, sleep_fn=waits.append,
    )
    assert outcome == Success(1) and used == 3 and waits == [1.0, 2.0]
