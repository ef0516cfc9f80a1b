"""The demo's fake services shared by several worker processes, through a SQLite journal.

The fakes of :mod:`.services` live in one process's memory. The chaos soak
(:mod:`.soak`, docs/workers.md "Soak") runs the worker saga in several ``reactor worker``
processes that are killed with SIGKILL, so every process must see the same inventory, ledger,
carrier and mailer, and the soak must be able to count every side effect afterwards. This
module does both with an **operation journal**:

* Every mutating service call (``inventory.reserve``, ``ledger.capture``, ``carrier.book``,
  ... see :data:`MUTATORS`) is one row of the ``ops`` table of a SQLite file: service, method,
  pickled arguments, the outcome (``"ok"`` or the exception class name), the worker and the job
  execution ("episode") that made it, and the order it concerns.
* Each process keeps a local replica, a plain :class:`~.services.Services`. A call takes the
  file's write lock (``BEGIN IMMEDIATE``), first replays the rows other processes appended
  since its last call (the fakes are deterministic: the same calls in the same order give the
  same state, ids included), then runs the call on the replica, appends its row and commits.
  So calls are serialised across processes exactly as the in-process fakes serialise threads,
  and a process killed before its commit made no call at all (SQLite rolls the transaction
  back), like a request that never reached a real service.
* Replaying the whole journal into fresh services (:meth:`Journal.replay`) gives the final
  state the invariant check (:func:`.run.check_invariants`) reads. A replayed call whose
  outcome differs from the recorded one is a *divergence* (reported by the soak: the journal
  would not describe what the workers saw).
* :func:`install` also wraps every job handler of the worker (:data:`reactor.jobs.handlers.
  HANDLERS`) so each call is tagged with its **episode**: one handler invocation of one job in
  one worker. When an episode that made calls ends, its row in ``episodes`` says whether it
  ended *cleanly*: the handler returned and logged no lost lock or lease in its thread. A
  killed worker never writes the row. The soak uses this to tell the documented re-runs (a step
  body whose worker died, or whose job failed or lost its lock, before the result was stored)
  from real repeats.

Workers load it with ``--import examples.order_fulfilment.soak_worker``, which calls
:func:`install_from_environment` (the journal path and worker name come from
:data:`JOURNAL_ENV` and :data:`WORKER_ENV`).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .services import SERVICES, AuditLog, Carrier, Inventory, Ledger, Mailer, Services

__all__ = [
    "CALL_DELAY_ENV",
    "JOURNAL_ENV",
    "MUTATORS",
    "WORKER_ENV",
    "Episode",
    "Journal",
    "OpRow",
    "SharedServices",
    "install",
    "install_from_environment",
]

#: Environment variable naming the journal file a worker process shares.
JOURNAL_ENV = "ORDER_FULFILMENT_JOURNAL"
#: Environment variable naming the worker process in the journal (``w1``, ``w2``, ...).
WORKER_ENV = "ORDER_FULFILMENT_WORKER"
#: Environment variable: seconds each journaled call lingers after its commit (default 0),
#: inside the step body, i.e. after the side effect and before the engine stores the result.
#: The soak sets it so a kill lands between the two often enough to exercise re-runs.
CALL_DELAY_ENV = "ORDER_FULFILMENT_CALL_DELAY"

#: Service -> the methods that change its state; only these are journaled.
MUTATORS: Mapping[str, frozenset[str]] = {
    "inventory": frozenset({"reserve", "release", "release_for"}),
    "ledger": frozenset({"authorize", "void", "void_open", "capture", "refund"}),
    "carrier": frozenset({"book", "cancel", "cancel_for"}),
    "mailer": frozenset({"send", "recall"}),
    "audit": frozenset(),
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL, method TEXT NOT NULL, args BLOB NOT NULL, key TEXT NOT NULL,
    order_id TEXT NOT NULL, outcome TEXT NOT NULL,
    worker TEXT NOT NULL, episode TEXT, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY, worker TEXT NOT NULL, kind TEXT NOT NULL, job_id TEXT NOT NULL,
    started REAL NOT NULL, ended REAL NOT NULL, clean INTEGER NOT NULL, note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kills (worker TEXT PRIMARY KEY, at REAL NOT NULL);
"""


@dataclass(frozen=True)
class OpRow:
    """One journaled service call.

    Attributes:
        seq: its position in the journal (1-based, gap-free among committed calls).
        service: ``"inventory"``, ``"ledger"``, ``"carrier"`` or ``"mailer"``.
        method: the method called (a :data:`MUTATORS` entry).
        key: the call's identity: service, method and arguments as JSON text; two rows with
            the same key are the same side effect asked for twice.
        order_id: the order the call concerns (from the audit event it wrote, else its first
            argument), ``""`` when unknown.
        outcome: ``"ok"`` or the class name of the exception it raised.
        worker: the worker process (:data:`WORKER_ENV`) that made it.
        episode: the job execution that made it (:class:`Episode` id), ``None`` outside jobs.
        at: epoch seconds (wall clock) of the call.
    """

    seq: int
    service: str
    method: str
    key: str
    order_id: str
    outcome: str
    worker: str
    episode: str | None
    at: float


@dataclass
class Episode:
    """One handler invocation of one job in one worker thread.

    Attributes:
        id: ``"<worker>:<random hex>"``.
        worker: the worker process.
        kind: the job kind (``run``, ``step``, ``map_element``, ...).
        job_id: the job's id.
        started: epoch seconds when the handler was entered.
        ended: epoch seconds when it returned or raised (0 while running).
        clean: ``True`` while the handler neither raised nor logged a lost lock or lease.
        notes: warnings logged in the handler's thread meanwhile, and how it ended.
        calls: journaled service calls it made.
    """

    id: str
    worker: str
    kind: str
    job_id: str
    started: float
    ended: float = 0.0
    clean: bool = True
    notes: list[str] = field(default_factory=list)
    calls: int = 0


class Journal:
    """The SQLite journal file: calls, episodes and kills (see the module docstring and
    docs/workers.md, "Soak"). Thread-safe; one instance per process and file.

    Args:
        path: the SQLite file (created with its tables when missing).
        timeout: seconds a writer waits for another process's write lock.

    Raises:
        sqlite3.Error: the file cannot be opened or initialised.
    """

    def __init__(self, path: str | Path, *, timeout: float = 120.0) -> None:
        self.path = Path(path)
        self._conn = sqlite3.connect(
            str(self.path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self.lock = threading.RLock()

    def close(self) -> None:
        """Close this process's connection to the file (idempotent); the file stays."""
        with self.lock:
            self._conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """Hold the file's write lock (``BEGIN IMMEDIATE``) for the block, then commit; roll
        back when the block raises.

        Yields:
            The connection, inside the transaction.

        Raises:
            sqlite3.OperationalError: the lock was not granted within ``timeout`` seconds.
        """
        with self.lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def rows_after(self, seq: int, conn: sqlite3.Connection | None = None
                   ) -> list[tuple[int, str, str, bytes, str]]:
        """The calls after position ``seq``, in journal order.

        Args:
            seq: the last position already seen (0: from the start).
            conn: the connection to read with (the one of an open :meth:`write` block), or
                ``None`` for this journal's own.

        Returns:
            ``(seq, service, method, pickled args, outcome)`` per call.

        Raises:
            sqlite3.Error: the file cannot be read.
        """
        with self.lock:
            cur = (conn or self._conn).execute(
                "SELECT seq, service, method, args, outcome FROM ops WHERE seq > ? ORDER BY seq",
                (seq,),
            )
            return [(int(r[0]), str(r[1]), str(r[2]), bytes(r[3]), str(r[4]))
                    for r in cur.fetchall()]

    def ops(self) -> list[OpRow]:
        """Every journaled call, in journal order (what the soak's repeat check reads).

        Raises:
            sqlite3.Error: the file cannot be read.
        """
        with self.lock:
            cur = self._conn.execute(
                "SELECT seq, service, method, key, order_id, outcome, worker, episode, at "
                "FROM ops ORDER BY seq"
            )
            return [OpRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], float(r[8]))
                    for r in cur.fetchall()]

    def episodes(self) -> dict[str, tuple[bool, str]]:
        """Episode id -> ``(clean, note)`` of every episode that ended and made calls; an
        episode missing here never ended (its worker was killed) or could not be stored.

        Raises:
            sqlite3.Error: the file cannot be read.
        """
        with self.lock:
            cur = self._conn.execute("SELECT id, clean, note FROM episodes")
            return {str(r[0]): (bool(r[1]), str(r[2])) for r in cur.fetchall()}

    def record_episode(self, episode: Episode) -> None:
        """Store how ``episode`` ended (only episodes that made calls are stored).

        Raises:
            sqlite3.Error: the write failed.
        """
        with self.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (episode.id, episode.worker, episode.kind, episode.job_id, episode.started,
                 episode.ended, int(episode.clean), "; ".join(episode.notes)[:2000]),
            )

    def record_kill(self, worker: str, at: float) -> None:
        """Note that ``worker`` was killed with SIGKILL at ``at`` (epoch seconds).

        Raises:
            sqlite3.Error: the write failed.
        """
        with self.write() as conn:
            conn.execute("INSERT OR REPLACE INTO kills VALUES (?, ?)", (worker, at))

    def kills(self) -> dict[str, float]:
        """Worker -> epoch seconds of its SIGKILL (:meth:`record_kill`).

        Raises:
            sqlite3.Error: the file cannot be read.
        """
        with self.lock:
            cur = self._conn.execute("SELECT worker, at FROM kills")
            return {str(r[0]): float(r[1]) for r in cur.fetchall()}

    def replay(self) -> tuple[Services, list[str]]:
        """Apply every journaled call, in order, to fresh services.

        Returns:
            ``(services, divergences)``: the final state, and one line per call whose replayed
            outcome differs from the recorded one (empty when the journal is consistent).

        Raises:
            sqlite3.Error: the file cannot be read.
        """
        services = Services.create()
        divergences: list[str] = []
        for seq, service, method, args, outcome in self.rows_after(0):
            got = _apply(services, service, method, args)
            if got != outcome:
                divergences.append(
                    f"journal call {seq} {service}.{method}: recorded {outcome}, replayed {got}"
                )
        return services, divergences


def _apply(services: Services, service: str, method: str, args: bytes) -> str:
    """Run one journaled call on ``services``; its outcome (``"ok"`` or exception class)."""
    fn = getattr(getattr(services, service), method)
    try:
        fn(*pickle.loads(args))  # our own journal, written by our own workers
    except Exception as exc:
        return type(exc).__name__
    return "ok"


def _call_key(service: str, method: str, args: tuple[Any, ...]) -> str:
    return json.dumps([service, method, [_plain(a) for a in args]], default=str, sort_keys=True)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


_local = threading.local()


def _current_episode() -> Episode | None:
    return cast(Episode | None, getattr(_local, "episode", None))


class SharedServices:
    """Services whose state lives in a :class:`Journal` shared by several processes
    (docs/workers.md, "Soak").

    :attr:`services` is what steps get from ``SERVICES.get()``: the same four services, whose
    mutating methods go through :meth:`call` and whose reads see the replica brought up to
    date with the journal.

    Args:
        journal: the shared journal.
        worker: this process's name in the journal.
        call_delay: seconds each call lingers after its commit, before it returns (0: none).
    """

    def __init__(self, journal: Journal, worker: str, call_delay: float = 0.0) -> None:
        self.journal = journal
        self.worker = worker
        self.call_delay = max(call_delay, 0.0)
        self._replica = Services.create()
        self._seen = 0
        self.divergences: list[str] = []
        self.services = Services(
            inventory=cast(Inventory, _Proxy(self, "inventory")),
            ledger=cast(Ledger, _Proxy(self, "ledger")),
            carrier=cast(Carrier, _Proxy(self, "carrier")),
            mailer=cast(Mailer, _Proxy(self, "mailer")),
            audit=cast(AuditLog, _Proxy(self, "audit")),
        )

    def _catch_up(self, conn: sqlite3.Connection | None = None) -> None:
        for seq, service, method, args, outcome in self.journal.rows_after(self._seen, conn):
            got = _apply(self._replica, service, method, args)
            if got != outcome:
                self.divergences.append(f"journal call {seq} {service}.{method}: recorded "
                                        f"{outcome}, replayed {got} in {self.worker}")
                logging.getLogger(__name__).error("event=journal_divergence %s",
                                                  self.divergences[-1])
            self._seen = seq

    def replica(self, service: str) -> Any:
        """The up-to-date local replica of ``service`` (for reads).

        Raises:
            sqlite3.Error: the journal cannot be read.
        """
        with self.journal.lock:
            self._catch_up()
            return getattr(self._replica, service)

    def call(self, service: str, method: str, *args: Any) -> Any:
        """Make one journaled call: catch up, run it on the replica, append it, commit.

        Args:
            service: a key of :data:`MUTATORS`.
            method: one of its mutating methods.
            *args: the call's positional arguments (picklable).

        Returns:
            What the service returned.

        Raises:
            Exception: what the service raised (the call is journaled with that outcome).
            sqlite3.Error: the journal failed (the replica is rebuilt on the next call).
        """
        episode = _current_episode()
        audit = self._replica.audit
        try:
            with self.journal.write() as conn:
                self._catch_up(conn)
                before = len(audit)
                fn = getattr(getattr(self._replica, service), method)
                raised: Exception | None = None
                result: Any = None
                try:
                    result = fn(*args)
                except Exception as exc:
                    raised = exc
                events = audit.events_since(before)
                order_id = events[-1].order_id if events else (
                    args[0] if args and isinstance(args[0], str) and args[0].startswith("ORD-")
                    else "")
                cur = conn.execute(
                    "INSERT INTO ops (service, method, args, key, order_id, outcome, worker, "
                    "episode, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (service, method, pickle.dumps(args), _call_key(service, method, args),
                     order_id, "ok" if raised is None else type(raised).__name__,
                     self.worker, episode.id if episode else None, time.time()),
                )
                self._seen = int(cur.lastrowid or self._seen)
        except BaseException:
            # The replica may hold a call the journal does not: start over from the journal.
            self._replica = Services.create()
            self._seen = 0
            raise
        if episode is not None:
            episode.calls += 1
        if self.call_delay:
            time.sleep(self.call_delay)  # the side effect happened; the result is not stored
        if raised is not None:
            raise raised
        return result


class _Proxy:
    """One service of :class:`SharedServices`: mutators journaled, everything else read from
    the up-to-date replica."""

    def __init__(self, shared: SharedServices, service: str) -> None:
        self._shared = shared
        self._service = service

    def __getattr__(self, name: str) -> Any:
        if name in MUTATORS[self._service]:
            shared, service = self._shared, self._service

            def journaled(*args: Any) -> Any:
                return shared.call(service, name, *args)

            return journaled
        return getattr(self._shared.replica(self._service), name)


class _EpisodeWarnings(logging.Handler):
    """Notes the warnings a job handler's thread logs into its episode; a lost lock or lease
    (``event=liveness_lost``, ``event=map_element_lock_lost``, ...) makes it unclean."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        episode = _current_episode()
        if episode is None:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        episode.notes.append(message[:300])
        if "lost" in message or record.levelno >= logging.ERROR:
            episode.clean = False


def _journaled_handler(
    kind: str, handler: Callable[[Any, Any], None], journal: Journal, worker: str
) -> Callable[[Any, Any], None]:
    def run(jc: Any, payload: Any) -> None:
        if _current_episode() is not None:  # nested (inline router): the outer one counts
            handler(jc, payload)
            return
        episode = Episode(f"{worker}:{uuid.uuid4().hex[:12]}", worker, kind,
                          str(getattr(jc.job, "id", "")), time.time())
        _local.episode = episode
        try:
            handler(jc, payload)
        except BaseException as exc:
            episode.clean = False
            episode.notes.append(f"raised {type(exc).__name__}: {exc}"[:300])
            raise
        finally:
            _local.episode = None
            episode.ended = time.time()
            if episode.calls:
                try:
                    journal.record_episode(episode)
                except Exception:  # unrecorded = treated as unclean by the soak
                    logging.getLogger(__name__).exception("event=episode_not_recorded id=%s",
                                                          episode.id)

    return run


_INSTALLED: list[SharedServices] = []


def install(journal_path: str | Path, worker: str, call_delay: float = 0.0) -> SharedServices:
    """Make this process's steps use the journal's shared services and tag calls by job.

    Installs :attr:`SharedServices.services` into :data:`~.services.SERVICES`, wraps every
    entry of :data:`reactor.jobs.handlers.HANDLERS` to record episodes, and adds the warning
    listener to the ``reactor`` logger. Idempotent per process (a second call returns the
    first installation).

    Args:
        journal_path: the SQLite journal file (created when missing).
        worker: this process's name in the journal.
        call_delay: seconds each call lingers after its commit (see :data:`CALL_DELAY_ENV`).

    Returns:
        The installed :class:`SharedServices`.

    Raises:
        sqlite3.Error: the journal cannot be opened.
    """
    if _INSTALLED:
        return _INSTALLED[0]
    from reactor.jobs.handlers import HANDLERS

    journal = Journal(journal_path)
    shared = SharedServices(journal, worker, call_delay)
    SERVICES.install(shared.services)
    for kind, handler in list(HANDLERS.items()):
        HANDLERS[kind] = _journaled_handler(kind, handler, journal, worker)
    logging.getLogger("reactor").addHandler(_EpisodeWarnings())
    _INSTALLED.append(shared)
    return shared


def install_from_environment() -> SharedServices | None:
    """:func:`install` with the journal of :data:`JOURNAL_ENV`, the worker name of
    :data:`WORKER_ENV` (default ``pid<N>``) and the delay of :data:`CALL_DELAY_ENV` (seconds,
    default 0); nothing when :data:`JOURNAL_ENV` is unset.

    Returns:
        The installation, or ``None``.

    Raises:
        sqlite3.Error: the journal cannot be opened.
        ValueError: :data:`CALL_DELAY_ENV` is not a number.
    """
    path = os.environ.get(JOURNAL_ENV, "").strip()
    if not path:
        return None
    return install(path, os.environ.get(WORKER_ENV, "").strip() or f"pid{os.getpid()}",
                   float(os.environ.get(CALL_DELAY_ENV, "").strip() or 0))
