"""A value the codec cannot store fails its step once and never re-runs it (docs/workers.md,
"Hostile input"): a step result nested deeper than ``codec.MAX_DEPTH`` is an ``EncodeError``
(a non-retryable failure: compensate, then roll back), never a raw ``RecursionError`` that
leaves the run ``running`` and makes a worker re-run the step on every delivery.

Worker cases run on the memory storage and a ``LocalRouter`` on one injected
:class:`ManualClock`, driven by ``Worker.run_pending`` in the test thread: nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, Failure, Input, Reactor, async_step, config, result, step
from reactor.config import Runtime
from reactor.engine.async_step import outcome_of
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model import codec
from reactor.model.status import RunStatus

#: Deeper than the codec's bound, shallow enough for a naive recursive encoder to start on.
DEPTH = 500


def deep(depth: int = DEPTH) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def local(clock: ManualClock) -> Iterator[Runtime]:
    """Memory storage + local router (no threads) on one manual clock."""
    rt = config.configure(
        storage=MemoryStorage(clock=clock),
        router=LocalRouter(clock=clock, visibility_timeout=30, workers=0),
    )
    yield rt
    config.reset()


def _reactor(events: list[str], *, background: bool = False) -> type[Reactor]:
    class Deep(Reactor):
        @step()
        def ok(inputs: Any, ctx: Any) -> int:
            events.append("ok")
            return 1

        @ok.undo
        def _undo(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo ok")

        @step(wait_for=["ok"])
        def deep_value(inputs: Any, ctx: Any) -> Any:
            events.append("deep_value")
            return deep()

        @deep_value.compensate
        def _compensate(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("compensate deep_value")

    if background:
        class BackgroundDeep(Deep):
            background = Background(all=True)

        return BackgroundDeep
    return Deep


def _assert_failed_once(failure: object, events: list[str]) -> None:
    assert isinstance(failure, Failure) and not failure.is_retryable
    assert failure.step_name == "deep_value"
    assert isinstance(failure.error, codec.EncodeError) and "MAX_DEPTH" in failure.message
    assert events == ["ok", "deep_value", "compensate deep_value", "undo ok"]


def test_a_step_value_nested_too_deep_fails_the_run_once_and_rolls_back() -> None:
    events: list[str] = []
    reactor = _reactor(events)
    failure = reactor.run()
    _assert_failed_once(failure, events)
    assert isinstance(failure, Failure)
    assert reactor.find(failure.run_id or "").status is RunStatus.FAILED


def test_a_throttled_checkpoint_still_catches_the_unstorable_value_at_its_step() -> None:
    config.configure(storage="memory://", router="inline://", checkpoint_min_interval=3600)
    events: list[str] = []
    reactor = _reactor(events)
    failure = reactor.run()  # the per-step save is skipped: the value is checked on its own
    _assert_failed_once(failure, events)
    assert isinstance(failure, Failure)
    assert reactor.find(failure.run_id or "").status is RunStatus.FAILED


def test_a_deep_reactor_input_fails_the_run_before_any_step() -> None:
    events: list[str] = []

    class R(Reactor):
        payload = Input(list)
        s = step(lambda inputs, ctx: events.append("ran"))

    failure = R.run(payload=deep())
    assert isinstance(failure, Failure) and not failure.is_retryable
    assert "MAX_DEPTH" in failure.message and events == []
    assert R.find(failure.run_id or "").status is RunStatus.FAILED


def test_in_a_worker_the_step_runs_once_and_the_job_is_acked(local: Runtime) -> None:
    events: list[str] = []
    reactor = _reactor(events, background=True)
    handle = reactor.run()
    worker = Worker(local, liveness_wait=0.0)
    assert worker.run_pending() == 1
    assert events == ["ok", "deep_value", "compensate deep_value", "undo ok"]
    assert (worker.processed, worker.retried, worker.jobs_dead_lettered) == (1, 0, 0)
    assert reactor.find(handle.run_id).status is RunStatus.FAILED
    assert local.router.dead_letters() == []


def test_an_async_step_unit_with_an_unstorable_result_completes_failed_once(
    local: Runtime, clock: ManualClock
) -> None:
    events: list[str] = []

    class Unit(Reactor):
        background = Background(all=True)

        @async_step()
        def unit(inputs: Any, ctx: Any) -> Any:
            events.append("unit")
            return deep()

        @unit.compensate
        def _compensate(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("compensate unit")

        @step(outcome=result("unit"))
        def reader(inputs: Any, ctx: Any) -> str:
            events.append(f"reader got {type(inputs.outcome).__name__}")
            return "read"

    handle = Unit.run()
    worker = Worker(local, liveness_wait=0.0)
    for _ in range(20):  # run, unit and the parked reader's redeliveries, on the manual clock
        worker.run_pending()
        if Unit.find(handle.run_id).status is not RunStatus.RUNNING:
            break
        clock.advance(5)
    record = local.storage.step_results.get(handle.run_id, "unit")
    assert record is not None and record.status == "completed"
    outcome = outcome_of(record)
    assert isinstance(outcome, Failure) and not outcome.is_retryable
    assert "MAX_DEPTH" in outcome.message
    assert events.count("unit") == 1 and events.count("compensate unit") == 1
    assert "reader got Failure" in events
    assert (worker.retried, worker.jobs_dead_lettered) == (0, 0)
    assert Unit.find(handle.run_id).status is RunStatus.COMPLETED
