"""Reactors for the crash-recovery tests of ``tests/engine/test_crash_recovery.py``
(docs/run-control.md, "Cancel"; docs/fan_out.md, "Recovery").

Every step body and undo appends to :data:`journal` (``"<what>:<step>:<order>"``), so a test
counts exactly how many times each side effect ran.
"""

from __future__ import annotations

import threading
from typing import Any

from reactor import Background, Input, Reactor, input, step

__all__ = ["Trio", "journal", "record"]

_lock = threading.Lock()
#: What ran, in order (step bodies and undos).
journal: list[str] = []


def record(entry: str) -> None:
    """Append ``entry`` to :data:`journal` (thread-safe)."""
    with _lock:
        journal.append(entry)


def _step(name: str, *, wait_for: str | None = None) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(f"run:{name}:{inputs.order_id}")
        return f"{name}:{inputs.order_id}"

    run.__name__ = run.__qualname__ = f"run_{name}"
    spec = step(run, order_id=input("order_id"), wait_for=wait_for)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(f"undo:{name}:{inputs.order_id}")

    return spec


class Trio(Reactor, name="tests.crash.trio"):
    """a -> b -> c, each undoable, run by a worker."""

    order_id = Input(str)
    background = Background(all=True)
    a = _step("a")
    b = _step("b", wait_for="a")
    c = _step("c", wait_for="b")
