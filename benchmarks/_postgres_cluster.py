"""A private, throw-away PostgreSQL cluster for a benchmark (never the system instance).

:func:`private_cluster` runs ``initdb`` and ``pg_ctl`` from the newest
``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package) in a temporary directory, as
the ``postgres`` user through ``runuser -u postgres --`` when this process is root (initdb and
postgres refuse to run as root), the way scripts/test starts its cluster: a free loopback port,
trust authentication, superuser ``reactor``. Unlike scripts/test's cluster it keeps the
durability settings a production server has (``fsync=on``, ``synchronous_commit=on``,
``full_page_writes=on``) unless told otherwise, and preloads the extra libraries asked for
(``pg_stat_statements``). The cluster is stopped (``pg_ctl stop -m fast``) and its directory
removed when the ``with`` block exits, however it exits; a caller that wants SIGTERM to count
turns it into ``SystemExit`` (benchmarks/celery_compare.py ``_terminated_on_sigterm``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cluster", "ClusterError", "pg_bin", "private_cluster"]

#: The superuser initdb creates (trust authentication on 127.0.0.1).
USER = "reactor"


class ClusterError(RuntimeError):
    """The cluster could not be created or started (the message carries its log's tail)."""


@dataclass(frozen=True)
class Cluster:
    """A running private cluster."""

    port: int
    version: str
    settings: dict[str, str]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"


def pg_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``pg_ctl``."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parent.name.split(".")],
    )
    if not found:
        raise ClusterError(
            "no /usr/lib/postgresql/*/bin/pg_ctl: install Debian's postgresql package "
            "(apt-get install postgresql) or pass --url"
        )
    return found[-1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(command: Sequence[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


@contextmanager
def private_cluster(settings: dict[str, str]) -> Iterator[Cluster]:
    """Create and start a cluster with ``settings`` (``-c name=value``), stop it on exit.

    Raises:
        ClusterError: initdb or pg_ctl failed (the message has the log's tail).
    """
    binaries = pg_bin()
    directory = Path(tempfile.mkdtemp(prefix="reactor-pg-bench-"))
    data, log = directory / "data", directory / "postgres.log"
    started = False
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, user="postgres")
        init_log = directory / "initdb.log"
        with init_log.open("wb") as out:
            init = subprocess.run(
                _as_postgres([str(binaries / "initdb"), "-D", str(data), "-U", USER,
                              "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False,
            )  # fmt: skip
        if init.returncode:
            raise ClusterError(f"initdb failed:\n{_tail(init_log)}")
        port = _free_port()
        options = [f"-p {port}", "-c listen_addresses=127.0.0.1", f"-k {directory}"]
        options += [f"-c {name}={value}" for name, value in settings.items()]
        start = subprocess.run(
            _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
                          "-t", "60", "-o", " ".join(options), "start"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        started = True  # pg_ctl may have started it even when it reports a failure
        if start.returncode:
            raise ClusterError(f"postgres did not start on port {port}:\n{_tail(log)}")
        yield Cluster(port, binaries.parent.name, dict(settings))
    finally:
        if started:
            subprocess.run(
                _as_postgres([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                              "-t", "30", "stop"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                check=False,
            )  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)
