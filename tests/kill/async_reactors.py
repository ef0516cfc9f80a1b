"""Reactors with ``async_step`` units for the process tests
(``--import tests.kill.async_reactors``).

Unit bodies append ``start:<tag>`` / ``done:<tag>`` to an ``O_APPEND`` log (see
:mod:`tests.kill.reactors`), so executions and overlaps are visible across processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from reactor import (
    Background,
    Input,
    Reactor,
    async_step,
    input,
    result,
    step,
    with_lock,
    with_rate_limit,
    with_semaphore,
)
from tests.kill.reactors import BLOCK_LIMIT, _block_on_first_entry, count, record

__all__ = ["AsyncKillUnit", "KillUnit", "LockedUnit", "PooledUnit", "RateLimitedUnit"]

#: Seconds a contended unit body works, so that bodies in other processes can overlap it.
BODY_SECONDS = 0.15


def _body(inputs: Any) -> str:
    tag = f"{inputs.tag}"
    record(inputs.log_path, f"start:{tag}")
    time.sleep(BODY_SECONDS)
    record(inputs.log_path, f"done:{tag}")
    return tag


class LockedUnit(Reactor, name="kill.async.locked"):
    """One unit under ``with_lock(key="shared")``."""

    log_path = Input(str)
    tag = Input(str)

    @async_step(log_path=input("log_path"), tag=input("tag"),
                coordination=with_lock(key="shared"))
    def unit(inputs: Any, ctx: Any) -> str:
        return _body(inputs)


class PooledUnit(Reactor, name="kill.async.pooled"):
    """One unit under ``with_semaphore(key="pool", limit=3)``."""

    log_path = Input(str)
    tag = Input(str)

    @async_step(log_path=input("log_path"), tag=input("tag"),
                coordination=with_semaphore(key="pool", limit=3))
    def unit(inputs: Any, ctx: Any) -> str:
        return _body(inputs)


class RateLimitedUnit(Reactor, name="kill.async.rate_limited"):
    """One unit under ``with_rate_limit(key="api", limit=4, period="hour")``."""

    log_path = Input(str)
    tag = Input(str)

    @async_step(log_path=input("log_path"), tag=input("tag"),
                coordination=with_rate_limit(key="api", limit=4, period="hour"))
    def unit(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"start:{inputs.tag}")
        record(inputs.log_path, f"done:{inputs.tag}")
        return str(inputs.tag)


class KillUnit(Reactor, name="kill.async.unit"):
    """A background run whose unit blocks on its first entry; ``reader`` waits for it."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    @async_step(log_path=input("log_path"), block_path=input("block_path"))
    def unit(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "start:unit")
        _block_on_first_entry(inputs.log_path, inputs.block_path, "start:unit")
        record(inputs.log_path, "done:unit")
        return "captured"

    @step(value=result("unit"), log_path=input("log_path"))
    def reader(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "start:reader")
        return f"read {inputs.value}"

    returns = "reader"


class AsyncKillUnit(Reactor, name="kill.async.unit_async_body"):
    """:class:`KillUnit` with an ``async def`` body: in a worker with async slots it awaits in a
    slot (docs/workers.md, "Async slots"), blocking no thread, on its first entry."""

    log_path = Input(str)
    block_path = Input(str)
    background = Background(all=True)

    @async_step(log_path=input("log_path"), block_path=input("block_path"))
    async def unit(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "start:unit")
        if count(inputs.log_path, "start:unit") == 1:
            deadline = time.monotonic() + BLOCK_LIMIT
            while os.path.exists(inputs.block_path) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        record(inputs.log_path, "done:unit")
        return "captured"

    @step(value=result("unit"), log_path=input("log_path"))
    def reader(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "start:reader")
        return f"read {inputs.value}"

    returns = "reader"
