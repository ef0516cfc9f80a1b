"""Concurrent branches under attack (docs/concepts.md, "Concurrency"): the promises of the
section held against hostile declarations, coordination, storage failures, interruptions and
workers.

As in tests/engine/test_concurrency.py, overlap is proven with barriers and events, never with
timing; a probe on :class:`~reactor.engine.branches.Branches` (``start``/``wait``) shows which
branches were in flight and lets a body wait until the executor reached a given point.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    Background,
    DispatchHandle,
    Input,
    Reactor,
    Retries,
    Step,
    async_step,
    compose,
    config,
    input,
    map_step,
    result,
    step,
    with_lock,
    with_period,
    with_semaphore,
)
from reactor.config import Runtime
from reactor.dsl import element
from reactor.engine.branches import Branch, Branches
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.state import RunState
from reactor.errors import DefinitionError, LockLost, StorageError
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.results import Failure, Halt, Success
from reactor.model.signals import halt
from reactor.model.status import RunStatus
from reactor.ports import Job
from reactor.ports.payloads import parse_payload

#: Seconds an event or barrier waits for the other side (only a broken run waits this long).
_MEET = 10.0

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts.md"


class Log:
    """A thread-safe event log."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)


class InFlight:
    """A probe on :class:`Branches`: which branches were in flight when each one started
    (``at_start``: the last start of each; ``starts``: every start), the exceptions branches
    settled with, and an event per branch set once the executor collected it
    (``settled[name]``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now: set[str] = set()
        self.at_start: dict[str, set[str]] = {}
        self.starts: list[tuple[str, set[str]]] = []
        self.settled: dict[str, threading.Event] = {}
        self.errors: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        real_start, real_wait = Branches.start, Branches.wait

        def start(group: Branches, spec: Any) -> Branch:
            with self._lock:
                self.at_start[spec.name] = set(self.now)
                self.starts.append((spec.name, set(self.now)))
                self.now.add(spec.name)
            return real_start(group, spec)

        def wait(group: Branches) -> list[Branch]:
            settled = real_wait(group)
            with self._lock:
                for branch in settled:
                    self.now.discard(branch.name)
                    self.event(branch.name).set()
                    if branch.error is not None:
                        self.errors.append((branch.name, type(branch.error).__name__))
            return settled

        monkeypatch.setattr(Branches, "start", start)
        monkeypatch.setattr(Branches, "wait", wait)

    def event(self, name: str) -> threading.Event:
        return self.settled.setdefault(name, threading.Event())


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    return fn


def _branch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("reactor-branch")]


# ----------------------------------------------------------------------------- the docs


def test_the_docs_example_runs_as_written_and_its_three_steps_overlap() -> None:
    """The first code block of "Concurrency" is a complete reactor: it used to read
    ``input("sku")`` etc. without declaring the inputs (a DefinitionError when pasted)."""
    section = _DOCS.read_text(encoding="utf-8").split("### Concurrency", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    meet = threading.Barrier(3)

    class ReserveStock(Step):
        sku = Input(str)

        def run(self) -> str:
            meet.wait(_MEET)
            return f"hold:{self.inputs.sku}"

    class Authorise(Step):
        amount = Input(Decimal)

        def run(self) -> str:
            meet.wait(_MEET)
            return f"auth:{self.inputs.amount}"

    class FraudCheck(Step):
        customer = Input(str)

        def run(self) -> str:
            meet.wait(_MEET)
            return "ok"

    class Confirm(Step):
        hold = Input(str)
        auth = Input(str)
        verdict = Input(str)

        def run(self) -> str:
            return f"{self.inputs.hold} {self.inputs.auth} {self.inputs.verdict}"

    namespace: dict[str, Any] = {
        "ReserveStock": ReserveStock, "Authorise": Authorise, "FraudCheck": FraudCheck,
        "Confirm": Confirm, "Reactor": Reactor, "Input": Input, "step": step,
        "input": input, "result": result, "Decimal": Decimal, "__name__": "docs_example",
    }
    exec(compile(code.group(1), "docs/concepts.md", "exec"), namespace)
    checkout = namespace["Checkout"]
    out = checkout.run(sku="A-1", amount=Decimal("10"), customer="c-1")
    assert isinstance(out, Success), out
    assert out.value["confirm"] == "hold:A-1 auth:10 ok"


# ----------------------------------------------------------------------------- declarations


def test_an_enormous_max_concurrency_runs_every_step_and_leaves_no_thread() -> None:
    meet = threading.Barrier(3)

    class Huge(Reactor):
        max_concurrency = 10**9
        a = step(_named(lambda inputs, ctx: meet.wait(_MEET) * 0 + 1, "a"))
        b = step(_named(lambda inputs, ctx: meet.wait(_MEET) * 0 + 2, "b"))
        c = step(_named(lambda inputs, ctx: meet.wait(_MEET) * 0 + 3, "c"))

    out = Huge.run()
    assert isinstance(out, Success) and out.value == {"a": 1, "b": 2, "c": 3}, out
    assert _branch_threads() == []


@pytest.mark.parametrize("bad", [float("inf"), 10**9 + 0.5, -(10**9), False, [2], 0])
def test_hostile_max_concurrency_values_are_refused(bad: Any) -> None:
    with pytest.raises(DefinitionError, match="max_concurrency"):
        class Bad(Reactor):
            max_concurrency = bad

            @step()
            def a(inputs: Any, ctx: Any) -> int:
                return 1


def test_a_subclass_cannot_lower_max_concurrency_below_one() -> None:
    class Base(Reactor):
        max_concurrency = 3

        @step()
        def a(inputs: Any, ctx: Any) -> int:
            return 1

    assert Base.definition.max_concurrency == 3
    with pytest.raises(DefinitionError, match="max_concurrency"):
        class Sub(Base):
            max_concurrency = 0


# ----------------------------------------------------------------------------- threads


def test_a_wide_run_leaves_no_branch_thread_behind() -> None:
    """200 independent steps with max_concurrency = 8: the run's pool is shut down (its
    threads joined) before the run returns, every time."""

    def body(i: int) -> Callable[..., int]:
        return _named(lambda inputs, ctx: i, f"s{i}")

    namespace: dict[str, Any] = {"max_concurrency": 8}
    namespace.update({f"s{i}": step(body(i)) for i in range(200)})
    wide = type("Wide", (Reactor,), namespace)
    assert isinstance(wide.run(), Success)  # warm-up: reactor's own long-lived threads start
    before = threading.active_count()
    for _ in range(3):
        out = wide.run()
        assert isinstance(out, Success) and len(out.value) == 200
        assert _branch_threads() == []
        assert threading.active_count() <= before


# ----------------------------------------------------------------------------- step-level holds


def test_two_branches_under_the_same_step_lock_key_never_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step-level lock is owned by the run's root id (re-entrant across compose): two
    branches of one run under the same key both "re-entered" it and ran at once. A branch
    whose lock key a branch in flight holds now waits for it to settle; other ready steps
    still start meanwhile (free meets locked_a at a barrier)."""
    probe = InFlight(monkeypatch)
    meet = threading.Barrier(2)

    class Locked(Reactor):
        max_concurrency = 3
        locked_a = step(_named(lambda inputs, ctx: meet.wait(_MEET) * 0 + 1, "locked_a"),
                        coordination=with_lock(key="order:1"))
        locked_b = step(_named(lambda inputs, ctx: 2, "locked_b"),
                        coordination=with_lock(key="order:1"))
        free = step(_named(lambda inputs, ctx: meet.wait(_MEET) * 0 + 3, "free"))

    out = Locked.run()
    assert isinstance(out, Success), out
    assert out.value == {"locked_a": 1, "locked_b": 2, "free": 3}
    assert "locked_a" not in probe.at_start["locked_b"]
    assert "locked_a" in probe.at_start["free"]


def test_a_step_semaphore_admits_as_many_branches_of_a_run_as_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a step-level semaphore of limit 1 (wait 0), the second branch used to contend
    with its own sibling and fail the run (SemaphoreAcquisitionError) — a run that succeeds one
    step at a time. Branches on one semaphore key run at once up to its limit (two of limit 2
    meet at a barrier), never more."""
    probe = InFlight(monkeypatch)
    pair = threading.Barrier(2)

    def slot(name: str, limit: int, barrier: threading.Barrier | None) -> Any:
        def body(inputs: Any, ctx: Any) -> str:
            if barrier is not None:
                barrier.wait(_MEET)
            return name

        return step(_named(body, name),
                    coordination=with_semaphore(key=f"pool{limit}", limit=limit))

    class Slots(Reactor):
        max_concurrency = 4
        one_a = slot("one_a", 1, None)
        one_b = slot("one_b", 1, None)
        two_a = slot("two_a", 2, pair)
        two_b = slot("two_b", 2, pair)

    out = Slots.run()
    assert isinstance(out, Success), out
    assert "one_a" not in probe.at_start["one_b"]
    assert "two_a" in probe.at_start["two_b"]


def test_steps_under_the_reactors_own_lock_key_are_serialized_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step-level lock on the reactor-level lock's key re-enters the run's own hold (one
    owner); two such branches must still not overlap."""
    probe = InFlight(monkeypatch)

    class Nested(Reactor):
        max_concurrency = 2
        coordination = with_lock(key="customer:9")
        a = step(_named(lambda inputs, ctx: 1, "a"), coordination=with_lock(key="customer:9"))
        b = step(_named(lambda inputs, ctx: 2, "b"), coordination=with_lock(key="customer:9"))

    out = Nested.run()
    assert isinstance(out, Success), out
    assert "a" not in probe.at_start["b"]
    storage = config.current().storage
    assert not storage.locks.held("customer:9")


def test_two_branches_of_one_period_key_run_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step-level period: a key's work succeeds at most once per bucket, and one step at a
    time the second step of the key is ``Skipped``. Two branches both passed the period check
    before either marked it, and both ran; the second now starts once the first settled."""
    probe = InFlight(monkeypatch)
    log = Log()

    def daily(name: str) -> Any:
        def body(inputs: Any, ctx: Any) -> str:
            log.add(f"run {name}")
            return name

        return step(_named(body, name), coordination=with_period(key="report", every="day"))

    class Reports(Reactor):
        max_concurrency = 2
        first = daily("first")
        second = daily("second")

    out = Reports.run()
    assert isinstance(out, Success), out
    assert "first" not in probe.at_start["second"]
    assert log.events == ["run first"]
    assert out.value == {"first": "first", "second": None}
    view = Reports.find(out.run_id)
    assert [e.step for e in view.trace if e.type == "skipped"] == ["second"]


# ----------------------------------------------------------------------------- storage failures


def test_a_failing_checkpoint_lets_the_branches_in_flight_finish_before_it_propagates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The storage fails recording the first branch while its sibling runs: the error used to
    propagate at once, leaving the sibling running user code (and its thread) after the
    caller had its error. Now the sibling finishes first, and nothing is recorded after the
    failed save."""
    log = Log()
    probe = InFlight(monkeypatch)
    failed = threading.Event()
    real_save = Checkpointer.save
    saves = {"n": 0}

    def save(self: Checkpointer, *, force: bool = True) -> None:
        saves["n"] += 1
        if saves["n"] == 2:  # the start checkpoint, then fast's
            failed.set()
            raise StorageError("disk gone")
        real_save(self, force=force)

    monkeypatch.setattr(Checkpointer, "save", save)

    class Fragile(Reactor):
        max_concurrency = 2

        @step()
        def fast(inputs: Any, ctx: Any) -> str:
            log.add("run fast")
            return "fast"

        @step()
        def slow(inputs: Any, ctx: Any) -> str:
            assert probe.event("fast").wait(_MEET)
            assert failed.wait(_MEET)
            log.add("run slow")
            return "slow"

    with pytest.raises(StorageError, match="disk gone"):
        Fragile.run()
    assert sorted(log.events) == ["run fast", "run slow"]  # slow finished before the raise
    assert _branch_threads() == []
    assert saves["n"] == 2  # nothing saved after the failed save


def test_an_unstorable_branch_result_fails_its_step_and_rolls_the_recorded_sibling_back() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Unstorable(Reactor):
        max_concurrency = 2

        @step()
        def good(inputs: Any, ctx: Any) -> str:
            meet.wait(_MEET)
            return "good"

        @good.undo
        def good_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo good")

        @step()
        def bad(inputs: Any, ctx: Any) -> object:
            meet.wait(_MEET)
            return object()

        @bad.compensate
        def bad_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate bad: {type(error).__name__}")

    out = Unstorable.run()
    assert isinstance(out, Failure) and out.step_name == "bad", out
    assert out.exception_class == "reactor.errors.EncodeError"
    view = Unstorable.find(out.run_id)
    assert view.status is RunStatus.FAILED and view.undo_stack == ()
    assert "bad" not in view.results
    assert log.events == ["compensate bad: EncodeError", "undo good"]


# ----------------------------------------------------------------------------- interruptions


def test_a_ctrl_c_while_a_branch_is_recorded_lets_the_others_settle_and_be_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs: "a Ctrl-C of the thread that waits for the branches stops new starts; the
    branches in flight settle and are recorded". A Ctrl-C landing while that thread saved a
    branch used to store the run ``aborted`` at once: the sibling still in flight ran on,
    unrecorded, and ``Reactor.undo`` never undid it."""
    log = Log()
    probe = InFlight(monkeypatch)
    interrupted = threading.Event()
    real_save = Checkpointer.save
    saves = {"n": 0}

    def save(self: Checkpointer, *, force: bool = True) -> None:
        saves["n"] += 1
        if saves["n"] == 2:  # while fast's checkpoint is written
            interrupted.set()
            raise KeyboardInterrupt
        real_save(self, force=force)

    monkeypatch.setattr(Checkpointer, "save", save)

    class Cut(Reactor):
        max_concurrency = 3

        @step()
        def fast(inputs: Any, ctx: Any) -> str:
            log.add("run fast")
            return "fast"

        @step()
        def slow(inputs: Any, ctx: Any) -> str:
            assert probe.event("fast").wait(_MEET)
            assert interrupted.wait(_MEET)
            log.add("run slow")
            return "slow"

        later = step(_named(lambda inputs, ctx: log.add("run later"), "later"),
                     wait_for=["fast"])

        @fast.undo
        def fast_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo fast")

        @slow.undo
        def slow_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo slow")

    with pytest.raises(KeyboardInterrupt) as caught:
        Cut.run()
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    view = Cut.find(run_id)
    assert view.status is RunStatus.ABORTED
    assert view.undo_stack == ("fast", "slow")  # in completion order; later never started
    assert _branch_threads() == []
    Cut.undo(run_id)
    Cut.undo(run_id)  # finished: a second undo does nothing more
    assert log.events == ["run fast", "run slow", "undo slow", "undo fast"]


@pytest.mark.parametrize("interruption", [SystemExit, KeyboardInterrupt])
def test_a_branch_interrupted_after_a_ctrl_c_is_compensated_exactly_once(
    monkeypatch: pytest.MonkeyPatch, interruption: type[BaseException],
) -> None:
    """A Ctrl-C of the waiting thread, then a branch whose body raises an interruption: both
    interruptions ranked alike and the first won, so the interrupted step's compensate was
    neither run nor left pending — lost. The Ctrl-C still propagates, and the aborted run
    records the interrupted step's compensate pending (``Reactor.undo`` runs it, once, with
    the failure naming the run's interruption)."""
    log = Log()
    ctrl_c = threading.Event()
    real_wait = Branches.wait
    waits = {"n": 0}

    def wait(group: Branches) -> list[Branch]:
        waits["n"] += 1
        if waits["n"] == 1:  # both branches started: Ctrl-C while waiting for them
            ctrl_c.set()
            raise KeyboardInterrupt
        return real_wait(group)

    monkeypatch.setattr(Branches, "wait", wait)

    class Twice(Reactor):
        max_concurrency = 2

        @step()
        def cut(inputs: Any, ctx: Any) -> None:
            assert ctrl_c.wait(_MEET)
            log.add("run cut")
            raise interruption()

        @cut.compensate
        def cut_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate cut: {error}")

        @step()
        def kept(inputs: Any, ctx: Any) -> str:
            assert ctrl_c.wait(_MEET)
            log.add("run kept")
            return "kept"

        @kept.undo
        def kept_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo kept")

    with pytest.raises(KeyboardInterrupt) as caught:
        Twice.run()
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    view = Twice.find(run_id)
    assert view.status is RunStatus.ABORTED and view.undo_stack == ("kept",)
    Twice.undo(run_id)
    Twice.undo(run_id)
    assert sorted(log.events[:2]) == ["run cut", "run kept"]
    assert log.events[2:] == [
        "compensate cut: step interrupted by KeyboardInterrupt", "undo kept",
    ]


def test_a_body_raising_system_exit_aborts_the_run_after_its_sibling_is_recorded() -> None:
    log = Log()
    meet = threading.Barrier(2)

    class Exits(Reactor):
        max_concurrency = 2

        @step()
        def a(inputs: Any, ctx: Any) -> str:
            meet.wait(_MEET)
            return "a"

        @a.undo
        def a_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo a")

        @step()
        def leave(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            raise SystemExit(3)

        @leave.compensate
        def leave_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add("compensate leave")

    with pytest.raises(SystemExit) as caught:
        Exits.run()
    run_id = caught.value.reactor_run_id  # type: ignore[attr-defined]
    assert Exits.find(run_id).status is RunStatus.ABORTED
    Exits.undo(run_id)
    assert log.events == ["compensate leave", "undo a"]


def test_a_branch_failing_after_a_cancel_outranks_it(
    fake_clock: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs: a branch in flight that fails after a cancel request stopped new starts
    outranks the cancel as it outranks a halt: the run is ``failed``, the failed step
    compensated and the recorded sibling undone."""
    config.configure(storage="memory://", router="inline://", clock=fake_clock,
                     cancel_check_interval=0)
    probe = InFlight(monkeypatch)
    log = Log()
    meet = threading.Barrier(3)
    cancelled = threading.Event()
    run_ids: list[str] = []

    class CancelThenFail(Reactor):
        max_concurrency = 2

        @step()
        def ok(inputs: Any, ctx: Any) -> str:
            run_ids.append(ctx.run_id)
            meet.wait(_MEET)
            assert cancelled.wait(_MEET)  # recorded after the request: the cancel is read
            return "ok"

        @ok.undo
        def ok_undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add("undo ok")

        @step()
        def broken(inputs: Any, ctx: Any) -> None:
            meet.wait(_MEET)
            assert probe.event("ok").wait(_MEET)  # fails once the cancel stopped the group
            raise RuntimeError("broken")

        @broken.compensate
        def broken_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate broken: {error}")

        after = step(_named(lambda inputs, ctx: log.add("run after"), "after"),
                     wait_for=["ok"])

    outcomes: list[Any] = []
    runner = threading.Thread(target=lambda: outcomes.append(CancelThenFail.run()))
    runner.start()
    meet.wait(_MEET)
    CancelThenFail.cancel(run_ids[0], reason="changed my mind")
    cancelled.set()
    runner.join(_MEET)
    [out] = outcomes
    assert isinstance(out, Failure) and out.step_name == "broken", out
    assert CancelThenFail.find(out.run_id).status is RunStatus.FAILED
    assert log.events == ["compensate broken: broken", "undo ok"]  # after never started


# ----------------------------------------------------------------------------- holds and retries


def test_a_reactor_hold_lost_while_branches_ran_fails_each_step_it_covered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = Log()
    meet = threading.Barrier(2)
    lost = threading.Event()
    real_lost_hold = RunState.lost_hold

    def lost_hold(self: RunState) -> LockLost | None:
        if lost.is_set() and self.holds:
            return LockLost("the order lock lapsed", key="order", primitive="lock")
        return real_lost_hold(self)

    monkeypatch.setattr(RunState, "lost_hold", lost_hold)

    def body(name: str) -> Any:
        def run(inputs: Any, ctx: Any) -> str:
            meet.wait(_MEET)
            lost.set()
            return name

        spec = step(_named(run, name))

        @spec.compensate
        def compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate {name}")

        @spec.undo
        def undo(value: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"undo {name}")

        return spec

    class Guarded(Reactor):
        max_concurrency = 2
        coordination = with_lock(key="order")
        a = body("a")
        b = body("b")

    out = Guarded.run()
    assert isinstance(out, Failure) and out.exception_class == "reactor.errors.LockLost", out
    assert sorted(log.events) == ["compensate a", "compensate b"]  # neither was recorded
    view = Guarded.find(out.run_id)
    assert sorted(e.step or "" for e in view.trace if e.type == "hold_lost") == ["a", "b"]


def test_branch_retries_wait_on_the_runtime_clock_with_their_backoff(
    sleeps: list[float],
) -> None:
    meet = threading.Barrier(2)
    tries: dict[str, int] = {"x": 0, "y": 0}

    def flaky(name: str, fails: int) -> Callable[..., str]:
        def run(inputs: Any, ctx: Any) -> str:
            tries[name] += 1
            if tries[name] == 1:
                meet.wait(_MEET)  # both first attempts overlap
            if tries[name] <= fails:
                raise RuntimeError("again")
            return name

        return _named(run, name)

    class Backoff(Reactor):
        max_concurrency = 2
        x = step(flaky("x", 2),
                 retries=Retries(max_attempts=3, backoff="exponential", base_delay=2.0))
        y = step(flaky("y", 1), retries=Retries(max_attempts=2, backoff="fixed", base_delay=5.0))

    out = Backoff.run()
    assert isinstance(out, Success) and out.value == {"x": "x", "y": "y"}, out
    assert sorted(sleeps) == [2.0, 4.0, 5.0]
    view = Backoff.find(out.run_id)
    assert {e.step: e.attempt for e in view.trace if e.type == "run"} == {"x": 3, "y": 2}


def test_sync_and_async_bodies_overlap_in_one_group() -> None:
    started = threading.Event()

    class Mixed(Reactor):
        max_concurrency = 2

        @step()
        async def remote(inputs: Any, ctx: Any) -> str:
            await asyncio.to_thread(lambda: started.wait(_MEET))
            return "remote"

        @step()
        def local(inputs: Any, ctx: Any) -> str:
            started.set()
            return "local"

        @step(r=result("remote"), l=result("local"))
        def join(inputs: Any, ctx: Any) -> str:
            return f"{inputs.r}+{inputs.l}"

        returns = "join"

    out = Mixed.run()
    assert isinstance(out, Success) and out.value == "remote+local", out


def test_a_composed_child_and_map_elements_branch_with_their_own_max_concurrency() -> None:
    child_meet = threading.Barrier(2)
    element_meet = threading.Barrier(2)

    class Child(Reactor):
        max_concurrency = 2
        a = step(_named(lambda inputs, ctx: child_meet.wait(_MEET) * 0 + 1, "a"))
        b = step(_named(lambda inputs, ctx: child_meet.wait(_MEET) * 0 + 2, "b"))

    class Line(Reactor):
        max_concurrency = 2
        x = Input(int)
        p = step(_named(lambda inputs, ctx: element_meet.wait(_MEET) * 0 + inputs.x, "p"),
                 x=input("x"))
        q = step(_named(lambda inputs, ctx: element_meet.wait(_MEET) * 0 - inputs.x, "q"),
                 x=input("x"))

    class Parent(Reactor):
        max_concurrency = 4
        items = Input(list)
        kid = compose(Child)
        lines = map_step(Line, source=input("items"), args={"x": element("lines")})

    out = Parent.run(items=[1, 2])
    assert isinstance(out, Success), out
    assert out.value["kid"] == {"a": 1, "b": 2}
    assert [dict(v) for v in out.value["lines"]] == [{"p": 1, "q": -1}, {"p": 2, "q": -2}]
    assert _branch_threads() == []


# ----------------------------------------------------------------------------- workers


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def local(manual_clock: ManualClock, fake_clock: Any) -> Iterator[Runtime]:
    """Memory storage and a local router on one manual clock (waits on the fake clock): runs
    go to :func:`worker`."""
    rt = config.configure(
        storage=MemoryStorage(clock=manual_clock),
        router=LocalRouter(clock=manual_clock, visibility_timeout=30),
        clock=fake_clock,
        context_lock_ttl=10,
    )
    yield rt
    config.reset()


@pytest.fixture
def worker(local: Runtime) -> Worker:
    return Worker(local, liveness_wait=0.0)


def _next_due(router: Any) -> float:
    [(due, body)] = router.queued()
    assert parse_payload(Job.from_json(body)) is not None
    return float(due)


def test_a_parked_branch_keeps_its_holds_when_a_sibling_settles_after_it(
    local: Runtime, worker: Worker, manual_clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a worker, ``parcel`` takes its lock, finds its semaphore full and parks (the lock
    detached and recorded for the redelivery in the run's engine state). ``label`` settled
    after it and its merge replaced the run's whole engine state with its own copy: the
    parked lock was forgotten, the redelivery took it a second time (the owner re-enters)
    and the run completed still holding it."""
    probe = InFlight(monkeypatch)
    storage = local.storage
    assert storage.semaphores.acquire("dock", "another-run", 1, 600)
    log = Log()

    class Shipping(Reactor):
        max_concurrency = 2
        background = Background(all=True)

        @step(coordination=[with_lock(key="parcel:1"), with_semaphore(key="dock", limit=1)])
        def parcel(inputs: Any, ctx: Any) -> str:
            log.add("run parcel")
            return "parcel"

        @step(coordination=with_semaphore(key="printer", limit=5))
        def label(inputs: Any, ctx: Any) -> str:
            assert probe.event("parcel").wait(_MEET)  # parcel parked and was merged first
            log.add("run label")
            return "label"

    handle = Shipping.run()
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    assert log.events == ["run label"]
    assert storage.locks.held("parcel:1")  # detached, kept for the redelivery
    assert storage.semaphores.release("dock", "another-run")
    manual_clock.advance(_next_due(local.router) - manual_clock())
    worker.run_pending()
    out = handle.wait(timeout=1)
    assert isinstance(out, Success) and out.value == {"parcel": "parcel", "label": "label"}
    assert log.events == ["run label", "run parcel"]
    assert not storage.locks.held("parcel:1")


@pytest.mark.parametrize("ending", ["fails", "halts"])
def test_a_branch_parked_while_a_sibling_ends_the_run_gives_its_holds_back(
    local: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch, ending: str,
) -> None:
    """A park (a step waiting for a hold) is no outcome of the run: a sibling's failure or
    halt that settles with it ends the run (a park used to outrank a halt: the run was
    re-enqueued and the halting body ran again), and the parked branch's detached lock is
    released instead of staying held by a run that ended."""
    probe = InFlight(monkeypatch)
    storage = local.storage
    assert storage.semaphores.acquire("dock", "another-run", 1, 600)
    log = Log()

    class Ending(Reactor):
        max_concurrency = 2
        background = Background(all=True)

        @step(coordination=[with_lock(key="parcel:1"), with_semaphore(key="dock", limit=1)])
        def parcel(inputs: Any, ctx: Any) -> str:
            log.add("run parcel")
            return "parcel"

        @step()
        def ender(inputs: Any, ctx: Any) -> None:
            assert probe.event("parcel").wait(_MEET)
            log.add("run ender")
            if ending == "halts":
                halt("nothing to ship")
            raise RuntimeError("carrier down")

    handle = Ending.run()
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    out = handle.wait(timeout=1)
    if ending == "halts":
        assert isinstance(out, Halt) and out.step_name == "ender", out
        assert Ending.find(handle.run_id).status is RunStatus.HALTED
    else:
        assert isinstance(out, Failure) and out.step_name == "ender", out
        assert Ending.find(handle.run_id).status is RunStatus.FAILED
    assert log.events == ["run ender"]
    assert not storage.locks.held("parcel:1")
    assert local.router.size() == 0  # type: ignore[attr-defined]


def test_a_second_failing_branch_whose_compensate_finds_its_lock_taken_never_parks_the_run(
    local: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a worker, a rollback whose undo or compensate finds its lock taken parks: the run's
    rollback record makes the redelivery resume it. A second failing sibling's compensate is
    no part of that record: it parked the run anyway, before the run's failure was recorded,
    so the redelivery forgot the failure and ran both failed steps again. It now waits in the
    thread (up to its ``rollback_wait``) as a synchronous rollback does, and the run fails."""
    storage = local.storage
    log = Log()
    first_failed = threading.Event()
    real_wait = Branches.wait

    def wait(group: Branches) -> list[Branch]:
        settled = real_wait(group)
        for branch in settled:
            if branch.name == "first":
                first_failed.set()
            if branch.name == "second":  # another run takes the bay before its compensate
                assert storage.locks.acquire("bay", "another-run", 600) > 0
        return settled

    monkeypatch.setattr(Branches, "wait", wait)

    class TwoFail(Reactor):
        max_concurrency = 2
        background = Background(all=True)

        @step()
        def first(inputs: Any, ctx: Any) -> None:
            log.add("run first")
            raise RuntimeError("first broke")

        @first.compensate
        def first_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate first: {error}")

        @step(coordination=with_lock(key="bay", rollback_wait=0))
        def second(inputs: Any, ctx: Any) -> None:
            assert first_failed.wait(_MEET)
            log.add("run second")
            raise RuntimeError("second broke")

        @second.compensate
        def second_compensate(error: Any, inputs: Any, ctx: Any) -> None:
            log.add(f"compensate second: {error}")

    handle = TwoFail.run()
    assert isinstance(handle, DispatchHandle)
    worker.run_pending()
    out = handle.wait(timeout=1)
    assert isinstance(out, Failure) and out.step_name == "first", out
    assert [(f.step, f.kind, f.reason) for f in out.rollback_failures] == [
        ("second", "compensate", "coordination_unavailable")
    ]
    assert log.events == ["run first", "run second", "compensate first: first broke"]
    assert TwoFail.find(handle.run_id).status is RunStatus.FAILED
    assert local.router.size() == 0  # type: ignore[attr-defined]


def test_a_branch_reading_an_async_unit_parks_in_its_own_thread_and_keeps_its_lock_alone(
    local: Runtime, worker: Worker, manual_clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step whose lock key needs an ``async_step`` unit's result: its key is not computed
    ahead (the read would park the executor's thread, in a worker): the branch reads (and
    parks) in its own thread, and meanwhile no branch under a lock of the run starts."""
    probe = InFlight(monkeypatch)
    log = Log()

    class Reader(Reactor):
        max_concurrency = 3
        background = Background(all=True)

        @async_step()
        def unit(inputs: Any, ctx: Any) -> str:
            log.add("run unit")
            return "k"

        @step(v=result("unit"), coordination=with_lock(key=lambda i: f"bay:{i.v}"))
        def reader(inputs: Any, ctx: Any) -> str:
            log.add("run reader")
            return f"read {inputs.v}"

        other = step(_named(lambda inputs, ctx: log.add("run other"), "other"),
                     coordination=with_lock(key="bay:k"))
        free = step(_named(lambda inputs, ctx: log.add("run free"), "free"))

    handle = Reader.run()
    assert isinstance(handle, DispatchHandle)
    for _ in range(20):
        worker.run_pending()
        if Reader.find(handle.run_id).status is RunStatus.COMPLETED:
            break
        manual_clock.advance(60)
    out = handle.wait(timeout=1)
    assert isinstance(out, Success), out
    assert out.value["reader"] == "read k"
    assert sorted(log.events) == ["run free", "run other", "run reader", "run unit"]
    assert ("reader", "Park") in probe.errors  # the branch parked, not the executor
    for name, in_flight in probe.starts:  # never both in flight
        assert not {"reader", "other"} <= {name} | in_flight, probe.starts
    assert not local.storage.locks.held("bay:k")
