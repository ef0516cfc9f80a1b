"""Reactors the kill tests run in real worker processes (``--import tests.kill.reactors``).

Every step and undo appends ``start:<name>`` / ``done:<name>`` (``undo-start:`` /
``undo-done:``) to a log file opened with ``O_APPEND``, so executions are counted across
processes, whatever the backend. One step (or undo) per reactor blocks on its **first** entry
while the ``block`` file exists: the test kills the worker at that deterministic point, and a
later entry (the recovered execution) does not block.
"""

from __future__ import annotations

import os
import time
from typing import Any

from reactor import Background, Failure, Input, Reactor, compose, input, result, step

__all__ = [
    "KillCompose",
    "KillComposeChild",
    "KillComposeChildFails",
    "KillComposeFails",
    "KillFlow",
    "KillRollback",
    "count",
    "entries",
    "record",
]

#: The longest a blocked step waits for its ``block`` file to vanish (a safety net).
BLOCK_LIMIT = 120.0


def record(path: str, line: str) -> None:
    """Append ``line`` to the log at ``path`` (one ``write`` on an ``O_APPEND`` descriptor)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def entries(path: str) -> list[str]:
    """Every line of the log (empty when it does not exist yet)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except FileNotFoundError:
        return []


def count(path: str, line: str) -> int:
    """How many times ``line`` was logged."""
    return entries(path).count(line)


def _block_on_first_entry(log_path: str, block_path: str, marker: str) -> None:
    if count(log_path, marker) != 1:
        return
    deadline = time.monotonic() + BLOCK_LIMIT
    while os.path.exists(block_path) and time.monotonic() < deadline:
        time.sleep(0.02)


def _leaf(name: str, *, blocks: bool = False) -> Any:
    def run(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"start:{name}")
        if blocks:
            _block_on_first_entry(inputs.log_path, inputs.block_path, f"start:{name}")
        record(inputs.log_path, f"done:{name}")
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


class KillFlow(Reactor, name="kill.flow"):
    """a -> b -> c (blocks on its first entry) -> d, all in a worker."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    a = step(_leaf("a"), log_path=input("log_path"), block_path=input("block_path"))
    b = step(_leaf("b"), log_path=input("log_path"), block_path=input("block_path"),
             wait_for="a")
    c = step(_leaf("c", blocks=True), log_path=input("log_path"),
             block_path=input("block_path"), wait_for="b")
    d = step(_leaf("d"), log_path=input("log_path"), block_path=input("block_path"),
             prev=result("c"))


def _undoable(name: str, *, undo_blocks: bool = False) -> Any:
    spec = step(_leaf(name), log_path=input("log_path"), block_path=input("block_path"))

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(inputs.log_path, f"undo-start:{name}")
        if undo_blocks:
            _block_on_first_entry(inputs.log_path, inputs.block_path, f"undo-start:{name}")
        record(inputs.log_path, f"undo-done:{name}")

    return spec


class KillRollback(Reactor, name="kill.rollback"):
    """a, b, c complete; d fails; the rollback undoes c, b (blocks on first entry), a."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    a = _undoable("a")
    b = _undoable("b", undo_blocks=True)
    c = _undoable("c")

    @step(log_path=input("log_path"), wait_for=["a", "b", "c"])
    def d(inputs: Any, ctx: Any) -> Failure:
        record(inputs.log_path, "start:d")
        return Failure("d always fails", retryable=False)



def _child_step(name: str, *, blocks: bool = False, after: str | None = None) -> Any:
    """An undoable leaf of the composed children (``blocks``: on its first entry)."""
    spec = step(_leaf(name, blocks=blocks), log_path=input("log_path"),
                block_path=input("block_path"), wait_for=[after] if after else None)

    @spec.undo
    def undo(value: Any, inputs: Any, ctx: Any) -> None:
        record(inputs.log_path, f"undo-start:{name}")
        record(inputs.log_path, f"undo-done:{name}")

    return spec


class KillComposeChild(Reactor, name="kill.compose_child"):
    """a -> b (blocks on its first entry) -> c, every step undoable."""

    log_path = Input(str)
    block_path = Input(str)

    a = _child_step("a")
    b = _child_step("b", blocks=True, after="a")
    c = _child_step("c", after="b")
    returns = "c"


class KillComposeChildFails(Reactor, name="kill.compose_child_fails"):
    """a -> b (blocks on its first entry) -> c, then d fails: the child rolls itself back."""

    log_path = Input(str)
    block_path = Input(str)

    a = _child_step("a")
    b = _child_step("b", blocks=True, after="a")
    c = _child_step("c", after="b")

    @step(log_path=input("log_path"), wait_for=["c"])
    def d(inputs: Any, ctx: Any) -> Failure:
        record(inputs.log_path, "start:d")
        return Failure("d always fails", retryable=False)


class KillCompose(Reactor, name="kill.compose"):
    """reserve -> pay (composed KillComposeChild, killed inside b) -> ship, in a worker."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    reserve = _child_step("reserve")
    pay = compose(KillComposeChild, log_path=input("log_path"),
                  block_path=input("block_path"), wait_for=["reserve"])
    ship = step(_leaf("ship"), log_path=input("log_path"), block_path=input("block_path"),
                wait_for=["pay"])


class KillComposeFails(Reactor, name="kill.compose_fails"):
    """reserve -> pay (composed KillComposeChildFails, killed inside b, fails later)."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    reserve = _child_step("reserve")
    pay = compose(KillComposeChildFails, log_path=input("log_path"),
                  block_path=input("block_path"), wait_for=["reserve"])
