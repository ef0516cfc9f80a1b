"""Reactors of the stale-writer and lost-batch kill tests (``--import tests.kill.fault_reactors``).

The fault injection itself lives in :mod:`tests.kill.fault_points`, which only worker
processes import; this module is plain reactor code, safe to import anywhere (the test process
submits the runs with it, ``reactor sweep --import`` registers them with it).

Every step and element appends ``start:<name>`` / ``done:<name>`` (``done:<index>`` for an
element) to an ``O_APPEND`` log file, so executions are counted across processes.

* :class:`FenceFlow`: ``a -> b -> c -> d``. While its ``freeze_path`` file exists, the first
  worker checkpoint after ``b`` freezes its worker (``SIGSTOP``) between the fence check and the
  write (:mod:`tests.kill.fault_points`).
* :class:`LostBatchOwner`: ``items -> m -> after``, ``m`` a fan-out map of
  :class:`tests.kill.map_reactors.MapElement` in batches of :data:`LOST_BATCH_SIZE`. While
  its ``block_path`` file exists, the element ending the first batch freezes its worker before
  it dispatches the next batch (the trigger the test then loses with ``SIGKILL``).
"""

from __future__ import annotations

from typing import Any

from reactor import (
    Background,
    FanOut,
    Input,
    MapResultEnumerator,
    Reactor,
    element,
    input,
    map_step,
    result,
    step,
    value,
)
from tests.kill.map_reactors import MapElement
from tests.kill.reactors import record

__all__ = ["LOST_BATCH_SIZE", "FenceFlow", "LostBatchOwner", "lost_batch_inputs"]

#: Element jobs per throw of :class:`LostBatchOwner`'s map.
LOST_BATCH_SIZE = 4


def _leaf(name: str) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"start:{name}")
        record(inputs.log_path, f"done:{name}")
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


class FenceFlow(Reactor, name="kill.fence_flow"):
    """a -> b -> c -> d, all in a worker; ``freeze_path`` arms the freeze after ``b``."""

    log_path = Input(str)
    freeze_path = Input(str)
    background = Background(all=True)

    a = step(_leaf("a"), log_path=input("log_path"))
    b = step(_leaf("b"), log_path=input("log_path"), wait_for="a")
    c = step(_leaf("c"), log_path=input("log_path"), wait_for="b")
    d = step(_leaf("d"), log_path=input("log_path"), prev=result("c"))


class LostBatchOwner(Reactor, name="kill.lost_batch_owner"):
    """``items`` -> ``m`` (fan-out map, batches of :data:`LOST_BATCH_SIZE`) -> ``after``."""

    count = Input(int)
    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    @step(count=input("count"))
    def items(inputs: Any, ctx: Any) -> list[int]:
        return list(range(inputs.count))

    m = map_step(
        MapElement,
        source=result("items"),
        args={
            "n": element("m"),
            "log_path": input("log_path"),
            "block_path": input("block_path"),
            "fail_at": value(-1),
            "undo_fail_at": value(-1),
            "block_undo_at": value(-1),
        },
        fan_out=FanOut(batch_size=LOST_BATCH_SIZE),
    )

    @step(m=result("m"))
    def after(inputs: Any, ctx: Any) -> int:
        mapped: MapResultEnumerator = inputs.m
        return sum(mapped.values())

    returns = "after"


def lost_batch_inputs(log_path: str, block_path: str, count: int) -> dict[str, Any]:
    """The inputs of one :class:`LostBatchOwner` run."""
    return {"count": count, "log_path": log_path, "block_path": block_path}
