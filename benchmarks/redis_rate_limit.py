"""Rate-limit hit throughput of reactor_redis vs ``limits`` FixedWindowRateLimiter on Redis.

Usage: ``python benchmarks/redis_rate_limit.py redis://127.0.0.1:PORT/0 [N]``. One window,
a limit high enough that every hit is admitted; prints hits/s (median of 10
alternating chunks) and the ratio, no assertions.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import reactor_redis
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from reactor.ports.records import RateWindow


def _rate(n: int, fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - started)


def _interleaved(
    n: int, fns: dict[str, Callable[[], object]], rounds: int = 10
) -> dict[str, float]:
    """Median calls/s of each loop over ``rounds`` alternating chunks of ``n / rounds`` calls.

    Alternating short chunks (instead of one long loop per library) exposes every library to
    the same machine load, so the ratio stays meaningful on a shared, noisy host.
    """
    chunk = max(n // rounds, 1)
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            rates[name].append(_rate(chunk, fn))
    return {name: statistics.median(values) for name, values in rates.items()}


def main(url: str, n: int) -> None:
    """Run both loops and print the numbers."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    windows = [RateWindow("minute", 60, 10**9)]
    limiter = FixedWindowRateLimiter(storage_from_string(url.split("?")[0]))
    item = RateLimitItemPerMinute(10**9)
    _rate(200, lambda: storage.rate_limits.hit("rl", windows))
    _rate(200, lambda: limiter.hit(item, "rl"))
    rates = _interleaved(
        n,
        {
            "ours": lambda: storage.rate_limits.hit("rl", windows),
            "limits": lambda: limiter.hit(item, "rl"),
        },
    )
    ours, theirs = rates["ours"], rates["limits"]
    print(f"hits/s  reactor_redis={ours:,.0f}  limits FixedWindowRateLimiter={theirs:,.0f}")
    print(f"ratio reactor_redis / limits = {ours / theirs:.2f}")
    storage.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
