"""Operator suspend under attack (docs/operations.md, "Suspend and unsuspend";
reactor/engine/run_control/suspend.py, reactor/engine/run_control/suspension.py,
reactor/engine/executor.py, reactor/engine/run_control/cancel/notice.py).

A run is suspended at every point of its life: queued, between steps in a worker, parked on
a lock or a semaphore, waiting on a retry delay, paused at an interrupt, during a fan-out
map, inside a composed child, with concurrent branches, with an ``async_reactor`` child and
a deadline; suspend and unsuspend race each other from threads; cancel, undo, retry and
resume meet a suspended run; hostile arguments; ``suspend_all`` over many runs. Each
completed step runs exactly once and is undone at most once.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Paused, Reactor, Retries, with_lock
from reactor.coordination import Lock
from reactor.dsl import async_reactor, compose, element, input, interrupt, map_step, step
from reactor.dsl.inputs import Input
from reactor.engine.async_reactor import child_run_id
from reactor.errors import (
    InterruptError,
    ReactorError,
    RunNotFoundError,
    RunStateError,
    SuspendArgumentError,
)
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestEnvironment


class _Journal:
    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def count(self, event: str) -> int:
        return self.events.count(event)


def _chain(journal: _Journal, *, handed: Background | None = None, hook: Any = None,
           names: tuple[str, ...] = ("a", "b", "c")) -> type[Reactor]:
    """Steps ``names`` in a line, each logged and undoable; ``hook(name, ctx)`` runs inside
    each body."""
    namespace: dict[str, Any] = {"background": handed}
    previous: str | None = None
    for name in names:
        def body(inputs: Any, ctx: Any, _n: str = name) -> str:
            journal.add(f"run {_n}")
            if hook is not None:
                hook(_n, ctx)
            return _n

        def undo(result: Any, inputs: Any, ctx: Any, _n: str = name) -> None:
            journal.add(f"undo {_n}")

        body.__name__ = name
        spec = step(wait_for=[previous] if previous else [])(body)
        spec.undo(undo)
        namespace[name] = spec
        previous = name
    return type("Chain", (Reactor,), namespace)


def _once_each(journal: _Journal, names: tuple[str, ...] = ("a", "b", "c")) -> None:
    runs = Counter(e for e in journal.events if e.startswith("run "))
    undos = Counter(e for e in journal.events if e.startswith("undo "))
    for name in names:
        assert runs[f"run {name}"] <= 1, journal.events
        assert undos[f"undo {name}"] <= 1, journal.events


# ----------------------------------------------------------------------------- every point


def test_a_queued_run_suspended_then_unsuspended_runs_each_step_once() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        assert isinstance(handle, DispatchHandle)
        assert chain.suspend(handle.run_id, reason="r", by="b") == "suspended"
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.SUSPENDED
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_defect_a_run_suspended_at_once_has_no_suspended_trace_entry() -> None:
    journal = _Journal()
    with TestEnvironment():
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        assert isinstance(handle, DispatchHandle)
        assert chain.suspend(handle.run_id, reason="incident") == "suspended"
        view = chain.find(handle.run_id)
    assert [e.type for e in view.trace].count("suspended") == 1, [e.type for e in view.trace]


def test_a_worker_run_suspends_between_steps_and_resumes_at_the_next() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def hook(name: str, ctx: Any) -> None:
            if name == "b":
                assert chain.suspend(ctx.run_id) == "requested"
                env.clock.advance(2)

        chain = _chain(journal, handed=Background(all=True), hook=hook)
        handle = chain.run()
        env.run_until_idle()
        view = chain.find(handle.run_id)
        assert view.status is RunStatus.SUSPENDED and view.current_step == "c"
        assert journal.events == ["run a", "run b"]
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_a_run_parked_on_a_reactor_lock_is_suspended_and_releases_nothing_it_lacks() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        class Locked(Reactor):
            background = Background(all=True)
            coordination = with_lock(key="acct", auto_extend=False)

            @step()
            def post(inputs: Any, ctx: Any) -> str:
                journal.add("run post")
                return "p"

        other = Lock(env.storage.locks, "acct", owner="other", ttl=3600, auto_extend=False)
        assert other.try_acquire()
        handle = Locked.run()
        env.run_pending()  # parks on the held lock
        answer = Locked.suspend(handle.run_id)
        assert answer in ("suspended", "requested")
        env.clock.advance(60)
        env.run_until_idle()
        assert Locked.find(handle.run_id).status is RunStatus.SUSPENDED
        assert env.storage.locks.held("acct")  # the other holder's lock is untouched
        assert other.release()
        assert Locked.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert Locked.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run post"]


def test_a_run_waiting_on_a_retry_delay_is_suspended_and_keeps_its_attempt_count() -> None:
    attempts: list[int] = []
    with TestEnvironment() as env:
        class Flaky(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=30))
            def call(inputs: Any, ctx: Any) -> str:
                attempts.append(ctx.attempt)
                if ctx.attempt == 1:
                    raise ConnectionError("down")
                return "ok"

        handle = Flaky.run()
        env.run_pending()  # attempt 1 fails; its retry is handed to the queue
        assert attempts == [1]
        assert Flaky.suspend(handle.run_id) in ("suspended", "requested")
        env.run_until_idle()
        assert Flaky.find(handle.run_id).status is RunStatus.SUSPENDED
        assert attempts == [1]
        assert Flaky.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = Flaky.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED and view.results["call"] == "ok"
    assert attempts == [1, 2]


def _approval(journal: _Journal, *, during_reserve: Any = None) -> type[Reactor]:
    class Approval(Reactor):
        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.add("run reserve")
            if during_reserve is not None:
                during_reserve(ctx)
            return "r"

        @reserve.undo
        def release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.add("undo reserve")

        approval = interrupt(wait_for="reserve")

        @step(wait_for=["approval"])
        def ship(inputs: Any, ctx: Any) -> str:
            journal.add("run ship")
            return "s"

    return Approval


def test_defect_resume_of_a_run_suspended_under_it_returns_a_paused_with_no_step() -> None:
    journal = _Journal()
    answers: list[str] = []
    with TestEnvironment() as env:
        def ask(ctx: Any) -> None:
            answers.append(approval.suspend(ctx.run_id, reason="hold"))

        approval = _approval(journal, during_reserve=ask)
        paused = approval.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        assert paused.step == "approval" and answers == ["requested"]
        out = approval.resume(paused.run_id, payload={"ok": True})
        view = approval.find(paused.run_id)
        assert view.status is RunStatus.SUSPENDED  # the request was honoured
        assert "run ship" not in journal.events
        assert approval.unsuspend(paused.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        final = approval.find(paused.run_id)
    assert final.status is RunStatus.COMPLETED and journal.count("run ship") == 1
    assert isinstance(out, DispatchHandle), out


def test_a_paused_run_suspended_refuses_resume_and_cancel_undoes_once() -> None:
    journal = _Journal()
    with TestEnvironment():
        approval = _approval(journal)
        paused = approval.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        assert approval.suspend(paused.run_id) == "suspended"
        with pytest.raises(InterruptError):
            approval.resume(paused.run_id, payload={})
        out = approval.cancel(paused.run_id, reason="stop")
        assert not out.success  # type: ignore[union-attr]
        view = approval.find(paused.run_id)
        with pytest.raises(RunStateError):
            approval.unsuspend(paused.run_id)
    assert view.status is RunStatus.CANCELLED
    assert journal.events == ["run reserve", "undo reserve"]


def test_suspending_a_map_element_is_refused_and_the_map_suspends_as_a_whole() -> None:
    journal = _Journal()
    refused: list[str] = []
    answers: list[str] = []
    with TestEnvironment() as env:
        class Pick(Reactor):
            x = Input(int)

            @step(x=input("x"))
            def pick(inputs: Any, ctx: Any) -> int:
                journal.add(f"run pick {inputs.x}")
                if inputs.x == 2:
                    try:
                        Pick.suspend(ctx.run_id)
                    except RunStateError as exc:
                        refused.append(str(exc))
                    answers.append(Wave.suspend(root[0], reason="map"))
                    env.clock.advance(2)
                return inputs.x

            @pick.undo
            def put_back(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add(f"undo pick {inputs.x}")

        root: list[str] = []

        class Wave(Reactor):
            background = Background(all=True)
            items = Input(list)

            @step()
            def open_(inputs: Any, ctx: Any) -> str:
                root.append(ctx.run_id)
                journal.add("run open")
                return "o"

            picks = map_step(Pick, source=input("items"), args={"x": element("picks")},
                             wait_for=["open_"])

            @step(wait_for=["picks"])
            def seal(inputs: Any, ctx: Any) -> str:
                journal.add("run seal")
                return "s"

        handle = Wave.run(items=[1, 2, 3])
        env.run_until_idle()
        held = Wave.find(handle.run_id)
        assert held.status is RunStatus.SUSPENDED, held.status
        assert "run seal" not in journal.events
        assert Wave.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = Wave.find(handle.run_id)
    assert len(refused) == 1 and "map element" in refused[0]
    assert answers == ["requested"]
    assert view.status is RunStatus.COMPLETED
    for x in (1, 2, 3):
        assert journal.count(f"run pick {x}") == 1, journal.events
    assert journal.count("run seal") == 1 and journal.count("run open") == 1


def test_a_run_with_a_composed_child_suspends_after_the_child_step() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        class Child(Reactor):
            @step()
            def c1(inputs: Any, ctx: Any) -> str:
                journal.add("run c1")
                assert Parent.suspend(ctx.root_run_id if hasattr(ctx, "root_run_id")
                                      else root[0]) == "requested"
                env.clock.advance(2)
                return "1"

            @step(wait_for=["c1"])
            def c2(inputs: Any, ctx: Any) -> str:
                journal.add("run c2")
                return "2"

        root: list[str] = []

        class Parent(Reactor):
            background = Background(all=True)

            @step()
            def first(inputs: Any, ctx: Any) -> str:
                root.append(ctx.run_id)
                journal.add("run first")
                return "f"

            child = compose(Child, wait_for=["first"])

            @step(wait_for=["child"])
            def last(inputs: Any, ctx: Any) -> str:
                journal.add("run last")
                return "l"

        handle = Parent.run()
        env.run_until_idle()
        view = Parent.find(handle.run_id)
        assert view.status is RunStatus.SUSPENDED, view.status
        assert "run last" not in journal.events
        assert Parent.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert Parent.find(handle.run_id).status is RunStatus.COMPLETED
    for e in ("run first", "run c1", "run c2", "run last"):
        assert journal.count(e) == 1, journal.events


def test_concurrent_branches_settle_then_the_run_suspends_once() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        both = threading.Barrier(2, timeout=10)
        answers: list[str] = []

        class Fork(Reactor):
            max_concurrency = 3

            @step()
            def left(inputs: Any, ctx: Any) -> str:
                journal.add("run left")
                both.wait()
                answers.append(Fork.suspend(ctx.run_id))
                env.clock.advance(2)
                return "l"

            @left.undo
            def undo_left(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo left")

            @step()
            def right(inputs: Any, ctx: Any) -> str:
                both.wait()
                journal.add("run right")
                return "r"

            @right.undo
            def undo_right(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo right")

            @step(wait_for=["left", "right"])
            def join(inputs: Any, ctx: Any) -> str:
                journal.add("run join")
                return "j"

        out = Fork.run()
        assert isinstance(out, DispatchHandle)
        view = Fork.find(out.run_id)
        assert view.status is RunStatus.SUSPENDED
        assert set(view.results) >= {"left", "right"}
        assert [e.type for e in view.trace].count("suspended") == 1
        assert "run join" not in journal.events
        cancelled = Fork.cancel(out.run_id)
        assert not cancelled.success  # type: ignore[union-attr]
        env.run_until_idle()
    assert answers == ["requested"]
    assert journal.count("undo left") == 1 and journal.count("undo right") == 1


def test_an_async_reactor_child_and_a_deadline_with_a_suspended_parent() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        class Kid(Reactor):
            @step()
            def hold(inputs: Any, ctx: Any) -> str:
                journal.add("run hold")
                return "h"

            @hold.undo
            def unhold(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo hold")

            gate = interrupt(wait_for="hold")

        class Parent(Reactor):
            background = Background(all=True)

            @step()
            def open_(inputs: Any, ctx: Any) -> str:
                journal.add("run open")
                return "o"

            @open_.undo
            def close(result: Any, inputs: Any, ctx: Any) -> None:
                journal.add("undo open")

            kid = async_reactor(Kid, wait_for=["open_"])

            @step(wait_for=["kid"])
            def after(inputs: Any, ctx: Any) -> str:
                journal.add("run after")
                return "a"

        handle = Parent.run(deadline=600)
        env.run_pending()  # open_, the child dispatched and paused at its gate
        kid_id = child_run_id(handle.run_id, "kid")
        # the parent's poll job holds its stamp: asked, it suspends when the poll comes back
        assert Parent.suspend(handle.run_id, reason="incident") == "requested"
        env.clock.advance(10)
        assert Parent.find(handle.run_id).status is RunStatus.SUSPENDED
        assert Kid.find(kid_id).status is RunStatus.PAUSED  # the child is a run of its own
        env.clock.advance(700)  # the deadline passes while it is suspended
        env.run_until_idle()
        view = Parent.find(handle.run_id)
        kid = Kid.find(kid_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.RunDeadlineExceeded"
    assert kid.status in TERMINAL_STATUSES
    assert "run after" not in journal.events
    assert journal.count("undo open") == 1 and journal.count("undo hold") <= 1


# ----------------------------------------------------------------------------- races


def test_double_suspend_from_threads_keeps_the_first_reason_and_one_entry() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        start = threading.Barrier(8, timeout=10)
        answers: list[Any] = []

        def go(i: int) -> None:
            start.wait()
            try:
                answers.append(chain.suspend(handle.run_id, reason=f"r{i}", by=f"u{i}"))
            except ReactorError as exc:  # the lock stayed held by another suspend
                answers.append(type(exc).__name__)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        view = chain.find(handle.run_id)
        assert view.status is RunStatus.SUSPENDED, answers
        assert view.suspension is not None
        assert view.suspension.reason == f"r{view.suspension.by[1:]}"  # one request, whole
        assert set(answers) <= {"suspended", "requested"}, answers
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_double_unsuspend_from_threads_lets_the_run_go_once() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        assert chain.suspend(handle.run_id) == "suspended"
        start = threading.Barrier(6, timeout=10)
        answers: list[Any] = []

        def go() -> None:
            start.wait()
            try:
                answers.append(chain.unsuspend(handle.run_id))
            except RunStateError:
                answers.append("refused")

        threads = [threading.Thread(target=go) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert answers.count(RunStatus.RUNNING) == 1, answers
        assert answers.count("refused") == 5
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_suspend_again_after_unsuspend_uses_a_fresh_claim() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        for i in range(3):
            assert chain.suspend(handle.run_id, reason=f"r{i}") == "suspended"
            view = chain.find(handle.run_id)
            assert view.suspension is not None and view.suspension.reason == f"r{i}"
            assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_unsuspend_of_a_run_not_suspended_is_refused_and_changes_nothing() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        with pytest.raises(RunStateError, match="not suspended"):
            chain.unsuspend(handle.run_id)
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
        with pytest.raises(RunStateError, match="not suspended"):
            chain.unsuspend(handle.run_id)
    assert journal.events == ["run a", "run b", "run c"]


# ----------------------------------------------------------------------------- other controls


def test_undo_and_retry_of_a_suspended_run_change_nothing() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def hook(name: str, ctx: Any) -> None:
            if name == "a":
                chain.suspend(ctx.run_id)
                env.clock.advance(2)

        chain = _chain(journal, handed=Background(all=True), hook=hook)
        handle = chain.run()
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.SUSPENDED
        for control in (chain.undo, chain.retry):
            try:
                control(handle.run_id)
            except ReactorError:
                pass
            env.run_until_idle()
            view = chain.find(handle.run_id)
            assert view.status is RunStatus.SUSPENDED, (control, view.status)
        assert journal.events == ["run a"]
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"run_id": 7}, "run_id"),
    ({"run_id": None}, "run_id"),
    ({"run_id": b"abc"}, "run_id"),
    ({"run_id": ""}, "run_id"),
    ({"reason": ["x"]}, "reason"),
    ({"reason": "x" * 1001}, "reason"),
    ({"by": 1.5}, "by"),
    ({"by": "y" * 100_000}, "by"),
])
def test_hostile_arguments_are_refused_before_anything_is_read(
    kwargs: dict[str, Any], field: str,
) -> None:
    journal = _Journal()
    with TestEnvironment():
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        args = {"run_id": handle.run_id, **kwargs}
        run_id = args.pop("run_id")
        with pytest.raises(SuspendArgumentError) as caught:
            chain.suspend(run_id, **args)
        assert caught.value.field == field
        assert chain.find(handle.run_id).status is RunStatus.PENDING or \
            chain.find(handle.run_id).status is RunStatus.RUNNING


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "nul\x00byte", "é" * 1000])
def test_odd_texts_are_refused_or_stored_and_shown_back(text: str) -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        try:
            answer = chain.suspend(handle.run_id, reason=text, by=text)
        except SuspendArgumentError as exc:
            assert exc.field in ("reason", "by")
            env.run_until_idle()
            assert chain.find(handle.run_id).status is RunStatus.COMPLETED
            return
        assert answer == "suspended"
        view = chain.find(handle.run_id)
        assert view.suspension is not None and view.suspension.reason == text
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_suspend_all_holds_every_run_over_several_pages_and_unsuspend_all_lets_them_go() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True), names=("a",))
        handles = [chain.run() for _ in range(620)]
        counts = chain.suspend_all(reason="incident", by="ops")
        assert counts == {"suspended": 620, "requested": 0, "skipped": 0}
        env.run_until_idle()
        assert journal.events == []
        back = chain.unsuspend_all()
        assert back == {"running": 620, "paused": 0, "skipped": 0}
        assert chain.unsuspend_all() == {"running": 0, "paused": 0, "skipped": 0}
        env.run_until_idle()
        statuses = {chain.find(h.run_id).status for h in handles}
    assert statuses == {RunStatus.COMPLETED}
    assert journal.count("run a") == 620


def test_a_very_long_run_id_is_simply_not_found() -> None:
    with TestEnvironment():
        chain = _chain(_Journal())
        with pytest.raises(RunNotFoundError):
            chain.suspend("x" * 1_000_000)
        with pytest.raises(RunNotFoundError):
            chain.unsuspend("x" * 1_000_000)


def test_defect_suspend_all_again_counts_no_suspended_run() -> None:
    with TestEnvironment():
        chain = _chain(_Journal(), handed=Background(all=True), names=("a",))
        for _ in range(3):
            chain.run()
        assert chain.suspend_all() == {"suspended": 3, "requested": 0, "skipped": 0}
        again = chain.suspend_all()
    assert again == {"suspended": 3, "requested": 0, "skipped": 0}, again


@pytest.mark.parametrize("round_", range(5))
def test_suspend_and_cancel_racing_from_threads_undo_each_step_at_most_once(round_: int) -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def hook(name: str, ctx: Any) -> None:
            if name == "b":
                chain.suspend(ctx.run_id)
                env.clock.advance(2)

        chain = _chain(journal, handed=Background(all=True), hook=hook)
        handle = chain.run()
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.SUSPENDED
        start = threading.Barrier(3, timeout=10)
        outcomes: list[str] = []

        def call(what: Any) -> None:
            start.wait()
            try:
                what(handle.run_id)
                outcomes.append(what.__name__)
            except ReactorError as exc:
                outcomes.append(type(exc).__name__)

        threads = [threading.Thread(target=call, args=(f,))
                   for f in (chain.cancel, chain.unsuspend, chain.suspend)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        env.run_until_idle()
        view = chain.find(handle.run_id)
        if view.status is RunStatus.SUSPENDED:  # the suspend came last: let it go
            chain.unsuspend(handle.run_id)
            env.run_until_idle()
            view = chain.find(handle.run_id)
    assert view.status in (RunStatus.CANCELLED, RunStatus.COMPLETED), (view.status, outcomes)
    _once_each(journal)
    if view.status is RunStatus.CANCELLED:
        assert journal.count("undo a") == 1 and journal.count("undo b") == 1
    else:
        assert journal.count("run c") == 1 and "undo a" not in journal.events


def test_a_requested_suspend_loses_to_a_failing_step_the_run_rolls_back_once() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        def hook(name: str, ctx: Any) -> None:
            if name == "b":
                assert chain.suspend(ctx.run_id) == "requested"
                env.clock.advance(2)
                raise RuntimeError("b failed")

        chain = _chain(journal, handed=Background(all=True), hook=hook)
        handle = chain.run()
        env.run_until_idle()
        view = chain.find(handle.run_id)
        with pytest.raises(RunStateError):
            chain.unsuspend(handle.run_id)
    assert view.status is RunStatus.FAILED
    assert "run c" not in journal.events
    assert journal.count("undo a") == 1
    _once_each(journal)


def test_suspending_a_run_rolling_back_or_finished_is_refused() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        refusals: list[str] = []

        def hook(name: str, ctx: Any) -> None:
            if name == "c":
                raise RuntimeError("c failed")

        chain = _chain(journal, handed=Background(all=True), hook=hook)

        handle = chain.run()
        env.run_until_idle()
        for call in (chain.suspend, chain.unsuspend):
            try:
                call(handle.run_id)
            except ReactorError as exc:
                refusals.append(type(exc).__name__)
        view = chain.find(handle.run_id)
    assert view.status is RunStatus.FAILED
    assert refusals == ["RunFinishedError", "RunStateError"]
    assert journal.count("undo a") == 1 and journal.count("undo b") == 1


def test_defect_an_active_interrupt_expiry_is_lost_across_a_suspension() -> None:
    undone: list[str] = []
    with TestEnvironment() as env:
        class Approval(Reactor):
            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            @reserve.undo
            def release(result: Any, inputs: Any, ctx: Any) -> None:
                undone.append("reserve")

            approval = interrupt(wait_for="reserve", timeout=60, expiry="active")

            @step(wait_for=["approval"])
            def ship(inputs: Any, ctx: Any) -> str:
                return "s"

        paused = Approval.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        env.clock.advance(10)
        assert Approval.suspend(paused.run_id) == "suspended"
        env.clock.advance(60)  # the interrupt's timeout passes while it is suspended
        assert Approval.find(paused.run_id).status is RunStatus.SUSPENDED
        assert Approval.unsuspend(paused.run_id) is RunStatus.PAUSED
        env.clock.advance(600)
        env.run_until_idle()
        view = Approval.find(paused.run_id)
    # past its timeout, with an active expiry: expired and rolled back, not paused forever
    assert view.status is RunStatus.FAILED, view.status
    assert undone == ["reserve"]


def test_a_suspended_paused_run_keeps_its_correlation_id_for_after_unsuspend() -> None:
    shipped: list[str] = []
    with TestEnvironment():
        class Approval(Reactor):
            order = Input(str)

            @step()
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r"

            approval = interrupt(wait_for="reserve",
                                 correlation_id=input("order", transform=lambda v: f"o:{v}"))

            @step(wait_for=["approval"])
            def ship(inputs: Any, ctx: Any) -> str:
                shipped.append("ship")
                return "s"

        paused = Approval.run(order="9")
        assert isinstance(paused, Paused) and paused.run_id is not None
        assert Approval.suspend(paused.run_id) == "suspended"
        with pytest.raises(InterruptError):
            Approval.resume(correlation_id="o:9", payload={})
        assert shipped == []
        assert Approval.unsuspend(paused.run_id) is RunStatus.PAUSED
        out = Approval.resume(correlation_id="o:9", payload={})
    assert out.success, out  # type: ignore[union-attr]
    assert shipped == ["ship"]


def test_a_suspend_read_before_another_suspension_merges_into_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactor.engine import api

    journal = _Journal()
    loaded = threading.Event()
    go_on = threading.Event()
    answers: list[str] = []
    real_load = api.load_run

    def slow_load(*args: Any, **kwargs: Any) -> Any:
        ctx = real_load(*args, **kwargs)
        if threading.current_thread().name == "late-operator":
            loaded.set()
            assert go_on.wait(10)
        return ctx

    monkeypatch.setattr(api, "load_run", slow_load)
    with TestEnvironment() as env:
        late = threading.Thread(
            target=lambda: answers.append(chain.suspend(run_id[0], reason="late")),
            name="late-operator",
        )

        def hook(name: str, ctx: Any) -> None:
            if name == "a":
                run_id.append(ctx.run_id)
                late.start()  # reads the run (generation 0) and waits
                assert loaded.wait(10)
                assert chain.suspend(ctx.run_id, reason="first") == "requested"
                env.clock.advance(2)
            if name == "b":  # the run was suspended and unsuspended: generation 1
                go_on.set()
                late.join(10)
                env.clock.advance(2)

        run_id: list[str] = []
        chain = _chain(journal, handed=Background(all=True), hook=hook)
        handle = chain.run()
        env.run_pending()
        assert chain.find(handle.run_id).status is RunStatus.SUSPENDED
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = chain.find(handle.run_id)
    # A late suspend that read the run before the first suspension (generation 0) claims the
    # same path: first writer wins, so it merges into that suspension, which the unsuspend
    # ended. "requested" is a linearizable answer (its request was honoured, before b), the
    # run then goes on: each step once, one suspended entry.
    assert answers == ["requested"]
    assert view.status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]
    assert [e.type for e in view.trace].count("suspended") == 1


def test_a_run_whose_holder_died_is_asked_then_suspended_when_its_job_comes_back() -> None:
    from reactor.model.keys import run_liveness_key

    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        dead = Lock(env.storage.locks, run_liveness_key(handle.run_id), owner="dead-worker",
                    ttl=30, auto_extend=False)
        assert dead.try_acquire()  # a worker took the run and died
        assert chain.suspend(handle.run_id, reason="incident") == "requested"
        env.clock.advance(60)  # its lease runs out
        assert chain.suspend(handle.run_id, reason="again") == "suspended"
        view = chain.find(handle.run_id)
        assert view.suspension is not None and view.suspension.reason == "incident"
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.SUSPENDED
        assert journal.events == []
        assert chain.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_a_requested_suspend_is_honoured_when_a_redelivered_job_takes_the_run() -> None:
    from reactor.model.keys import run_liveness_key

    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        handle = chain.run()
        dead = Lock(env.storage.locks, run_liveness_key(handle.run_id), owner="dead-worker",
                    ttl=30, auto_extend=False)
        assert dead.try_acquire()
        assert chain.suspend(handle.run_id) == "requested"
        env.clock.advance(60)  # the holder's lease runs out; nobody calls suspend again
        env.run_until_idle()
        view = chain.find(handle.run_id)
    assert view.status is RunStatus.SUSPENDED, (view.status, journal.events)
    assert journal.events == []


def test_defect_a_suspended_runs_fan_out_keeps_throwing_batches() -> None:
    from reactor import FanOut

    journal = _Journal()
    answers: list[str] = []
    root: list[str] = []
    with TestEnvironment() as env:
        class Pick(Reactor):
            x = Input(int)

            @step(x=input("x"))
            def pick(inputs: Any, ctx: Any) -> int:
                journal.add(f"run pick {inputs.x}")
                if inputs.x == 1:
                    answers.append(Wave.suspend(root[0], reason="incident"))
                return inputs.x

        class Wave(Reactor):
            background = Background(all=True)
            items = Input(list)

            @step()
            def open_(inputs: Any, ctx: Any) -> str:
                root.append(ctx.run_id)
                return "o"

            picks = map_step(Pick, source=input("items"), args={"x": element("picks")},
                             fan_out=FanOut(batch_size=2), wait_for=["open_"])

            @step(wait_for=["picks"])
            def seal(inputs: Any, ctx: Any) -> str:
                journal.add("run seal")
                return "s"

        handle = Wave.run(items=[1, 2, 3, 4, 5, 6])
        env.run_until_idle()
        held = Wave.find(handle.run_id).status
        while_held = list(journal.events)
        if held is RunStatus.SUSPENDED:
            Wave.unsuspend(handle.run_id)
            env.run_until_idle()
        view = Wave.find(handle.run_id)
    assert answers == ["suspended"] and held is RunStatus.SUSPENDED
    assert view.status is RunStatus.COMPLETED
    for x in range(1, 7):
        assert journal.count(f"run pick {x}") == 1
    assert journal.count("run seal") == 1
    # only the batch in flight when it was suspended ran before the unsuspend
    assert sorted(while_held) == ["run pick 1", "run pick 2"], while_held


def test_a_run_paused_inside_a_composed_child_is_suspended_and_resumed_after() -> None:
    journal = _Journal()
    with TestEnvironment():
        class Child(Reactor):
            @step()
            def c1(inputs: Any, ctx: Any) -> str:
                journal.add("run c1")
                return "1"

            gate = interrupt(wait_for="c1")

            @step(wait_for=["gate"])
            def c2(inputs: Any, ctx: Any) -> str:
                journal.add("run c2")
                return "2"

        class Parent(Reactor):
            child = compose(Child)

            @step(wait_for=["child"])
            def last(inputs: Any, ctx: Any) -> str:
                journal.add("run last")
                return "l"

        paused = Parent.run()
        assert isinstance(paused, Paused) and paused.run_id is not None
        assert paused.step == "child.gate"
        assert Parent.suspend(paused.run_id) == "suspended"
        with pytest.raises(InterruptError):
            Parent.resume(paused.run_id, step=paused.step, payload={})
        assert Parent.unsuspend(paused.run_id) is RunStatus.PAUSED
        out = Parent.resume(paused.run_id, step=paused.step, payload={})
    assert out.success, out  # type: ignore[union-attr]
    assert journal.events == ["run c1", "run c2", "run last"]


def test_an_awaited_run_suspended_under_its_caller_gives_a_dispatch_handle() -> None:
    import asyncio

    journal = _Journal()
    with TestEnvironment() as env:
        class Async(Reactor):
            @step()
            async def a(inputs: Any, ctx: Any) -> str:
                journal.add("run a")
                assert Async.suspend(ctx.run_id) == "requested"
                env.clock.advance(2)
                return "a"

            @step(wait_for=["a"])
            async def b(inputs: Any, ctx: Any) -> str:
                journal.add("run b")
                return "b"

        out = asyncio.run(Async.arun())
        assert isinstance(out, DispatchHandle)
        assert Async.find(out.run_id).status is RunStatus.SUSPENDED
        assert Async.unsuspend(out.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert Async.find(out.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b"]


def test_suspend_through_another_reactor_is_not_found_and_through_the_base_class_works() -> None:
    journal = _Journal()
    with TestEnvironment() as env:
        chain = _chain(journal, handed=Background(all=True))
        class Other(Reactor):
            @step()
            def x(inputs: Any, ctx: Any) -> str:
                return "x"

        other = Other
        handle = chain.run()
        with pytest.raises(RunNotFoundError):
            other.suspend(handle.run_id)
        with pytest.raises(RunNotFoundError):
            other.unsuspend(handle.run_id)
        assert chain.find(handle.run_id).status is not RunStatus.SUSPENDED
        assert Reactor.suspend(handle.run_id, by="ops") == "suspended"
        env.run_until_idle()
        assert journal.events == []
        assert Reactor.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert chain.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c"]


def test_a_suspend_requested_during_an_attempt_that_hands_its_retry_off_holds_the_retry() -> None:
    attempts: list[int] = []
    answers: list[str] = []
    with TestEnvironment() as env:
        class Flaky(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=30))
            def call(inputs: Any, ctx: Any) -> str:
                attempts.append(ctx.attempt)
                if ctx.attempt == 1:
                    answers.append(Flaky.suspend(ctx.run_id, reason="hold the retry"))
                    raise ConnectionError("down")
                return "ok"

        handle = Flaky.run()
        env.clock.advance(31)  # the retry's job comes back and finds the request
        view = Flaky.find(handle.run_id)
        assert view.status is RunStatus.SUSPENDED, view.status
        assert attempts == [1] and answers == ["requested"]
        assert view.suspension is not None and view.suspension.reason == "hold the retry"
        env.clock.advance(3600)
        assert attempts == [1]
        assert Flaky.unsuspend(handle.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        view = Flaky.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED and attempts == [1, 2]


def test_a_suspended_run_frees_its_reactor_semaphore_slot_for_another_run() -> None:
    from reactor import with_semaphore

    journal = _Journal()
    with TestEnvironment() as env:
        first: list[str] = []

        class Pooled(Reactor):
            background = Background(all=True)
            tag = Input(str)
            coordination = with_semaphore(key="pool", limit=1)

            @step(tag=input("tag"))
            def a(inputs: Any, ctx: Any) -> str:
                journal.add(f"a {inputs.tag}")
                if inputs.tag == "one":
                    first.append(ctx.run_id)
                    assert Pooled.suspend(ctx.run_id) == "requested"
                    env.clock.advance(2)
                return "a"

            @step(wait_for=["a"], tag=input("tag"))
            def b(inputs: Any, ctx: Any) -> str:
                journal.add(f"b {inputs.tag}")
                return "b"

        one = Pooled.run(tag="one")
        env.run_pending()
        assert Pooled.find(one.run_id).status is RunStatus.SUSPENDED
        two = Pooled.run(tag="two")
        env.run_until_idle()  # the slot is free: the second run goes through
        assert Pooled.find(two.run_id).status is RunStatus.COMPLETED
        assert Pooled.unsuspend(one.run_id) is RunStatus.RUNNING
        env.run_until_idle()
        assert Pooled.find(one.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["a one", "a two", "b two", "b one"]
