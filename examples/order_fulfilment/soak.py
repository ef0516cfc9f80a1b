"""The chaos soak: the worker saga in killed-and-restarted worker processes, then the invariants.

``scripts/soak`` (docs/workers.md, "Soak") runs ``python -m examples.order_fulfilment.soak``::

    scripts/soak --smoke --storage URL --router URL            # under a minute
    scripts/soak --orders 1000 --kills 150 --workers 4 --storage URL --router URL

against any storage/router pair that several processes can share (Redis, a MongoDB server,
DynamoDB + SQS; not ``memory://``). What it does:

1. Starts ``--workers`` processes ``python -m reactor.cli worker --sweep --import
   examples.order_fulfilment.soak_worker`` on the URLs (each URL gets a fresh ``prefix`` so
   runs of the soak never meet). They run :class:`~.saga_workers.FulfilInWorkers` — validate,
   a fan-out ``reserve`` map with distributed rollback, authorize, a retried
   ``book_shipment``, the ``capture`` async step, ``send_confirmation`` — against the demo's
   fake services shared through a SQLite journal in the run directory
   (:mod:`.shared_services`), so every side effect of every process is recorded.
2. Submits the first ``--orders`` orders of the dataset as background runs
   (``FulfilInWorkers.run``), evenly spread over the load phase, which lasts ``--kills`` x
   ``--kill-every`` seconds (or ``--orders / --rate`` without kills). Meanwhile it SIGKILLs a
   random worker every ``--kill-every`` seconds and starts a replacement at once, and every
   ``--pause-every`` seconds pauses the backend for ``--pause-seconds`` (``--pause``:
   ``client-pause`` = Redis ``CLIENT PAUSE <ms> ALL``; ``sigstop`` = SIGSTOP/SIGCONT of the
   server process ``--server-pid``; ``restart`` = run ``--restart-command``, a shell command
   that restarts the server and returns once it accepts connections again, every
   ``--pause-every`` seconds (every pooled connection of every process dies; the soak then
   pings its own storage and router until they answer); ``none``; the default ``auto`` is
   ``client-pause`` on ``redis://``/``rediss://``, ``sigstop`` when ``--server-pid`` is given,
   else ``none``).
3. After the last submission it waits, bounded by ``--timeout``, until every run is terminal;
   with ``--stall S`` it gives up sooner when for ``S`` seconds no run was stored again (none
   finished, none moved on to a later step), so a slow but steady fleet gets the whole
   ``--timeout`` and a wedged one is reported early.
   **Time to quiescence** is from the last submission to the last run's final write (its
   ``updated_at``, on the storage clock).
4. Stops the workers (SIGTERM, drain) and checks, printing every violation:

   * every run is terminal, and the run listing (``contexts.page``, what ``reactor runs
     list`` shows) agrees with the stored runs (quiescence is judged on the stored runs);
   * :func:`.run.check_invariants` on the journal's final service state: a failed order left
     no reservation, capture, open authorization, shipment or e-mail and its stored run has an
     empty undo stack; a completed order holds exactly its reservations, one capture, one
     shipment, one e-mail; stock and money are conserved;
   * **no unexplained repeat**: the same side effect (same service call with the same
     arguments) happens once, except a retried ``book_shipment`` (up to its 3 attempts) and
     one more time per call made in a job execution that did not end cleanly — its worker was
     SIGKILLed, its handler raised, or it lost its lock or lease (the documented at-least-once
     re-runs of step bodies, undos and async units across crashes);
   * the journal replays to what the workers saw, and no worker exited on its own.

   Then it prints ``soak: N runs, X completed, Y failed, Z violations, quiescence T s, kills
   K`` (with ``, restarts R`` appended under ``--pause restart``) and exits 0, or 1 on any
   violation or timeout (2 on bad arguments or a failing restart command).

The run directory (``--run-dir``, default a fresh ``/tmp/reactor-soak.*``) holds the journal
and one log per worker; it is removed after a clean run unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from reactor import DispatchHandle, config, generate_key
from reactor.config import Runtime
from reactor.runs import TERMINAL_STATUSES, RunStatus

from .models import Order
from .run import Outcome, check_invariants, failure_reason, load_orders
from .saga import SHIPMENT_RETRIES
from .saga_workers import FulfilInWorkers
from .shared_services import CALL_DELAY_ENV, JOURNAL_ENV, WORKER_ENV, Journal, OpRow

__all__ = [
    "PAUSE_MECHANISMS",
    "RESTART_TIMEOUT",
    "SMOKE",
    "SOAK_SETTINGS",
    "SoakOptions",
    "SoakReport",
    "default_pause",
    "main",
    "namespaced",
    "parse_args",
    "run_soak",
    "unexplained_repeats",
]

ROOT = Path(__file__).resolve().parents[2]

#: Engine settings of the soak's workers and of its submitting process (``-s`` overrides):
#: short liveness locks and a 1 s sweep so killed work is recovered within seconds; short
#: snoozes, with enough of them (200 x at least 0.2 s = 40 s) that a unit parked on the SKU
#: lock of a killed worker (TTL 30 s) outlasts it (docs/workers.md, "Settings that drain").
SOAK_SETTINGS: Mapping[str, object] = {
    "context_lock_ttl": 6,
    "sweeper_interval": 1,
    "visibility_timeout": 10,
    "lock_snooze_base_delay": 0.2,
    "lock_snooze_jitter": 0.2,
    "lock_snooze_max_attempts": 200,
}

#: ``--smoke``: under a minute on Redis (2 workers, 100 orders over 30 s, 5 kills, 3 pauses,
#: service calls lingering 0.1 s so kills hit step bodies), at most about three with the 120 s
#: quiescence timeout.
SMOKE: Mapping[str, float] = {
    "orders": 100, "workers": 2, "threads": 2, "kills": 5, "kill_every": 6.0,
    "pause_every": 9.0, "pause_seconds": 1.0, "call_delay": 0.1, "timeout": 120.0,
}

#: Ways to pause the backend (``--pause``).
PAUSE_MECHANISMS = ("auto", "none", "client-pause", "sigstop", "restart")

#: Seconds a ``--restart-command`` may take before the soak gives up on it.
RESTART_TIMEOUT = 120.0

_WORKER_MODULE = "examples.order_fulfilment.soak_worker"
#: The secret keys every soak process shares (docs/security.md, "Keys").
SECRET_KEYS_ENV = "REACTOR_SECRET_KEYS"


@dataclass
class SoakOptions:
    """What one soak does (see the module docstring; times in seconds).

    Attributes:
        storage: the storage URL (given a fresh ``prefix`` unless ``prefix`` is ``""``).
        router: the router URL (same).
        orders: how many orders of the dataset to submit (1..1200).
        workers: worker processes kept running.
        threads: handler threads per worker.
        kills: SIGKILLs during the load phase (each followed by a replacement worker).
        kill_every: seconds between kills; the load phase lasts ``kills * kill_every``.
        rate: orders per second when ``kills`` is 0.
        pause: a :data:`PAUSE_MECHANISMS` entry.
        pause_every: seconds between backend pauses, or restarts (0: none).
        pause_seconds: length of each pause (not used by ``restart``).
        server_pid: the backend server's pid (for ``sigstop``).
        restart_command: the shell command that restarts the backend server and returns once
            it accepts connections again (for ``restart``).
        call_delay: seconds each service call lingers after its side effect, inside the step
            body (so kills often land before the result is stored).
        timeout: seconds to wait for quiescence after the last submission.
        stall: seconds without any run stored again (finished or moved on) after which the
            wait gives up before ``timeout`` (``None``: only ``timeout`` bounds it).
        run_dir: where the journal and worker logs go (``None``: a fresh temp dir).
        keep: keep ``run_dir`` after a clean run.
        seed: seed of the kill victim choice.
        prefix: the key prefix added to both URLs (``None``: ``soak<random>``; ``""``: none).
        settings: engine settings for workers and the submitting process.
    """

    storage: str
    router: str
    orders: int = 300
    workers: int = 3
    threads: int = 2
    kills: int = 30
    kill_every: float = 2.0
    rate: float = 10.0
    pause: str = "auto"
    pause_every: float = 20.0
    pause_seconds: float = 1.0
    server_pid: int | None = None
    restart_command: str | None = None
    call_delay: float = 0.05
    timeout: float = 300.0
    stall: float | None = None
    run_dir: Path | None = None
    keep: bool = False
    seed: int = 1
    prefix: str | None = None
    settings: dict[str, object] = field(default_factory=lambda: dict(SOAK_SETTINGS))


@dataclass
class SoakReport:
    """The result of :func:`run_soak`.

    Attributes:
        runs: runs submitted.
        completed: runs stored ``completed``.
        failed: runs stored ``failed``.
        violations: one line per violated invariant (empty: all hold).
        quiescence: seconds from the last submission to the last run's final write; ``None``
            when the runs did not all finish within the timeout.
        kills: SIGKILLs sent during the load phase.
        pauses: backend pauses made (restarts included).
        restarts: backend server restarts made; ``None`` unless the mechanism is ``restart``.
        restart_seconds: how long each restart command took.
        load_seconds: length of the load phase.
        total_seconds: wall time of the whole soak.
        calls: journaled service calls.
        reruns: calls repeated by an execution that did not end cleanly (allowed).
        interrupted: kills that cut off a job execution in the middle of its service calls
            (its episode has calls and never ended).
        dead_letters: dead-lettered jobs the router reports (informational).
        failures: failed runs by ``"reason at step: message"`` (informational).
        run_dir: the run directory.
    """

    runs: int
    completed: int = 0
    failed: int = 0
    violations: list[str] = field(default_factory=list)
    quiescence: float | None = None
    kills: int = 0
    pauses: int = 0
    restarts: int | None = None
    restart_seconds: list[float] = field(default_factory=list)
    load_seconds: float = 0.0
    total_seconds: float = 0.0
    calls: int = 0
    reruns: int = 0
    interrupted: int = 0
    dead_letters: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    run_dir: Path | None = None

    def summary(self) -> str:
        """The closing line: ``soak: N runs, X completed, Y failed, Z violations, quiescence
        T s, kills K``, then ``, restarts R`` when the backend was restarted (``restart``)."""
        quiet = "timeout" if self.quiescence is None else f"{self.quiescence:.1f} s"
        restarts = "" if self.restarts is None else f", restarts {self.restarts}"
        return (f"soak: {self.runs} runs, {self.completed} completed, {self.failed} failed, "
                f"{len(self.violations)} violations, quiescence {quiet}, kills {self.kills}"
                f"{restarts}")


# --------------------------------------------------------------------------------------------
# URLs and pauses
# --------------------------------------------------------------------------------------------


def namespaced(url: str, prefix: str) -> str:
    """``url`` with ``prefix=<prefix>`` added (MongoDB gets a trailing ``_``), unless the URL
    already has a ``prefix`` or ``prefix`` is empty."""
    if not prefix or "prefix" in dict(parse_qsl(urlsplit(url).query)):
        return url
    if url.startswith(("mongodb://", "mongodb+srv://")):
        prefix += "_"
    return url + ("&" if "?" in url else "?") + f"prefix={prefix}"


def default_pause(storage: str, server_pid: int | None) -> str:
    """The ``auto`` pause mechanism for a storage URL: ``client-pause`` on ``redis://`` and
    ``rediss://``, else ``sigstop`` when the server's pid is known, else ``none``."""
    scheme = urlsplit(storage).scheme
    if scheme in ("redis", "rediss"):
        return "client-pause"
    return "sigstop" if server_pid else "none"


class _Pauser:
    """Pauses or restarts the backend (see :data:`PAUSE_MECHANISMS`)."""

    def __init__(self, mechanism: str, storage: str, server_pid: int | None,
                 restart_command: str | None = None, log: Path | None = None) -> None:
        self.mechanism = mechanism
        self.server_pid = server_pid
        self.restart_command = restart_command
        self.log = log
        self._redis: Any = None
        if mechanism == "client-pause":
            import redis

            parts = urlsplit(storage)  # reactor's own options are not redis-py's
            self._redis = redis.Redis.from_url(urlunsplit(parts._replace(query="")))
        if mechanism == "sigstop" and not server_pid:
            raise ValueError("--pause sigstop needs --server-pid")
        if mechanism == "restart" and not (restart_command or "").strip():
            raise ValueError("--pause restart needs --restart-command CMD")

    def restart(self) -> float:
        """Run the restart command (blocking: it returns once the server accepts connections
        again), its output appended to :attr:`log`; returns the seconds it took.

        Raises:
            OSError: the command failed or took longer than :data:`RESTART_TIMEOUT`.
        """
        assert self.restart_command is not None
        started = time.monotonic()
        with open(self.log or os.devnull, "ab") as out:
            out.write(f"--- {time.strftime('%H:%M:%S')} $ {self.restart_command}\n".encode())
            out.flush()
            try:
                proc = subprocess.run(self.restart_command, shell=True, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      timeout=RESTART_TIMEOUT, check=False)
            except subprocess.TimeoutExpired as exc:
                raise OSError(f"the restart command took over {RESTART_TIMEOUT:g}s: "
                              f"{self.restart_command}") from exc
        if proc.returncode != 0:
            raise OSError(f"the restart command exited with code {proc.returncode} (output in "
                          f"{self.log}): {self.restart_command}")
        return time.monotonic() - started

    def pause(self, seconds: float) -> None:
        """Pause the backend for ``seconds``; blocks until it runs again (``sigstop``) or
        returns at once (``client-pause``: the server resumes by itself)."""
        if self.mechanism == "client-pause":
            self._redis.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")
        elif self.mechanism == "sigstop" and self.server_pid:
            os.kill(self.server_pid, signal.SIGSTOP)
            try:
                time.sleep(seconds)
            finally:
                os.kill(self.server_pid, signal.SIGCONT)

    def close(self) -> None:
        """Let go of the Redis connection, if any."""
        if self._redis is not None:
            self._redis.close()


# --------------------------------------------------------------------------------------------
# worker processes
# --------------------------------------------------------------------------------------------


class _Workers:
    """The soak's ``reactor worker`` processes: started, killed, replaced, stopped."""

    def __init__(self, opts: SoakOptions, storage: str, router: str, run_dir: Path,
                 secret_keys: str) -> None:
        self.opts = opts
        self.storage = storage
        self.router = router
        self.run_dir = run_dir
        self.secret_keys = secret_keys
        self.alive: dict[str, subprocess.Popen[bytes]] = {}
        self.exited: list[str] = []  # workers that exited on their own
        self.started = 0

    def start(self) -> str:
        self.started += 1
        name = f"w{self.started}"
        args = [
            sys.executable, "-m", "reactor.cli", "worker", "--import", _WORKER_MODULE,
            "--storage", self.storage, "--router", self.router, "--sweep",
            "--threads", str(self.opts.threads),
            *[a for k, v in self.opts.settings.items() for a in ("-s", f"{k}={v}")],
        ]
        env = {k: v for k, v in os.environ.items()
               if k not in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL")}
        env[SECRET_KEYS_ENV] = self.secret_keys
        env[JOURNAL_ENV] = str(self.run_dir / "journal.sqlite")
        env[WORKER_ENV] = name
        env[CALL_DELAY_ENV] = str(self.opts.call_delay)
        with open(self.run_dir / f"{name}.log", "wb") as log:
            self.alive[name] = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return name

    def ready(self, name: str) -> bool:
        """Whether worker ``name`` logged ``event=worker_started`` (it consumes jobs)."""
        try:
            with open(self.run_dir / f"{name}.log", "rb") as log:
                return b"event=worker_started" in log.read(16384)
        except OSError:
            return False

    def kill(self, rng: random.Random, journal: Journal) -> str:
        """SIGKILL a random worker that already consumes jobs (any worker when none does
        yet), record the kill in the journal and start a replacement; returns the victim."""
        candidates = sorted(n for n in self.alive if self.ready(n)) or sorted(self.alive)
        name = rng.choice(candidates)
        proc = self.alive.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        journal.record_kill(name, time.time())
        self.start()
        return name

    def reap(self) -> list[str]:
        """Replace workers that exited by themselves; returns their ``name: code`` lines."""
        gone = []
        for name, proc in list(self.alive.items()):
            code = proc.poll()
            if code is not None:
                del self.alive[name]
                gone.append(f"{name}: exit code {code}")
                self.start()
        self.exited.extend(gone)
        return gone

    def stop(self, timeout: float = 45.0) -> list[str]:
        """SIGTERM every worker, wait for the drain, SIGKILL stragglers; returns problems."""
        problems = []
        for proc in self.alive.values():
            with suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for name, proc in self.alive.items():
            try:
                code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                problems.append(f"{name} did not stop within {timeout:g}s of SIGTERM")
                continue
            if code == -signal.SIGTERM and not self.ready(name):
                continue  # still booting: SIGTERM came before the worker's own handler
            if code not in (0, 1):  # 1: jobs still running at the drain deadline
                problems.append(f"{name} exited with code {code} on SIGTERM")
        self.alive.clear()
        return problems

    def kill_all(self) -> None:
        for proc in self.alive.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.alive.clear()

    def grep(self, needle: str, limit: int = 8) -> list[str]:
        """Up to ``limit`` log lines (all workers) containing ``needle``."""
        out: list[str] = []
        for log in sorted(self.run_dir.glob("w*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if needle in line:
                    out.append(f"{log.stem}: {line[:300]}")
                    if len(out) >= limit:
                        return out
        return out


# --------------------------------------------------------------------------------------------
# the invariants
# --------------------------------------------------------------------------------------------


def unexplained_repeats(
    ops: Sequence[OpRow],
    episodes: Mapping[str, tuple[bool, str]],
    killed: Mapping[str, float],
    *,
    max_attempts: int = SHIPMENT_RETRIES.max_attempts,
) -> tuple[list[str], dict[str, int], int]:
    """Finds side effects repeated more often than the documented re-runs explain.

    Calls are grouped by key (same service, method and arguments: the same side effect). A
    group may hold ``base + u`` calls, where ``base`` is 1 (``max_attempts`` for a
    ``carrier.book`` that raised the transient ``CarrierUnavailable``: the step's retries) and
    ``u`` the group's calls made by an execution that did not end cleanly: its episode row is
    missing (the worker was SIGKILLed, or never stored it) or says it raised or lost a hold.
    A call made outside any job is itself a violation (every step runs in a worker).

    Args:
        ops: the journal's calls (:meth:`Journal.ops`).
        episodes: the journal's ended episodes (:meth:`Journal.episodes`).
        killed: worker -> time of its SIGKILL (:meth:`Journal.kills`).
        max_attempts: ``book_shipment``'s attempts.

    Returns:
        ``(violations, extra_attempts, reruns)``: one line per unexplained repeat;
        ``{order_id: n}`` booking attempts explained by unclean executions (for
        :func:`.run.check_invariants`); the number of calls beyond ``base`` that unclean
        executions explain.
    """
    groups: dict[str, list[OpRow]] = defaultdict(list)
    violations: list[str] = []
    for op in ops:
        groups[op.key].append(op)
        if op.episode is None:
            violations.append(f"{op.order_id}: {op.service}.{op.method} (call {op.seq}) ran "
                              f"outside any job in {op.worker}")

    def why_unclean(op: OpRow) -> str | None:
        if op.episode is None:
            return "no job"
        ended = episodes.get(op.episode)
        if ended is None:
            return "killed" if op.worker in killed else "episode not recorded"
        clean, note = ended
        return None if clean else (note or "unclean")

    extra: dict[str, int] = {}
    reruns = 0
    for calls in groups.values():
        first = calls[0]
        base = 1
        if (first.service, first.method) == ("carrier", "book") and any(
                c.outcome == "CarrierUnavailable" for c in calls):
            base = max_attempts
        unclean = [c for c in calls if why_unclean(c) is not None]
        if (first.service, first.method) == ("carrier", "book"):
            extra[first.order_id] = len(unclean)
        reruns += max(min(len(calls) - base, len(unclean)), 0)
        if len(calls) > base + len(unclean):
            shown = ", ".join(
                f"#{c.seq} {c.worker} {c.outcome}"
                + (f" [{why_unclean(c)}]" if why_unclean(c) else "") for c in calls[:6])
            violations.append(
                f"{first.order_id}: {first.service}.{first.method} ran {len(calls)} times, "
                f"{base} expected + {len(unclean)} explained by unclean executions: {shown}")
    return violations, extra, reruns


def _outcome(order: Order, run_id: str, runtime: Runtime) -> Outcome:
    view = FulfilInWorkers.find(run_id, runtime=runtime)
    if view.status is RunStatus.FAILED and view.failure is not None:
        failure = view.failure
        return Outcome(order.id, run_id, "failed", reason=failure_reason(failure),
                       step=failure.step_name, message=failure.message,
                       rollback_failures=tuple(f"{rf.step} {rf.kind}: {rf.message}"
                                               for rf in failure.rollback_failures))
    if view.status is RunStatus.COMPLETED:
        return Outcome(order.id, run_id, "completed")
    return Outcome(order.id, run_id, "halted", message=f"stored status {view.status.value}")


# --------------------------------------------------------------------------------------------
# the soak
# --------------------------------------------------------------------------------------------


def _listing(runtime: Runtime, run_ids: set[str]) -> dict[str, tuple[RunStatus, float]]:
    """run id -> (status, updated_at) of our runs as the run listing (``contexts.page``, what
    ``reactor runs list`` shows) has them; runs it does not list are absent."""
    seen: dict[str, tuple[RunStatus, float]] = {}
    cursor: str | None = None
    while True:
        page = runtime.storage.contexts.page(cursor=cursor, limit=500)
        for row in page.runs:
            if row.context_id in run_ids:
                seen[row.context_id] = (RunStatus(row.status), row.updated_at)
        cursor = page.next_cursor
        if cursor is None:
            break
    return seen


def _stored(runtime: Runtime, run_ids: set[str]) -> dict[str, tuple[RunStatus, float]]:
    """run id -> (status, updated_at) of the stored runs themselves (authoritative)."""
    seen: dict[str, tuple[RunStatus, float]] = {}
    for run_id in run_ids:
        record = runtime.storage.contexts.load(run_id)
        if record is not None:
            seen[run_id] = (RunStatus(record.status), record.updated_at)
    return seen


class _Quiescence:
    """Tracks which runs are terminal: the listing for the many, the stored run for the ones
    the listing still shows unfinished (a terminal status is final, so it is read once)."""

    def __init__(self, runtime: Runtime, run_ids: set[str]) -> None:
        self.runtime = runtime
        self.ids = run_ids
        self.final: dict[str, tuple[RunStatus, float]] = {}
        #: The latest ``updated_at`` seen on any of the runs (epoch seconds): it moves while
        #: the fleet makes progress, a run finishing or not.
        self.latest = 0.0
        self._last_direct = 0.0

    def pending(self) -> set[str]:
        """The runs not terminal now (reads the listing; loads the runs it shows unfinished
        when they are few, or every 10 s)."""
        listing = _listing(self.runtime, self.ids - set(self.final))
        for run_id, (status, updated) in listing.items():
            self.latest = max(self.latest, updated)
            if status in TERMINAL_STATUSES:
                self.final[run_id] = (status, updated)
        pending = self.ids - set(self.final)
        if pending and (len(pending) <= 25 or time.monotonic() - self._last_direct >= 10):
            self._last_direct = time.monotonic()
            for run_id, (status, updated) in _stored(self.runtime, pending).items():
                self.latest = max(self.latest, updated)
                if status in TERMINAL_STATUSES:
                    self.final[run_id] = (status, updated)
            pending = self.ids - set(self.final)
        return pending

    def stale_listing(self) -> list[str]:
        """One line per finished run the listing still shows unfinished (or not at all)."""
        listing = _listing(self.runtime, self.ids)
        lines = []
        for run_id, (status, updated) in sorted(self.final.items()):
            shown = listing.get(run_id)
            if shown is None or shown[0] is not status:
                lines.append(
                    f"run listing (contexts.page) shows run {run_id} as "
                    f"{shown[0].value if shown else 'absent'}, the stored run is "
                    f"{status.value} since {time.strftime('%H:%M:%S', time.gmtime(updated))}Z")
        return lines


def _events(opts: SoakOptions, t0: float, load: float) -> Iterator[tuple[float, str]]:
    """The load phase's schedule: ``(monotonic time, "submit" | "kill" | "pause")``."""
    events = [(t0 + i * load / opts.orders, "submit") for i in range(opts.orders)]
    events += [(t0 + (j + 1) * opts.kill_every, "kill") for j in range(opts.kills)]
    if opts.pause != "none" and opts.pause_every > 0:
        k = 1
        while k * opts.pause_every < load:
            events.append((t0 + k * opts.pause_every, "pause"))
            k += 1
    return iter(sorted(events, key=lambda e: (e[0], e[1] != "submit")))


def run_soak(opts: SoakOptions, out: TextIO = sys.stdout) -> SoakReport:
    """Runs one soak (see the module docstring) and returns its report; prints progress.

    Args:
        opts: what to do.
        out: where progress and violations are printed.

    Returns:
        The report (``violations`` empty and ``quiescence`` set when all is well).

    Raises:
        ValueError: impossible options (e.g. ``sigstop`` without a server pid, too many orders).
        OSError: the restart command failed, or the backend did not answer after it.
        ReactorError: the backend cannot be configured.
    """
    started = time.monotonic()

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    token = f"soak{uuid.uuid4().hex[:8]}" if opts.prefix is None else opts.prefix
    storage, router = namespaced(opts.storage, token), namespaced(opts.router, token)
    orders = load_orders(limit=opts.orders)
    if len(orders) < opts.orders:
        raise ValueError(f"the dataset has only {len(orders)} orders")
    mechanism = opts.pause if opts.pause != "auto" else default_pause(storage, opts.server_pid)
    run_dir = opts.run_dir or Path(tempfile.mkdtemp(prefix="reactor-soak."))
    run_dir.mkdir(parents=True, exist_ok=True)
    pauser = _Pauser(mechanism, storage, opts.server_pid, opts.restart_command,
                     log=run_dir / "restarts.log")
    journal = Journal(run_dir / "journal.sqlite")
    report = SoakReport(runs=len(orders), run_dir=run_dir,
                        restarts=0 if mechanism == "restart" else None)
    # the card token is a redact=True input, sealed at rest (docs/security.md): the soak's
    # processes share the operator's keys, or one made for this soak
    secret_keys = os.environ.get(SECRET_KEYS_ENV) or generate_key()
    settings: dict[str, Any] = dict(opts.settings)
    runtime = config.configure(storage=storage, router=router, **settings,
                               secret_keys=secret_keys)
    workers = _Workers(opts, storage, router, run_dir, secret_keys)
    rng = random.Random(opts.seed)
    load = opts.kills * opts.kill_every if opts.kills else len(orders) / opts.rate
    chaos = {"none": "", "restart": f" every {opts.pause_every:g}s ({opts.restart_command})"}
    say(f"soak: {len(orders)} orders over {load:.0f}s, {opts.workers} workers x "
        f"{opts.threads} threads, {opts.kills} kills every {opts.kill_every:g}s, pause "
        f"{mechanism}" + chaos.get(mechanism, f" {opts.pause_seconds:g}s every "
                                              f"{opts.pause_every:g}s")
        + f"; prefix {token}; dir {run_dir}")
    handles: dict[str, tuple[Order, str]] = {}
    last_submit = 0.0
    try:
        for _ in range(opts.workers):
            workers.start()
        t0 = time.monotonic()
        submitted = 0
        for at, what in _events(opts, t0, load):
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if what == "submit":
                order = orders[submitted]
                handle = FulfilInWorkers.run(order=order, card_token=order.card_token())
                assert isinstance(handle, DispatchHandle)
                handles[handle.run_id] = (order, handle.run_id)
                submitted += 1
                if submitted == len(orders):
                    last_submit = runtime.storage.now()
            elif what == "kill":
                victim = workers.kill(rng, journal)
                report.kills += 1
                say(f"  [{time.monotonic() - t0:6.1f}s] kill -9 {victim} ({submitted} submitted)")
            elif mechanism == "restart":
                took = pauser.restart()
                report.pauses += 1
                report.restarts = (report.restarts or 0) + 1
                report.restart_seconds.append(took)
                failed = _reconnect(runtime)
                say(f"  [{time.monotonic() - t0:6.1f}s] restarted the backend server in "
                    f"{took:.1f}s ({submitted} submitted; {failed} pings of the soak's own "
                    f"pools failed before they answered)")
            else:
                pauser.pause(opts.pause_seconds)
                report.pauses += 1
                say(f"  [{time.monotonic() - t0:6.1f}s] paused the backend "
                    f"{opts.pause_seconds:g}s ({mechanism})")
            for line in workers.reap():
                say(f"  worker exited by itself: {line}")
        report.load_seconds = time.monotonic() - t0
        stall = "" if opts.stall is None else f", or {opts.stall:g}s without a run progressing"
        say(f"soak: load done in {report.load_seconds:.1f}s; waiting for every run "
            f"(timeout {opts.timeout:g}s{stall})")

        # -- quiescence ----------------------------------------------------------------------
        ids = set(handles)
        deadline = time.monotonic() + opts.timeout
        quiet = _Quiescence(runtime, ids)
        progress_at, left, latest = time.monotonic(), len(ids), 0.0
        while True:
            pending = quiet.pending()
            now = time.monotonic()
            if len(pending) < left or quiet.latest > latest:  # a run finished or moved on
                progress_at, left, latest = now, len(pending), quiet.latest
            if not pending or now > deadline or (
                    opts.stall is not None and now - progress_at > opts.stall):
                break
            for line in workers.reap():
                say(f"  worker exited by itself: {line}")
            time.sleep(0.5)
        if not pending:
            finished = max(updated for _, updated in quiet.final.values())
            report.quiescence = max(finished - last_submit, 0.0)
        say("soak: " + ("every run is terminal" if not pending else
                        f"TIMEOUT: {len(pending)} runs not terminal")
            + "; stopping the workers")
        stuck = _describe_stuck(runtime, sorted(pending), workers)
        if stuck:
            states = Counter(line.split(" not terminal: ", 1)[1].split(", last trace")[0]
                             for line in stuck)
            say("soak: not terminal, by state: " + "; ".join(
                f"{n} x {state}" for state, n in states.most_common()))
        report.violations.extend(workers.stop())
        report.violations.extend(f"worker {line} (not killed by the soak)"
                                 for line in workers.exited)
        report.violations.extend(stuck)
        report.violations.extend(quiet.stale_listing())

        # -- invariants ----------------------------------------------------------------------
        report.violations.extend(_check(report, runtime, journal, handles, workers))
        report.dead_letters = _dead_letters(runtime, say)
    except BaseException:
        workers.kill_all()
        raise
    finally:
        pauser.close()
        journal.close()
        config.reset()
    report.total_seconds = time.monotonic() - started
    return report


def _reconnect(runtime: Runtime, timeout: float = 30.0) -> int:
    """After a server restart, ping the soak's own storage and router until each answers
    three times in a row (every pooled connection died with the server; a pool discards a
    dead one when a statement finds it, docs/adapters/postgres.md, "Limits"), so the next
    submission does not meet one. Returns the failed pings.

    Raises:
        OSError: a backend still fails after ``timeout`` seconds.
    """
    failures = 0
    deadline = time.monotonic() + timeout
    for backend in (runtime.storage, runtime.router):
        ping = getattr(backend, "ping", None)
        if ping is None:
            continue
        streak = 0
        while streak < 3:
            try:
                ping()
                streak += 1
            except Exception as exc:
                failures += 1
                streak = 0
                if time.monotonic() > deadline:
                    raise OSError(f"the backend does not answer after its restart: {exc}"
                                  ) from exc
                time.sleep(0.1)
    return failures


def _describe_stuck(runtime: Runtime, pending: list[str], workers: _Workers) -> list[str]:
    """One violation line per run left non-terminal, with what the logs say about it."""
    lines = []
    for run_id in pending:
        try:
            view = FulfilInWorkers.find(run_id, runtime=runtime)
            last = view.trace[-1] if view.trace else None
            where = (f"status {view.status.value}, current step {view.current_step}, last trace "
                     f"{last.type if last else '-'} {last.step if last else ''}")
            record = runtime.storage.step_results.get(run_id, "capture")
            if record is not None:
                where += f", capture record {record.status}"
        except Exception as exc:  # the report must not die on one unreadable run
            where = f"status unknown (unreadable: {exc})"
        logs = workers.grep(run_id, limit=3)
        lines.append(f"run {run_id} not terminal: {where}"
                     + "".join(f"\n      {line}" for line in logs))
    return lines


def _check(report: SoakReport, runtime: Runtime, journal: Journal,
           handles: Mapping[str, tuple[Order, str]], workers: _Workers) -> list[str]:
    """The invariants (see the module docstring); fills the report's counts."""
    problems: list[str] = []
    pairs = list(handles.values())
    outcomes = [_outcome(order, run_id, runtime) for order, run_id in pairs]
    counts = Counter(o.status for o in outcomes)
    report.completed, report.failed = counts["completed"], counts["failed"]
    report.failures = Counter(f"{o.reason} at {o.step}: {o.message[:80]}" for o in outcomes
                              if o.status == "failed")
    ops = journal.ops()
    report.calls = len(ops)
    episodes, killed = journal.episodes(), journal.kills()
    repeats, extra, report.reruns = unexplained_repeats(ops, episodes, killed)
    report.interrupted = len({op.worker for op in ops
                              if op.episode is not None and op.episode not in episodes
                              and op.worker in killed})
    problems.extend(repeats)
    services, divergences = journal.replay()
    problems.extend(divergences)
    problems.extend(f"worker log: {line}" for line in workers.grep("event=journal_divergence"))
    terminal = [(order, out) for (order, _), out in zip(pairs, outcomes, strict=True)
                if out.status != "halted"]
    problems.extend(check_invariants(
        [o for o, _ in terminal], [out for _, out in terminal], services,
        reactor_cls=FulfilInWorkers, extra_attempts=extra,
    ))
    return problems


def _dead_letters(runtime: Runtime, say: Callable[[str], None]) -> int:
    reader = getattr(runtime.router, "dead_letters", None)
    if reader is None:
        return 0
    try:
        dead = list(reader(limit=1000))
    except Exception as exc:
        say(f"soak: cannot read dead letters: {exc}")
        return 0
    if dead:
        reasons = Counter(d.reason.split(":", 1)[0][:80] for d in dead)
        say(f"soak: {len(dead)} dead-lettered jobs (informational): {dict(reasons)}")
    return len(dead)


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> SoakOptions:
    """Parses the command line (``--help`` lists the options).

    Raises:
        SystemExit: 2 on bad arguments (argparse), 0 after ``--help``.
    """
    p = argparse.ArgumentParser(
        prog="scripts/soak",
        description="Chaos soak of the order-fulfilment worker saga: kill -9 workers and pause "
                    "the backend under load, then check every invariant (docs/workers.md, Soak).")
    p.add_argument("--storage", default=os.environ.get("REACTOR_STORAGE_URL"),
                   help="storage URL (default $REACTOR_STORAGE_URL); not memory://")
    p.add_argument("--router", default=os.environ.get("REACTOR_ROUTER_URL"),
                   help="router URL (default $REACTOR_ROUTER_URL, else the storage URL)")
    p.add_argument("--smoke", action="store_true",
                   help="under a minute: 100 orders, 2 workers, 5 kills, 3 pauses (other "
                        "options still override)")
    p.add_argument("--orders", type=int, help="orders to submit (default 300, max 1200)")
    p.add_argument("--workers", type=int, help="worker processes (default 3)")
    p.add_argument("--threads", type=int, help="handler threads per worker (default 2)")
    p.add_argument("--kills", type=int, help="SIGKILLs during the load (default 30)")
    p.add_argument("--kill-every", type=float, help="seconds between kills (default 2)")
    p.add_argument("--rate", type=float, help="orders per second when --kills 0 (default 10)")
    p.add_argument("--pause", choices=PAUSE_MECHANISMS, default="auto",
                   help="how to pause the backend (default auto: client-pause on redis://, "
                        "sigstop with --server-pid, else none; restart runs "
                        "--restart-command)")
    p.add_argument("--pause-every", type=float,
                   help="seconds between pauses or restarts (default 20)")
    p.add_argument("--pause-seconds", type=float, help="length of a pause (default 1)")
    p.add_argument("--server-pid", type=int, help="backend server pid, for --pause sigstop")
    p.add_argument("--restart-command", metavar="CMD",
                   help="for --pause restart: a shell command that restarts the backend server "
                        "and returns once it accepts connections again")
    p.add_argument("--call-delay", type=float,
                   help="seconds each service call lingers after its side effect, before the "
                        "step returns (default 0.05; widens the kill window)")
    p.add_argument("--timeout", type=float, help="seconds to wait for quiescence (default 300)")
    p.add_argument("--stall", type=float,
                   help="give up waiting sooner once no run was stored again (finished or "
                        "moved on) for this many seconds (default: wait the whole --timeout)")
    p.add_argument("--run-dir", type=Path, help="journal and worker logs (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the run dir after a clean run")
    p.add_argument("--seed", type=int, default=1, help="seed of the kill victim choice")
    p.add_argument("--prefix", help="key prefix added to both URLs (default: soak<random>)")
    p.add_argument("-s", "--setting", action="append", default=[], metavar="KEY=VALUE",
                   help="an engine setting for workers and submitter (repeatable)")
    args = p.parse_args(argv)
    if not args.storage:
        p.error("--storage URL (or REACTOR_STORAGE_URL) is required")
    router = args.router or args.storage
    if urlsplit(args.storage).scheme in ("memory", "") or urlsplit(router).scheme in (
            "local", "inline", ""):
        p.error("the soak needs a storage and router several processes share (not memory://, "
                "local:// or inline://)")
    base: dict[str, Any] = dict(SMOKE) if args.smoke else {}
    values: dict[str, Any] = {}
    for name in ("orders", "workers", "threads", "kills", "kill_every", "rate", "pause_every",
                 "pause_seconds", "call_delay", "timeout"):
        given = getattr(args, name)
        if given is not None:
            values[name] = given
        elif name in base:
            values[name] = type(getattr(SoakOptions, name, base[name]))(base[name])
    settings = dict(SOAK_SETTINGS)
    for pair in args.setting:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            p.error(f"bad --setting {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    opts = SoakOptions(storage=args.storage, router=router, pause=args.pause,
                       server_pid=args.server_pid, restart_command=args.restart_command,
                       run_dir=args.run_dir, keep=args.keep, stall=args.stall,
                       seed=args.seed, prefix=args.prefix, settings=settings, **values)
    if not 1 <= opts.orders <= 1200:
        p.error("--orders must be between 1 and 1200 (the dataset)")
    if opts.workers < 1 or opts.threads < 1 or opts.kills < 0 or opts.kill_every <= 0:
        p.error("--workers and --threads must be >= 1, --kills >= 0, --kill-every > 0")
    if opts.rate <= 0 or opts.timeout <= 0 or opts.pause_seconds <= 0 or (
            opts.pause_every < 0 or opts.call_delay < 0) or (
            opts.stall is not None and opts.stall <= 0):
        p.error("--rate, --timeout, --stall and --pause-seconds must be > 0, --pause-every and "
                "--call-delay >= 0")
    if opts.pause == "sigstop" and not opts.server_pid:
        p.error("--pause sigstop needs --server-pid PID")
    if opts.pause == "restart" and not (opts.restart_command or "").strip():
        p.error("--pause restart needs --restart-command CMD (a command that restarts the "
                "server and returns once it accepts connections)")
    if opts.restart_command is not None and opts.pause != "restart":
        p.error("--restart-command is only used with --pause restart")
    if opts.pause == "restart" and opts.pause_every <= 0:
        p.error("--pause restart needs --pause-every > 0")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the soak from the command line.

    Returns:
        0 when every invariant holds and every run finished, 1 otherwise, 2 on bad arguments
        or a failing restart command.
    """
    try:
        opts = parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        report = run_soak(opts)
    except (ValueError, OSError) as exc:
        print(f"soak: error: {exc}", file=sys.stderr)
        return 2
    if report.violations:
        # every violation of an invariant, then at most 40 of the runs left unfinished
        stuck = [v for v in report.violations if " not terminal: " in v]
        shown = [v for v in report.violations if " not terminal: " not in v] + stuck[:40]
        print(f"soak: {len(report.violations)} VIOLATIONS:")
        for line in shown:
            print(f"  - {line}")
        if len(shown) < len(report.violations):
            print(f"  ... and {len(report.violations) - len(shown)} more unfinished runs")
    print(f"soak: {report.calls} service calls, {report.interrupted} kills hit a job after a "
          f"side effect, {report.reruns} calls re-run by unclean executions (allowed), "
          f"{report.pauses} pauses, load {report.load_seconds:.1f}s, total "
          f"{report.total_seconds:.1f}s")
    if report.failures:
        print("soak: failed runs by reason: " + "; ".join(
            f"{n} x {why}" for why, n in report.failures.most_common(8)))
    if report.restart_seconds:
        took = sorted(report.restart_seconds)
        print(f"soak: {len(took)} server restarts, {took[0]:.1f}-{took[-1]:.1f}s each")
    print(report.summary())
    ok = not report.violations and report.quiescence is not None
    if report.run_dir is not None:
        if ok and not opts.keep and opts.run_dir is None:
            shutil.rmtree(report.run_dir, ignore_errors=True)
        else:
            print(f"soak: run dir kept: {report.run_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
