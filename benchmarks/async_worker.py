"""``async_step`` units (or, with ``--runs``, whole runs of an async reactor) whose ``async
def`` bodies wait on I/O, through one worker with a few handler threads: one thread per job vs
async slots (docs/workers.md, "Async slots").

The script dispatches ``--units`` runs of one unit each (the body is ``await
asyncio.sleep(io)``), then starts one in-process ``Worker`` with ``--threads`` handler threads
— first with ``async_slots=0`` (each job holds its thread for the whole body), then with
``async_slots=--slots`` — and, for comparison, with as many handler threads as slots and no
slots; it prints, for each, the units per second from the worker's start to the last unit
processed and the most threads the process had meanwhile (sampled every 5 ms).

With ``--runs`` each of the ``--units`` jobs is a background run of a reactor of two ``async
def`` steps (``await asyncio.sleep(io)`` each): a ``run`` job that a slot keeps suspended
through both bodies.

Usage: ``python benchmarks/async_worker.py [STORAGE_URL [ROUTER_URL]] [--units N] [--io SECONDS]
[--threads T] [--slots S] [--runs]`` (default: in-process memory storage and router; e.g.
``redis://127.0.0.1:PORT/0`` for both). No assertions (performance is measured, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import uuid
from typing import Any

import reactor
from reactor import Background, DispatchHandle, Reactor, Success, async_step, step
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage


def _build(io: float) -> type[Reactor]:
    class Notify(Reactor, name=f"bench.async_worker_{uuid.uuid4().hex[:6]}"):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "sent"

    return Notify


def _build_run(io: float) -> type[Reactor]:
    class Order(Reactor, name=f"bench.async_run_{uuid.uuid4().hex[:6]}"):
        background = Background(all=True)

        @step()
        async def reserve(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "reserved"

        @step(wait_for="reserve")
        async def notify(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(io)
            return "sent"

    return Order


def _with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


def _measure(storage: str, router: str, units: int, io: float, threads: int,
             slots: int, runs: bool = False) -> tuple[float, int]:
    """Units (or runs) per second and the peak thread count of one worker draining them."""
    prefix = f"bw{uuid.uuid4().hex[:8]}"
    if storage.startswith("memory:"):  # objects: a local:// URL would start embedded workers
        runtime = reactor.configure(storage=MemoryStorage(), router=LocalRouter())
    else:
        runtime = reactor.configure(storage=_with_prefix(storage, prefix),
                                    router=_with_prefix(router, prefix))
    try:
        if runs:
            order = _build_run(io)
            for _ in range(units):
                assert isinstance(order.run(), DispatchHandle)
        else:
            notify = _build(io)
            for _ in range(units):
                assert isinstance(notify.run(), Success)
        worker = Worker(runtime, threads=threads, async_slots=slots, poll_seconds=0.05)
        peak = [threading.active_count()]
        done = threading.Event()

        def sample() -> None:  # from before the start: threads start while jobs run
            while not done.wait(0.005):
                peak[0] = max(peak[0], threading.active_count())

        sampler = threading.Thread(target=sample, name="bench-sampler")
        sampler.start()
        started = time.perf_counter()
        worker.start()
        while worker.processed < units:
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
        worker.stop()
        return units / elapsed, peak[0] - 1  # not the sampler
    finally:
        reactor.config.reset()


def main() -> None:
    """Parse the arguments, measure both modes and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", nargs="?", default="memory://")
    parser.add_argument("router", nargs="?", default=None)
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--io", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--slots", type=int, default=200)
    parser.add_argument("--runs", action="store_true",
                        help="whole runs of a two-step async reactor instead of units")
    args = parser.parse_args()
    router = args.router or ("memory" if args.storage.startswith("memory:") else args.storage)
    what = "runs of 2 async steps" if args.runs else "async_step units"
    unit = "runs" if args.runs else "units"
    print(f"{args.units} {what}, {args.io * 1000:g} ms of I/O each, one worker with "
          f"{args.threads} threads, storage {args.storage}, router {router}")
    base_rate, base_peak = _measure(args.storage, router, args.units, args.io, args.threads, 0,
                                    args.runs)
    print(f"  one thread per job   : {base_rate:8.1f} {unit}/s, peak threads {base_peak}")
    rate, peak = _measure(args.storage, router, args.units, args.io, args.threads, args.slots,
                          args.runs)
    print(f"  async_slots={args.slots:<5}   : {rate:8.1f} {unit}/s, peak threads {peak}")
    print(f"  ratio                : {rate / base_rate:8.1f}x")
    wide_rate, wide_peak = _measure(args.storage, router, args.units, args.io, args.slots, 0,
                                    args.runs)
    print(f"  {args.slots} threads, no slots: {wide_rate:8.1f} {unit}/s, peak threads "
          f"{wide_peak}")


if __name__ == "__main__":
    main()
