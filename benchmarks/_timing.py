"""Timing helpers shared by the benchmarks: ops/s of a loop, and interleaved medians.

Benchmarks print ratios against a baseline measured in the same process on the same server; no
assertions (performance is measured, not asserted).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["interleaved", "rate"]


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
