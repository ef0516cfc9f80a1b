"""The cost of ``Timeouts`` on steps that do not time out (docs/concepts.md, "Time limits").

A 10-step chain of trivial steps (a plain body returning at once, an ``async def`` body
returning at once) and of 1 ms I/O steps (``time.sleep`` / ``asyncio.sleep``), each run with
and without ``Timeouts(per_attempt=30)``, interleaved in rounds so both see the same machine.
It prints the median µs per step of each and the ratio timed / untimed (an ``async def`` body
is awaited under ``asyncio.timeout``; a plain body is handed to a kept body thread and waited
for, which is the cost of being able to stop waiting for it). Then the cost of one
``ctx.heartbeat(details)`` call (docs/concepts.md, "Heartbeats"): a body making 10,000 calls,
against a plain loop calling a no-op function as often (µs per call, in the same process).
Last, the same tight loop of heartbeats in a worker (``memory://`` with ``local://``'s embedded
worker), a step declared ``Timeouts(heartbeat=3)`` heartbeating for ``--worker-seconds``: the
store writes per second the worker made for it while the attempt ran (the last heartbeat is
stored at most once per ``max(heartbeat / 3, 1 s)``), and the µs per call there.

Usage: ``python benchmarks/step_timeouts.py [STORAGE_URL] [--runs N] [--rounds N]
[--worker-seconds S]`` (default ``memory://``, 6 s). No assertions (performance is
measured, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import reactor
from reactor import Reactor, Timeouts, step


def _chain(flavour: str, io: float, timeouts: Timeouts | None) -> type[Reactor]:
    attrs: dict[str, Any] = {}
    previous: str | None = None
    for i in range(10):
        if flavour == "async":
            async def body(inputs: Any, ctx: Any) -> int:
                if io:
                    await asyncio.sleep(io)
                return 1
        else:
            def body(inputs: Any, ctx: Any) -> int:  # type: ignore[misc]
                if io:
                    time.sleep(io)
                return 1
        body.__name__ = body.__qualname__ = f"s{i}"
        attrs[f"s{i}"] = step(body, timeouts=timeouts, wait_for=[previous] if previous else None)
        previous = f"s{i}"
    suffix = "timed" if timeouts else "plain"
    name = f"bench.timeouts.{flavour}.{int(io * 1000)}ms.{suffix}"
    return type(name.replace(".", "_"), (Reactor,), attrs, name=name)


def _per_step(saga: type[Reactor], runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        saga.run()
    return (time.perf_counter() - started) / (runs * 10) * 1e6


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", nargs="?", default="memory://")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--worker-seconds", type=float, default=6.0)
    args = parser.parse_args()
    reactor.configure(storage=args.storage, router="inline://")
    limit = Timeouts(per_attempt=30)
    print(f"10-step chains, {args.runs} runs x {args.rounds} rounds, on {args.storage}")
    for flavour in ("plain", "async"):
        for io in (0.0, 0.001):
            plain, timed = _chain(flavour, io, None), _chain(flavour, io, limit)
            _per_step(plain, 10)
            _per_step(timed, 10)
            untimed_us, timed_us = [], []
            for _ in range(args.rounds):
                untimed_us.append(_per_step(plain, args.runs))
                timed_us.append(_per_step(timed, args.runs))
            a, b = statistics.median(untimed_us), statistics.median(timed_us)
            what = f"{flavour} body, {'no I/O' if not io else f'{io * 1000:g} ms of I/O'}"
            print(f"{what:28} without {a:8.1f} µs/step   with Timeouts {b:8.1f} µs/step   "
                  f"ratio {b / a:.2f}")
    _heartbeat_cost(args.rounds)
    _worker_heartbeats(args.worker_seconds)


def _worker_heartbeats(seconds: float) -> None:
    """Print the store writes per second and the µs per ``ctx.heartbeat`` call of a step
    heartbeating in a tight loop for ``seconds`` in a worker (``Timeouts(heartbeat=3)``)."""
    runtime = reactor.configure(storage="memory://", router="local://")
    contexts: Any = runtime.storage.contexts
    writes = [0]
    for name in ("save", "append"):  # count every context write the worker makes
        original = getattr(contexts, name)

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            writes[0] += 1
            return _original(*args, **kwargs)

        setattr(contexts, name, counted)
    during: list[tuple[int, int, float]] = []

    def beats(inputs: Any, ctx: Any) -> int:
        before, began, n = writes[0], time.perf_counter(), 0
        while time.perf_counter() - began < seconds:
            for _ in range(1000):
                ctx.heartbeat({"offset": n})
                n += 1
        during.append((writes[0] - before, n, time.perf_counter() - began))
        return n

    saga = type("bench_worker_heartbeats", (Reactor,), {
        "background": reactor.Background(all=True),
        "beats": step(beats, timeouts=Timeouts(heartbeat=3)),
    }, name="bench.worker_heartbeats")
    handle: Any = saga.run()
    handle.wait(timeout=seconds + 60)
    [(stored, calls, took)] = during
    print(f"in a worker, Timeouts(heartbeat=3), {took:.1f} s of heartbeats: {stored} store "
          f"writes ({stored / took:.2f} per second), {calls} calls, "
          f"{took / calls * 1e6:.2f} µs per call")


def _heartbeat_cost(rounds: int, calls: int = 10_000) -> None:
    """Print the µs per ``ctx.heartbeat`` call inside a step with ``Timeouts(heartbeat=30)``
    against a no-op call (the baseline), median of ``rounds``."""
    spent: list[float] = []

    def beats(inputs: Any, ctx: Any) -> int:
        began = time.perf_counter()
        for n in range(calls):
            ctx.heartbeat(n)
        spent.append(time.perf_counter() - began)
        return calls

    def noop(details: Any) -> None:
        return None

    saga = type("bench_heartbeats", (Reactor,), {
        "beats": step(beats, timeouts=Timeouts(heartbeat=30)),
    }, name="bench.heartbeats")
    baseline: list[float] = []
    for _ in range(rounds):
        saga.run()
        began = time.perf_counter()
        for n in range(calls):
            noop(n)
        baseline.append(time.perf_counter() - began)
    per_call = statistics.median(spent) / calls * 1e6
    floor = statistics.median(baseline) / calls * 1e6
    print(f"ctx.heartbeat: {per_call:.2f} µs per call (a no-op call: {floor:.3f} µs; ratio "
          f"{per_call / floor:.1f}); outside a worker it writes nothing: 0 store writes")


if __name__ == "__main__":
    main()
