"""An outside attack on ``async def`` step bodies and the awaitable API (docs/concepts.md,
"Async steps"; reactor/engine/coroutines.py). Each test demonstrates a
defect the attack found: it fails on 6bcfc05 (the first version) and passes on the fixed one.
A test that would otherwise hang detects the hang with a deadline and unblocks what it
started before it fails, so the session goes on."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Reactor, Retries
from reactor.dsl import step
from reactor.engine import coroutines
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus

#: How long a test lets a call that must return promptly run before calling it a hang.
HANG = 20.0


@pytest.fixture(autouse=True)
def _fresh_reactor_loop() -> Iterator[None]:
    """Each test starts and ends with reactor's own loop unstarted (a test may kill it)."""
    coroutines._stop_reactor_loop()
    yield
    coroutines._stop_reactor_loop()


def _wait_until_stored(reactor: type[Reactor], run_id: str, deadline: float) -> RunStatus:
    """The run's stored status once it is no longer ``running``, or ``running`` at the
    deadline (the engine thread is stuck)."""
    end = time.monotonic() + deadline
    status = reactor.find(run_id).status
    while status is RunStatus.RUNNING and time.monotonic() < end:
        time.sleep(0.02)
        status = reactor.find(run_id).status
    return status


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_keyboard_interrupt_in_an_async_body_aborts_the_run_instead_of_hanging() -> None:
    """docs/concepts.md, "Rollback": an interruption (``KeyboardInterrupt``, ``SystemExit``)
    stores the run ``aborted`` and propagates with ``exc.reactor_run_id``. From an async body
    under a synchronous run it instead kills reactor's loop thread (asyncio re-raises it out of
    ``run_forever`` before the future is resolved), and ``Reactor.run`` waits forever."""

    class Interrupted(Reactor):
        @step()
        async def boom(inputs: Any, ctx: Any) -> None:
            await asyncio.sleep(0)
            raise KeyboardInterrupt("from an async body")

    raised: list[BaseException] = []

    def call() -> None:
        try:
            Interrupted.run()
        except BaseException as exc:
            raised.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(HANG)
    assert not caller.is_alive(), "Reactor.run never returned after the body's KeyboardInterrupt"
    assert len(raised) == 1 and isinstance(raised[0], KeyboardInterrupt)
    run_id = raised[0].reactor_run_id  # type: ignore[attr-defined]
    assert Interrupted.find(run_id).status is RunStatus.ABORTED


def test_an_async_body_raising_cancelled_error_aborts_the_run_like_a_plain_one() -> None:
    """docs/concepts.md, "Rollback": ``asyncio.CancelledError`` is an interruption (the run is
    stored ``aborted`` and the exception propagates), and "an async body obeys every rule of
    this page as a plain one does". The async body's ``CancelledError`` reaches the engine as
    ``concurrent.futures.CancelledError`` (an ``Exception``): the run is stored ``failed`` with
    a retryable failure, and the message is lost."""

    class Plain(Reactor):
        @step()
        def boom(inputs: Any, ctx: Any) -> None:
            raise asyncio.CancelledError("shutting down")

    class Async(Reactor):
        @step()
        async def boom(inputs: Any, ctx: Any) -> None:
            await asyncio.sleep(0)
            raise asyncio.CancelledError("shutting down")

    with pytest.raises(asyncio.CancelledError) as plain:
        Plain.run()
    assert Plain.find(plain.value.reactor_run_id).status is RunStatus.ABORTED  # type: ignore[attr-defined]

    with pytest.raises(asyncio.CancelledError) as from_async:
        Async.run()
    assert Async.find(from_async.value.reactor_run_id).status is RunStatus.ABORTED  # type: ignore[attr-defined]


def test_an_interrupted_wait_for_an_async_body_cancels_the_body() -> None:
    """``await_result``'s docstring: the coroutine "is always awaited or closed, never left
    pending". A Ctrl-C while ``Reactor.run`` waits for an async body stores the run ``aborted``
    (and ``Reactor.undo`` may roll it back), but the body goes on running on reactor's loop:
    its side effects land after the abort, even after the undo."""
    started = threading.Event()
    body: list[asyncio.Task[Any]] = []
    cancelled: list[bool] = []

    class Charge(Reactor):
        @step()
        async def charge(inputs: Any, ctx: Any) -> None:
            task = asyncio.current_task()
            assert task is not None
            body.append(task)
            started.set()
            try:
                await asyncio.Event().wait()  # a slow gateway call
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

    main = threading.main_thread().ident
    assert main == threading.get_ident()
    interrupter = threading.Thread(  # a real SIGINT: Ctrl-C
        target=lambda: (started.wait(HANG), signal.pthread_kill(main, signal.SIGINT)),
        daemon=True,
    )
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            Charge.run()
        interrupter.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert body, "the body never started"

    async def settled() -> bool:
        await asyncio.wait({body[0]}, timeout=HANG)
        return body[0].done()

    loop = coroutines._reactor_loop()
    done = asyncio.run_coroutine_threadsafe(settled(), loop).result()
    if not done:
        loop.call_soon_threadsafe(body[0].cancel)  # unblock before failing
    assert done and cancelled == [True], "the body still runs after its run was aborted"


def test_nested_arun_from_async_bodies_does_not_deadlock_the_pool() -> None:
    """reactor's own error message (and docs/concepts.md) tells an async body to ``await
    Other.arun()``. With ``POOL_THREADS`` outer runs in their bodies at once, every pool thread
    holds an outer engine waiting for its body, and every body's inner ``arun`` queues for a
    pool thread: no run ever finishes. (A barrier puts every outer body in flight first.)"""
    n = coroutines.POOL_THREADS
    bodies: list[asyncio.Task[Any]] = []

    class Inner(Reactor):
        @step()
        async def leaf(inputs: Any, ctx: Any) -> int:
            return 1

        returns = "leaf"

    class Outer(Reactor):
        @step()
        async def call_inner(inputs: Any, ctx: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            bodies.append(task)
            while len(bodies) < n:
                await asyncio.sleep(0.01)
            return (await Inner.arun()).value

        returns = "call_inner"

    async def main() -> tuple[bool, list[Any]]:
        outs = asyncio.gather(*(Outer.arun() for _ in range(n)))
        done, _ = await asyncio.wait({outs}, timeout=HANG * 2)
        if not done:
            for task in bodies:  # unblock the pool before failing
                task.cancel()
        return bool(done), await outs

    finished, outs = asyncio.run(main())
    assert finished, f"{n} outer runs awaiting a nested arun deadlocked reactor's pool"
    assert all(isinstance(out, Success) and out.value == 1 for out in outs)


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_a_run_whose_awaiting_loop_has_closed_still_runs_its_async_undo() -> None:
    """docs/concepts.md: "Cancelling the awaiting task does not stop the run". The run goes on,
    but its later async bodies are sent to the awaiting loop, which ``asyncio.run`` has closed
    by then: the async undo of the completed ``charge`` fails with "Event loop is closed", so
    the charge is never refunded (and its coroutine is never awaited)."""
    ledger: list[str] = []
    run_ids: list[str] = []
    loop_closed = threading.Event()

    class Order(Reactor):
        @step()
        async def charge(inputs: Any, ctx: Any) -> str:
            run_ids.append(ctx.run_id)
            ledger.append("charged")
            return "ch-1"

        @charge.undo
        async def refund(result: Any, inputs: Any, ctx: Any) -> None:
            ledger.append("refunded")

        @step(wait_for=["charge"])
        async def ship(inputs: Any, ctx: Any) -> None:
            started.set()
            await asyncio.Event().wait()  # a slow call, cancelled with the request

        @ship.compensate
        def bookkeeping(error: Any, inputs: Any, ctx: Any) -> None:
            loop_closed.wait(HANG)  # the rollback's sync part outlives the caller's loop

    started: asyncio.Event

    async def request() -> None:
        nonlocal started
        started = asyncio.Event()
        task = asyncio.ensure_future(Order.arun())
        await started.wait()
        task.cancel()  # the client went away / the server shuts down
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(request())
    loop_closed.set()
    status = _wait_until_stored(Order, run_ids[0], HANG)
    view = Order.find(run_ids[0])
    assert status is RunStatus.FAILED
    assert view.failure is not None and view.failure.rollback_failures == []
    assert ledger == ["charged", "refunded"]


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_a_stopped_awaiting_loop_does_not_leave_the_run_running_forever() -> None:
    """A caller that drives its own loop (``loop.run_until_complete(asyncio.wait_for(
    Order.arun(), ...))``) and stops it while the run goes on: the next async body is queued on
    the stopped loop and the engine thread waits for it forever. The run stays ``running``
    (its heartbeat keeps renewing it, so no sweep recovers it) and the pool thread keeps the
    interpreter from exiting."""
    run_ids: list[str] = []
    gate = threading.Event()

    class Order(Reactor):
        @step()
        def slow(inputs: Any, ctx: Any) -> int:
            run_ids.append(ctx.run_id)
            gate.wait(HANG)
            return 1

        @step(wait_for=["slow"])
        async def charge(inputs: Any, ctx: Any) -> int:
            return 2

    loop = asyncio.new_event_loop()
    try:
        pending = loop.create_task(Order.arun())
        while not run_ids:  # the engine is in `slow`
            loop.run_until_complete(asyncio.sleep(0.01))
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(pending)
        gate.set()  # the loop is stopped (not closed) from here on
        status = _wait_until_stored(Order, run_ids[0], HANG)
    finally:
        end = time.monotonic() + HANG  # unblock the engine thread before failing
        while Order.find(run_ids[0]).status is RunStatus.RUNNING and time.monotonic() < end:
            loop.run_until_complete(asyncio.sleep(0.01))
        loop.close()
    assert status is not RunStatus.RUNNING, "the run waits forever for a stopped loop"


def test_a_blocking_run_inside_an_async_body_fails_at_once_without_retry_waits(
    sleeps: list[float],
) -> None:
    """docs/concepts.md: a synchronous ``Other.run()`` from an async body "fails with an error
    that says to await Other.arun() instead". That error can never go away on a retry, but it
    is a retryable ``DefinitionError``: the inner step's ``Retries`` wait (``clock.sleep`` on
    the loop's own thread, blocking the application's loop) before the run fails."""

    class Inner(Reactor):
        @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=1.0))
        async def leaf(inputs: Any, ctx: Any) -> int:
            return 1

    class Outer(Reactor):
        @step()
        async def call_inner(inputs: Any, ctx: Any) -> bool:
            inner = Inner.run()
            assert isinstance(inner, Failure) and "arun" in str(inner.error)
            return inner.retryable

        returns = "call_inner"

    out = asyncio.run(Outer.arun())
    assert isinstance(out, Success)
    assert out.value is False, "the 'use arun' failure is retryable"
    assert sleeps == [], "the inner step waited for retries on the caller's loop thread"


def test_an_async_body_returning_an_unawaited_coroutine_fails_naming_the_missing_await() -> None:
    """An ``async def`` body that returns ``other()`` instead of ``await other()``: the step
    fails with a codec error ("cannot encode value: register its type with codec.register")
    that does not say what is wrong, and the returned coroutine is never awaited or closed
    (a "coroutine ... was never awaited" RuntimeWarning at garbage collection)."""
    made: list[Any] = []

    async def other() -> int:
        return 42

    class Forgot(Reactor):
        @step()
        async def call(inputs: Any, ctx: Any) -> Any:
            made.append(other())
            return made[-1]

        returns = "call"

    out = Forgot.run()
    closed = inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    if not closed:
        made[0].close()  # keep the unawaited-coroutine warning out of the session
    assert isinstance(out, Failure)
    assert "await" in str(out.error), str(out.error)
    assert closed


def test_an_async_body_failure_traceback_has_no_future_machinery_frames() -> None:
    """docs/concepts.md, "Results and signals": a ``Failure`` carries "a traceback with the
    engine's frames trimmed"; a plain body's shows only user frames. An async body's also shows
    ``concurrent/futures/_base.py`` (``result``, ``__get_result``): the hand-off to the loop."""

    class Broken(Reactor):
        @step()
        async def boom(inputs: Any, ctx: Any) -> None:
            await asyncio.sleep(0)
            raise ValueError("deep")

    out = Broken.run()
    assert isinstance(out, Failure) and out.traceback is not None
    assert "ValueError: deep" in out.traceback
    assert "concurrent/futures" not in out.traceback, out.traceback


def test_aexecute_takes_every_argument_execute_takes() -> None:
    """docs/concepts.md lists ``aexecute`` as the awaitable ``execute``, whose documented
    signature is ``execute(inputs, runtime=None, sleep=None)`` ("A synchronous run"); the
    per-run retry wait ``sleep=`` is missing from ``aexecute`` (TypeError)."""
    blocking = set(inspect.signature(Reactor.execute).parameters)
    awaitable = set(inspect.signature(Reactor.aexecute).parameters)
    assert blocking - awaitable == set()
