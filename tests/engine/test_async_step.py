"""``async_step``: definition rules, dispatch, readers and the dispatch guard (docs/workers.md,
"Async steps"). The engine fixture runs the inline router: units run at once,
nested in the dispatching thread."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import (
    DefinitionError,
    Failure,
    Input,
    Reactor,
    Step,
    Success,
    async_step,
    config,
    halt,
    input,
    result,
    step,
    with_lock,
)
from reactor.config import Runtime
from reactor.engine import async_dispatch
from reactor.engine import async_step as engine_async
from reactor.errors import (
    ArgumentResolutionError,
    AsyncStepDeadlockError,
    AsyncWaitTimeoutError,
)
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model import codec
from reactor.model.results import Halt
from reactor.model.status import RunStatus
from tests.fake_clock import FakeClock

# ------------------------------------------------------------------------------ definition


def test_function_unit_rejects_undo_and_accepts_compensate() -> None:
    @async_step(x=input("x"))
    def unit(inputs: Any, ctx: Any) -> int:
        return 1

    assert unit.kind == "async_step"
    with pytest.raises(DefinitionError, match="cannot have an undo"):
        unit.undo(lambda r, i, c: None)
    unit.compensate(lambda e, i, c: None)
    assert unit.compensate_function is not None


def test_class_unit_with_undo_and_returns_naming_a_unit_are_rejected() -> None:
    class WithUndo(Step):
        def run(self) -> int:
            return 1

        def undo(self) -> None:
            pass

    with pytest.raises(DefinitionError, match="defines undo"):
        async_step(WithUndo)

    with pytest.raises(DefinitionError, match="names an async_step"):
        class Bad(Reactor):
            u = async_step(lambda inputs, ctx: 1)
            returns = "u"


# ------------------------------------------------------------------------------ runs (inline)


def test_reader_gets_the_raw_value_and_units_are_never_recorded_or_undone(
    runtime: Runtime, events: list[str]
) -> None:
    class R(Reactor):
        x = Input(int)

        @async_step(x=input("x"))
        def unit(inputs: Any, ctx: Any) -> int:
            events.append("unit")
            return inputs.x * 2

        @step(v=result("unit"))
        def reader(inputs: Any, ctx: Any) -> int:
            return int(inputs.v) + 1

    out = R.run(x=4)
    assert isinstance(out, Success)
    assert out.value == {"reader": 9}  # the unit's value is not part of the run's results
    view = R.find(out.run_id or "")
    assert list(view.undo_stack) == ["reader"]
    record = runtime.storage.step_results.get(out.run_id or "", "unit")
    assert record is not None and record.status == "completed"
    assert engine_async.outcome_of(record) == Success(8)
    assert events == ["unit"]


def test_failing_unit_without_reader_never_fails_the_parent_and_compensates_once(
    runtime: Runtime, events: list[str]
) -> None:
    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> None:
            events.append("unit")
            raise RuntimeError("boom")

        @unit.compensate
        def _(error: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"compensate:{error}")

        @step()
        def other(inputs: Any, ctx: Any) -> str:
            return "ok"

    out = R.run()
    assert isinstance(out, Success) and out.value == {"other": "ok"}
    assert events == ["unit", "compensate:boom"]
    record = runtime.storage.step_results.get(out.run_id or "", "unit")
    assert record is not None and record.data["compensation"] == {"status": "completed"}
    failure = engine_async.outcome_of(record)
    assert isinstance(failure, Failure) and failure.step_name == "unit"


def test_reader_gets_the_failure_object_and_opts_into_rollback(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def first(inputs: Any, ctx: Any) -> str:
            return "a"

        @first.undo
        def _u(value: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo:first")

        @async_step(retries=None)
        def unit(inputs: Any, ctx: Any) -> None:
            return Failure("declined", retryable=False)  # type: ignore[return-value]

        @step(v=result("unit"), wait_for=["first"])
        def reader(inputs: Any, ctx: Any) -> Any:
            assert isinstance(inputs.v, Failure)
            events.append(f"reader saw {inputs.v.message}")
            return inputs.v

    out = R.run()
    assert isinstance(out, Failure) and out.step_name == "reader"
    assert events == ["reader saw declined", "undo:first"]


def test_a_halted_unit_reads_as_the_halt() -> None:
    seen: list[Any] = []

    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> None:
            halt("enough")

        @step(v=result("unit"))
        def reader(inputs: Any, ctx: Any) -> str:
            seen.append(inputs.v)
            return "read"

    assert R.run().success
    assert isinstance(seen[0], Halt) and seen[0].reason == "enough"


def test_unit_retries_inside_its_job_through_the_sleep_hook(sleeps: list[float]) -> None:
    from reactor import Retries

    tries: list[int] = []

    class R(Reactor):
        @async_step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=2))
        def unit(inputs: Any, ctx: Any) -> str:
            tries.append(ctx.attempt)
            if len(tries) < 3:
                raise RuntimeError("flaky")
            return "done"

        @step(v=result("unit"))
        def reader(inputs: Any, ctx: Any) -> Any:
            return inputs.v

    out = R.run()
    assert isinstance(out, Success) and out.value == {"reader": "done"}
    assert tries == [1, 2, 3] and sleeps == [2.0, 2.0]


def test_dispatch_guard_refuses_a_unit_on_a_lock_its_run_holds(events: list[str]) -> None:
    class R(Reactor):
        coordination = [with_lock(key="acct", auto_extend=False)]

        @step()
        def first(inputs: Any, ctx: Any) -> str:
            return "a"

        @first.undo
        def _u(value: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo:first")

        @async_step(wait_for=["first"], coordination=with_lock(key="acct"))
        def unit(inputs: Any, ctx: Any) -> None:
            events.append("unit ran")

        @unit.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("unit compensated")

    out = R.run()
    assert isinstance(out, Failure) and out.step_name == "unit"
    assert isinstance(out.error, AsyncStepDeadlockError) and out.error.key == "acct"
    assert events == ["undo:first"]  # refused: never ran, never compensated


# ------------------------------------------------------------------------------ local router


@pytest.fixture
def queued() -> Runtime:
    """A local router nobody consumes: dispatched units stay queued."""
    config.reset()
    return config.configure(storage=MemoryStorage(), router=LocalRouter(),
                            async_wait_timeout=3.0)


def test_dispatch_persists_before_enqueue_and_a_resume_reattaches(queued: Runtime) -> None:
    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> int:
            return 1

        @step()
        def sibling(inputs: Any, ctx: Any) -> str:
            return "ran without waiting"

    out = R.run()
    assert isinstance(out, Success) and out.value == {"sibling": "ran without waiting"}
    router = queued.router
    assert isinstance(router, LocalRouter) and router.size() == 1
    record = queued.storage.step_results.get(out.run_id or "", "unit")
    assert record is not None and record.status == "dispatched"
    assert record.root_context_id == out.run_id and record.reactor == R.reactor_name
    view = R.find(out.run_id or "")
    assert view.status is RunStatus.COMPLETED

    # a resumed execution of the same context re-attaches instead of re-dispatching
    from reactor.engine.checkpoint import Checkpointer, load_context
    from reactor.engine.env import make_env
    from reactor.engine.state import RunState

    env = make_env(queued)
    ctx = load_context(env, out.run_id or "")
    assert ctx is not None
    assert engine_async.dispatched_units(ctx) == {"unit"}
    state = RunState(R.definition, ctx, env, Checkpointer(env, ctx))
    assert async_dispatch.dispatch(state, R.definition.steps["unit"]) is None
    assert router.size() == 1


def test_synchronous_reader_times_out_on_its_bound(
    queued: Runtime, fake_clock: FakeClock
) -> None:
    # the same backends on a fake clock: the reader polls on it (no signal wait, no sleeping)
    config.configure(storage=queued.storage, router=queued.router, clock=fake_clock,
                     async_wait_timeout=3.0)

    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> int:
            return 1

        @step(v=result("unit"))
        def reader(inputs: Any, ctx: Any) -> Any:
            return inputs.v

    out = R.run()
    assert isinstance(out, Failure) and out.step_name == "reader"
    assert isinstance(out.error, ArgumentResolutionError)
    assert isinstance(out.error.__cause__, AsyncWaitTimeoutError)
    assert fake_clock.monotonic() == pytest.approx(3.0)  # the whole bound, polled every 0.3 s
    assert fake_clock.slept == pytest.approx(3.0) and max(fake_clock.sleeps) == pytest.approx(0.3)


def test_synchronous_reader_wakes_on_the_completed_record(queued: Runtime) -> None:
    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> int:
            return 41

        @step(v=result("unit"))
        def reader(inputs: Any, ctx: Any) -> Any:
            return inputs.v + 1

    from reactor.jobs.worker import Worker

    worker = Worker(queued, poll_seconds=0.05)
    worker.start()
    try:
        out = R.run()
    finally:
        worker.stop(timeout=5)
    assert isinstance(out, Success) and out.value == {"reader": 42}


def test_outcome_codec_round_trips_failures() -> None:
    failure = Failure(RuntimeError("x"), retryable=False, step_name="u")
    record_text = codec.dumps(failure)
    decoded = codec.loads(record_text)
    assert isinstance(decoded, Failure) and decoded.message == "x"
