"""Throughput and Redis commands of reactor against Celery, on the same Redis server.

Two scenarios, each run by reactor and by Celery (with two Celery worker pools) in one
invocation, interleaved round by round (the order rotates every round), medians printed:

* **fan-out**: a fan-out map (docs/fan_out.md) of E trivial one-step elements
  (``map_step(..., fan_out=FanOut(batch_size=50))``, as benchmarks/redis_reactor_steps.py
  builds it) against a Celery chord of E trivial tasks with a trivial callback
  (``chord(group(add.s(i) for i in range(E)))(total.s())``). Figures: elements/s;
* **background**: M 3-step ``Background(all=True)`` sagas (every step run by a worker,
  docs/workers.md) against M Celery chains of 3 trivial tasks (``chain(a.s(0), b.s(), c.s())``).
  Figures: sagas/s.

Time is wall time from the first submit to the last final result being available to the
submitting thread (``DispatchHandle.wait`` for reactor, ``AsyncResult.get`` for Celery), the
submits included.

The sides:

* **reactor**: ``reactor.configure(storage=URL, router=URL)`` on Redis database ``--db``
  (a fresh key prefix), run by an in-process ``reactor.Worker`` with ``--threads`` handler
  threads (the benchmark's own thread submits and waits in the same process);
* **celery threads**: a ``celery worker --pool=threads --concurrency=N`` subprocess, the
  equivalent of reactor's N handler threads;
* **celery prefork**: a ``celery worker --pool=prefork --concurrency=N`` subprocess (N
  processes: Celery's default pool, which the GIL does not limit).

Celery's broker and result backend are both Redis database ``--db`` + 1 (its app and tasks:
benchmarks/_celery_app.py; each worker consumes its own queue). Both workers are started as
subprocesses by this script (gossip, mingle and heartbeats off), pinged until they answer, and
terminated on exit, errors included (SIGTERM too). Both databases are flushed at start and at
exit. Every side is warmed up once before the timed rounds. Celery runs with its defaults (a
task is acknowledged before it runs) unless ``--acks-late`` (after, as reactor's worker acks a
job: docs/workers.md).

Redis commands per unit are ``INFO commandstats`` deltas (benchmarks/_roundtrips.py
``server_calls``/``server_delta``) over each timed window plus a short settle: the commands
clients sent and those Lua scripts ran, counted by the server for every client, so use a server
nobody else is using. The idle rate (both sides' workers idle, measured before the rounds) is
printed: it is counted in every window too.

Usage::

    .venv/bin/python benchmarks/celery_compare.py [--url redis://127.0.0.1:6379]
        [--db 12] [--elements 1000] [--sagas 200] [--threads 4] [--rounds 3]
        [--acks-late]

Needs ``celery[redis]`` (``pip install -e '.[bench]'``). Nothing is asserted: this prints a
measurement (performance is measured, not asserted: benchmarks/_timing.py). Wrong results
(a run that did not succeed, a chord that lost a task) stop it with an error.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import _celery_app
import redis
from _roundtrips import format_counts, server_calls, server_delta
from _sagas import FanOwner
from _sagas import chain as chain_reactor
from celery import chain, chord, group  # type: ignore[import-untyped]

from reactor import (
    DispatchHandle,
    Runtime,
    Success,
    Worker,
    configure,
)

ROOT = Path(__file__).resolve().parent.parent
#: Seconds any one final result may take before the benchmark gives up.
TIMEOUT = 600.0
#: Seconds after a timed window before the server's counts are read (trailing acks).
SETTLE = 0.2


# -- reactor's side --------------------------------------------------------------------------


ThreeSteps = chain_reactor(3, background=True)


def _finished(outcome: object) -> object:
    """The run's final result: waited for on its handle, or already there (a worker thread of
    this process may finish a handed-off run before ``run`` returns)."""
    return outcome.wait(TIMEOUT) if isinstance(outcome, DispatchHandle) else outcome


def _check(what: str, got: object, expected: object) -> None:
    if got != expected:
        raise RuntimeError(f"{what}: expected {expected!r}, got {got!r}")


def reactor_fan_out(elements: int) -> None:
    """One fan-out map of ``elements`` elements, until its owner's result is stored."""
    _check("reactor fan-out", _finished(FanOwner.run(count=elements)), Success(elements))


def reactor_background(sagas: int) -> None:
    """``sagas`` background 3-step sagas, until all are finished."""
    outcomes = [ThreeSteps.run(start=0) for _ in range(sagas)]
    for outcome in outcomes:
        _check("reactor saga", _finished(outcome), Success(3))


# -- Celery's side ---------------------------------------------------------------------------


def celery_fan_out(queue: str, elements: int) -> None:
    """A chord of ``elements`` tasks and its callback, until the callback's result is in."""
    header = group(_celery_app.add.s(i).set(queue=queue) for i in range(elements))
    outcome = chord(header)(_celery_app.total.s().set(queue=queue))
    _check("celery chord", outcome.get(timeout=TIMEOUT), elements)


def celery_background(queue: str, sagas: int) -> None:
    """``sagas`` chains of 3 tasks, until all their last results are in."""
    outcomes = [
        chain(
            _celery_app.a.s(0).set(queue=queue),
            _celery_app.b.s().set(queue=queue),
            _celery_app.c.s().set(queue=queue),
        ).apply_async()
        for _ in range(sagas)
    ]
    for outcome in outcomes:
        _check("celery chain", outcome.get(timeout=TIMEOUT), 3)


class CeleryWorker:
    """A ``celery worker`` subprocess of one pool consuming its own queue; :meth:`stop`
    terminates its whole process group (the prefork children too)."""

    def __init__(self, pool: str, concurrency: int, url: str, acks_late: bool,
                 logs: Path) -> None:  # fmt: skip
        tag = uuid.uuid4().hex[:8]
        self.pool = pool
        self.queue = f"bench.{pool}.{tag}"
        self.node = f"bench-{pool}-{tag}@localhost"
        self.log_path = logs / f"celery-{pool}.log"
        env = dict(os.environ)
        env[_celery_app.URL_ENV] = url
        env[_celery_app.ACKS_LATE_ENV] = "1" if acks_late else "0"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        command = [
            sys.executable, "-m", "celery", "-A", "benchmarks._celery_app", "worker",
            f"--pool={pool}", f"--concurrency={concurrency}", "-Q", self.queue,
            "-n", self.node, "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel=WARNING",
        ]  # fmt: skip
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Ping the worker until it answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery {self.pool} worker exited: {self.log_tail()}")
            replies = _celery_app.app.control.ping(destination=[self.node], timeout=0.5)
            if any(self.node in reply for reply in replies or []):
                return
        raise TimeoutError(f"celery {self.pool} worker not ready: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def stop(self) -> None:
        """SIGTERM the process group (a warm shutdown), SIGKILL it after 15 s."""
        if self.process.poll() is None:
            for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Side:
    """One contender of a scenario and what its rounds measured."""

    label: str
    run: Callable[[], None]
    seconds: list[float] = field(default_factory=list)
    commands: list[int] = field(default_factory=list)
    by_name: Counter[str] = field(default_factory=Counter)

    def measure(self, stats: redis.Redis) -> None:
        before = server_calls(stats)
        started = time.perf_counter()
        self.run()
        self.seconds.append(time.perf_counter() - started)
        time.sleep(SETTLE)
        delta = server_delta(before, server_calls(stats))
        self.commands.append(sum(delta.values()))
        self.by_name += delta


def _rounds(sides: list[Side], rounds: int, stats: redis.Redis) -> None:
    """``rounds`` timed rounds of every side, the order rotating every round."""
    for index in range(rounds):
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:
            side.measure(stats)


def _report(title: str, unit: str, units: int, sides: list[Side], idle: float) -> None:
    reactor, *others = sides
    rounds = len(reactor.seconds)
    print(f"\n{title}: {units} {unit}s per round, median of {rounds} rounds")
    print(f"  {'':<24} {'wall s':>8} {unit + 's/s':>12} {'commands/' + unit:>18}")
    rates: dict[str, float] = {}
    per_unit: dict[str, float] = {}
    for side in sides:
        rates[side.label] = units / statistics.median(side.seconds)
        per_unit[side.label] = statistics.median(side.commands) / units
        print(f"  {side.label:<24} {statistics.median(side.seconds):>8.3f} "
              f"{rates[side.label]:>12.1f} {per_unit[side.label]:>18.2f}")  # fmt: skip
    for other in others:
        print(
            f"  reactor/{other.label}: rate {rates[reactor.label] / rates[other.label]:.2f}x,"
            f" commands per {unit} {per_unit[reactor.label] / per_unit[other.label]:.2f}x"
        )
    wall = statistics.median(reactor.seconds) + SETTLE
    print(
        f"  (idle background: about {idle * wall / units:.3f} commands per {unit} in a "
        f"{wall:.2f} s window at the idle rate)"
    )
    print(f"  commands per {unit} by name (all rounds):")
    for side in sides:
        top = Counter(dict(side.by_name.most_common(14)))
        rest = sum(side.by_name.values()) - sum(top.values())
        if rest:
            top["other"] = rest
        print(f"    {side.label}: {format_counts(top, units * rounds)}")


def _idle_rate(stats: redis.Redis, seconds: float = 2.0) -> float:
    """Commands per second the server runs while every worker is idle."""
    before = server_calls(stats)
    time.sleep(seconds)
    return sum(server_delta(before, server_calls(stats)).values()) / seconds


def _database_url(base: str, db: int) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))


def _flush(*urls: str) -> None:
    for url in urls:
        with redis.Redis.from_url(url) as client:
            client.flushdb()


@contextmanager
def _terminated_on_sigterm() -> Iterator[None]:
    """SIGTERM raises ``SystemExit`` so the ``finally`` blocks stop the subprocesses."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main() -> None:
    """Start the workers, warm up, run the rounds and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379", help="the Redis server")
    parser.add_argument(
        "--db",
        type=int,
        default=12,
        help="reactor's database; Celery uses the next one (both flushed)",
    )
    parser.add_argument("--elements", type=int, default=1000, help="fan-out map / chord size")
    parser.add_argument("--sagas", type=int, default=200, help="background sagas / chains")
    parser.add_argument(
        "--threads",
        type=int,
        default=4,
        help="reactor handler threads = Celery concurrency (both pools)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median)")
    parser.add_argument(
        "--acks-late",
        action="store_true",
        help="Celery task_acks_late (ack after running, as reactor's worker)",
    )
    args = parser.parse_args()

    reactor_url = _database_url(args.url, args.db)
    celery_url = _database_url(args.url, args.db + 1)
    stats = redis.Redis.from_url(reactor_url, decode_responses=True)
    _flush(reactor_url, celery_url)
    info = stats.info("server")
    print(f"redis-server {info['redis_version']} at {args.url}; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; redis-py {redis.__version__}, celery {version('celery')}, "
          f"kombu {version('kombu')}, billiard {version('billiard')}")  # fmt: skip
    print(f"reactor: db {args.db}, in-process Worker, {args.threads} threads; celery: db "
          f"{args.db + 1} (broker and result backend), worker subprocesses --pool=threads and "
          f"--pool=prefork, --concurrency={args.threads}, "
          f"task_acks_late={args.acks_late}")  # fmt: skip

    _celery_app.configure(celery_url, args.acks_late)
    prefixed = f"{reactor_url}?prefix=cc{uuid.uuid4().hex[:8]}"
    runtime: Runtime = configure(storage=prefixed, router=prefixed)
    worker = Worker(runtime, threads=args.threads)
    celery_workers: list[CeleryWorker] = []
    with tempfile.TemporaryDirectory(prefix="reactor-celery-compare-") as tmp, \
            _terminated_on_sigterm():  # fmt: skip
        try:
            for pool in ("threads", "prefork"):
                celery_workers.append(
                    CeleryWorker(pool, args.threads, celery_url, args.acks_late, Path(tmp))
                )
            worker.start()
            for celery_worker in celery_workers:
                celery_worker.wait_ready()
            threads, prefork = celery_workers

            fan_sides = [
                Side(f"reactor ({args.threads} threads)",
                     lambda: reactor_fan_out(args.elements)),
                Side(f"celery threads ({args.threads})",
                     lambda: celery_fan_out(threads.queue, args.elements)),
                Side(f"celery prefork ({args.threads})",
                     lambda: celery_fan_out(prefork.queue, args.elements)),
            ]  # fmt: skip
            saga_sides = [
                Side(f"reactor ({args.threads} threads)",
                     lambda: reactor_background(args.sagas)),
                Side(f"celery threads ({args.threads})",
                     lambda: celery_background(threads.queue, args.sagas)),
                Side(f"celery prefork ({args.threads})",
                     lambda: celery_background(prefork.queue, args.sagas)),
            ]  # fmt: skip

            # warm up: connections, scripts, consumer groups, the prefork children
            reactor_fan_out(20)
            reactor_background(5)
            for celery_worker in celery_workers:
                celery_fan_out(celery_worker.queue, 20)
                celery_background(celery_worker.queue, 5)
            time.sleep(SETTLE)
            idle = _idle_rate(stats)
            print(f"idle: {idle:.1f} server commands/s with every worker idle (counted in every "
                  f"window below)", flush=True)  # fmt: skip

            _rounds(fan_sides, args.rounds, stats)
            _report("fan-out: reactor FanOut(batch_size=50) map vs Celery chord", "element",
                    args.elements, fan_sides, idle)  # fmt: skip
            _rounds(saga_sides, args.rounds, stats)
            _report("background: reactor Background(all=True) 3-step saga vs Celery 3-task "
                    "chain", "saga", args.sagas, saga_sides, idle)  # fmt: skip
        except BaseException:
            for celery_worker in celery_workers:
                if celery_worker.process.poll() is not None:
                    print(f"celery {celery_worker.pool} worker log:\n{celery_worker.log_tail()}",
                          file=sys.stderr)  # fmt: skip
            raise
        finally:
            worker.stop(timeout=5.0)
            for celery_worker in celery_workers:
                celery_worker.stop()
            runtime.router.close()
            runtime.storage.close()
            stats.close()
            _flush(reactor_url, celery_url)


if __name__ == "__main__":
    main()
