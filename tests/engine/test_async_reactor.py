"""``async_reactor``: a child reactor run as its own background run (docs/run-control.md,
"async_reactor"), through real worker threads on every backend.

Timing: nothing asserts on durations; the tests wait for conditions (bounded by generous
deadlines) and parks are re-enqueued after 20-40 ms.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import (
    Background,
    DefinitionError,
    DispatchHandle,
    Failure,
    Input,
    Paused,
    Reactor,
    RunStatus,
    Success,
    async_reactor,
    config,
    input,
    interrupt,
    result,
    step,
)
from reactor.config import Runtime
from reactor.engine.async_reactor import child_run_id
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.errors import CancelArgumentError
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.context import Context
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.ports.payloads import RunPayload, job
from tests.backends import BACKENDS, backend_urls

events: list[str] = []
#: The child's ``work`` step waits for this (set by default: it does not block).
release = threading.Event()
#: Set when the child's ``work`` step starts.
started = threading.Event()


class ArChild(Reactor):
    x = Input(int)
    explode = Input(bool, default=False)

    @step(x=input("x"))
    def prepare(inputs: Any, ctx: Any) -> int:
        events.append("child.prepare")
        return int(inputs.x)

    @prepare.undo
    def _(result: Any, inputs: Any, ctx: Any) -> None:
        events.append("undo child.prepare")

    @step(v=result("prepare"), explode=input("explode"))
    def work(inputs: Any, ctx: Any) -> int:
        started.set()
        assert release.wait(20)
        events.append("child.work")
        if inputs.explode:
            raise RuntimeError("child boom")
        return int(inputs.v) * 10

    @work.undo
    def _(result: Any, inputs: Any, ctx: Any) -> None:
        events.append("undo child.work")

    returns = "work"


def _parent_steps(cls_name: str, *, background: bool) -> type[Reactor]:
    namespace: dict[str, Any] = {
        "x": Input(int),
        "explode": Input(bool, default=False),
        "fail_after": Input(bool, default=False),
    }

    @step(x=input("x"))
    def reserve(inputs: Any, ctx: Any) -> int:
        events.append("reserve")
        return int(inputs.x)

    @reserve.undo
    def _undo_reserve(result: Any, inputs: Any, ctx: Any) -> None:
        events.append("undo reserve")

    @step(v=result("child"), fail_after=input("fail_after"))
    def after(inputs: Any, ctx: Any) -> int:
        events.append("after")
        if inputs.fail_after:
            raise RuntimeError("parent boom")
        return int(inputs.v) + 1

    namespace.update(
        reserve=reserve,
        child=async_reactor(ArChild, args={"x": input("x")}, wait_for="reserve"),
        after=after,
        returns="after",
    )
    if background:
        namespace["background"] = Background(all=True)
    return type(cls_name, (Reactor,), namespace)


ArParent = _parent_steps("ArParent", background=False)
ArBackgroundParent = _parent_steps("ArBackgroundParent", background=True)


@pytest.fixture(params=BACKENDS)
def rt(
    request: pytest.FixtureRequest, service_url: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Runtime]:
    # a worker refuses to serve reactors with secrets (other modules') without a key
    monkeypatch.setenv(ENV_VAR, generate_key())
    config.reset()
    options: dict[str, Any] = dict(
        lock_snooze_base_delay=0.02, lock_snooze_jitter=0.02, lock_snooze_max_attempts=None,
        cancel_check_interval=0,  # every boundary reads the cancel request: no timing
    )
    if request.param == "memory":
        runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(), **options)
    else:
        storage_url, router_url = backend_urls(
            request.param, service_url, f"ar{uuid.uuid4().hex[:10]}", area="asyncreactor"
        )
        runtime = config.configure(storage=storage_url, router=router_url, **options)
    events.clear()
    release.set()
    started.clear()
    yield runtime
    release.set()
    config.reset()


def _until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _worker(rt: Runtime, threads: int = 2) -> Worker:
    worker = Worker(rt, threads=threads, poll_seconds=0.02, liveness_wait=0.0)
    worker.start()
    return worker


def _load(rt: Runtime, run_id: str) -> Context:
    ctx = load_context(make_env(rt), run_id)
    assert ctx is not None, run_id
    return ctx


def _run_in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


# ------------------------------------------------------------------------------ happy path


def test_the_child_runs_in_a_worker_and_the_parent_reads_its_result(rt: Runtime) -> None:
    worker = _worker(rt)
    try:
        out = ArParent.run(x=4)
    finally:
        worker.stop(5)
    assert isinstance(out, Success) and out.value == 41
    assert out.run_id is not None
    child_id = child_run_id(out.run_id, "child")
    record = rt.storage.contexts.load(child_id)
    assert record is not None
    assert record.parent_context_id == out.run_id
    assert record.root_context_id == out.run_id
    assert record.dispatched_child is True
    assert record.status == "completed"
    parent = _load(rt, out.run_id)
    assert parent.intermediate_results["child"] == 40
    assert [e.step for e in parent.undo_stack] == ["reserve", "child", "after"]
    assert parent.undo_stack[1].child_run_id == child_id
    assert events == ["reserve", "child.prepare", "child.work", "after"]


def test_a_sync_reader_waits_for_the_child(rt: Runtime) -> None:
    release.clear()
    worker = _worker(rt)
    try:
        thread, out = _run_in_thread(lambda: ArParent.run(x=2))
        assert started.wait(30), "the child never started in the worker"
        # the child is blocked in its worker: the parent waits, its reader has not run
        assert thread.is_alive()
        assert "after" not in events
        release.set()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        worker.stop(5)
    assert isinstance(out[0], Success) and out[0].value == 21
    assert events.index("child.work") < events.index("after")


def test_a_worker_parent_parks_and_resumes(rt: Runtime) -> None:
    release.clear()
    worker = _worker(rt, threads=1)  # a blocked parent would starve its own child
    try:
        handle = ArBackgroundParent.run(x=3)
        assert isinstance(handle, DispatchHandle)
        assert started.wait(30), "the child never got the only worker thread"

        def parked() -> bool:
            parent = _load(rt, handle.run_id)
            return parent.status is RunStatus.RUNNING and parent.current_step == "child"

        _until(parked, "the parent to be parked at the async_reactor step")
        assert "after" not in events
        release.set()
        assert handle.wait(30) == Success(31, run_id=handle.run_id)
    finally:
        worker.stop(5)
    parent = _load(rt, handle.run_id)
    assert [e.type for e in parent.execution_trace if e.step == "child"] == [
        "dispatched", "run"
    ]


# ------------------------------------------------------------------------------ idempotency


def test_a_re_executed_parent_does_not_start_a_second_child(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reactor.worker")
    release.clear()
    worker = _worker(rt)
    try:
        handle = ArBackgroundParent.run(x=5)
        assert isinstance(handle, DispatchHandle)
        assert started.wait(30)
        # a redelivered (or swept) parent job re-executes the step while the child runs
        rt.router.enqueue(job(RunPayload(context_id=handle.run_id,
                                         reactor=ArBackgroundParent.reactor_name)))
        parked = f"event=run_parked context_id={handle.run_id}"

        def re_executed() -> bool:  # every park follows one execution of the step
            return sum(parked in r.getMessage() for r in caplog.records) >= 3

        _until(re_executed, "the parent to re-execute the async_reactor step")
        release.set()
        assert handle.wait(30) == Success(51, run_id=handle.run_id)
    finally:
        worker.stop(5)
    assert events.count("child.prepare") == 1 and events.count("child.work") == 1
    children = [
        r.context_id for r in rt.storage.contexts.scan(include_dispatched_children=True)
        if r.parent_context_id == handle.run_id
    ]
    assert children == [child_run_id(handle.run_id, "child")]
    parent = _load(rt, handle.run_id)
    assert [e.type for e in parent.execution_trace].count("dispatched") == 1


# ------------------------------------------------------------------------------ failures


def test_a_failed_child_rolls_back_itself_then_the_parent(rt: Runtime) -> None:
    worker = _worker(rt)
    try:
        out = ArParent.run(x=1, explode=True)
    finally:
        worker.stop(5)
    assert isinstance(out, Failure)
    assert out.step_name == "child" and "child boom" in out.message
    assert events == [
        "reserve", "child.prepare", "child.work", "undo child.prepare", "undo reserve"
    ]
    assert out.run_id is not None
    child = _load(rt, child_run_id(out.run_id, "child"))
    assert child.status is RunStatus.FAILED
    assert _load(rt, out.run_id).status is RunStatus.FAILED


def test_a_parent_failing_after_the_child_completed_undoes_the_child_once(
    rt: Runtime,
) -> None:
    worker = _worker(rt)
    try:
        out = ArParent.run(x=1, fail_after=True)
    finally:
        worker.stop(5)
    assert isinstance(out, Failure) and out.step_name == "after"
    assert events == [
        "reserve", "child.prepare", "child.work", "after",
        "undo child.work", "undo child.prepare", "undo reserve",
    ]
    assert out.run_id is not None
    child_id = child_run_id(out.run_id, "child")
    child = _load(rt, child_id)
    assert child.status is RunStatus.CANCELLED and child.undo_stack == []
    # undoing again finds nothing left: the child's steps were undone once
    assert isinstance(ArParent.undo(out.run_id), Success)
    assert isinstance(ArChild.undo(child_id), Success)
    assert events.count("undo child.work") == 1 and events.count("undo child.prepare") == 1


# ------------------------------------------------------------------------------ cancel


CANCELLED = "reactor.errors.RunCancelledError"


def test_cancelling_a_worker_parent_cancels_its_running_child_and_undoes_each_step_once(
    rt: Runtime,
) -> None:
    """The parent is parked on its child, which runs in another worker thread: the cancel is
    passed on to the child, the parent waits for the child to end and then rolls back, and
    every step that completed, the child's included, is undone exactly once."""
    release.clear()
    worker = _worker(rt)
    try:
        handle = ArBackgroundParent.run(x=3)
        assert isinstance(handle, DispatchHandle)
        assert started.wait(30), "the child never started"
        child_id = child_run_id(handle.run_id, "child")

        def parked() -> bool:
            parent = _load(rt, handle.run_id)
            return parent.status is RunStatus.RUNNING and parent.current_step == "child"

        _until(parked, "the parent to be parked at the async_reactor step")
        out = ArBackgroundParent.cancel(handle.run_id, reason="customer left")
        assert isinstance(out, DispatchHandle)  # the parent's own execution finishes it
        release.set()
        outcome = handle.wait(60)
    finally:
        release.set()
        worker.stop(5)
    assert isinstance(outcome, Failure) and outcome.exception_class == CANCELLED, outcome
    assert "customer left" in outcome.message
    assert _load(rt, child_id).status is RunStatus.CANCELLED
    assert _load(rt, handle.run_id).status is RunStatus.CANCELLED
    # the child read the request at work's boundary (passed on when the cancel was
    # accepted): work counts as cut off (compensated: it has no compensate), prepare is
    # undone, then the parent undoes reserve; each once, the child's first
    assert events == [
        "reserve", "child.prepare", "child.work", "undo child.prepare", "undo reserve",
    ], events


def test_cancelling_a_synchronous_parent_passes_the_cancel_to_its_child_at_once(
    rt: Runtime,
) -> None:
    """A synchronous parent waits on its child in the caller's thread; the cancel reaches the
    child now (not when the parent notices), the parent's wait ends with the child's
    cancelled outcome, and the parent ends cancelled, not failed."""
    release.clear()
    worker = _worker(rt)
    try:
        thread, out = _run_in_thread(lambda: ArParent.run(x=2))
        assert started.wait(30), "the child never started"
        parent_ids = [
            r.context_id for r in rt.storage.contexts.scan()
            if r.reactor == ArParent.reactor_name and r.status == "running"
        ]
        assert len(parent_ids) == 1
        run_id = parent_ids[0]
        child_id = child_run_id(run_id, "child")
        handle = ArParent.cancel(run_id, reason="stop")
        assert isinstance(handle, DispatchHandle)
        assert rt.storage.claims.interrupt_resumes(child_id, ["@cancel"])  # passed on
        release.set()
        thread.join(60)
        assert not thread.is_alive()
    finally:
        release.set()
        worker.stop(5)
    result_ = out[0]
    assert isinstance(result_, Failure) and result_.exception_class == CANCELLED, result_
    assert _load(rt, run_id).status is RunStatus.CANCELLED
    assert _load(rt, child_id).status is RunStatus.CANCELLED
    assert events == [
        "reserve", "child.prepare", "child.work", "undo child.prepare", "undo reserve",
    ], events


def test_a_child_that_completed_before_the_cancel_reached_it_is_undone_by_the_parent(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The request never reaches the child (forced: the hand-over is skipped everywhere, as
    when the canceller dies first); the child completes unaware. The parent's execution reads
    its request and compensates the step in flight by undoing the child (after it ended:
    its lock is waited for), so nothing the child did is left standing."""
    from reactor.engine.run_control import cancel as cancel_module
    from reactor.engine.run_control.cancel import in_flight, notice

    def dies_before_handing_over(*args: Any) -> bool:
        return False

    release.clear()
    worker = _worker(rt)
    try:
        handle = ArBackgroundParent.run(x=3)
        assert isinstance(handle, DispatchHandle)
        assert started.wait(30), "the child never started"
        child_id = child_run_id(handle.run_id, "child")
        # every module whose code calls it: Reactor.cancel's call, at_start's, and
        # cancel_stored's (the canceller that takes the parked parent itself)
        for module in (cancel_module, notice, in_flight):
            monkeypatch.setattr(module, "hold_for_child", dies_before_handing_over)
        # the canceller may find the parent parked (its execution finishes the cancel) or
        # take it itself (and wait for the child's lock): either way the same end
        canceller, _ = _run_in_thread(lambda: ArBackgroundParent.cancel(handle.run_id))
        _until(lambda: bool(rt.storage.claims.interrupt_resumes(handle.run_id, ["@cancel"])),
               "the parent's cancel request")
        release.set()
        outcome = handle.wait(60)
        canceller.join(60)
        assert not rt.storage.claims.interrupt_resumes(child_id, ["@cancel"])  # not passed on
    finally:
        release.set()
        worker.stop(5)
    assert isinstance(outcome, Failure) and outcome.exception_class == CANCELLED, outcome
    child = _load(rt, child_id)
    assert child.status is RunStatus.CANCELLED and child.undo_stack == []
    assert events == [
        "reserve", "child.prepare", "child.work",
        "undo child.work", "undo child.prepare", "undo reserve",
    ], events


def test_an_async_reactor_child_can_be_cancelled_by_its_own_id(rt: Runtime) -> None:
    release.clear()
    worker = _worker(rt)
    try:
        handle = ArBackgroundParent.run(x=3)
        assert isinstance(handle, DispatchHandle)
        assert started.wait(30), "the child never started"
        child_id = child_run_id(handle.run_id, "child")
        assert isinstance(ArChild.cancel(child_id, reason="child only"), DispatchHandle)
        release.set()
        outcome = handle.wait(60)
    finally:
        release.set()
        worker.stop(5)
    # the child rolled itself back (or completed first and is undone by the parent), and the
    # parent's step failed with it: the parent rolled back, it was not itself cancelled
    assert isinstance(outcome, Failure) and outcome.step_name == "child", outcome
    assert _load(rt, child_id).status is RunStatus.CANCELLED
    assert _load(rt, handle.run_id).status is RunStatus.FAILED
    assert events.count("undo reserve") == 1 and "after" not in events


# ------------------------------------------------------------------------------ declaration


def test_the_declaration_mirrors_compose() -> None:
    with pytest.raises(DefinitionError, match="async_reactor"):
        async_reactor(object)
    with pytest.raises(DefinitionError, match="only leaf steps retry"):
        async_reactor(ArChild, retries=3)
    with pytest.raises(DefinitionError, match="both in args= and as keywords"):
        async_reactor(ArChild, args={"x": 1}, x=2)
    spec = async_reactor(ArChild, x=input("x"))
    assert spec.kind == "async_reactor" and spec.target is ArChild


def test_child_ids_are_derived_from_the_parent_and_the_step() -> None:
    assert child_run_id("p", "a") == child_run_id("p", "a")
    assert child_run_id("p", "a") != child_run_id("p", "b")
    assert child_run_id("p", "a") != child_run_id("q", "a")


def test_an_inline_router_runs_the_child_inside_the_dispatch() -> None:
    """The engine tests' default runtime (``inline://``): the child's job runs inside the
    enqueue, so the parent reads a finished child without waiting."""
    events.clear()
    release.set()
    out = ArParent.run(x=6)
    assert isinstance(out, Success) and out.value == 61
    assert events == ["reserve", "child.prepare", "child.work", "after"]


# ------------------------------------------------------------------------------ found by review

review_log: list[str] = []
kid_gate = threading.Event()
kid_started = threading.Event()


class ReviewKid(Reactor, name="test_async_reactor.review_kid"):
    @step()
    def a(inputs: Any, ctx: Any) -> int:
        review_log.append("kid.a")
        return 1

    @a.undo
    def _(result: Any, inputs: Any, ctx: Any) -> None:
        review_log.append("undo kid.a")
        raise RuntimeError("undo a broke")

    @step(v=result("a"))
    def b(inputs: Any, ctx: Any) -> int:
        kid_started.set()
        assert kid_gate.wait(20)
        review_log.append("kid.b")
        return 2

    @b.undo
    def _(result: Any, inputs: Any, ctx: Any) -> None:
        review_log.append("undo kid.b")

    returns = "b"


class ReviewParent(Reactor, name="test_async_reactor.review_parent"):
    @step()
    def p1(inputs: Any, ctx: Any) -> int:
        review_log.append("p1")
        return 0

    @p1.undo
    def _(result: Any, inputs: Any, ctx: Any) -> None:
        review_log.append("undo p1")

    kid = async_reactor(ReviewKid, wait_for="p1")

    @step(v=result("kid"))
    def p2(inputs: Any, ctx: Any) -> int:
        review_log.append("p2")
        return 3


class ReviewBackgroundParent(ReviewParent, name="test_async_reactor.review_bg_parent"):
    background = Background(all=True)


class AskingKid(Reactor, name="test_async_reactor.asking_kid"):
    @step()
    def a(inputs: Any, ctx: Any) -> int:
        review_log.append("ask.a")
        return 1

    ask = interrupt(wait_for="a")

    @step(answer=result("ask"))
    def b(inputs: Any, ctx: Any) -> str:
        review_log.append(f"ask.b {inputs.answer}")
        return f"got {inputs.answer}"

    returns = "b"


class AskingParent(Reactor, name="test_async_reactor.asking_parent"):
    background = Background(all=True)
    kid = async_reactor(AskingKid)


@pytest.fixture
def memory_rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """The in-process backend with the default settings (cancel_check_interval 1 s)."""
    monkeypatch.setenv(ENV_VAR, generate_key())
    config.reset()
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter())
    review_log.clear()
    kid_gate.clear()
    kid_started.clear()
    yield runtime
    kid_gate.set()
    config.reset()


def test_a_cancel_of_a_synchronous_parent_is_not_lost_with_the_default_interval(
    memory_rt: Runtime,
) -> None:
    """The child completes before it reads the request passed on to it (its boundary falls
    within the 1 s interval); the parent reads its request after the wait whatever the
    interval, undoes the completed child and ends cancelled. Before: p2 ran and the parent
    completed, the accepted cancel left no trace."""
    worker = _worker(memory_rt)
    try:
        thread, out = _run_in_thread(lambda: ReviewParent.run())
        assert kid_started.wait(20)
        run_id = next(r.context_id for r in memory_rt.storage.contexts.scan()
                      if r.reactor == ReviewParent.reactor_name)
        assert isinstance(ReviewParent.cancel(run_id, reason="stop"), DispatchHandle)
        kid_gate.set()
        thread.join(30)
    finally:
        kid_gate.set()
        worker.stop(5)
    outcome = out[0]
    assert isinstance(outcome, Failure) and outcome.exception_class == CANCELLED, outcome
    assert "p2" not in review_log
    assert review_log.count("undo p1") == 1 and review_log.count("undo kid.a") == 1
    # the child's failed undo is one of the cancelled parent's rollback failures
    assert [f.step for f in outcome.rollback_failures] == ["kid.a"], outcome.rollback_failures


def test_a_childs_rollback_failures_reach_the_cancelled_parent(memory_rt: Runtime) -> None:
    """The child reads the request passed on to it at b's boundary (every boundary reads:
    cancel_check_interval 0) and rolls itself back; its failed undo is listed by the
    cancelled parent too. Before: the parent's Failure listed none."""
    runtime = config.configure(storage=memory_rt.storage, router=memory_rt.router,
                               cancel_check_interval=0)
    worker = _worker(runtime)
    try:
        handle = ReviewBackgroundParent.run()
        assert isinstance(handle, DispatchHandle)
        assert kid_started.wait(20)
        ReviewBackgroundParent.cancel(handle.run_id)
        kid_gate.set()
        outcome = handle.wait(30)
    finally:
        kid_gate.set()
        worker.stop(5)
    assert isinstance(outcome, Failure) and outcome.exception_class == CANCELLED, outcome
    failures = outcome.rollback_failures
    assert [(f.step, f.kind) for f in failures] == [("kid.a", "undo")], failures
    assert "undo a broke" in failures[0].message


def test_a_cancel_reason_that_cannot_be_stored_is_refused_first(memory_rt: Runtime) -> None:
    handle = ReviewBackgroundParent.run()  # queued: no worker
    assert isinstance(handle, DispatchHandle)
    with pytest.raises(CancelArgumentError) as caught:
        ReviewBackgroundParent.cancel(handle.run_id, reason="\ud800")
    assert caught.value.field == "reason"
    assert memory_rt.storage.claims.interrupt_resumes(handle.run_id, ["@cancel"]) == {}
    out = ReviewBackgroundParent.cancel(handle.run_id, reason="plain")  # nothing recorded
    assert isinstance(out, Failure) and "plain" in out.message


def test_a_child_paused_at_an_interrupt_is_resumed_by_its_own_id(memory_rt: Runtime) -> None:
    """The child's interrupt is claimed under the child's id, as Reactor.resume names it.
    Before: resume returned Paused and applied nothing, and the parent stayed parked."""
    worker = _worker(memory_rt)
    try:
        handle = AskingParent.run()
        assert isinstance(handle, DispatchHandle)
        child_id = child_run_id(handle.run_id, "kid")

        def paused() -> bool:
            stored = memory_rt.storage.contexts.load(child_id)
            return stored is not None and stored.status == "paused"

        _until(paused, "the child to pause")
        resumed = AskingKid.resume(child_id, payload="yes")
        assert not isinstance(resumed, Paused), resumed
        assert handle.wait(30) == Success({"kid": "got yes"}, run_id=handle.run_id)
    finally:
        worker.stop(5)
    assert review_log == ["ask.a", "ask.b yes"]
