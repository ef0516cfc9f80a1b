"""Timing helpers shared by the benchmarks: ops/s of a loop, and interleaved medians.

Benchmarks print ratios against a baseline measured in the same process on the same server; no
assertions (performance is measured, not asserted).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["gathered_with_lag", "interleaved", "rate"]


def rate(n: int, fn: Callable[[int], object]) -> float:
    """Calls per second of ``fn(i)`` for ``i`` in ``range(n)``."""
    started = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - started)


def interleaved(
    n: int, fns: dict[str, Callable[[int], object]], rounds: int = 10
) -> dict[str, float]:
    """Median calls/s of each loop over ``rounds`` alternating chunks of ``n / rounds`` calls.

    Alternating short chunks (instead of one long loop per library) exposes every loop to the
    same machine load, so the ratios stay meaningful on a shared, noisy host.
    """
    chunk = max(n // rounds, 1)
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            rates[name].append(rate(chunk, fn))
    return {name: statistics.median(values) for name, values in rates.items()}


async def gathered_with_lag(
    make: Callable[[], Awaitable[Any]], n: int
) -> tuple[list[Any], float, float]:
    """Await ``n`` calls of ``make()`` at once (``asyncio.gather``) while a 5 ms ticker measures
    how late the loop wakes (a blocked loop shows as a lag as long as the blocking call).

    Returns:
        ``(results, seconds elapsed, largest loop lag in seconds)``.
    """
    lag = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal lag
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lag = max(lag, time.perf_counter() - before - 0.005)

    tick = asyncio.ensure_future(ticker())
    started = time.perf_counter()
    results = await asyncio.gather(*(make() for _ in range(n)))
    elapsed = time.perf_counter() - started
    stop.set()
    await tick
    return list(results), elapsed, lag
