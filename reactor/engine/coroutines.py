"""Async step bodies and the awaitable API: where a coroutine runs (docs/concepts.md,
"Async steps").

The engine is synchronous: it checkpoints, takes locks and calls step bodies in the thread that
runs the saga. A step body written ``async def`` returns a coroutine there, and
:func:`await_result` runs it to completion before the engine goes on, on one of two loops:

* **the caller's loop**, when the run was started from async code through the awaitable API
  (``await Reactor.arun(...)``, :func:`off_loop`): the engine runs in a thread of reactor's
  pool, off the caller's loop, and hands each coroutine back to that loop
  (``asyncio.run_coroutine_threadsafe``). A step body therefore shares the loop, and every
  loop-bound object (an ``httpx.AsyncClient``, a lock, a queue) of the application that
  started the run;
* **reactor's loop** otherwise (a synchronous ``Reactor.run``, a worker thread): one event loop
  per process, on a daemon thread started at the first async step, shared by every thread of
  the process, so async bodies of concurrent runs and units overlap on it and a loop-bound
  client made in one step is usable in the next.

The calling thread blocks until the coroutine is done; a body's exception, signal (``fail()``,
``halt()``, ``skip()``, ``succeed()``) or return value reaches the engine exactly as from a plain
method, with the context variables of the calling thread (the coroutine runs in a copy of
them). A synchronous ``Reactor.run`` called on the very loop that would run the coroutine (an
``async def`` step that calls ``Other.run()`` instead of ``await Other.arun()``) cannot
complete and raises :class:`~reactor.errors.DefinitionError` saying so.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from reactor.errors import DefinitionError

__all__ = ["POOL_THREADS", "await_result", "off_loop"]

_T = TypeVar("_T")

#: Threads of the pool that runs the blocking engine for the awaitable API: at most this many
#: ``arun``/``aresume``/... calls of one process make progress at once; the rest queue.
POOL_THREADS = 64

#: The loop of the code that awaited the awaitable API (``None``: not inside one).
_CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "reactor_caller_loop", default=None
)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _reactor_loop() -> asyncio.AbstractEventLoop:
    """The process's own loop, started on a daemon thread at the first call."""
    global _loop, _loop_thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

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


def await_result(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` (an ``async def`` step body's coroutine) to completion and return its
    value, blocking the calling thread: on the caller's loop inside the awaitable API, else on
    reactor's loop (module docstring).

    Args:
        coro: the coroutine; it is always awaited or closed, never left pending.

    Returns:
        What the coroutine returned.

    Raises:
        DefinitionError: the calling thread is running the loop the coroutine would need (a
            synchronous run started from an ``async def`` step; use the awaitable API).
        BaseException: whatever the coroutine raised, unchanged.
    """
    loop = _CALLER_LOOP.get() or _reactor_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise DefinitionError(
            "an async step body cannot run: this thread is running the event loop it needs "
            "(a synchronous Reactor.run, resume, retry, undo or cancel was called from async "
            "code on that loop; await Reactor.arun(...) and the other awaitable methods "
            "instead: docs/concepts.md, \"Async steps\")"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _engine_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=POOL_THREADS, thread_name_prefix="reactor-arun"
            )
        return _pool


async def off_loop(fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """Run the blocking ``fn(*args, **kwargs)`` (an engine entry point) in reactor's pool,
    with the caller's context variables, and await it without blocking the caller's loop;
    ``async def`` step bodies it meets run back on this loop (:func:`await_result`).

    Cancelling the awaiting task does not stop ``fn``: a run goes on to its next checkpoint
    and beyond (cancel a run with ``Reactor.acancel``).

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
    token = _CALLER_LOOP.set(loop)
    try:
        context = contextvars.copy_context()
    finally:
        _CALLER_LOOP.reset(token)
    call = functools.partial(context.run, fn, *args, **kwargs)
    return await loop.run_in_executor(_engine_pool(), call)
