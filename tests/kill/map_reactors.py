"""Fan-out map reactors the map tests run, in threads and in real worker processes
(``--import tests.kill.map_reactors``).

Every element step and undo appends ``done:<i>`` / ``undo-start:<i>`` / ``undo-done:<i>`` to a
log file opened with ``O_APPEND`` (counted across processes, whatever the backend). Knobs (all
inputs, ``-1`` = off):

* ``fail_at``: the element whose step fails (``atomic=True``: the map stops there);
* ``undo_fail_at``: the element whose undo raises (reported with ``map_step``/``element_index``);
* ``block_undo_at``: the element whose undo blocks on its **first** entry while the ``block``
  file exists, after logging ``blocked-pid:<pid>`` (the kill tests kill that worker);
* ``expire_at``: after the map completed, the ``after`` step deletes this element's stored
  context (a forced expiry through the storage), so the rollback finds it gone;
* ``fail_after``: the ``after`` step fails, so the completed map is undone (distributed).
"""

from __future__ import annotations

import os
from typing import Any

from reactor import (
    Background,
    FanOut,
    Input,
    MapResultEnumerator,
    Reactor,
    config,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.engine.maps.dispatcher import element_context_id
from tests.kill.reactors import _block_on_first_entry, count, record

__all__ = ["BATCH_SIZE", "MapElement", "MapOwner", "inputs"]

#: Element jobs per throw (and rollback positions per batch).
BATCH_SIZE = 50


class MapElement(Reactor, name="kill.map_element"):
    """One element: ``work`` logs ``done:<n>`` and returns ``n``; its undo logs and may block
    or fail."""

    n = Input(int)
    log_path = Input(str)
    block_path = Input(str)
    fail_at = Input(int)
    undo_fail_at = Input(int)
    block_undo_at = Input(int)

    @step(n=input("n"), log_path=input("log_path"), block_path=input("block_path"),
          fail_at=input("fail_at"), undo_fail_at=input("undo_fail_at"),
          block_undo_at=input("block_undo_at"))
    def work(inputs: Any, ctx: Any) -> int:
        if inputs.n == inputs.fail_at:
            record(inputs.log_path, f"fail:{inputs.n}")
            raise RuntimeError(f"element {inputs.n} failed")
        record(inputs.log_path, f"done:{inputs.n}")
        return int(inputs.n)

    @work.undo
    def release(value: Any, inputs: Any, ctx: Any) -> None:
        n = inputs.n
        record(inputs.log_path, f"undo-start:{n}")
        if n == inputs.block_undo_at:
            if count(inputs.log_path, f"undo-start:{n}") == 1:
                record(inputs.log_path, f"blocked-pid:{os.getpid()}")
            _block_on_first_entry(inputs.log_path, inputs.block_path, f"undo-start:{n}")
        if n == inputs.undo_fail_at:
            raise RuntimeError(f"undo of element {n} failed")
        record(inputs.log_path, f"undo-done:{n}")

    returns = "work"


class MapOwner(Reactor, name="kill.map_owner"):
    """``items`` -> ``m`` (fan-out map of :class:`MapElement`, atomic) -> ``after``."""

    count = Input(int)
    log_path = Input(str)
    block_path = Input(str)
    fail_at = Input(int)
    undo_fail_at = Input(int)
    block_undo_at = Input(int)
    expire_at = Input(int)
    fail_after = Input(bool)
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
            "fail_at": input("fail_at"),
            "undo_fail_at": input("undo_fail_at"),
            "block_undo_at": input("block_undo_at"),
        },
        atomic=True,
        fan_out=FanOut(batch_size=BATCH_SIZE),
    )

    @step(m=result("m"), expire_at=input("expire_at"), fail_after=input("fail_after"))
    def after(inputs: Any, ctx: Any) -> int:
        mapped: MapResultEnumerator = inputs.m
        if inputs.expire_at >= 0:
            config.current().storage.contexts.delete(
                element_context_id(mapped.map_id, inputs.expire_at)
            )
        if inputs.fail_after:
            raise RuntimeError("after failed")
        return sum(mapped.values())


def inputs(
    log_path: str, block_path: str = "", *, count: int = 200, **knobs: Any
) -> dict[str, Any]:
    """The inputs of one :class:`MapOwner` run; unset knobs are off."""
    out: dict[str, Any] = {
        "count": count, "log_path": log_path, "block_path": block_path or log_path + ".block",
        "fail_at": -1, "undo_fail_at": -1, "block_undo_at": -1, "expire_at": -1,
        "fail_after": False,
    }
    out.update(knobs)
    return out
