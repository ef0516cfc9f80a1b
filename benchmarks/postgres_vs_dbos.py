"""Durable steps and job pickup on PostgreSQL: reactor's PostgreSQL adapter against DBOS.

Both sides run in this one process against the same PostgreSQL server and database, rounds
interleaved (the order of the sides rotates every round), medians printed. By default the
server is a **private cluster** this script creates and starts (benchmarks/_postgres_cluster.py:
``initdb`` + ``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` in a temporary directory, a free
loopback port, trust authentication; never the system instance on 5432) with **matched
durability, as in production: ``fsync=on``, ``synchronous_commit=on``** (every commit waits for
its WAL flush), ``shared_preload_libraries=pg_stat_statements``; it is stopped on exit, errors
and SIGTERM included. ``--url`` uses an existing server instead (its superuser URL: the script
creates a database of its own there, with ``pg_stat_statements`` preloaded, and drops it at the
end). Everything runs in database ``reactor_bench``; the counters are read through a connection
to database ``postgres``, so the benchmark's own queries are not counted.

Scenario 1, **durable steps**: W workflows in a row (``--workflows``, default 200) of S trivial
steps each (``--steps``, default 10), synchronous, in the calling thread. The sides:

* **reactor steps**: ``reactor.configure(storage="postgresql://...?schema=bench_<tag>",
  router="inline://")`` and a reactor of S ``@step`` s chained by ``wait_for``, ``.run()``;
* **reactor tx steps**: the same with ``@step(transaction=True)``, each step inserting one row
  into a table through ``ctx.transaction`` (docs/concepts.md, "Transactional steps": the row and
  the step's checkpoint commit together);
* **dbos steps**: a ``@DBOS.workflow()`` calling S ``@DBOS.step()`` functions, the system
  database in the same database (schema ``dbos``);
* **dbos tx**: the same workflow calling S transactions, each inserting one row. DBOS 3 has no
  application database and no ``@DBOS.transaction()`` any more: its transactions are
  ``@SQLAlchemyDatasource.transaction()`` functions of a datasource (same database; its
  checkpoint table in schema ``dbos``), the body's writes and the step's checkpoint committed
  together. They run with ``isolation_level="READ COMMITTED"``, the isolation of reactor's
  step transactions (psycopg's default); DBOS's own default is ``SERIALIZABLE``.

Figures per side (medians over the rounds): wall time of the W workflows, durable steps/s
(W*S / time), workflows/s, **statements per step** (the ``calls`` of ``pg_stat_statements``,
``pg_stat_statements_reset()`` before each window, every top-level statement of the database
``BEGIN``/``COMMIT``/``SET`` included, divided by W*S) by kind, and **transactions per step**
(the delta of ``pg_stat_database.xact_commit`` of the database over the window, / W*S).
Backends report their transaction counts at most once a second, so every window is followed by
a settle of ``SETTLE`` seconds before the counters are read; everything running in the
background (DBOS's queue pollers, reactor's router listener) is counted too: its idle rate,
measured first, is printed. Ratios are reactor/DBOS (time per step, statements, transactions).

Scenario 2, **job pickup latency**: from the call that enqueues a trivial one-step job to the
first line of its body running in a worker thread of this process. The sides:

* **reactor**: ``router="postgresql://...?schema=..."`` (jobs table claimed with
  ``FOR UPDATE SKIP LOCKED``, idle waits woken by ``LISTEN``/``NOTIFY``:
  docs/adapters/postgres.md, "Router"), a one-step ``Background(all=True)`` reactor started with
  ``.run()`` and run by an in-process ``reactor.Worker`` with ``--threads`` threads;
* **dbos**: ``DBOS.register_queue(name)`` with DBOS's defaults (polling interval 1 s, no
  concurrency limit, unless ``--dbos-polling``) and ``queue.enqueue(workflow)`` of a workflow
  calling one step; DBOS's queue worker polls its queue table every polling interval.

*Idle*: ``--jobs`` jobs per side (default 50), one at a time (each waited for before the next),
the sides alternating job by job, each preceded by a random pause in [0, polling interval) so
the enqueues are not in phase with a poller: median, p95 and max, and the median duration of
the enqueue call itself (included in the latency). *Under load*: per round, each side enqueues
``--backlog`` jobs (default 500) and then a marker job, and waits for all: the marker's pickup
latency, how many backlog jobs had not started when the marker was enqueued (the workers run
while the backlog is enqueued: a side that keeps up never has 500 queued) and the backlog's
throughput (jobs/s from the first enqueue to the last result).

Load averages (``os.getloadavg``) are printed at the start and at the end. Nothing is asserted:
this prints a measurement (performance is measured, not asserted: benchmarks/_timing.py). A
wrong result (a run that did not succeed, a missing row) stops it with an error.

Usage::

    .venv/bin/python benchmarks/postgres_vs_dbos.py [--url postgresql://USER@HOST:PORT/postgres]
        [--steps 10] [--workflows 200] [--rounds 5] [--jobs 50] [--backlog 500]
        [--threads 4] [--dbos-polling SECONDS] [--queries N] [--no-dbos]
        [--skip-steps] [--skip-pickup]

Needs ``dbos`` (``pip install -e '.[bench]'``) and the PostgreSQL adapter's ``psycopg``.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from _postgres_cluster import ClusterError, private_cluster
from psycopg import sql

from reactor import (
    Background,
    DispatchHandle,
    Input,
    Reactor,
    Success,
    Worker,
    config,
    input,
    step,
)

#: The database every side works in (created at start, dropped at the end).
DATABASE = "reactor_bench"
#: Seconds after a window before ``pg_stat_database`` is read. A backend reports its
#: transaction counts when it goes idle, but at most once a second: one that flushed less than
#: a second before only flushes again after PGSTAT_IDLE_INTERVAL, 10 s (PostgreSQL 15+
#: cumulative statistics, src/backend/utils/activity/pgstat.c), so a shorter settle lets one
#: window's commits land in the next one's.
SETTLE = 11.0
#: Seconds after a window before ``pg_stat_statements`` and the transaction id are read (both
#: are updated at once; this only lets trailing statements of the window finish).
SHORT_SETTLE = 0.2
#: Seconds any one result may take before the benchmark gives up.
TIMEOUT = 600.0
#: Server settings of the private cluster.
SERVER_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.track_utility": "on",
    "max_connections": "300",
}
_KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT", "ROLLBACK", "SET",
          "LISTEN", "other")  # fmt: skip


def _url_with_database(url: str, database: str, query: str = "") -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", query, ""))


def _check(what: str, got: object, expected: object) -> None:
    if got != expected:
        raise RuntimeError(f"{what}: expected {expected!r}, got {got!r}")


# -- server-side counters --------------------------------------------------------------------


def _kind(query: str) -> str:
    head = query.lstrip().split(None, 1)
    word = head[0].upper() if head else ""
    if word == "WITH":  # a common table expression: classify by the statement it leads to
        upper = query.upper()
        word = next((w for w in ("INSERT", "UPDATE", "DELETE") if w in upper), "SELECT")
    if word in ("START", "BEGIN"):
        return "BEGIN"
    if word in ("END", "COMMIT"):
        return "COMMIT"
    return word if word in _KINDS else "other"


class Counters:
    """``pg_stat_statements`` calls and ``pg_stat_database.xact_commit`` of :data:`DATABASE`,
    read through a connection to another database (its own queries are not counted)."""

    def __init__(self, admin_url: str) -> None:
        self.conn = psycopg.connect(admin_url, autocommit=True)
        #: queryid -> statement text (the first seen)
        self.texts: dict[str, str] = {}
        row = self.conn.execute("SELECT oid FROM pg_database WHERE datname = %s",
                                (DATABASE,)).fetchone()  # fmt: skip
        if row is None:
            raise RuntimeError(f"database {DATABASE} missing")
        self.dbid = row[0]

    def next_xid(self) -> int:
        """The cluster's next transaction id (``xmax`` of a snapshot: no id is assigned):
        its delta is how many transactions wrote (got an id), in every database."""
        row = self.conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())").fetchone()
        return int(str(row[0])) if row else 0

    def commits(self) -> int:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        row = self.conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datid = %s", (self.dbid,)
        ).fetchone()
        return int(row[0]) if row else 0

    def reset_statements(self) -> None:
        self.conn.execute("SELECT pg_stat_statements_reset()")

    def statements(self) -> Counter[str]:
        """Calls per statement (``pg_stat_statements.queryid``) since the last reset.

        The text of a ``queryid`` is the one its first call after a reset recorded (constants
        shown as ``$n``, or as sent when that call was a prepared statement), so it may differ
        from window to window: :attr:`texts` keeps the first one seen.
        """
        rows = self.conn.execute(
            "SELECT queryid, query, calls FROM pg_stat_statements WHERE dbid = %s", (self.dbid,)
        ).fetchall()
        out: Counter[str] = Counter()
        for queryid, query, calls in rows:
            key = str(queryid)
            self.texts.setdefault(key, " ".join(str(query).split()))
            out[key] += int(calls)
        return out

    def close(self) -> None:
        self.conn.close()


@dataclass
class Window:
    """What one timed window took and what the server ran in it."""

    seconds: float
    #: calls per statement text, over ``short`` seconds (the window and a short settle)
    statements: Counter[str]
    #: transaction ids assigned over ``short`` seconds (write transactions, whole cluster)
    xids: int
    #: ``xact_commit`` delta of the database over ``long`` seconds (the window and SETTLE)
    commits: int
    short: float
    long: float


@dataclass(frozen=True)
class Idle:
    """The database's background rates while nothing is run (per second)."""

    statements: float
    xids: float
    commits: float

    def net(self, window: Window) -> tuple[float, float, float]:
        """The window's statements, write transactions and commits, background subtracted."""
        return (sum(window.statements.values()) - self.statements * window.short,
                window.xids - self.xids * window.short,
                window.commits - self.commits * window.long)  # fmt: skip


def measure(counters: Counters, fn: Callable[[], None]) -> Window:
    """Time ``fn()``; what the server ran meanwhile (+ the settles)."""
    before_commits = counters.commits()
    before_xid = counters.next_xid()
    counters.reset_statements()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    time.sleep(SHORT_SETTLE)
    statements = counters.statements()
    xids = counters.next_xid() - before_xid
    short = time.perf_counter() - started
    time.sleep(SETTLE)
    commits = counters.commits() - before_commits
    return Window(seconds, statements, xids, commits, short, time.perf_counter() - started)


# -- scenario 1: durable steps ---------------------------------------------------------------

#: Table both transactional sides insert into (one row per step), in schema public.
ROWS_TABLE = "bench_rows"


def _plain_step(inputs: Any, ctx: Any) -> int:
    return int(inputs.n)


def _tx_step(inputs: Any, ctx: Any) -> int:
    ctx.transaction.execute(
        sql.SQL("INSERT INTO public.{} (side, workflow, step) VALUES ('reactor', %s, %s)").format(
            sql.Identifier(ROWS_TABLE)
        ),
        (ctx.run_id, int(inputs.n)),
    )
    return int(inputs.n)


def build_chain(steps: int, *, transaction: bool) -> type[Reactor]:
    """A reactor of ``steps`` steps chained by ``wait_for``, each returning its index."""
    fn = _tx_step if transaction else _plain_step
    namespace: dict[str, Any] = {"__module__": __name__}
    for i in range(steps):
        wait_for = f"s{i - 1}" if i else None
        namespace[f"s{i}"] = step(fn, wait_for=wait_for, transaction=transaction, n=i)
    namespace["returns"] = f"s{steps - 1}"
    name = f"PgBench{'Tx' if transaction else 'Plain'}Chain{steps}"
    return type(name, (Reactor,), namespace)


# -- scenario 2: job pickup ------------------------------------------------------------------

#: token -> perf_counter() when the job's body started (the first call wins).
STARTED: dict[str, float] = {}
_started_lock = threading.Lock()


def _mark_started(token: str) -> None:
    now = time.perf_counter()
    with _started_lock:
        STARTED.setdefault(token, now)


class PickupJob(Reactor, name="bench.pg_pickup"):
    """One trivial step, run by a worker (``Background(all=True)``)."""

    token = Input(str)
    background = Background(all=True)

    @step(token=input("token"))
    def body(inputs: Any, ctx: Any) -> int:
        _mark_started(inputs.token)
        return 1

    returns = "body"


# -- DBOS ------------------------------------------------------------------------------------


class Dbos:
    """DBOS's side: the workflows, steps, datasource transactions and the queue."""

    def __init__(self, url: str, polling: float | None) -> None:
        import sqlalchemy as sa
        from dbos import DBOS, SQLAlchemyDatasource

        self.DBOS = DBOS
        self.polling = polling
        DBOS(config={"name": "reactor-pg-bench", "system_database_url": url,
                     "log_level": "WARNING"})  # fmt: skip
        datasource = SQLAlchemyDatasource.create(url)
        insert = sa.text(f"INSERT INTO public.{ROWS_TABLE} (side, workflow, step) "
                         "VALUES ('dbos', :workflow, :step)")  # fmt: skip

        @DBOS.step()
        def bench_step(n: int) -> int:
            return n

        @datasource.transaction(isolation_level="READ COMMITTED")
        def bench_tx(n: int) -> int:
            datasource.sql_session().execute(insert, {"workflow": DBOS.workflow_id, "step": n})
            return n

        @DBOS.workflow()
        def bench_steps(steps: int) -> int:
            last = -1
            for n in range(steps):
                last = bench_step(n)
            return last

        @DBOS.workflow()
        def bench_txs(steps: int) -> int:
            last = -1
            for n in range(steps):
                last = bench_tx(n)
            return last

        @DBOS.step()
        def pickup_step() -> int:
            return 1

        @DBOS.workflow()
        def bench_pickup(token: str) -> int:
            _mark_started(token)
            return pickup_step()

        self.steps_workflow = bench_steps
        self.tx_workflow = bench_txs
        self.pickup_workflow = bench_pickup
        DBOS.launch()
        kwargs: dict[str, Any] = {}
        if polling is not None:
            kwargs["polling_interval_sec"] = polling
        self.queue = DBOS.register_queue(f"bench_{uuid.uuid4().hex[:8]}", **kwargs)

    def polling_interval(self) -> float:
        return float(self.queue.polling_interval_sec)

    def destroy(self) -> None:
        self.DBOS.destroy(destroy_registry=True)


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Side:
    """One contender of scenario 1 and its windows."""

    label: str
    run: Callable[[], None]
    windows: list[Window] = field(default_factory=list)

    def median_seconds(self) -> float:
        return statistics.median(w.seconds for w in self.windows)

    def per_step(self, units: int, idle: Idle) -> tuple[float, float, float]:
        """Median statements, write transactions and commits per step, net of the idle
        background."""
        nets = [idle.net(w) for w in self.windows]
        return tuple(statistics.median(n[i] for n in nets) / units  # type: ignore[return-value]
                     for i in range(3))  # fmt: skip

    def statements(self) -> Counter[str]:
        """The statements of every round, by ``queryid`` (background included)."""
        out: Counter[str] = Counter()
        for w in self.windows:
            out += w.statements
        return out


def _rounds(sides: list[Side], rounds: int, counters: Counters) -> None:
    """``rounds`` timed rounds of every side, the order rotating every round."""
    for index in range(rounds):
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:
            side.windows.append(measure(counters, side.run))
        print(f"  round {index + 1}/{rounds} done", flush=True)


def _idle(counters: Counters, seconds: float = 5.0) -> Idle:
    """The database's rates while nothing is run."""
    window = measure(counters, lambda: time.sleep(seconds))
    return Idle(sum(window.statements.values()) / window.short, window.xids / window.short,
                window.commits / window.long)  # fmt: skip


def scenario_steps(args: argparse.Namespace, url: str, dbos: Dbos | None,
                   counters: Counters) -> None:  # fmt: skip
    """Scenario 1: W workflows of S steps per side."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    runtime = config.configure(storage=_with_schema(url, schema), router="inline://")
    try:
        plain = build_chain(args.steps, transaction=False)
        tx = build_chain(args.steps, transaction=True)
        last = args.steps - 1

        def reactor_plain() -> None:
            for _ in range(args.workflows):
                outcome = plain.run()
                if not (isinstance(outcome, Success) and outcome.value == last):
                    raise RuntimeError(f"reactor steps: {outcome!r}")

        def reactor_tx() -> None:
            for _ in range(args.workflows):
                outcome = tx.run()
                if not (isinstance(outcome, Success) and outcome.value == last):
                    raise RuntimeError(f"reactor tx steps: {outcome!r}")

        sides = [Side("reactor steps", reactor_plain), Side("reactor tx steps", reactor_tx)]
        if dbos is not None:
            steps_workflow, tx_workflow = dbos.steps_workflow, dbos.tx_workflow

            def dbos_steps() -> None:
                for _ in range(args.workflows):
                    _check("dbos steps", steps_workflow(args.steps), last)

            def dbos_tx() -> None:
                for _ in range(args.workflows):
                    _check("dbos tx", tx_workflow(args.steps), last)

            sides += [Side("dbos steps", dbos_steps), Side("dbos tx", dbos_tx)]

        # warm up: pools, prepared statements, migrations, class checks
        for side in sides:
            side.run()
        time.sleep(SETTLE)
        idle = _idle(counters)
        print(f"\nscenario 1 idle background (DBOS's queue pollers): {idle.statements:.1f} "
              f"statements/s, {idle.xids:.1f} write transactions/s, {idle.commits:.1f} "
              f"commits/s (subtracted from every window)", flush=True)  # fmt: skip
        _rounds(sides, args.rounds, counters)
        _check_rows(url, sides, args)
        _report_steps(args, sides, idle, counters.texts)
    finally:
        runtime.storage.close()
        config.reset()


def _check_rows(url: str, sides: list[Side], args: argparse.Namespace) -> None:
    """Every transactional workflow run (warm-up included) left exactly S rows."""
    runs = (args.rounds + 1) * args.workflows
    with psycopg.connect(url, autocommit=True) as conn:
        for label, side_name in (("reactor tx steps", "reactor"), ("dbos tx", "dbos")):
            if not any(s.label == label for s in sides):
                continue
            row = conn.execute(
                sql.SQL("SELECT count(*), count(DISTINCT workflow) FROM public.{} "
                        "WHERE side = %s").format(sql.Identifier(ROWS_TABLE)),
                (side_name,),
            ).fetchone()  # fmt: skip
            _check(f"{label}: rows, workflows", tuple(row or ()), (runs * args.steps, runs))


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def _report_steps(
    args: argparse.Namespace, sides: list[Side], idle: Idle, texts: dict[str, str]
) -> None:
    units = args.workflows * args.steps
    print(f"\nscenario 1, durable steps: {args.workflows} workflows of {args.steps} steps per "
          f"round, synchronous, one thread; median of {args.rounds} rounds; per step, net of "
          f"the idle background: stmts = pg_stat_statements calls, wtxns = transaction ids "
          f"assigned (write transactions), txns = pg_stat_database.xact_commit")  # fmt: skip
    print(f"  {'':<18} {'wall s':>8} {'steps/s':>9} {'wf/s':>8} {'us/step':>9} "
          f"{'stmts':>7} {'wtxns':>7} {'txns':>7}")  # fmt: skip
    figures: dict[str, tuple[float, ...]] = {}
    for side in sides:
        seconds = side.median_seconds()
        statements, xids, commits = side.per_step(units, idle)
        figures[side.label] = (seconds, statements, xids, commits)
        print(f"  {side.label:<18} {seconds:>8.3f} {units / seconds:>9.1f} "
              f"{args.workflows / seconds:>8.1f} {seconds / units * 1e6:>9.1f} "
              f"{statements:>7.2f} {xids:>7.2f} {commits:>7.2f}")  # fmt: skip
    for mine, theirs in (("reactor steps", "dbos steps"), ("reactor tx steps", "dbos tx")):
        if mine in figures and theirs in figures:
            a, b = figures[mine], figures[theirs]
            print(f"  {mine}/{theirs}: time per step {_ratio(a[0], b[0])}, statements "
                  f"{_ratio(a[1], b[1])}, write transactions {_ratio(a[2], b[2])}, "
                  f"transactions {_ratio(a[3], b[3])}")  # fmt: skip
    short = statistics.median(w.short for s in sides for w in s.windows)
    long = statistics.median(w.long for s in sides for w in s.windows)
    print(
        f"  (subtracted, in a median window: {idle.statements * short / units:.3f} statements "
        f"and {idle.xids * short / units:.3f} write transactions per step over {short:.1f} s, "
        f"{idle.commits * long / units:.3f} transactions per step over {long:.1f} s)"
    )
    print("  statements per step by kind (all rounds, background included):")
    for side in sides:
        per = units * len(side.windows)
        kinds: Counter[str] = Counter()
        for queryid, calls in side.statements().items():
            kinds[_kind(texts[queryid])] += calls
        line = ", ".join(f"{k} {kinds[k] / per:.2f}" for k in _KINDS if kinds[k])
        print(f"    {side.label}: {line}")
    if args.queries:
        print(f"  the {args.queries} most frequent statements per step (all rounds):")
        for side in sides:
            per = units * len(side.windows)
            print(f"    {side.label}:")
            for queryid, calls in side.statements().most_common(args.queries):
                print(f"      {calls / per:6.2f}  {texts[queryid][:150]}")


def _with_schema(url: str, schema: str) -> str:
    return _url_with_database(url, DATABASE, f"schema={schema}")


# -- scenario 2 ------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def scenario_pickup(args: argparse.Namespace, url: str, dbos: Dbos | None) -> None:
    """Scenario 2: enqueue -> body start, idle and under load."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    target = _with_schema(url, schema)
    runtime = config.configure(storage=target, router=target)
    worker = Worker(runtime, threads=args.threads)
    worker.start()
    try:

        def reactor_job(token: str) -> Callable[[], None]:
            handle = PickupJob.run(token=token)

            def wait() -> None:
                outcome = handle.wait(TIMEOUT) if isinstance(handle, DispatchHandle) else handle
                _check("reactor job", outcome, Success(1))

            return wait

        submitters: dict[str, Callable[[str], Callable[[], None]]] = {"reactor": reactor_job}
        gap = 1.0
        if dbos is not None:
            queue, workflow = dbos.queue, dbos.pickup_workflow
            gap = dbos.polling_interval()

            def dbos_job(token: str) -> Callable[[], None]:
                handle = queue.enqueue(workflow, token)
                return lambda: _check("dbos job", handle.get_result(), 1)

            submitters["dbos"] = dbos_job

        def one(name: str) -> tuple[float, float]:
            """(pickup latency, duration of the enqueue call) of one job."""
            token = uuid.uuid4().hex
            started = time.perf_counter()
            wait = submitters[name](token)
            submitted = time.perf_counter() - started
            wait()
            return STARTED.pop(token) - started, submitted

        for name in submitters:  # warm up: queue worker threads, pools, listener
            for _ in range(3):
                one(name)

        idle: dict[str, list[tuple[float, float]]] = {name: [] for name in submitters}
        names = list(submitters)
        for index in range(args.jobs):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                time.sleep(random.uniform(0.0, gap))
                idle[name].append(one(name))
        print(f"\nscenario 2, job pickup latency (enqueue call -> body start), ms; reactor: "
              f"Worker({args.threads} threads) on the PostgreSQL router (LISTEN/NOTIFY, "
              f"poll_ceiling 1 s); dbos: queue polling_interval_sec={gap:g}"
              f"{'' if args.dbos_polling is not None else ' (its default)'}, worker_concurrency "
              f"none (default)")  # fmt: skip
        print(f"  idle: {args.jobs} jobs per side, one at a time, a random pause in "
              f"[0, {gap:g}) s before each")  # fmt: skip
        print(f"    {'':<10} {'median':>9} {'p95':>9} {'max':>9} {'enqueue call':>13}")
        for name, values in idle.items():
            ms = [v[0] * 1e3 for v in values]
            call = statistics.median(v[1] for v in values) * 1e3
            print(f"    {name:<10} {statistics.median(ms):>9.1f} {_percentile(ms, 0.95):>9.1f} "
                  f"{max(ms):>9.1f} {call:>13.1f}", flush=True)  # fmt: skip

        marker: dict[str, list[float]] = {name: [] for name in submitters}
        drain: dict[str, list[float]] = {name: [] for name in submitters}
        waiting: dict[str, list[int]] = {name: [] for name in submitters}
        for index in range(args.rounds):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter()
                waits = [submitters[name](f"load-{uuid.uuid4().hex}") for _ in range(args.backlog)]
                token = uuid.uuid4().hex
                marked = time.perf_counter()
                waiting[name].append(args.backlog - len(STARTED))
                waits.append(submitters[name](token))
                for wait in waits:
                    wait()
                drain[name].append((args.backlog + 1) / (time.perf_counter() - started))
                marker[name].append(STARTED.pop(token) - marked)
                STARTED.clear()
            print(f"  load round {index + 1}/{args.rounds} done", flush=True)
        print(f"  under load: a marker job enqueued after {args.backlog} jobs (the workers "
              f"run meanwhile: 'not started' = backlog jobs not started when the marker was "
              f"enqueued), median of {args.rounds} rounds")  # fmt: skip
        print(f"    {'':<10} {'marker ms':>10} {'not started':>12} {'backlog jobs/s':>15}")
        for name in names:
            print(f"    {name:<10} {statistics.median(marker[name]) * 1e3:>10.1f} "
                  f"{statistics.median(waiting[name]):>12.0f} "
                  f"{statistics.median(drain[name]):>15.1f}")  # fmt: skip
    finally:
        worker.stop(timeout=5.0)
        runtime.router.close()
        runtime.storage.close()
        config.reset()


# -- setup -----------------------------------------------------------------------------------


@contextmanager
def _terminated_on_sigterm() -> Iterator[None]:
    """SIGTERM raises ``SystemExit`` so the ``finally`` blocks stop the cluster."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _bench_database(admin_url: str) -> Iterator[str]:
    """Create :data:`DATABASE` (and ``pg_stat_statements``, the rows table), drop it after."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(DATABASE)))  # fmt: skip
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT count(*) FROM pg_stat_statements")
        except psycopg.Error as exc:
            raise RuntimeError(
                f"pg_stat_statements is not usable on this server ({exc}); it needs "
                "shared_preload_libraries=pg_stat_statements"
            ) from exc
    url = _url_with_database(admin_url, DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE public.{} (side text, workflow text, step int)")
                     .format(sql.Identifier(ROWS_TABLE)))  # fmt: skip
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(DATABASE)))  # fmt: skip


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(args: argparse.Namespace, admin_url: str, note: str) -> None:
    with ExitStack() as stack:
        url = stack.enter_context(_bench_database(admin_url))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            server = conn.execute("SHOW server_version").fetchone()
            durability = conn.execute(
                "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings "
                "WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', "
                "'wal_sync_method')"
            ).fetchone()
        print(f"PostgreSQL {server[0] if server else '?'} ({note}); "
              f"{durability[0] if durability else '?'}")  # fmt: skip
        dbos: Dbos | None = None
        dbos_note = "dbos not measured (--no-dbos)"
        if not args.no_dbos:
            try:
                dbos = Dbos(url, args.dbos_polling)
            except ImportError as exc:
                sys.exit(f"dbos is not installed ({exc}): pip install -e '.[bench]'")
            stack.callback(dbos.destroy)
            dbos_note = f"dbos {version('dbos')}"
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; psycopg "
              f"{psycopg.__version__}, {dbos_note}; database {DATABASE}; "
              f"load average at start {_load()}", flush=True)  # fmt: skip
        logging.getLogger("dbos").setLevel(logging.WARNING)
        counters = Counters(admin_url)
        stack.callback(counters.close)
        if not args.skip_steps:
            scenario_steps(args, url, dbos, counters)
        if not args.skip_pickup:
            scenario_pickup(args, url, dbos)
        print(f"\nload average at end {_load()}")


def main() -> None:
    """Start the cluster (or use --url), run the scenarios, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing server's superuser URL (default: a private "
                        "cluster started by this script)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=10, help="steps per workflow")
    parser.add_argument("--workflows", type=int, default=200, help="workflows per round")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (median)")
    parser.add_argument("--jobs", type=int, default=50, help="idle pickup jobs per side")
    parser.add_argument("--backlog", type=int, default=500, help="jobs queued before the marker")
    parser.add_argument("--threads", type=int, default=4, help="reactor worker threads")
    parser.add_argument(
        "--dbos-polling",
        type=float,
        default=None,
        help="DBOS queue polling_interval_sec (default: DBOS's own, 1 s)",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=0,
        metavar="N",
        help="also print the N most frequent statements of each side",
    )
    parser.add_argument("--no-dbos", action="store_true", help="measure reactor only")
    parser.add_argument("--skip-steps", action="store_true", help="skip scenario 1")
    parser.add_argument("--skip-pickup", action="store_true", help="skip scenario 2")
    args = parser.parse_args()
    if min(args.steps, args.workflows, args.rounds, args.jobs, args.threads) < 1:
        parser.error("--steps, --workflows, --rounds, --jobs and --threads must be >= 1")
    try:
        with _terminated_on_sigterm():
            if args.url:
                run(args, args.url, f"--url {urlsplit(args.url).hostname}")
            else:
                with private_cluster(SERVER_SETTINGS) as cluster:
                    run(args, cluster.url(), f"private cluster on 127.0.0.1:{cluster.port}")
    except (ClusterError, psycopg.OperationalError) as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
