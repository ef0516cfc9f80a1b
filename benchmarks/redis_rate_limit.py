"""Rate-limit hit throughput of reactor_redis vs ``limits`` FixedWindowRateLimiter on Redis.

Usage: ``python benchmarks/redis_rate_limit.py redis://127.0.0.1:PORT/0 [N]``. One window,
a limit high enough that every hit is admitted; prints hits/s and the ratio, no assertions.
"""

from __future__ import annotations

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


def main(url: str, n: int) -> None:
    """Run both loops and print the numbers."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    windows = [RateWindow("minute", 60, 10**9)]
    limiter = FixedWindowRateLimiter(storage_from_string(url.split("?")[0]))
    item = RateLimitItemPerMinute(10**9)
    _rate(200, lambda: storage.rate_limits.hit("rl", windows))
    _rate(200, lambda: limiter.hit(item, "rl"))
    ours = _rate(n, lambda: storage.rate_limits.hit("rl", windows))
    theirs = _rate(n, lambda: limiter.hit(item, "rl"))
    print(f"hits/s  reactor_redis={ours:,.0f}  limits FixedWindowRateLimiter={theirs:,.0f}")
    print(f"ratio reactor_redis / limits = {ours / theirs:.2f}")
    storage.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
