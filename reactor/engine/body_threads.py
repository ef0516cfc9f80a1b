"""The threads that run plain step bodies under a time limit (docs/concepts.md, "Time limits").

A plain body cannot be stopped, so a step with ``Timeouts`` runs it in a thread of its own
that the engine waits for at most the limit (:func:`reactor.engine.invoke.capture`). Starting
a thread per attempt cost more than the step itself (about 170 µs on a 2-core machine against
110 µs for a whole trivial step), so the threads are kept: an elastic pool that reuses an idle
thread when there is one and starts a new one otherwise (a body that hangs keeps its thread,
and never delays another body). A thread idle for :data:`IDLE_SECONDS` ends.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "submit"]

#: Seconds an idle body thread waits for work before it ends.
IDLE_SECONDS = 60.0

_lock = threading.Lock()
_idle: list[_BodyThread] = []


class _BodyThread(threading.Thread):
    """One kept thread: runs the calls handed to it, one at a time."""

    def __init__(self) -> None:
        super().__init__(name="reactor-step-body", daemon=True)
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            try:
                call = self.calls.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with _lock:
                    if self in _idle:  # nobody took it meanwhile: end
                        _idle.remove(self)
                        return
                continue  # a submit took it just now: its call is on the way
            try:
                call()
            except BaseException:  # the caller wraps its call; nothing may end the thread
                pass
            with _lock:
                _idle.append(self)


def submit(call: Callable[[], None]) -> None:
    """Run ``call()`` on an idle body thread, or on a new one when none is idle.

    Args:
        call: the work; what it raises is dropped (wrap it to hand results back).
    """
    with _lock:
        thread = _idle.pop() if _idle else None
    if thread is None:
        thread = _BodyThread()
        thread.calls.put(call)
        thread.start()
        return
    thread.calls.put(call)


def _forget_after_fork() -> None:
    """A forked child has none of the parent's threads: start afresh."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
