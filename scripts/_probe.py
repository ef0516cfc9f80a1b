"""Helpers for scripts/test: pick free loopback ports and wait for services to answer.

Usage (run with the project's venv python):

    python scripts/_probe.py free-ports N
        Prints N distinct TCP ports, free on 127.0.0.1 right now, separated by spaces.
        All N sockets are held open together while picking, so the ports are distinct.

    python scripts/_probe.py wait-http URL TIMEOUT [PID]
    python scripts/_probe.py wait-mongo URL TIMEOUT [PID]
        Polls every 0.1 s until the service answers (HTTP 200 / MongoDB ``ping``) and exits 0;
        exits 1 after TIMEOUT seconds, or as soon as process PID (the server) has exited.

This file is a development tool, not part of the ``reactor`` package.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import urllib.request
from collections.abc import Callable


def free_ports(count: int) -> list[int]:
    """Returns ``count`` distinct ports that are free on 127.0.0.1 (bound to port 0)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) still answers kill(0); /proc tells the truth.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _wait(check: Callable[[], bool], what: str, timeout: float, pid: int | None) -> int:
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if not _alive(pid):
            print(f"probe: {what}: server process {pid} exited", file=sys.stderr)
            return 1
        try:
            if check():
                return 0
        except Exception as exc:  # any failure means "not ready yet"
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    print(f"probe: {what} not ready after {timeout:g}s ({last_error})", file=sys.stderr)
    return 1


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def _mongo_ok(url: str) -> bool:
    import pymongo

    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
        url, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000
    )
    try:
        return client.admin.command("ping").get("ok") == 1
    finally:
        client.close()


def main(argv: list[str]) -> int:
    """Entry point; see the module docstring for the commands."""
    if len(argv) == 2 and argv[0] == "free-ports":
        print(" ".join(str(p) for p in free_ports(int(argv[1]))))
        return 0
    if len(argv) in (3, 4) and argv[0] in ("wait-http", "wait-mongo"):
        url, timeout = argv[1], float(argv[2])
        pid = int(argv[3]) if len(argv) == 4 else None
        check = _http_ok if argv[0] == "wait-http" else _mongo_ok
        return _wait(lambda: check(url), url, timeout, pid)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
