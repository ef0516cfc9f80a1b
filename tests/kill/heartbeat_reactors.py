"""The reactor the heartbeat kill test runs in real worker processes
(``--import tests.kill.heartbeat_reactors``; docs/concepts.md, "Heartbeats").

Its one step copies "objects" one offset at a time, heartbeating ``{"offset": n}`` after each.
Its first execution stops at :data:`STOP_AT` and keeps heartbeating that offset while the
``block`` file exists (the test kills the worker there, once the store shows the heartbeat);
a later execution logs where ``ctx.last_heartbeat`` told it to resume and copies the rest.
Every execution appends to an ``O_APPEND`` log (:func:`tests.kill.reactors.record`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from reactor import Background, Input, Reactor, Timeouts, input, step
from tests.kill.reactors import BLOCK_LIMIT, count, record

__all__ = ["END", "STOP_AT", "KillHeartbeat"]

#: The offset the first execution stops at (and heartbeats until it is killed).
STOP_AT = 5
#: The offset the copy ends at.
END = 8


def copy(inputs: Any, ctx: Any) -> int:
    """Copy offsets ``[start, END)``, heartbeating each; ``start`` from the last heartbeat."""
    last = ctx.last_heartbeat
    if last is None:
        record(inputs.log_path, f"start:none:{os.getpid()}")
        start = 0
    else:
        record(inputs.log_path, f"start:{last.details['offset']}:{last.attempt}:{os.getpid()}")
        start = last.details["offset"]
    for offset in range(start, END):
        if offset == STOP_AT and count(inputs.log_path, "stopped") == 0:
            record(inputs.log_path, "stopped")
            deadline = time.monotonic() + BLOCK_LIMIT
            while os.path.exists(inputs.block_path) and time.monotonic() < deadline:
                ctx.heartbeat({"offset": offset})  # alive, still at this offset
                time.sleep(0.05)
        ctx.heartbeat({"offset": offset + 1})
        record(inputs.log_path, f"copied:{offset}")
    return END


class KillHeartbeat(Reactor, name="kill.heartbeat"):
    """One long heartbeating step (``Timeouts(heartbeat=6)``), in a worker."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    copy = step(copy, log_path=input("log_path"), block_path=input("block_path"),
                timeouts=Timeouts(heartbeat=6))
