"""A reactor the cancel process test runs in a real worker process
(``--import tests.kill.cancel_reactors``; docs/run-control.md, "Cancel").

Every step body, undo and compensate appends ``start:<step>``/``done:<step>``,
``undo:<step>``, ``compensate:<step>`` to a log opened with ``O_APPEND`` (counted across
processes). Step ``c`` blocks while the ``block`` file exists: the test cancels the run while
the worker is inside ``c``, then removes the file.
"""

from __future__ import annotations

import os
import time
from typing import Any

from reactor import Background, Input, Reactor, input, step
from tests.kill.reactors import BLOCK_LIMIT, record

__all__ = ["CancelFlow"]


def _undoable(name: str, *, blocks: bool = False, after: str | None = None) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"start:{name}")
        deadline = time.monotonic() + BLOCK_LIMIT
        while blocks and os.path.exists(inputs.block_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        record(inputs.log_path, f"done:{name}")
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    spec = step(run, log_path=input("log_path"), block_path=input("block_path"), wait_for=after)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(inputs.log_path, f"undo:{name}")

    @spec.compensate
    def compensate(error: Any, inputs: Any, ctx: Any) -> None:
        record(inputs.log_path, f"compensate:{name}")

    return spec


class CancelFlow(Reactor, name="kill.cancel_flow"):
    """a -> b -> c (blocks while the block file exists) -> d -> e, all in a worker."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    a = _undoable("a")
    b = _undoable("b", after="a")
    c = _undoable("c", blocks=True, after="b")
    d = _undoable("d", after="c")
    e = _undoable("e", after="d")
