"""Deterministic freeze points inside real worker processes (``--import
tests.kill.fault_points``; the product has no test hook, this module wraps two of its
functions when a worker imports it).

Only the kill tests' worker processes import this module (it refuses to load under pytest, so
it never changes the test process). Each point is armed by a file of the run and fires once per
run (a marker line in the run's log), and only for the reactors of
:mod:`tests.kill.fault_reactors`; everything else passes straight through.

* **Between the fence check and the write** (docs/workers.md, "Stale writers and fenced
  saves"): ``Checkpointer.save`` is what ``FencedCheckpointer.save`` calls after its liveness
  check passed. For :class:`~tests.kill.fault_reactors.FenceFlow`, while its ``freeze_path``
  exists, the first worker checkpoint after step ``b`` logged ``done:b`` logs
  ``frozen-pid:<pid>`` and stops its own process with ``SIGSTOP``. Once the test removed the
  freeze file and sent ``SIGCONT`` the write goes on and its outcome is logged:
  ``stale-save:refused`` (the store raised ``StaleWriterError``) or ``stale-save:written``.
* **Before a fan-out map's next batch trigger** (docs/fan_out.md): the element job that ends a
  throw calls ``dispatch_batch`` (``reactor.jobs.handlers.map_element``) after storing its
  result. For :class:`~tests.kill.fault_reactors.LostBatchOwner`, while its ``block_path``
  exists, the first such call waits until every claimed element settled, logs
  ``trigger-lost-pid:<pid>`` and stops the process with ``SIGSTOP`` (and never returns); the
  test kills it, so the next batch is never dispatched (``reactor sweep`` re-claims it). The
  map sweeper's own call (``reactor.engine.maps.dispatcher.dispatch_batch``) is not wrapped.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from reactor.engine import checkpoint
from reactor.engine.checkpoint import load_context
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer
from reactor.errors import StaleWriterError
from reactor.jobs.handlers import map_element
from reactor.model.records import MapMetadata
from tests.kill.fault_reactors import FenceFlow, LostBatchOwner
from tests.kill.reactors import BLOCK_LIMIT, entries, record

if "pytest" in sys.modules:  # pragma: no cover - a guard, never taken by the worker processes
    raise ImportError("tests.kill.fault_points is for worker processes (--import) only")

__all__: list[str] = []

#: The longest the trigger point waits for the rest of its throw to settle.
SETTLE_LIMIT = 60.0

_write = checkpoint.Checkpointer.save
_dispatch_batch = map_element.dispatch_batch


def _stop_here() -> None:
    """Stop this process with ``SIGSTOP`` sent to the **calling thread**.

    A process-directed ``os.kill(os.getpid(), SIGSTOP)`` can let the calling thread return
    and run on for a moment before the group stop catches it; a signal to the thread itself is
    taken before the call returns to Python, and the group stop then stops every thread.
    """
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def _wait_while(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BLOCK_LIMIT
    while condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def _has_marker(log_path: str, prefix: str) -> bool:
    return any(line.startswith(prefix) for line in entries(log_path))


def _freeze_between_check_and_write(
    self: checkpoint.Checkpointer, *, force: bool = True
) -> None:
    ctx = self.context
    log_path = str(ctx.inputs.get("log_path", ""))
    armed = (
        isinstance(self, FencedCheckpointer)
        and ctx.reactor == FenceFlow.definition.name
        and os.path.exists(str(ctx.inputs.get("freeze_path", "")))
        and entries(log_path).count("done:b") == 1
        and not _has_marker(log_path, "frozen-pid:")
    )
    if not armed:
        _write(self, force=force)
        return
    record(log_path, f"frozen-pid:{os.getpid()}")
    _stop_here()  # the liveness check passed; the write has not begun
    # SIGCONT arrives after the test removed the freeze file; wait for that all the same.
    _wait_while(lambda: os.path.exists(str(ctx.inputs["freeze_path"])))
    try:
        _write(self, force=force)
    except StaleWriterError:
        record(log_path, "stale-save:refused")
        raise
    record(log_path, "stale-save:written")


def _lose_the_batch_trigger(env: Env, meta: MapMetadata, **kwargs: Any) -> range:
    if meta.parent_reactor == LostBatchOwner.definition.name:
        owner = load_context(env, meta.owner_context_id)
        inputs = owner.inputs if owner is not None else {}
        log_path = str(inputs.get("log_path", ""))
        if (
            os.path.exists(str(inputs.get("block_path", "")))
            and not _has_marker(log_path, "trigger-lost-pid:")
        ):
            maps = env.storage.maps
            claimed = min(maps.offset(meta.map_id) or 0, meta.count)
            deadline = time.monotonic() + SETTLE_LIMIT
            while maps.count_results(meta.map_id) < claimed and time.monotonic() < deadline:
                time.sleep(0.02)
            record(log_path, f"trigger-lost-pid:{os.getpid()}")
            _stop_here()  # the test kills the process here
            _wait_while(lambda: True)  # never dispatch this batch, even if continued
    result: range = _dispatch_batch(env, meta, **kwargs)
    return result


checkpoint.Checkpointer.save = _freeze_between_check_and_write  # type: ignore[method-assign]
map_element.dispatch_batch = _lose_the_batch_trigger  # type: ignore[assignment]
