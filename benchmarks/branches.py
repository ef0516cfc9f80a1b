"""Concurrent branches (docs/concepts.md, "Concurrency"): a saga of 4 independent I/O-bound
steps, then one step that depends on all of them, with ``max_concurrency = 4`` vs the same
saga run one step at a time (the default).

The script prints:

* the latency of one saga (median of ``--repeat`` runs, each step's body an ``--io`` second
  wait), sequential and concurrent, next to the floors (5 x io and 2 x io): what the engine
  adds is the difference;
* ``--sagas`` concurrent sagas started from one event loop with ``await Reactor.arun``:
  sagas/s and the loop's largest lag (a 5 ms ticker measures how late it woke).

Both step flavours are measured: ``async def`` bodies (``await asyncio.sleep``) and plain
bodies (``time.sleep``, each branch in its own thread).

Usage: ``python benchmarks/branches.py [STORAGE_URL] [--io SECONDS] [--repeat N]
[--sagas N]`` (default ``memory://``; e.g. ``redis://127.0.0.1:PORT/0``). The router is
``inline://``. No assertions (performance is measured, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from _timing import gathered_with_lag

import reactor
from reactor import Reactor, result, step


def _build(io: float, concurrency: int, flavour: str) -> type[Reactor]:
    def leg(name: str) -> Any:
        if flavour == "async":
            async def run(inputs: Any, ctx: Any) -> str:
                await asyncio.sleep(io)
                return name
        else:
            def run(inputs: Any, ctx: Any) -> str:  # type: ignore[misc]
                time.sleep(io)
                return name
        run.__name__ = run.__qualname__ = name
        return step(run)

    class Checkout(Reactor, name=f"bench.branches.{flavour}.{concurrency}"):
        max_concurrency = concurrency
        reserve = leg("reserve")
        authorise = leg("authorise")
        fraud = leg("fraud")
        quote = leg("quote")

        @step(a=result("reserve"), b=result("authorise"), c=result("fraud"),
              d=result("quote"))
        async def confirm(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "confirmed"

        returns = "confirm"

    return Checkout


def _latency(saga: type[Reactor], repeat: int) -> float:
    """The median seconds of one ``run`` of ``saga``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        out = saga.run()
        times.append(time.perf_counter() - started)
        assert out.value == "confirmed", out
    return statistics.median(times)


async def _arun_batch(saga: type[Reactor], n: int) -> tuple[float, float]:
    """Seconds for ``n`` concurrent ``arun`` calls, and the loop's largest lag (seconds)."""
    results, elapsed, lag = await gathered_with_lag(saga.arun, n)
    assert all(out.value == "confirmed" for out in results)
    return elapsed, lag


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", nargs="?", default="memory://")
    parser.add_argument("--io", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--sagas", type=int, default=1000)
    args = parser.parse_args()
    reactor.configure(storage=args.storage, router="inline://")
    io = args.io
    print(f"saga: 4 independent steps then 1 dependent step, {io * 1000:g} ms of I/O each, "
          f"on {args.storage}")
    for flavour in ("async", "plain"):
        sequential = _build(io, 1, flavour)
        concurrent = _build(io, 4, flavour)
        _latency(sequential, 2)  # warm up: the loop, the pools, the scripts
        _latency(concurrent, 2)
        seq = _latency(sequential, args.repeat)
        con = _latency(concurrent, args.repeat)
        print(f"{flavour:5} bodies: one step at a time {seq * 1000:7.1f} ms (floor "
              f"{5 * io * 1000:g}); max_concurrency=4 {con * 1000:7.1f} ms (floor "
              f"{2 * io * 1000:g}); speed-up {seq / con:.2f}x")
    concurrent = _build(io, 4, "async")
    asyncio.run(_arun_batch(concurrent, 20))
    elapsed, lag = asyncio.run(_arun_batch(concurrent, args.sagas))
    print(f"{args.sagas} sagas with max_concurrency=4 from one loop with arun: "
          f"{args.sagas / elapsed:8.1f} sagas/s (largest loop lag {lag * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
