"""Round trips and server commands per checkpointed step of real reactors on Redis.

Round trips are counted **on the client** (benchmarks/_roundtrips.py: every request a
redis-py connection of this process writes, a pipeline being one) and printed beside the
server's own ``INFO commandstats`` deltas (commands clients sent plus those Lua scripts ran),
for:

* ``sync N``: an N-step reactor (each step adds one to its input) run synchronously
  (``storage=redis://``, ``router=inline://``), N = 10 and 100: per step;
* ``worker N``: the same reactor with ``background = Background(all=True)`` on the Redis router,
  run by an in-process ``reactor.Worker`` (1 handler thread): per step, with the caller's
  share (main thread: persist, enqueue) and the worker's (handler threads: receive, run, ack)
  shown apart;
* ``fan-out``: one fan-out map (``FanOut(batch_size=50)``) of E one-step elements run by an
  in-process worker (4 threads): per element, the owner's own run included;
* ``background 3``: a 3-step ``Background(all=True)`` reactor: per saga.

The baseline, measured first in the same process, is the raw floor: one checkpoint saved
directly with ``storage.contexts.save`` (one ``EVALSHA``). Each scenario prints its round
trips per unit as a ratio to that floor times the unit's steps (1 round trip per step).
Worker runs are all enqueued before the worker starts; counting stops inside the handler
thread the moment the last job (the last run's, or the one that ran the fan-out owner's last
step) is acked, so the receives that fetched jobs are counted and the trailing idle poll is
not (during a fan-out map, the other threads' polls while they waited for work are).

Usage: ``python benchmarks/redis_reactor_steps.py redis://127.0.0.1:PORT/0 [RUNS]
[--elements E] [--only sync,worker,fanout,background]``. Use a server nobody else is using
while it runs (the server's counts are global); no assertions.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis
from _roundtrips import (
    Tally,
    counting,
    format_counts,
    inside_scripts,
    server_calls,
    server_delta,
    snapshot,
    unexplained,
)
from _sagas import FanOwner, chain, owner_thread

from reactor import (
    DispatchHandle,
    Reactor,
    Worker,
    config,
)
from reactor.model.records import ContextRecord
from reactor.model.results import Success


class _Measure:
    """Client tally and server commandstats between :meth:`start` and the first :meth:`stop`
    (which may run in a worker thread: :class:`_MeasuredWorker`)."""

    def __init__(self, stats: redis.Redis) -> None:
        self.stats = stats
        self.stopped = threading.Event()
        self.result: tuple[Tally, Counter[str]] | None = None

    def start(self) -> None:
        first = snapshot()
        self.server_before = server_calls(self.stats)
        self.client_before = snapshot()
        #: sent while the server was read (other threads): either side of its snapshot
        self.slack = (self.client_before - first).by_command()

    def stop(self) -> tuple[Tally, Counter[str]]:
        if self.result is None:
            client = snapshot() - self.client_before
            server = server_delta(self.server_before, server_calls(self.stats))
            self.slack += (snapshot() - self.client_before - client).by_command()
            self.result = client, server
            self.stopped.set()
        return self.result

    def wait(self, what: str, timeout: float = 600.0) -> tuple[Tally, Counter[str]]:
        if not self.stopped.wait(timeout):
            raise TimeoutError(f"timed out waiting for {what}")
        assert self.result is not None
        return self.result


class _MeasuredWorker(Worker):
    """A worker that stops :attr:`measure` in the handler thread right after the delivery for
    which :attr:`last` is true was acked, so the handler threads' later receive polls (idle
    time, not work) are never counted."""

    measure: _Measure | None = None
    last: Callable[[], bool] = staticmethod(lambda: False)

    def process(self, delivery: Any) -> None:
        super().process(delivery)
        if self.measure is not None and self.last():
            self.measure.stop()


def _url(base: str) -> str:
    return base + ("&" if "?" in base else "?") + f"prefix=rt{uuid.uuid4().hex[:8]}"


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.002)


def _report(title: str, unit: str, units: int, steps_per_unit: int, floor: float,
            client: Tally, server: Counter[str], runs: int | None = None,
            slack: Counter[str] | None = None) -> None:  # fmt: skip
    """Print one scenario: round trips per unit and its ratio to the floor, then details
    (and, given ``runs``, the totals per run)."""
    trips = client.total_round_trips()
    sent = client.by_command()
    inside = inside_scripts(server, sent)
    print(f"\n{title}")
    floor_text = f"{floor:.2f}" if steps_per_unit == 1 else f"{steps_per_unit} x {floor:.2f}"
    print(f"  round trips per {unit}: {trips / units:.2f} = "
          f"{trips / units / (floor * steps_per_unit):.2f}x the floor ({floor_text}: one raw "
          f"checkpoint per step, measured above)")  # fmt: skip
    roles = client.round_trips
    if roles.get("worker"):
        for role in ("caller", "worker"):
            commands = format_counts(client.by_command(role), units)
            scripts = format_counts(client.by_script(role), units)
            print(f"    {role} {roles[role] / units:.2f}: {commands}; EVALSHA: {scripts}")
    print(f"  client commands per {unit}: {sum(sent.values()) / units:.2f} "
          f"({format_counts(sent, units)})")  # fmt: skip
    print(f"    EVALSHA by script: {format_counts(client.by_script(), units)}")
    print(f"  server commands per {unit}: {sum(server.values()) / units:.2f}, of which "
          f"{sum(inside.values()) / units:.2f} inside scripts "
          f"({format_counts(inside, units)})")  # fmt: skip
    problem = unexplained(server, sent, slack)
    if problem:
        print(f"  WARNING: {problem}; the server figures are not this benchmark's alone")
    if runs:
        split = ""
        if roles.get("worker"):
            split = f" = caller {roles['caller'] / runs:.2f} + worker {roles['worker'] / runs:.2f}"
        print(f"  per run: round trips {trips / runs:.2f}{split} ({format_counts(sent, runs)}; "
              f"EVALSHA: {format_counts(client.by_script(), runs)}), server commands "
              f"{sum(server.values()) / runs:.2f}")  # fmt: skip
    if unit != "step" and steps_per_unit > 1:
        print(f"  per step: round trips {trips / units / steps_per_unit:.2f}, server commands "
              f"{sum(server.values()) / units / steps_per_unit:.2f}")  # fmt: skip


def baseline(base: str, stats: redis.Redis, n: int) -> float:
    """The raw floor: round trips of one ``storage.contexts.save`` (a checkpoint)."""
    runtime = config.configure(storage=_url(base), router="inline://")
    contexts = runtime.storage.contexts
    contexts.save(ContextRecord("warm", "R", "running", "{}", 1.0, 1.0))  # connect, load
    ids = [str(uuid.uuid4()) for _ in range(n)]
    measure = _Measure(stats)
    measure.start()
    for i, cid in enumerate(ids):
        status = "running" if i % 2 else "completed"
        contexts.save(ContextRecord(cid, "R", status, '{"k":1}', 1.0, 2.0))
    client, server = measure.stop()
    config.reset()
    floor = client.total_round_trips() / n
    inside = inside_scripts(server, client.by_command())
    print(f"baseline: raw checkpoint (storage.contexts.save), {n} saves")
    print(f"  round trips per save: {floor:.2f} ({format_counts(client.by_command(), n)}); "
          f"server commands per save: {sum(server.values()) / n:.2f}, of which "
          f"{sum(inside.values()) / n:.2f} inside scripts")  # fmt: skip
    problem = unexplained(server, client.by_command())
    if problem:
        print(f"  WARNING: {problem}; the server figures are not this benchmark's alone")
    return floor


def sync_saga(base: str, stats: redis.Redis, steps: int, runs: int, floor: float) -> None:
    """An N-step reactor run synchronously: round trips per step."""
    config.configure(storage=_url(base), router="inline://")
    reactor_cls = chain(steps, background=False)
    assert reactor_cls.run(start=0) == Success(steps)  # warm up (connection, scripts)
    measure = _Measure(stats)
    measure.start()
    for _ in range(runs):
        assert reactor_cls.run(start=0) == Success(steps)
    client, server = measure.stop()
    config.reset()
    _report(f"sync {steps}-step saga (router inline://), {runs} runs: per step ({steps + 1} "
            "checkpoints per run: the start, one per step, the last one final)",
            "step", runs * steps, 1, floor, client, server, runs)  # fmt: skip


def _worker_runs(base: str, stats: redis.Redis, reactor_cls: type[Reactor], runs: int,
                 expected: int) -> tuple[Tally, Counter[str]]:  # fmt: skip
    """Enqueue ``runs`` background runs, then let a 1-thread worker run them; counting stops
    when the last run's job is acked."""
    url = _url(base)
    runtime = config.configure(storage=url, router=url)
    worker = _MeasuredWorker(runtime, threads=1)
    warm = reactor_cls.run(start=0)  # warm up: connections, scripts, consumer group
    assert isinstance(warm, DispatchHandle), warm
    worker.start()
    _wait(lambda: worker.processed >= 1, "the warm-up run")
    worker.stop()
    assert warm.wait(60) == Success(expected)
    measure = _Measure(stats)
    measure.start()
    handles = [reactor_cls.run(start=0) for _ in range(runs)]
    target = worker.processed + runs
    worker.measure, worker.last = measure, lambda: worker.processed >= target
    worker.start()
    client, server = measure.wait("the background runs")
    worker.stop()
    for handle in handles:
        assert isinstance(handle, DispatchHandle) and handle.wait(60) == Success(expected)
    config.reset()
    return client, server


def worker_saga(base: str, stats: redis.Redis, steps: int, runs: int, floor: float) -> None:
    """The N-step reactor as ``Background(all=True)``, run by a worker: per step."""
    reactor_cls = chain(steps, background=True)
    client, server = _worker_runs(base, stats, reactor_cls, runs, steps)
    _report(
        f"worker {steps}-step saga (Background(all=True), router redis, 1 worker thread), "
        f"{runs} runs: per step",
        "step",
        runs * steps,
        1,
        floor,
        client,
        server,
        runs,
    )


def background_saga(base: str, stats: redis.Redis, runs: int, floor: float) -> None:
    """A 3-step ``Background(all=True)`` reactor run by a worker: per saga."""
    reactor_cls = chain(3, background=True)
    client, server = _worker_runs(base, stats, reactor_cls, runs, 3)
    _report(
        f"background 3-step saga (Background(all=True), router redis, 1 worker thread), "
        f"{runs} runs: per saga",
        "saga",
        runs,
        3,
        floor,
        client,
        server,
    )


def fan_out(base: str, stats: redis.Redis, elements: int, floor: float) -> None:
    """One fan-out map of ``elements`` one-step elements: round trips per element."""
    url = _url(base)
    runtime = config.configure(storage=url, router=url)
    worker = _MeasuredWorker(runtime, threads=4)
    # counting stops when the job that ran the owner's last step is acked
    worker.last = lambda: owner_thread[0] == threading.get_ident()
    worker.start()
    for count in (2, elements):  # a 2-element warm-up map, then the measured one
        owner_thread[0] = None
        measure = _Measure(stats)
        worker.measure = measure
        measure.start()
        handle = FanOwner.run(count=count)
        assert isinstance(handle, DispatchHandle), handle
        client, server = measure.wait("the fan-out map")
    worker.stop()
    assert isinstance(handle, DispatchHandle) and handle.wait(60) == Success(elements)
    config.reset()
    _report(
        f"fan-out map of {elements} one-step elements (FanOut(batch_size=50), router redis,"
        f" 4 worker threads): per element",
        "element",
        elements,
        1,
        floor,
        client,
        server,
        slack=measure.slack,
    )


def main() -> None:
    """Measure the baseline, then every scenario, and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="redis://HOST:PORT/DB of a server nobody else uses")
    parser.add_argument(
        "runs",
        nargs="?",
        type=int,
        default=100,
        help="runs of the 10-step and 3-step sagas (a tenth for 100 steps)",
    )
    parser.add_argument("--elements", type=int, default=200, help="fan-out map size")
    parser.add_argument(
        "--only", default="sync,worker,fanout,background", help="comma-separated scenarios to run"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    stats = redis.Redis.from_url(args.url.split("?")[0], decode_responses=True)
    with counting():
        info = stats.info("server")
        print(
            f"redis-server {info['redis_version']}, redis-py {redis.__version__}; round trips "
            f"counted on the client, server commands from INFO commandstats deltas"
        )
        floor = baseline(args.url, stats, max(args.runs * 10, 100))
        long_runs = max(args.runs // 10, 1)
        if "sync" in only:
            sync_saga(args.url, stats, 10, args.runs, floor)
            sync_saga(args.url, stats, 100, long_runs, floor)
        if "worker" in only:
            worker_saga(args.url, stats, 10, args.runs, floor)
            worker_saga(args.url, stats, 100, long_runs, floor)
        if "fanout" in only:
            fan_out(args.url, stats, args.elements, floor)
        if "background" in only:
            background_saga(args.url, stats, args.runs, floor)
    stats.close()


if __name__ == "__main__":
    main()
