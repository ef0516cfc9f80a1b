"""Rate-limit hit throughput of reactor_redis vs ``limits`` FixedWindowRateLimiter on Redis.

Usage: ``python benchmarks/redis_rate_limit.py redis://127.0.0.1:PORT/0 [N]``. One window,
a limit high enough that every hit is admitted; prints hits/s (median of 10
alternating chunks) and the ratio, then the round trips of one reactor_redis hit counted on
the client and the server's commands (benchmarks/_roundtrips.py; after the timed loops, which
run unwrapped); no assertions.
"""

from __future__ import annotations

import sys

import reactor_redis
import redis
from _roundtrips import count_calls, format_counts
from _timing import interleaved, rate
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from reactor.model.records import RateWindow


def main(url: str, n: int) -> None:
    """Run both loops and print the numbers."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    windows = [RateWindow("minute", 60, 10**9)]
    limiter = FixedWindowRateLimiter(storage_from_string(url.split("?")[0]))
    item = RateLimitItemPerMinute(10**9)
    rate(200, lambda _: storage.rate_limits.hit("rl", windows))
    rate(200, lambda _: limiter.hit(item, "rl"))
    rates = interleaved(
        n,
        {
            "ours": lambda _: storage.rate_limits.hit("rl", windows),
            "limits": lambda _: limiter.hit(item, "rl"),
        },
    )
    ours, theirs = rates["ours"], rates["limits"]
    print(f"hits/s  reactor_redis={ours:,.0f}  limits FixedWindowRateLimiter={theirs:,.0f}")
    print(f"ratio reactor_redis / limits = {ours / theirs:.2f}")
    client = redis.Redis.from_url(url.split("?")[0])
    sent, server = count_calls(200, lambda _: storage.rate_limits.hit("rl", windows), client)
    print(
        f"reactor_redis hit: round trips {sent.total_round_trips() / 200:.2f} "
        f"({format_counts(sent.by_script(), 200)}), server commands "
        f"{sum(server.values()) / 200:.2f} ({format_counts(server, 200)})"
    )
    client.close()
    storage.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
