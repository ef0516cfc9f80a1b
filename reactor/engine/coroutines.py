"""Async step bodies and the awaitable API: where a coroutine runs (docs/concepts.md,
"Async steps").

The engine is synchronous: it checkpoints, takes locks and calls step bodies in the thread that
runs the saga. A step body written ``async def`` returns a coroutine there, and
:func:`await_result` runs it to completion before the engine goes on, on one of two loops:

* **the caller's loop**, when the run was started from async code through the awaitable API
  (``await Reactor.arun(...)``, :func:`off_loop`) and that loop is still running: the engine
  runs in a thread of reactor's pool, off the caller's loop, and hands each coroutine back to
  that loop. A step body therefore shares the loop, and every loop-bound object (an
  ``httpx.AsyncClient``, a lock, a queue) of the application that started the run;
* **reactor's loop** otherwise (a synchronous ``Reactor.run``, a worker thread, or a caller
  whose loop stopped or closed since it awaited): one event loop per process, on a daemon
  thread started at the first async step, shared by every thread of the process, so async
  bodies of concurrent runs and units overlap on it and a loop-bound client made in one step
  is usable in the next.

The calling thread blocks until the coroutine is done (in a worker's async slot the execution
is suspended instead and its thread runs other jobs meanwhile: :mod:`reactor.engine.handback`,
docs/workers.md, "Async slots"); a body's exception, signal (``fail()``,
``halt()``, ``skip()``, ``succeed()``) or return value reaches the engine exactly as from a plain
method, with the context variables of the calling thread (the coroutine runs in a copy of
them), and an interruption (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``
raised by the body) is re-raised in the engine's thread, where it aborts the run as from a
plain body; it never reaches, nor stops, the loop. An interruption of the waiting thread
(Ctrl-C) cancels the body before it propagates. A body cancelled by its loop going away (the
task awaiting ``arun`` was cancelled and ``asyncio.run`` ended) fails its step with
:class:`~reactor.errors.AsyncStepCancelledError`, not retried. A synchronous ``Reactor.run``
called on the very loop that would run the coroutine (an ``async def`` step that calls
``Other.run()`` instead of ``await Other.arun()``) cannot complete: that step fails with
:class:`~reactor.errors.EventLoopBlockedError`, not retried.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from reactor.engine import handback
from reactor.engine.interruptions import PASS_THROUGH
from reactor.errors import AsyncStepCancelledError, EventLoopBlockedError

__all__ = ["POOL_THREADS", "await_result", "off_loop"]

_T = TypeVar("_T")

#: Threads of the pool that runs the blocking engine for the awaitable API: at most this many
#: ``arun``/``aresume``/... calls of one process make progress at once; the rest queue. An
#: awaitable call made from inside an async step body (a nested run, ``wait_async``) gets a
#: thread of its own instead, so nesting never waits for the pool its parent holds.
POOL_THREADS = 64

#: Seconds between two checks, while a thread waits for a body, that the body's loop still runs.
_WATCH = 0.25

#: Seconds an interrupted wait gives the body it cancels to finish cancelling; also what a
#: body cancelled at its time limit is given to end before the engine stops waiting for it
#: (docs/concepts.md, "Time limits").
_CANCEL_GRACE = 5.0

#: The loop of the code that awaited the awaitable API (``None``: not inside one).
_CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "reactor_caller_loop", default=None
)

#: Whether this context runs an engine call of the awaitable API (on a pool thread, or in a
#: body that such a thread waits for).
_IN_ENGINE_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "reactor_in_engine_call", default=False
)

_log = logging.getLogger("reactor.engine")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _reactor_loop() -> asyncio.AbstractEventLoop:
    """The process's own loop, started on a daemon thread at the first call (and again if its
    thread died)."""
    global _loop, _loop_thread
    with _lock:
        alive = _loop_thread is not None and _loop_thread.is_alive()
        if _loop is None or _loop.is_closed() or not alive:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                while not loop.is_closed():
                    try:
                        loop.run_forever()
                        return  # stopped on purpose (_stop_reactor_loop)
                    except BaseException:  # nothing may end this thread
                        continue

            thread = threading.Thread(target=serve, name="reactor-async-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _loop_thread = loop, thread
        return _loop


def _stop_reactor_loop() -> None:
    """Stop and close reactor's loop (at interpreter exit); the next use starts a new one."""
    global _loop, _loop_thread
    with _lock:
        loop, thread, _loop, _loop_thread = _loop, _loop_thread, None, None
    if loop is None or loop.is_closed():
        return
    loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(timeout=5)
    if not loop.is_running():
        loop.close()


def _forget_after_fork() -> None:
    """A forked child has neither the loop's thread nor the pool's: start afresh."""
    global _loop, _loop_thread, _pool, _lock
    _lock = threading.Lock()
    _loop, _loop_thread, _pool = None, None, None


atexit.register(_stop_reactor_loop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class _Handoff:
    """One coroutine handed to a loop: run there by :meth:`run`, which never lets anything
    escape to the loop, and waited for by the engine's thread."""

    def __init__(
        self, coro: Coroutine[Any, Any, Any], timeout: float | None = None,
        expired: Callable[[], BaseException] | None = None,
        due: Callable[[], float] | None = None,
    ) -> None:
        self.coro = coro
        self.timeout = timeout
        self.expired = expired
        self.due = due
        #: ``time.monotonic()`` when the watcher found :attr:`due` passed, else ``None``.
        self.limit_passed_at: float | None = None
        self.lock = threading.Lock()
        self.started = False
        self.abandoned = False
        self.given_up = False  # the engine stopped waiting: what the body ends with is dropped
        self.discarded: str | None = None  # what the body ended with past its limit
        self.done = threading.Event()
        #: Called once :attr:`done` is set: wakes a suspended waiter (reactor.engine.handback).
        self.on_done: Callable[[], None] | None = None
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.value: Any = None
        self.error: BaseException | None = None

    async def run(self) -> None:
        with self.lock:
            if self.abandoned:  # the engine gave up on this loop before it started us
                return
            self.started = True
            self.task = asyncio.current_task()
            self.loop = asyncio.get_running_loop()
        try:
            if self.timeout is None and self.due is None:
                self.value = await self.coro
            else:
                self.value = await self._limited(self.timeout)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:  # cancelled from outside
                self.error = AsyncStepCancelledError(
                    "the event loop running this async step body cancelled it (the task "
                    "awaiting Reactor.arun was cancelled and its loop shut down)"
                )
            else:  # the body raised it itself: an interruption, as from a plain body
                self.error = exc
        except BaseException as exc:  # re-raised in the engine's thread
            self.error = exc
        finally:
            with self.lock:  # logged before the engine goes on (or gives up meanwhile)
                if self.given_up or self.discarded is not None:
                    self._log_discarded()
                self.done.set()
                wake = self.on_done
            if wake is not None:
                wake()

    def notify(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` once the body ended (at once when it has), in place of an earlier
        one: how a waiter whose thread was handed back is resumed (reactor.engine.handback)."""
        with self.lock:
            ended = self.done.is_set()
            if not ended:
                self.on_done = wake
        if ended:
            wake()

    def _log_discarded(self) -> None:
        """Log what a body ended with past its limit: it is never recorded."""
        what = self.discarded or (
            type(self.error).__name__ if self.error is not None else "Success"
        )
        _log.warning(
            "%s: what the async body ended with after it (%s) is discarded, never recorded "
            "(docs/concepts.md, \"Time limits\")",
            self.expired() if self.expired is not None else "an async step body", what,
        )

    async def _limited(self, seconds: float | None) -> Any:
        """Await the body for at most ``seconds`` (or until :attr:`due`, which a heartbeat
        moves later: a watcher task expires the scope when it passes); past them it is
        cancelled and :attr:`expired` is raised instead, whatever the body does once
        cancelled (a body that catches the cancellation and returns, or raises something
        else, still timed out: what it ended with is discarded; docs/concepts.md, "Time
        limits")."""
        scope = asyncio.timeout(seconds if self.due is None else None)
        watcher: asyncio.Task[None] | None = None
        try:
            async with scope:
                if self.due is not None:
                    watcher = asyncio.get_running_loop().create_task(self._watch(scope))
                value = await self.coro
        except TimeoutError as exc:
            if scope.expired() and self.expired is not None:
                if not isinstance(exc.__cause__, asyncio.CancelledError):
                    self.discarded = "TimeoutError"  # its own, once cancelled
                raise self.expired() from None
            raise  # the body's own TimeoutError, within its limit
        except PASS_THROUGH:  # an interruption or a park stays one
            raise
        except BaseException as exc:
            if self.expired is not None and self._past(scope):
                self.discarded = type(exc).__name__
                raise self.expired() from None
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        if self.expired is not None and self._past(scope):
            self.discarded = "Success"  # it caught the cancellation, or blocked its loop
            raise self.expired()
        return value

    async def _watch(self, scope: asyncio.Timeout) -> None:
        """Expire ``scope`` once :attr:`due` passes (asked again each time: a heartbeat
        moves it later)."""
        assert self.due is not None
        while True:
            left = self.due() - time.monotonic()
            if left <= 0:
                self.limit_passed_at = time.monotonic()
                scope.reschedule(asyncio.get_running_loop().time())
                return
            await asyncio.sleep(left)

    def _past(self, scope: asyncio.Timeout) -> bool:
        """Whether ``scope``'s deadline passed: it expired, or the body kept the loop from
        expiring it (synchronous work in an ``async def`` body)."""
        if scope.expired():
            return True
        if self.due is not None:
            return self.limit_passed_at is not None or time.monotonic() >= self.due()
        when = scope.when()
        return when is not None and asyncio.get_running_loop().time() >= when

    def give_up(self) -> bool:
        """Stop waiting for a body past its limit (and its grace): a body that never started
        is closed, a running one goes on and what it ends with is logged as discarded.

        Returns:
            ``False`` when the body ended meanwhile (use what it ended with).
        """
        with self.lock:
            if self.done.is_set():
                return False
            self.given_up = True
            if not self.started and not self.abandoned:
                self.abandoned = True
                self.coro.close()
            return True

    def abandon(self) -> bool:
        """Give up on a loop that never started this hand-off; ``False`` once it started."""
        with self.lock:
            if not self.started:
                self.abandoned = True
            return self.abandoned

    def cancel(self) -> None:
        """Cancel the body: close it if it never started (it never will), else cancel its
        task and wait a little for it to finish cancelling."""
        with self.lock:
            task, loop = self.task, self.loop
            if not self.started and not self.abandoned:
                self.abandoned = True
                self.coro.close()
        if task is not None and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed meanwhile
                return
            self.done.wait(_CANCEL_GRACE)


def _submit(handoff: _Handoff, loop: asyncio.AbstractEventLoop) -> bool:
    """Schedule ``handoff`` on ``loop``; ``False`` when the loop is closed."""
    runner = handoff.run()
    try:
        asyncio.run_coroutine_threadsafe(runner, loop)
    except RuntimeError:  # closed
        runner.close()
        return False
    return True


def _usable(loop: asyncio.AbstractEventLoop | None) -> bool:
    return loop is not None and not loop.is_closed() and loop.is_running()


def await_result(
    coro: Coroutine[Any, Any, _T],
    *,
    timeout: float | None = None,
    expired: Callable[[], BaseException] | None = None,
    due: Callable[[], float] | None = None,
    tick: Callable[[], None] | None = None,
) -> _T:
    """Run ``coro`` (an ``async def`` step body's coroutine) to completion and return its
    value, blocking the calling thread (or, with a bound :mod:`reactor.engine.handback`,
    suspending the execution and handing its thread back): on the caller's loop inside the
    awaitable API while it runs, else on reactor's loop (module docstring).

    Args:
        coro: the coroutine; it is awaited, or closed when it cannot be.
        timeout: seconds the coroutine may run; past them it is cancelled and ``expired()``
            is raised, whatever it does once cancelled; a body that has not ended
            :data:`_CANCEL_GRACE` seconds later is no longer waited for (what it ends with is
            logged and discarded; docs/concepts.md, "Time limits"). ``None``: no limit.
        expired: builds the error raised when ``timeout`` passes.
        due: instead of ``timeout``: the ``time.monotonic`` time the limit passes, asked
            again whenever it is reached (a heartbeat moves it later; docs/concepts.md,
            "Heartbeats").
        tick: called by the waiting thread each time it wakes while the body runs (at most
            every 0.25 s), never on the body's loop: stores the step's last heartbeat in a
            worker (:mod:`reactor.engine.heartbeat_writes`). ``None``: nothing.

    Returns:
        What the coroutine returned.

    Raises:
        EventLoopBlockedError: the calling thread is running the loop the coroutine would need
            (a synchronous run started from an ``async def`` step; use the awaitable API).
        AsyncStepCancelledError: the body's loop cancelled it (the loop shut down).
        BaseException: whatever the coroutine raised, unchanged (interruptions included).
    """
    caller = _CALLER_LOOP.get()
    loop = caller if caller is not None and _usable(caller) else _reactor_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise EventLoopBlockedError(
            "an async step body cannot run: this thread is running the event loop it needs "
            "(a synchronous Reactor.run, resume, retry, undo or cancel was called from async "
            "code on that loop; await Reactor.arun(...) and the other awaitable methods "
            "instead: docs/concepts.md, \"Async steps\")"
        )
    handoff = _Handoff(coro, timeout, expired, due)
    # A body under a limit is cancelled on its loop at the limit; the engine waits for it to
    # end at most the limit and a grace, then stops waiting (it ignores its cancellation, or
    # blocks its loop, or the loop is too busy to start it).
    if due is None and timeout is not None:
        limit_at = time.monotonic() + timeout
        due = lambda: limit_at  # noqa: E731 - a constant limit
    deadline = None if due is None else due() + _CANCEL_GRACE
    gave_up = False
    try:  # from the submission on: an interruption anywhere here cancels the body
        if not _submit(handoff, loop):
            loop = _reactor_loop()
            _submit(handoff, loop)
        while not handback.wait_event(
            handoff.done, handoff.notify,
            _WATCH if deadline is None
            else min(_WATCH, max(deadline - time.monotonic(), 0.0)),
        ):
            if tick is not None:
                tick()
            if due is not None:
                # a heartbeat moves the limit later, until it passed (the watcher expired the
                # body's scope): the grace runs from then, whatever the body does after
                limit_at = handoff.limit_passed_at or due()
                deadline = limit_at + _CANCEL_GRACE
            if deadline is not None and time.monotonic() >= deadline:
                gave_up = handoff.give_up()
                if gave_up:
                    break
                continue  # it ended just now
            if loop is not caller or _usable(caller):
                continue
            # The caller's loop stopped or closed while we wait.
            if handoff.abandon():  # it never started the body: run it on reactor's loop
                handoff = _Handoff(handoff.coro, timeout, expired, handoff.due)
                loop = _reactor_loop()
                _submit(handoff, loop)
            elif caller is not None and caller.is_closed():  # closed mid-body: it is gone
                raise AsyncStepCancelledError(
                    "the event loop running this async step body closed before the body "
                    "finished (the task awaiting Reactor.arun was cancelled and its loop "
                    "shut down)"
                )
    except BaseException:
        handoff.cancel()  # an interrupted wait (Ctrl-C) leaves no body running behind it
        raise
    if gave_up:
        if expired is not None:
            raise expired()
        raise TimeoutError(f"the async body ran past its limit of {timeout:g}s")
    if handoff.error is not None:
        raise handoff.error
    value = handoff.value
    if inspect.iscoroutine(value):
        value.close()
        raise TypeError(
            "the async step body returned an un-awaited coroutine (a missing await?)"
        )
    return value  # type: ignore[no-any-return]


def _engine_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=POOL_THREADS, thread_name_prefix="reactor-arun"
            )
        return _pool


def _own_thread(call: Callable[[], _T]) -> concurrent.futures.Future[_T]:
    """Run ``call`` on a new thread of its own (a nested engine call: see POOL_THREADS)."""
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(call())
        except BaseException as exc:  # handed to the awaiting task
            future.set_exception(exc)

    threading.Thread(target=work, name="reactor-arun-nested", daemon=False).start()
    return future


async def off_loop(fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """Run the blocking ``fn(*args, **kwargs)`` (an engine entry point) in reactor's pool,
    with the caller's context variables, and await it without blocking the caller's loop;
    ``async def`` step bodies it meets run back on this loop (:func:`await_result`). Called
    from inside an async step body of another such call, it runs on a thread of its own
    (never waiting for the pool its parent holds a thread of).

    Cancelling the awaiting task does not stop ``fn``: a run goes on to its end, its later
    async bodies on reactor's loop once this loop is gone (cancel a run with
    ``Reactor.acancel``).

    Args:
        fn: the blocking call.
        *args: its positional arguments.
        **kwargs: its keyword arguments.

    Returns:
        What ``fn`` returned.

    Raises:
        BaseException: whatever ``fn`` raised.
    """
    loop = asyncio.get_running_loop()
    nested = _IN_ENGINE_CALL.get()
    tokens = (_CALLER_LOOP.set(loop), _IN_ENGINE_CALL.set(True))
    try:
        context = contextvars.copy_context()
    finally:
        _IN_ENGINE_CALL.reset(tokens[1])
        _CALLER_LOOP.reset(tokens[0])
    call = functools.partial(context.run, fn, *args, **kwargs)
    if nested:
        return await asyncio.wrap_future(_own_thread(call))
    return await loop.run_in_executor(_engine_pool(), call)
