"""SQL statements, transactions and time per durable step on SQLite: reactor against DBOS.

For N = 10, 100 and 1000, in one process, on fresh database files in a temporary directory:

* **reactor**: a reactor of N trivial steps (a chain, each adding one to the result of the one
  before, as benchmarks/engine_overhead.py builds) run synchronously on
  ``reactor.configure(storage="sqlite:///<tmp>/reactor.db", router="local://")``: the SQLite
  example adapter (examples/sqlite_adapter, entry point ``reactor.storages: sqlite``; install
  it with ``pip install -e examples/sqlite_adapter``, as scripts/test does). Every step is a
  checkpoint (``ContextStore.append``: docs/protocol.md, "Incremental checkpoints").
* **dbos**: the equivalent DBOS workflow (one ``@DBOS.workflow`` calling an ``@DBOS.step``
  N times) on a SQLite system database (``system_database_url="sqlite:///<tmp>/dbos.sqlite"``),
  twice: with DBOS's defaults (rollback journal, ``synchronous=FULL``) and with the pragmas the
  reactor store uses (``journal_mode=WAL``, ``synchronous=NORMAL``), which changes its time,
  not its statements. Skipped, and said so, when the ``dbos`` package is not installed
  (``pip install -e '.[bench]'``).

Statements are counted with :meth:`sqlite3.Connection.set_trace_callback` on every connection:
the reactor store's one connection, and each connection DBOS's SQLAlchemy pool opens (a
``connect`` event), which sees what the driver itself sends too (the ``BEGIN IMMEDIATE`` and
``COMMIT`` pysqlite issues around DBOS's writes, the pool's ``SELECT 1`` liveness pings).
Per step, over whole runs (start and finish included, so a short run shows more per step):

* ``stmts``: every SQL statement;
* ``txns``: explicit transactions (``BEGIN`` statements);
* ``commits``: durable commits, i.e. ``COMMIT`` statements plus write statements run outside
  an explicit transaction (in autocommit mode each is its own transaction and commit);
* the statements by kind, and those run by other threads than the caller's (DBOS's
  background pollers) if any.

Times (``us``) are measured in separate runs with no trace callback installed: the median of
``--samples`` samples of about ``--budget`` steps each (whole runs). Ratios are reactor/DBOS,
of statements (all, and all but DBOS's pool pings), transactions, commits and time.
No assertion is made: this prints a measurement (docs/architecture.md, "Repository layout").

Usage::

    .venv/bin/python benchmarks/sqlite_steps.py [--steps 10,100,1000] [--budget 1000]
        [--samples 3] [--no-dbos]
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactor import Reactor, config
from reactor.dsl import Input, input, result, step
from reactor.model.results import Success

_KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT", "ROLLBACK", "other")
_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})


def _kind(sql: str) -> str:
    head = sql.lstrip().split(None, 1)
    word = head[0].upper() if head else ""
    if word == "END":
        return "COMMIT"
    if word == "WITH":  # a common table expression: classify by the statement it leads to
        upper = sql.upper()
        word = next((w for w in ("INSERT", "UPDATE", "DELETE") if w in upper), "SELECT")
    return word if word in _KINDS or word in _WRITES else "other"


@dataclass
class Tally:
    """Statements seen by the trace callbacks while :attr:`on` is set."""

    on: bool = False
    caller: int = field(default_factory=threading.get_ident)
    kinds: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    background: int = 0
    pings: int = 0

    @property
    def statements(self) -> int:
        return sum(self.kinds.values())

    def tracer(self) -> Callable[[str], None]:
        """A trace callback for one connection (it follows that connection's transactions)."""
        in_transaction = False

        def trace(sql: str) -> None:
            nonlocal in_transaction
            kind = _kind(sql)
            if kind == "BEGIN":
                in_transaction = True
            elif kind in ("COMMIT", "ROLLBACK"):
                in_transaction = False
            if not self.on:
                return
            self.kinds[kind if kind != "REPLACE" else "INSERT"] += 1
            if kind == "COMMIT" or (kind in _WRITES and not in_transaction):
                self.commits += 1
            if " ".join(sql.split()).upper() == "SELECT 1":
                self.pings += 1
            if threading.get_ident() != self.caller:
                self.background += 1

        return trace

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.caller = threading.get_ident()
        self.on = True
        try:
            yield
        finally:
            self.on = False


@dataclass(frozen=True)
class Figures:
    """What one system did per step for one N."""

    steps: int
    us: float
    tally: Tally
    units: int  # steps counted (runs x N)

    def per_step(self, n: int) -> float:
        return n / self.units


def _runs_for(steps: int, budget: int) -> int:
    return max(1, budget // steps)


def _time(run: Callable[[], object], runs: int, steps: int, samples: int) -> float:
    """Median µs per step over ``samples`` samples of ``runs`` runs."""
    values = []
    for _ in range(samples):
        started = time.perf_counter()
        for _ in range(runs):
            run()
        values.append((time.perf_counter() - started) / (runs * steps) * 1e6)
    return statistics.median(values)


# ------------------------------------------------------------------------------ reactor


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def _build_reactor(steps: int) -> type[Reactor]:
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, steps):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = f"s{steps - 1}"
    return type(f"Chain{steps}", (Reactor,), namespace)


def reactor_figures(directory: Path, steps: int, budget: int, samples: int) -> Figures:
    """Run the N-step reactor on the SQLite example: counted runs, then timed runs."""
    try:
        from reactor_sqlite import SQLiteStorage
    except ImportError:
        sys.exit("reactor_sqlite is not installed: pip install -e examples/sqlite_adapter")
    runtime = config.configure(
        storage=f"sqlite://{directory / f'reactor-{steps}.db'}", router="local://"
    )
    try:
        storage = runtime.storage
        if not isinstance(storage, SQLiteStorage):
            sys.exit(f"sqlite:// built a {type(storage).__name__}, not the example's storage")
        reactor_cls = _build_reactor(steps)

        def run() -> None:
            outcome = reactor_cls.run(start=0)
            if outcome != Success(steps):
                raise RuntimeError(f"the {steps}-step reactor returned {outcome!r}")

        run()  # warm up: schema, statement cache, class checks
        runs = _runs_for(steps, budget)
        tally = Tally()
        storage.documents.connection.set_trace_callback(tally.tracer())
        with tally.counting():
            for _ in range(runs):
                run()
        storage.documents.connection.set_trace_callback(None)
        us = _time(run, runs, steps, samples)
    finally:
        config.reset()
    return Figures(steps, us, tally, runs * steps)


# ------------------------------------------------------------------------------ DBOS


class _Dbos:
    """The DBOS side: the step and workflow, registered once, launched per database."""

    def __init__(self) -> None:
        import sqlalchemy as sa
        from dbos import DBOS

        self.DBOS = DBOS
        self.sa = sa
        #: the tally the next new connection traces into, and whether it sets the pragmas
        self.tally = Tally()
        self.wal = False

        @DBOS.step()
        def bench_add_one(x: int) -> int:
            return x + 1

        @DBOS.workflow()
        def bench_chain(steps: int, x: int) -> int:
            for _ in range(steps):
                x = bench_add_one(x)
            return x

        self.chain = bench_chain
        sa.event.listen(sa.engine.Engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_connection: Any, record: Any) -> None:
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        if self.wal:
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")
        dbapi_connection.set_trace_callback(self.tally.tracer())

    def close(self) -> None:
        self.sa.event.remove(self.sa.engine.Engine, "connect", self._on_connect)

    def figures(
        self, directory: Path, steps: int, budget: int, samples: int, *, wal: bool
    ) -> Figures:
        """Launch DBOS on a fresh SQLite file, count then time the N-step workflow."""
        DBOS = self.DBOS
        self.tally = Tally()
        self.wal = wal
        name = f"dbos-{steps}-{'wal' if wal else 'default'}.sqlite"
        DBOS(
            config={
                "name": "reactor-bench",
                "system_database_url": f"sqlite:///{directory / name}",
                "log_level": "WARNING",
            }
        )
        try:
            DBOS.launch()

            def run() -> None:
                outcome = self.chain(steps, 0)
                if outcome != steps:
                    raise RuntimeError(f"the {steps}-step workflow returned {outcome!r}")

            run()  # warm up: pool connections, statement caches
            runs = _runs_for(steps, budget)
            with self.tally.counting():
                for _ in range(runs):
                    run()
            tally = self.tally
            us = _time(run, runs, steps, samples)
        finally:
            DBOS.destroy()
        return Figures(steps, us, tally, runs * steps)


# ------------------------------------------------------------------------------ report


def _amount(value: float) -> str:
    return f"{value:.2f}" if value >= 0.005 else "<0.01"


def _row(label: str, figures: Figures) -> str:
    tally, per = figures.tally, figures.per_step
    kinds = " ".join(
        f"{kind} {_amount(per(tally.kinds[kind]))}" for kind in _KINDS if tally.kinds[kind]
    )
    extra = []
    if tally.pings:
        extra.append(f"of which SELECT 1 pings {per(tally.pings):.2f}")
    if tally.background:
        extra.append(f"by other threads {per(tally.background):.2f}")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return (
        f"  {label:<32} {figures.us:9.1f} {per(tally.statements):7.2f} "
        f"{per(tally.kinds['BEGIN']):6.2f} {per(tally.commits):8.2f}   {kinds}{tail}"
    )


#: The per-step counts compared as ratios.
_COUNTS: tuple[tuple[str, Callable[[Figures], float]], ...] = (
    ("statements", lambda f: f.per_step(f.tally.statements)),
    ("statements but pool pings", lambda f: f.per_step(f.tally.statements - f.tally.pings)),
    ("txns", lambda f: f.per_step(f.tally.kinds["BEGIN"])),
    ("commits", lambda f: f.per_step(f.tally.commits)),
)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def main() -> None:
    """Measure every N and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000", help="comma-separated N")
    parser.add_argument("--budget", type=int, default=1000, help="steps per sample (whole runs)")
    parser.add_argument("--samples", type=int, default=3, help="timed samples (median)")
    parser.add_argument("--no-dbos", action="store_true", help="measure reactor only")
    args = parser.parse_args()
    sizes = [int(n) for n in args.steps.split(",")]

    dbos: _Dbos | None = None
    dbos_note = ""
    if not args.no_dbos:
        try:
            from importlib.metadata import version

            dbos = _Dbos()
            dbos_note = f"dbos {version('dbos')}"
        except ImportError as exc:
            dbos_note = f"DBOS not measured: {exc} (pip install -e '.[bench]')"
        logging.getLogger("dbos").setLevel(logging.WARNING)

    print(
        f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}; "
        f"{dbos_note or 'DBOS not measured (--no-dbos)'}"
    )
    print(
        "per step, whole runs: us = median time; stmts = SQL statements; txns = BEGIN;"
        " commits = COMMIT + autocommit writes"
    )
    header = f"  {'':<32} {'us':>9} {'stmts':>7} {'txns':>6} {'commits':>8}   by kind"
    with tempfile.TemporaryDirectory(prefix="reactor-sqlite-steps-") as tmp:
        directory = Path(tmp)
        try:
            for steps in sizes:
                runs = _runs_for(steps, args.budget)
                print(f"\nN = {steps} steps per run (runs counted: {runs})")
                print(header)
                mine = reactor_figures(directory, steps, args.budget, args.samples)
                print(_row("reactor (sqlite example)", mine), flush=True)
                if dbos is None:
                    continue
                for wal, label in ((False, "dbos (defaults)"), (True, "dbos (WAL, sync=NORMAL)")):
                    try:
                        theirs = dbos.figures(directory, steps, args.budget, args.samples, wal=wal)
                    except Exception as exc:  # report, never fake: the comparison is skipped
                        print(f"  {label}: could not run on SQLite here: {exc!r}", flush=True)
                        continue
                    print(_row(label, theirs), flush=True)
                    ratios = ", ".join(
                        what + " " + _ratio(count(mine), count(theirs)) for what, count in _COUNTS
                    )
                    print(
                        f"    reactor/{label}: {ratios}, time {_ratio(mine.us, theirs.us)}",
                        flush=True,
                    )
        finally:
            if dbos is not None:
                dbos.close()


if __name__ == "__main__":
    main()
