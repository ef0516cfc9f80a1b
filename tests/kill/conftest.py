"""Fixtures of the kill tests: real ``reactor worker`` processes against each adapter.

Backends come from ``scripts/test`` through the ``service_url`` fixture (a missing service
FAILS the test, it is never skipped). Every test uses its own key prefix / queue names.

Leases are generous (:data:`LEASE`, per backend): a live worker's liveness lease must never lapse
between two renewals, even on a loaded 2-core machine where the Python test servers (SecantusDB,
moto) answer a renewal seconds late. A lapse there is real behaviour (another worker may take the
run over), but it is not the scenario under test and it breaks the exactly-once counts. A killed
worker's lease still lapses: the tests wait for the recovery on an explicit condition, bounded by
:func:`recovery_bound` (docs/coordination.md, "Renewal and loss").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactor import config
from reactor.config import Runtime

ROOT = Path(__file__).resolve().parents[2]


def with_query(url: str, **options: str) -> str:
    """``url`` with extra query options appended."""
    extra = "&".join(f"{k}={v}" for k, v in options.items())
    return url + ("&" if "?" in url else "?") + extra


#: ``context_lock_ttl`` of every process of a kill test, in seconds, per backend: 3 renewals
#: per lease, so a renewal may come ``2/3`` of the lease late before the lease lapses. Redis
#: answers in microseconds, but the workers' heartbeat threads share the CPU (and their GIL)
#: with busy handler threads; SecantusDB and moto are single Python processes that serialise
#: their requests, and under a load of 8-17 on 2 cores a renewal there was seen to come more
#: than 4 s late.
LEASE: dict[str, float] = {"redis": 10.0, "mongodb": 15.0, "dynamodb": 15.0, "postgres": 10.0}


@dataclass(frozen=True)
class Backend:
    """One adapter under test: its storage and router URLs (with a per-test prefix)."""

    name: str
    storage: str
    router: str

    @property
    def lease(self) -> float:
        """The liveness lease (``context_lock_ttl``) its processes use, in seconds."""
        return LEASE[self.name]


def kill_settings(backend: Backend, settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with the backend's generous lease as ``context_lock_ttl`` (:data:`LEASE`).

    Args:
        backend: the adapter under test.
        settings: the test's other settings (without ``context_lock_ttl``).

    Returns:
        A new dict: the caller's ``config.configure`` keywords and the workers' ``--setting``s.
    """
    return {**settings, "context_lock_ttl": backend.lease}


def recovery_bound(backend: Backend) -> float:
    """Seconds a test waits for a recovery that starts when a killed worker's lease lapses.

    Only bounds a failing test: the lease lapses (``backend.lease``), a sweep finds the unit and
    re-dispatches it, and a worker finishes the run, each of them slowed down by the load.

    Args:
        backend: the adapter under test.
    """
    return 4 * backend.lease + 120.0


#: The backends of the kill scenarios that run on Redis alone by default and on every backend
#: in the long mode (``REACTOR_TEST_LONG=1``; docs/testing.md, "Running reactor's own suite"):
#: each takes minutes on the Python test servers at load.
LONG_BACKENDS: tuple[str, ...] = (
    ("redis", "mongodb", "dynamodb", "postgres") if os.environ.get("REACTOR_TEST_LONG") == "1"
    else ("redis",)
)


@pytest.fixture
def caller(backend: Backend, request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """This process's runtime (it submits, cancels and reads runs), on ``backend`` with the
    test module's ``SETTINGS`` and the backend's generous lease (:func:`kill_settings`)."""
    settings: Mapping[str, object] = getattr(request.module, "SETTINGS", {})
    runtime = config.configure(storage=backend.storage, router=backend.router,
                               **kill_settings(backend, settings))
    try:
        yield runtime
    finally:
        config.reset()


@pytest.fixture(params=["redis", "mongodb", "dynamodb", "postgres"])
def backend(request: pytest.FixtureRequest, service_url: Callable[[str], str]) -> Backend:
    """The storage and router URLs of one real adapter, namespaced for this test."""
    token = f"kill{uuid.uuid4().hex[:10]}"
    name = request.param
    if name == "postgres":  # a schema of its own: storage and router tables side by side
        url = f"{service_url('postgres')}?schema={token}"
        return Backend(name, url, url)
    if name == "redis":
        url = with_query(service_url("redis"), prefix=token)
        return Backend(name, url, url)
    if name == "mongodb":
        url = with_query(service_url("mongodb_wire"), prefix=f"{token}_")
        return Backend(name, url, url)
    moto = service_url("moto")
    return Backend(
        name,
        f"dynamodb://reactor-kill?region=us-east-1&endpoint_url={moto}&prefix={token}",
        f"sqs://reactor-kill?region=us-east-1&endpoint_url={moto}&prefix={token}",
    )


class WorkerProcesses:
    """Starts ``python -m reactor.cli worker`` processes and always reaps them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, backend: Backend, *extra: str, settings: dict[str, object]) -> (
        subprocess.Popen[bytes]
    ):
        args = [
            sys.executable, "-m", "reactor.cli", "worker",
            "--import", "tests.kill.reactors",
            "--storage", backend.storage, "--router", backend.router,
            *[a for k, v in settings.items() for a in ("--setting", f"{k}={v}")],
            *extra,
        ]
        env = {k: v for k, v in os.environ.items()
               if k not in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL")}
        log = open(self.log_dir / f"worker-{len(self.procs) + 1}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        """The output of one worker started by this pool (so far)."""
        path = self.log_dir / f"worker-{self.procs.index(proc) + 1}.log"
        return path.read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.log_dir.glob("worker-*.log"))
        )

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerProcesses]:
    """A factory of worker processes, killed at teardown if still running."""
    pool = WorkerProcesses(tmp_path)
    try:
        yield pool
    finally:
        pool.close()


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               on_timeout: Callable[[], str] = lambda: "") -> None:
    """Poll ``predicate`` every 20 ms until it holds; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{on_timeout()}")
        time.sleep(0.02)


def wait_while_progressing(
    predicate: Callable[[], bool], progress: Callable[[], object], stall: float, cap: float,
    what: str, on_timeout: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``predicate`` every 20 ms until it holds; fail the test when ``progress()`` (any
    value that changes while the scenario advances: lines logged, outcomes stored) stayed the
    same for ``stall`` seconds, or after ``cap`` seconds in all. A slow machine that keeps
    advancing (a map rolled back at one element every 10 s at load 17) is waited for; a
    stuck scenario still fails after ``stall``.

    Args:
        predicate: the condition waited for.
        progress: the scenario's progress marker.
        stall: seconds without progress that fail the test.
        cap: seconds in all that fail the test.
        what: the condition, for the failure message.
        on_timeout: extra text for the failure message (the workers' logs).
    """
    started = time.monotonic()
    seen, since = progress(), started
    while not predicate():
        now = time.monotonic()
        current = progress()
        if current != seen:
            seen, since = current, now
        if now - since > stall or now - started > cap:
            pytest.fail(
                f"waited {now - started:.0f}s for {what}, the last {now - since:.0f}s without "
                f"progress\n{on_timeout()}"
            )
        time.sleep(0.02)


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (``SIGSTOP``: state ``T`` in
    ``/proc/<pid>/stat``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def marked_pid(log: Path, prefix: str) -> int | None:
    """The pid of the first ``<prefix><pid>`` line of an ``O_APPEND`` step log, if any."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    return next((int(line[len(prefix):]) for line in lines if line.startswith(prefix)), None)
