"""What auto-extension costs: ``reactor.coordination.Lock`` on Redis against the raw floor.

Usage: ``python benchmarks/redis_lock_renewal.py redis://127.0.0.1:PORT/0 [N] [HOLD_SECONDS]``.

Prints, measured in the same process on the same server (median of alternating chunks):

* acquire+release/s of the raw floor — ``SET key owner NX PX`` and a compare-and-delete Lua
  release through redis-py — of the adapter's ``LockStore`` alone, and of the ``Lock`` client
  with ``auto_extend=True`` (which starts and stops a renewal on the shared heartbeat scheduler
  for every hold), with their ratios to the floor;
* extend calls per held second for 1 s, 3 s and 30 s locks held ``HOLD_SECONDS`` each (the
  policy renews every ``ttl/3``: expect about ``3/ttl``).

No assertions: performance is measured, not asserted (``docs/coordination.md``, "Renewal").
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

import reactor_redis
import redis
from _timing import interleaved, rate

from reactor.coordination import Lock

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class _Counting:
    """A lock sub-store proxy counting ``extend`` calls."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.extends = 0

    def extend(self, *args: Any) -> bool:
        self.extends += 1
        return bool(self._inner.extend(*args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(url: str, n: int, hold: float) -> None:
    """Run the loops and print the numbers."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    client = redis.Redis.from_url(url.split("?")[0])
    release = client.register_script(RELEASE)
    owner = uuid.uuid4().hex

    def floor(i: int) -> None:
        key = f"bench-floor-{i % 64}"
        assert client.set(key, owner, nx=True, px=30_000)
        assert release(keys=[key], args=[owner])

    def store(i: int) -> None:
        assert storage.locks.acquire(f"s{i % 64}", owner, 30)
        assert storage.locks.release(f"s{i % 64}", owner)

    def lock_client(i: int) -> None:
        lock = Lock(storage.locks, f"c{i % 64}", owner=owner, ttl=30, auto_extend=True)
        assert lock.try_acquire()
        assert lock.release()

    loops = {"floor": floor, "store": store, "client": lock_client}
    for fn in loops.values():
        rate(200, fn)  # warm up (script loading, scheduler threads)
    rates = interleaved(n, loops)
    print(
        f"acquire+release/s  raw SET NX PX + Lua release={rates['floor']:,.0f}  "
        f"LockStore={rates['store']:,.0f}  Lock(auto_extend=True)={rates['client']:,.0f}"
    )
    print(f"ratio LockStore / floor              = {rates['store'] / rates['floor']:.2f}")
    print(f"ratio Lock(auto_extend) / floor      = {rates['client'] / rates['floor']:.2f}")

    for ttl in (1.0, 3.0, 30.0):
        counting = _Counting(storage.locks)
        lock = Lock(counting, f"held-{ttl}", owner=owner, ttl=ttl)  # type: ignore[arg-type]
        lock.acquire()
        time.sleep(hold)
        lost = lock.lost
        lock.release()
        print(
            f"ttl={ttl:>4g}s held {hold:g}s: {counting.extends} extends "
            f"= {counting.extends / hold:.2f}/s (policy: {3 / ttl:.2f}/s), lost={lost is not None}"
        )
    storage.close()
    client.close()


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 3000,
        float(sys.argv[3]) if len(sys.argv) > 3 else 6.0,
    )
