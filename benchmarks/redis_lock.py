"""Lock acquire+release throughput of reactor_redis vs python-redis-lock and pottery Redlock.

Usage: ``python benchmarks/redis_lock.py redis://127.0.0.1:PORT/0 [N]``. Prints ops/s of each
(median of 10 alternating chunks) and the ratios measured in the same run on the same server,
then the round trips of one reactor_redis acquire+release counted on the client and the
server's commands (benchmarks/_roundtrips.py; after the timed loops, which run unwrapped); no
assertions.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path

import reactor_redis
import redis
from _roundtrips import count_calls, format_counts
from _timing import interleaved, rate
from pottery import Redlock


def _python_redis_lock() -> object:
    """Import python-redis-lock's ``redis_lock`` (this file shadows the name on ``sys.path``)."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.modules.pop("redis_lock", None)
    return importlib.import_module("redis_lock")


def main(url: str, n: int) -> None:
    """Run the three loops and print the numbers."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    client = redis.Redis.from_url(url.split("?")[0])
    redis_lock: object = _python_redis_lock()
    owner = uuid.uuid4().hex

    def ours(i: int) -> None:
        assert storage.locks.acquire(f"k{i % 64}", owner, 30)
        assert storage.locks.release(f"k{i % 64}", owner)

    def prl(i: int) -> None:
        lock = redis_lock.Lock(client, f"bench-prl-{i % 64}", expire=30)  # type: ignore[attr-defined]
        assert lock.acquire(blocking=False)
        lock.release()

    def pottery(i: int) -> None:
        lock = Redlock(key=f"bench-pottery-{i % 64}", masters={client}, auto_release_time=30)
        assert lock.acquire(blocking=False)
        lock.release()

    rate(200, ours), rate(200, prl), rate(200, pottery)  # warm up (script loading)
    rates = interleaved(n, {"ours": ours, "prl": prl, "pottery": pottery})
    r_ours, r_prl, r_pot = rates["ours"], rates["prl"], rates["pottery"]
    print(f"acquire+release/s  reactor_redis={r_ours:,.0f}  python-redis-lock={r_prl:,.0f}  "
          f"pottery Redlock={r_pot:,.0f}")  # fmt: skip
    print(f"ratio reactor_redis / python-redis-lock = {r_ours / r_prl:.2f}")
    print(f"ratio reactor_redis / pottery Redlock   = {r_ours / r_pot:.2f}")
    sent, server = count_calls(200, ours, client)
    print(
        f"reactor_redis acquire+release: round trips {sent.total_round_trips() / 200:.2f} "
        f"({format_counts(sent.by_script(), 200)}), server commands "
        f"{sum(server.values()) / 200:.2f} ({format_counts(server, 200)})"
    )
    storage.close()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
