"""Sagas of ``async def`` steps started from one event loop with ``await Reactor.arun`` vs
the same sagas run with the blocking ``Reactor.run`` in threads (docs/concepts.md, "Async
steps").

Each saga has three steps whose bodies are I/O waits (``await asyncio.sleep(io)``; the
threaded baseline's bodies are the same coroutines, run by reactor on its own loop). The
script prints, for N sagas started at once:

* sagas/s of ``arun`` (N tasks ``asyncio.gather``-ed on one loop) and of the baseline
  (a ``ThreadPoolExecutor`` of ``--threads`` threads calling ``Reactor.run``), and their ratio;
* the event loop's largest lag while the ``arun`` batch ran (a 5 ms ticker measures how late
  it woke: a blocked loop shows as a lag as long as the blocking call).

Usage: ``python benchmarks/async_sagas.py [STORAGE_URL] [--sagas N] [--io SECONDS]
[--threads T]`` (default ``memory://``; e.g. ``redis://127.0.0.1:PORT/0``). The router is
``inline://``. No assertions (performance is measured, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import time
from typing import Any

from _timing import gathered_with_lag

import reactor
from reactor import Reactor, step


def _build(io: float) -> type[Reactor]:
    class Order(Reactor, name="bench.async_order"):
        @step()
        async def reserve(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "held"

        @step(wait_for=["reserve"])
        async def charge(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "paid"

        @step(wait_for=["charge"])
        async def ship(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "shipped"

        returns = "ship"

    return Order


async def _arun_batch(order: type[Reactor], n: int) -> tuple[float, float]:
    """Seconds for ``n`` concurrent ``arun`` calls, and the loop's largest lag (seconds)."""
    results, elapsed, lag = await gathered_with_lag(order.arun, n)
    assert all(r.value == "shipped" for r in results)
    return elapsed, lag


def _threaded_batch(order: type[Reactor], n: int, threads: int) -> float:
    """Seconds for ``n`` blocking ``run`` calls on ``threads`` threads."""
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(lambda _: order.run(), range(n)))
    assert all(r.value == "shipped" for r in results)
    return time.perf_counter() - started


def main() -> None:
    """Run both batches and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", nargs="?", default="memory://")
    parser.add_argument("--sagas", type=int, default=1000)
    parser.add_argument("--io", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=64)
    args = parser.parse_args()
    reactor.configure(storage=args.storage, router="inline://")
    order = _build(args.io)
    asyncio.run(_arun_batch(order, 20))  # warm up: the pool, the loop, the scripts
    _threaded_batch(order, 20, args.threads)
    arun_s, lag = asyncio.run(_arun_batch(order, args.sagas))
    threaded_s = _threaded_batch(order, args.sagas, args.threads)
    floor = 3 * args.io
    print(f"{args.sagas} sagas of 3 async steps ({args.io * 1000:g} ms of I/O each, "
          f"{floor * 1000:g} ms per saga at best) on {args.storage}")
    print(f"arun from one loop:       {args.sagas / arun_s:8.1f} sagas/s  "
          f"(largest loop lag {lag * 1000:.1f} ms)")
    print(f"run in {args.threads} threads:     {args.sagas / threaded_s:8.1f} sagas/s")
    print(f"ratio arun / threaded run = {threaded_s / arun_s:.2f}")


if __name__ == "__main__":
    main()
