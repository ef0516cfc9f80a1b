"""Concurrent branches (docs/concepts.md, "Concurrency"; reactor/engine/branches.py): a reactor
with ``max_concurrency = N`` runs up to N ready leaf steps at once; the run keeps one writer,
records each branch as it settles, and rolls back newest-first by completion order.

Overlap is proven with barriers, never with timing: a step that waits on a barrier its
siblings must also reach passes only when they run at the same time (a sequential run breaks
the barrier after its timeout and fails the step).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from reactor import Reactor, Retries
from reactor.dsl import Input, input, result, step
from reactor.engine.branches import Branches
from reactor.errors import DefinitionError
from reactor.model.results import Failure, Halt, Success
from reactor.model.signals import halt
from reactor.model.status import RunStatus

#: Seconds a barrier waits for its siblings before it breaks (only a broken run waits this).
_MEET = 10.0


class Log:
    """A thread-safe event log that also tracks how many bodies run at once."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def enter(self) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self._lock:
            self.running -= 1


def _meeting(log: Log, name: str, barrier: threading.Barrier | None) -> Callable[..., Any]:
    """A step body that logs ``run <name>``, meets ``barrier`` (if any) and returns its name."""

    def body(inputs: Any, ctx: Any) -> str:
        log.enter()
        try:
            if barrier is not None:
                barrier.wait(_MEET)
            log.add(f"run {name}")
            return name
        finally:
            log.leave()

    body.__name__ = body.__qualname__ = f"run_{name}"
    return body


def _undoable(log: Log, name: str, barrier: threading.Barrier | None = None,
              **wiring: Any) -> Any:
    spec = step(_meeting(log, name, barrier), **wiring)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        log.add(f"undo {name}")

    @spec.compensate
    def compensate(error: Any, inputs: Any, ctx: Any) -> None:
        log.add(f"compensate {name}")

    return spec


# ----------------------------------------------------------------------------- declaration


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2", None])
def test_max_concurrency_must_be_a_positive_whole_number(bad: Any) -> None:
    with pytest.raises(DefinitionError, match="max_concurrency") as info:
        class Bad(Reactor):
            max_concurrency = bad

            @step()
            def a(inputs: Any, ctx: Any) -> int:
                return 1

    assert repr(bad) in str(info.value) or str(bad) in str(info.value)


def test_a_step_cannot_be_named_max_concurrency() -> None:
    with pytest.raises(DefinitionError, match="max_concurrency"):
        class Bad(Reactor):
            @step()
            def max_concurrency(inputs: Any, ctx: Any) -> int:
                return 1


def test_the_default_runs_one_step_at_a_time_in_declaration_order() -> None:
    log = Log()

    class Sequential(Reactor):
        c = _undoable(log, "c")
        a = _undoable(log, "a")
        b = _undoable(log, "b")

    assert Sequential.definition.max_concurrency == 1
    out = Sequential.run()
    assert isinstance(out, Success)
    assert log.events == ["run c", "run a", "run b"] and log.peak == 1


# ----------------------------------------------------------------------------- overlap


def test_independent_steps_run_at_the_same_time_and_the_dependent_one_after_them() -> None:
    log = Log()
    meet = threading.Barrier(3)

    class Checkout(Reactor):
        max_concurrency = 4
        reserve = _undoable(log, "reserve", meet)
        authorise = _undoable(log, "authorise", meet)
        fraud = _undoable(log, "fraud", meet)

        @step(r=result("reserve"), a=result("authorise"), f=result("fraud"))
        def confirm(inputs: Any, ctx: Any) -> str:
            log.add("run confirm")
            return f"{inputs.r}+{inputs.a}+{inputs.f}"

        returns = "confirm"

    out = Checkout.run()
    assert isinstance(out, Success), out
    assert out.value == "reserve+authorise+fraud"
    assert log.peak == 3 and log.events[-1] == "run confirm"
    view = Checkout.find(out.run_id)
    assert view.status is RunStatus.COMPLETED


def test_at_most_max_concurrency_steps_run_at_once() -> None:
    log = Log()
    pairs = threading.Barrier(2)

    class Bounded(Reactor):
        max_concurrency = 2
        a = _undoable(log, "a", pairs)
        b = _undoable(log, "b", pairs)
        c = _undoable(log, "c", pairs)
        d = _undoable(log, "d", pairs)

    out = Bounded.run()
    assert isinstance(out, Success), out
    assert log.peak == 2
    assert sorted(log.events) == ["run a", "run b", "run c", "run d"]


def test_the_trace_shows_the_branches_overlapping() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Pair(Reactor):
        max_concurrency = 2
        a = _undoable(log, "a", meet)
        b = _undoable(log, "b", meet)

    out = Pair.run()
    assert isinstance(out, Success), out
    runs = [e for e in Pair.find(out.run_id).trace if e.type == "run"]
    assert sorted(e.step or "" for e in runs) == ["a", "b"]
    first, second = runs
    assert first.started is not None and second.started is not None
    assert first.started <= first.at and second.started <= second.at
    assert second.started <= first.at  # the second began before the first was recorded


def test_async_step_bodies_branch_too() -> None:
    gate: dict[str, asyncio.Event] = {}
    seen: list[str] = []

    class AsyncFork(Reactor):
        max_concurrency = 2

        @step()
        async def left(inputs: Any, ctx: Any) -> str:
            gate.setdefault("right", asyncio.Event())
            await asyncio.wait_for(gate.setdefault("left", asyncio.Event()).wait(), _MEET)
            seen.append("left")
            return "L"

        @step()
        async def right(inputs: Any, ctx: Any) -> str:
            gate.setdefault("left", asyncio.Event()).set()  # left can only finish after
            seen.append("right")                           # right started
            return "R"

        @step(l=result("left"), r=result("right"))
        def join(inputs: Any, ctx: Any) -> str:
            return f"{inputs.l}{inputs.r}"

        returns = "join"

    out = AsyncFork.run()
    assert isinstance(out, Success) and out.value == "LR", out
    assert seen == ["right", "left"]


def test_arun_runs_branches_on_the_callers_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    class OnLoop(Reactor):
        max_concurrency = 2

        @step()
        async def a(inputs: Any, ctx: Any) -> int:
            loops.append(asyncio.get_running_loop())
            return 1

        @step()
        async def b(inputs: Any, ctx: Any) -> int:
            loops.append(asyncio.get_running_loop())
            return 2

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        return await OnLoop.arun(), asyncio.get_running_loop()

    out, loop = asyncio.run(main())
    assert isinstance(out, Success), out
    assert loops == [loop, loop]


# ----------------------------------------------------------------------------- failure


def test_a_failing_branch_lets_its_sibling_finish_then_rolls_back_by_completion_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = Log()
    slow_started = threading.Event()
    failure_seen = threading.Event()
    real_wait = Branches.wait

    def wait(self: Branches) -> list[Any]:  # probe: the executor has collected boom
        settled = real_wait(self)
        if any(b.name == "boom" for b in settled):
            failure_seen.set()
        return settled

    monkeypatch.setattr(Branches, "wait", wait)

    class Fork(Reactor):
        max_concurrency = 2
        first = _undoable(log, "first")

        @step(wait_for=["first"])
        def slow(inputs: Any, ctx: Any) -> str:
            slow_started.set()
            assert failure_seen.wait(_MEET)  # still running when its sibling's failure lands
            log.add("run slow")
            return "slow"

        @slow.undo
        def slow_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo slow")

        @step(wait_for=["first"])
        def boom(inputs: Any, ctx: Any) -> None:
            assert slow_started.wait(_MEET)
            raise RuntimeError("card declined")

        @boom.compensate
        def boom_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate boom: {error}")

        late = _undoable(log, "late", wait_for=["first"])

    out = Fork.run()
    assert isinstance(out, Failure) and out.step_name == "boom", out
    assert "card declined" in out.message
    # late never started (the failure stops new starts); slow finished and is undone first
    assert log.events == [
        "run first", "run slow", "compensate boom: card declined", "undo slow", "undo first",
    ]
    assert Fork.find(out.run_id).status is RunStatus.FAILED


def test_two_failing_branches_are_both_compensated_and_the_first_is_the_runs_failure() -> None:
    log = Log()
    meet = threading.Barrier(2)
    order = threading.Event()

    class TwoFail(Reactor):
        max_concurrency = 2
        base = _undoable(log, "base")

        @step(wait_for=["base"])
        def one(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            raise RuntimeError("one broke")

        @one.compensate
        def one_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate one: {error}")

        @step(wait_for=["base"])
        def two(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            order.wait(0.0)
            raise RuntimeError("two broke")

        @two.compensate
        def two_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate two: {error}")

    out = TwoFail.run()
    assert isinstance(out, Failure), out
    assert out.step_name in ("one", "two")
    other = "two" if out.step_name == "one" else "one"
    assert log.events[0] == "run base" and log.events[-1] == "undo base"
    # each failed step's compensate received its own error; the run's failure's ran last
    assert log.events[1:3] == [
        f"compensate {other}: {other} broke", f"compensate {out.step_name}: "
        f"{out.step_name} broke",
    ]
    failed = [e.step for e in TwoFail.find(out.run_id).trace if e.type == "failed"]
    assert sorted(failed, key=str) == ["one", "two"]


def test_a_failing_sibling_compensate_is_reported_with_the_runs_rollback_failures() -> None:
    meet = threading.Barrier(2)

    class BadCompensate(Reactor):
        max_concurrency = 2

        @step()
        def one(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            raise RuntimeError("one broke")

        @step()
        def two(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            raise RuntimeError("two broke")

        @one.compensate
        def one_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            raise RuntimeError("compensate one broke")

        @two.compensate
        def two_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            raise RuntimeError("compensate two broke")

    out = BadCompensate.run()
    assert isinstance(out, Failure), out
    failed = sorted((f.step, f.kind) for f in out.rollback_failures)
    assert failed == [("one", "compensate"), ("two", "compensate")]


def test_a_halting_branch_stops_the_run_after_its_siblings_without_rollback() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Halts(Reactor):
        max_concurrency = 2
        a = _undoable(log, "a", meet)

        @step()
        def stop(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            halt("out of stock")

        after = _undoable(log, "after", wait_for=["a", "stop"])

    out = Halts.run()
    assert isinstance(out, Halt) and out.step_name == "stop", out
    assert log.events == ["run a"]
    assert Halts.find(out.run_id).status is RunStatus.HALTED


def test_a_branch_retries_in_its_own_thread_and_its_attempts_are_counted() -> None:
    meet = threading.Barrier(2)
    tries: list[int] = []

    class Retrying(Reactor):
        max_concurrency = 2

        @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=0.0))
        def flaky(inputs: Any, ctx: Any) -> str:
            tries.append(ctx.attempt)
            if len(tries) == 1:
                meet.wait(_MEET)
            if len(tries) < 3:
                raise RuntimeError("again")
            return "ok"

        @step()
        def steady(inputs: Any, ctx: Any) -> str:
            meet.wait(_MEET)
            return "fine"

    out = Retrying.run()
    assert isinstance(out, Success), out
    assert tries == [1, 2, 3]
    view = Retrying.find(out.run_id)
    assert [e.attempt for e in view.trace if e.type == "retry"] == [1, 2]
    assert [e.attempt for e in view.trace if e.type == "run" and e.step == "flaky"] == [3]


def test_an_interrupted_branch_aborts_the_run_after_its_sibling_is_recorded() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Interrupted(Reactor):
        max_concurrency = 2
        a = _undoable(log, "a", meet)

        @step()
        def cut(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            raise KeyboardInterrupt

        @cut.compensate
        def cut_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add("compensate cut")

    with pytest.raises(KeyboardInterrupt) as caught:
        Interrupted.run()
    run = caught.value.reactor_run_id  # type: ignore[attr-defined]
    view = Interrupted.find(run)
    assert view.status is RunStatus.ABORTED
    assert view.undo_stack == ("a",)  # the sibling's success is kept
    Interrupted.undo(run)
    # the interrupted step's body started: its compensate was pending, and runs first
    assert log.events == ["run a", "compensate cut", "undo a"]


def test_steps_that_cannot_branch_run_alone_between_groups() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Mixed(Reactor):
        max_concurrency = 3
        a = _undoable(log, "a", meet)
        b = _undoable(log, "b", meet)

        @step(wait_for=["a", "b"])
        def middle(inputs: Any, ctx: Any) -> str:
            log.enter()
            log.leave()
            log.add("run middle")
            return "m"

        c = _undoable(log, "c", wait_for=["middle"])

    out = Mixed.run()
    assert isinstance(out, Success), out
    assert log.events[-2:] == ["run middle", "run c"]


def test_a_branch_sees_the_results_recorded_before_it_started() -> None:
    class Wiring(Reactor):
        max_concurrency = 3
        amount = Input(int)

        @step(amount=input("amount"))
        def base(inputs: Any, ctx: Any) -> int:
            return int(inputs.amount)

        @step(x=result("base"))
        def double(inputs: Any, ctx: Any) -> int:
            return int(inputs.x) * 2

        @step(x=result("base"))
        def triple(inputs: Any, ctx: Any) -> int:
            assert set(ctx.results) >= {"base"}
            return int(inputs.x) * 3

        @step(d=result("double"), t=result("triple"))
        def total(inputs: Any, ctx: Any) -> int:
            return int(inputs.d) + int(inputs.t)

        returns = "total"

    out = Wiring.run(amount=5)
    assert isinstance(out, Success) and out.value == 25, out


def test_a_cancel_stops_new_starts_and_rolls_back_the_settled_branches(
    fake_clock: Any,
) -> None:
    from reactor import DispatchHandle, config

    config.configure(storage="memory://", router="inline://", clock=fake_clock,
                     cancel_check_interval=0)
    log = Log()
    meet = threading.Barrier(3)
    run_ids: list[str] = []
    cancelled = threading.Event()

    def held(name: str) -> Any:
        def body(inputs: Any, ctx: Any) -> str:
            run_ids.append(ctx.run_id)
            meet.wait(_MEET)  # both branches are in flight, and the test is here too
            assert cancelled.wait(_MEET)
            log.add(f"run {name}")
            return name

        body.__name__ = body.__qualname__ = name
        spec = step(body)

        @spec.undo
        def undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"undo {name}")

        return spec

    class Cancellable(Reactor):
        max_concurrency = 2
        a = held("a")
        b = held("b")
        c = _undoable(log, "c", wait_for=["a"])

    outcomes: list[Any] = []
    runner = threading.Thread(target=lambda: outcomes.append(Cancellable.run()))
    runner.start()
    meet.wait(_MEET)
    handle = Cancellable.cancel(run_ids[0], reason="customer left")
    assert isinstance(handle, DispatchHandle)  # the executing caller carries it out
    cancelled.set()
    runner.join(_MEET)
    out = outcomes[0]
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.RunCancelledError"
    assert "c" not in " ".join(log.events)  # c never started
    assert sorted(log.events[:2]) == ["run a", "run b"]
    view = Cancellable.find(out.run_id)
    assert view.status is RunStatus.CANCELLED
    # undone newest first by completion order (the order they were recorded in)
    recorded = [e.step for e in view.trace if e.type == "run"]
    assert sorted(recorded, key=str) == ["a", "b"]
    assert log.events[2:] == [f"undo {recorded[1]}", f"undo {recorded[0]}"]


@pytest.mark.parametrize(("stored", "read"), [
    (1_700_000_000.5, 1_700_000_000.5), (1_700_000_000, 1_700_000_000.0),
    (True, None), ("yesterday", None), (None, None), ([1], None),
])
def test_a_stored_started_reads_as_seconds_or_not_at_all(stored: Any, read: Any) -> None:
    from reactor.model.run_records import TraceRecord
    from reactor.model.run_view import TraceEntry

    raw = {"type": "run", "step": "a", "at": 1_700_000_001.0, "attempt": 1, "started": stored}
    record = TraceRecord.from_stored(raw)
    assert record.started == read
    assert TraceEntry.from_record(record).started == read
    assert TraceEntry.from_entry(raw).started == read
    if stored is not None:  # written back exactly as read (an older release keeps it too)
        assert record.to_stored() == raw


def test_a_trace_entry_without_started_is_what_a_sequential_run_stores() -> None:
    class Plain(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

    out = Plain.run()
    assert isinstance(out, Success)
    [run] = [e for e in Plain.find(out.run_id).trace if e.type == "run"]
    assert run.started is None
