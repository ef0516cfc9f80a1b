"""Load test of the FastAPI orders example (examples/fastapi_orders/): ``POST /orders``, which
starts the saga with ``await Order.arun(...)``, vs ``POST /orders-threaded``, the same saga
with the blocking ``Order.run(...)`` in a thread of the server's pool (docs/concepts.md,
"Async steps").

The saga: reserve, authorise and fraud_check at the same time (``max_concurrency = 3``:
docs/concepts.md, "Concurrency"), then confirm; every step an ``async def`` body whose I/O is
``await asyncio.sleep(--io)``, so an order takes at best 2 x io.

The app runs under uvicorn in a child process, on a loopback socket the script binds to a free
port and hands over. The load comes from ``--clients`` other processes, each an
``httpx.AsyncClient`` on its own loop; together they keep ``--concurrency`` requests in flight
(split between them) until ``--requests`` orders were placed through each endpoint. One
client process saturates before the server does on a small machine (an ``httpx`` request
costs about as much CPU as the server's whole order), hence 2 by default. After a warm-up of
both endpoints, the endpoints alternate in ``--rounds`` chunks (so both see the same machine
load); every chunk starts in all clients at once (a barrier).

The script prints, per endpoint, requests/s and the p50/p99 latency (measured by the
clients: queueing included), and the ratios; answers other than 201 are counted and printed.
Last, the CPU time the server and the clients spent per order, and the machine's load
average: on a shared machine the figures move with it.

Server-side bounds: ``arun`` runs the engine in reactor's pool (64 threads); the threaded
endpoint runs ``Order.run`` in anyio's pool (40 threads by default).

Usage: ``python benchmarks/fastapi_orders.py [STORAGE_URL] [--requests N] [--concurrency C]
[--clients K] [--io SECONDS] [--warmup N] [--rounds R]`` (default ``memory://``; e.g.
``redis://127.0.0.1:PORT/0``). The router is ``inline://``. No assertions (performance is
measured, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SKU = "WIDGET"
BODY = {"sku": SKU, "quantity": 1, "amount": "9.99"}
ENDPOINTS = {"/orders": "await arun", "/orders-threaded": "run in a thread"}

#: One chunk of a client's plan: (endpoint path, orders to place, measured?).
_Chunk = tuple[str, int, bool]
#: What a client measured in one chunk: (wall start, wall end, latencies, answers by code).
_Measure = tuple[float, float, list[float], dict[int, int]]


def _serve(fd: int, storage: str, io: float, stock: int) -> None:
    """The server process: serve the example app on the inherited listening socket ``fd``."""
    sys.path.insert(0, str(ROOT))
    import uvicorn

    from examples.fastapi_orders.app import Inventory, Services, create_app

    app = create_app(storage, services=Services(io_seconds=io, inventory=Inventory({SKU: stock})))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


async def _load(
    client: httpx.AsyncClient, path: str, n: int, concurrency: int
) -> tuple[list[float], Counter[int]]:
    """Places ``n`` orders through ``path`` with ``concurrency`` requests in flight.

    Returns:
        Each request's latency (seconds) and the answers' status codes.
    """
    todo = iter(range(n))
    latencies: list[float] = []
    answers: Counter[int] = Counter()

    async def worker() -> None:
        for _ in todo:
            started = time.perf_counter()
            response = await client.post(path, json=BODY)
            latencies.append(time.perf_counter() - started)
            answers[response.status_code] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, answers


def _client(
    index: int, url: str, plan: list[_Chunk], concurrency: int, barrier: Any, out: Any
) -> None:
    """A client process: run ``plan`` chunk by chunk, each started with the other clients
    (``barrier``); put ``(index, measures, cpu seconds)`` on ``out``."""

    async def drive() -> list[_Measure]:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        measures: list[_Measure] = []
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300.0) as client:
            for path, n, _measured in plan:
                barrier.wait()  # blocks this loop between chunks only: nothing is in flight
                started = time.time()
                latencies, answers = await _load(client, path, n, concurrency)
                measures.append((started, time.time(), latencies, dict(answers)))
        return measures

    measures = asyncio.run(drive())
    out.put((index, measures, time.process_time()))


def _split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _plan(requests: int, warmup: int, rounds: int) -> list[_Chunk]:
    """The chunks every client runs, in order (for the whole load, before the split)."""
    plan: list[_Chunk] = [(path, warmup, False) for path in ENDPOINTS]
    chunk = max(requests // max(rounds, 1), 1)
    left = requests
    while left > 0:
        size = min(chunk, left)
        plan += [(path, size, True) for path in ENDPOINTS]
        left -= size
    return plan


@dataclass
class _Tally:
    """What one endpoint's measured chunks gave, over every client."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    answers: Counter[int] = field(default_factory=Counter)


def _percentile(latencies: list[float], q: int) -> float:
    """The ``q``-th percentile (1..99) of ``latencies``, in seconds."""
    return statistics.quantiles(latencies, n=100, method="inclusive")[q - 1]


def _drive(url: str, args: argparse.Namespace) -> tuple[dict[str, _Tally], float]:
    """Run the clients against ``url``.

    Returns:
        The tallies by endpoint, and the clients' CPU seconds.
    """
    ready = httpx.get(f"{url}/orders/readiness-probe", timeout=120.0)  # queued until accepted
    if ready.status_code != 404:
        raise SystemExit(f"the server answered {ready.status_code}: {ready.text}")
    plan = _plan(args.requests, args.warmup, args.rounds)
    shares = [[(path, _split(n, args.clients)[i], measured) for path, n, measured in plan]
              for i in range(args.clients)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(args.clients)
    out = context.Queue()
    clients = [
        context.Process(target=_client, args=(i, url, shares[i], concurrency, barrier, out))
        for i, concurrency in enumerate(_split(args.concurrency, args.clients))
    ]
    for process in clients:
        process.start()
    reports = [out.get() for _ in clients]
    for process in clients:
        process.join()
    tallies = {path: _Tally() for path in ENDPOINTS}
    for j, (path, _n, measured) in enumerate(plan):
        if not measured:
            continue
        tally = tallies[path]
        chunk = [measures[j] for _i, measures, _cpu in reports]
        tally.seconds += max(m[1] for m in chunk) - min(m[0] for m in chunk)
        for _start, _end, latencies, answers in chunk:
            tally.latencies += latencies
            tally.answers.update(answers)
    return tallies, sum(cpu for _i, _measures, cpu in reports)


def main() -> None:
    """Start the server, drive both endpoints, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", nargs="?", default="memory://")
    parser.add_argument("--requests", type=int, default=2000, help="orders per endpoint")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--clients", type=int, default=2, help="load generator processes")
    parser.add_argument("--io", type=float, default=0.02, help="seconds of I/O per step")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up orders per endpoint")
    parser.add_argument("--rounds", type=int, default=2, help="alternating chunks")
    parser.add_argument("--serve-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stock", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fd is not None:
        _serve(args.serve_fd, args.storage, args.io, args.stock)
        return
    if not 1 <= args.clients <= args.concurrency:
        parser.error("--clients must be between 1 and --concurrency")

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    port = listener.getsockname()[1]
    stock = 2 * (args.requests + args.warmup)
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), args.storage, "--io", str(args.io),
         "--serve-fd", str(listener.fileno()), "--stock", str(stock)],
        pass_fds=[listener.fileno()], cwd=ROOT,
    )
    listener.close()  # the server owns it now
    try:
        tallies, client_cpu = _drive(f"http://127.0.0.1:{port}", args)
    finally:
        server.terminate()
        server.wait(timeout=60)
    # the server and the clients, every one exited and waited for
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = children.ru_utime + children.ru_stime - client_cpu
    served = 2 * (args.requests + args.warmup)

    print(f"{args.requests} orders per endpoint, {args.concurrency} in flight from "
          f"{args.clients} client processes, saga of 3 concurrent async steps then 1 "
          f"({args.io * 1000:g} ms of I/O each, {2 * args.io * 1000:g} ms per order at best) "
          f"on {args.storage}")
    figures = {}
    for path, label in ENDPOINTS.items():
        tally = tallies[path]
        rps = args.requests / tally.seconds
        p50 = _percentile(tally.latencies, 50)
        p99 = _percentile(tally.latencies, 99)
        figures[path] = (rps, p50, p99)
        answers = ", ".join(f"{code}: {count}" for code, count in sorted(tally.answers.items()))
        print(f"POST {path:<17} ({label:<15}) {rps:8.1f} requests/s  "
              f"p50 {p50 * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms  (answers {answers})")
    arun, threaded = figures["/orders"], figures["/orders-threaded"]
    print(f"ratio arun / threaded: requests/s {arun[0] / threaded[0]:.2f}, "
          f"p50 {arun[1] / threaded[1]:.2f}, p99 {arun[2] / threaded[2]:.2f}")
    print(f"CPU per order (both endpoints and the warm-up): server "
          f"{server_cpu / served * 1000:.1f} ms, clients {client_cpu / served * 1000:.1f} ms; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
