"""The reactors the pause/rewind/fork tests run (docs/operations.md, "Pause, rewind, fork").

:func:`chain` builds ``a -> b -> c`` (``c`` also reads ``b``'s result); each body, undo and
compensate logs to a :class:`Journal`; ``c`` raises while ``journal.broken`` is set (the bug
an operator fixes before rewinding). Bodies are plain functions (``sync``) or ``async def``
functions (``async``).
"""

from __future__ import annotations

import threading
from typing import Any

from reactor import Background, Reactor
from reactor.dsl import result, step

__all__ = ["Journal", "chain"]


class Journal:
    """A thread-safe event log, and the switch of ``c``'s bug."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.broken = True
        self._lock = threading.Lock()

    def log(self, event: str) -> None:
        """Append ``event``."""
        with self._lock:
            self.events.append(event)

    def count(self, event: str) -> int:
        """How many times ``event`` was logged."""
        return self.events.count(event)


def chain(journal: Journal, *, kind: str = "sync", on_failure: str | None = "pause",
          handed: Background | None = None, step_level: bool = False) -> type[Reactor]:
    """``a -> b -> c``; ``on_failure`` on the class (or on ``c`` alone with ``step_level``).
    """

    def body(name: str) -> Any:
        def run_sync(inputs: Any, ctx: Any) -> str:
            journal.log(f"run {name}")
            if name == "c" and journal.broken:
                raise RuntimeError("bug in c")
            return f"{name}:{getattr(inputs, 'seen', '')}"

        async def run_async(inputs: Any, ctx: Any) -> str:
            return run_sync(inputs, ctx)

        return run_async if kind == "async" else run_sync

    class_level = "rollback" if step_level or on_failure is None else on_failure

    class Chain(Reactor):
        background = handed
        on_failure = class_level  # type: ignore[assignment]

        a = step(body("a"))
        b = step(body("b"), wait_for=["a"])
        c = step(body("c"), seen=result("b"),
                 on_failure="pause" if step_level else None)  # type: ignore[arg-type]

        @a.undo
        def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            journal.log("undo a")

        @b.undo
        def undo_b(result: Any, inputs: Any, ctx: Any) -> None:
            journal.log("undo b")

        @c.undo
        def undo_c(result: Any, inputs: Any, ctx: Any) -> None:
            journal.log("undo c")

        @c.compensate
        def compensate_c(error: Any, inputs: Any, ctx: Any) -> None:
            journal.log("compensate c")

    return Chain
