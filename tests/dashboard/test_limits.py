"""Body and connection limits (docs/dashboard.md, "Security"): a large body is refused before
it is read — and before authentication, an anonymous one — so the dashboard process does not
grow by it (its peak RSS is measured in a subprocess server); connections that never finish a
request head are closed; request heads and connections are bounded."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from reactor.dashboard import DashboardServer, create_app
from reactor.dashboard.server import ConnectionLimits
from tests.dashboard.conftest import TOKEN

MIB = 1024 * 1024
#: The peak RSS growth tolerated while refusing a body of 128 MiB or more, in MiB.
MAX_GROWTH_MIB = 24

_SERVER = f"""
import resource, sys
from reactor import config
from reactor.dashboard import start_dashboard
from reactor.memory import LocalRouter, MemoryStorage
config.configure(storage=MemoryStorage(), router=LocalRouter())
server = start_dashboard(None, token={TOKEN!r})
print(server.url, flush=True)
for _ in sys.stdin:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""


@dataclass
class Served:
    """A dashboard in a subprocess; :meth:`peak_mib` asks it for its peak RSS."""

    process: subprocess.Popen[str]
    host: str
    port: int

    def peak_mib(self) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("rss\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline()) / 1024  # ru_maxrss is in KiB on Linux


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        try:
            yield Served(process, "127.0.0.1", int(url.rsplit(":", 1)[1]))
        finally:
            process.kill()
            process.wait(30)


def _status(sock: socket.socket) -> int | None:
    """The status of the answer on ``sock`` (``None``: the server reset the connection)."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        return None
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None


def _post_streamed(served: Served, total: int, headers: str = "") -> tuple[int | None, int]:
    """POST a chunked body of ``total`` bytes to a resume action, stopping as soon as the
    server answers; returns the status (``None``: reset) and the bytes sent."""
    sock = socket.create_connection((served.host, served.port), timeout=60)
    chunk = b"x" * MIB
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    with sock:
        sock.sendall((f"POST /api/runs/r-1/resume HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                      f"{headers}\r\n").encode())
        try:
            while sent < total and not select.select([sock], [], [], 0)[0]:
                sock.sendall(frame)
                sent += len(chunk)
            if sent >= total:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        return _status(sock), sent


def test_a_body_announced_too_large_is_refused_unread(served: Served) -> None:
    before = served.peak_mib()
    sock = socket.create_connection((served.host, served.port), timeout=60)
    with sock:
        sock.sendall(b"POST /api/runs/r-1/resume HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {256 * MIB}\r\n\r\n".encode() + b"{" * MIB)
        assert _status(sock) == 413
    assert served.peak_mib() - before < MAX_GROWTH_MIB


def test_an_anonymous_streamed_body_is_refused_before_it_is_read(served: Served) -> None:
    before = served.peak_mib()
    status, _sent = _post_streamed(served, 128 * MIB)
    assert status in (401, None)
    grown = served.peak_mib() - before
    assert grown < MAX_GROWTH_MIB, f"the process grew by {grown:.0f} MiB"
    answer = httpx.post(f"http://{served.host}:{served.port}/api/runs/r-1/resume",
                        content=b"{}", headers={"content-type": "application/json"})
    assert answer.status_code == 401 and answer.json()["error"] == "unauthorized"


def test_a_streamed_body_is_cut_off_at_the_limit(served: Served) -> None:
    before = served.peak_mib()
    status, sent = _post_streamed(served, 128 * MIB, f"Authorization: Bearer {TOKEN}\r\n")
    assert status in (413, None)
    assert sent < 128 * MIB
    grown = served.peak_mib() - before
    assert grown < MAX_GROWTH_MIB, f"the process grew by {grown:.0f} MiB"


# ---- connections -------------------------------------------------------------------------------


@pytest.fixture
def limited() -> Iterator[DashboardServer]:
    limits = ConnectionLimits(header_timeout=0.5, keep_alive_timeout=1, max_connections=4,
                              max_header_bytes=4096)
    with DashboardServer(create_app(None), "127.0.0.1", 0, limits=limits).start() as server:
        yield server


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (whatever it answered first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], deadline - time.monotonic())
        if ready:
            try:
                if not sock.recv(65536):
                    return True
            except ConnectionResetError:
                return True
    return False


def test_half_open_connections_are_closed(limited: DashboardServer) -> None:
    silent = socket.create_connection(("127.0.0.1", limited.port), timeout=30)
    partial = socket.create_connection(("127.0.0.1", limited.port), timeout=30)
    with silent, partial:
        partial.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _closed_within(silent, 20)
        assert _closed_within(partial, 20)


def test_a_trickled_request_head_is_cut_off(limited: DashboardServer) -> None:
    head = b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 300
    sock = socket.create_connection(("127.0.0.1", limited.port), timeout=30)
    with sock:
        sent = 0
        while sent < len(head):  # one byte each 50 ms: the head would take 17 s
            try:
                sock.sendall(head[sent:sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            if select.select([sock], [], [], 0.05)[0]:
                break
        assert sent < len(head)
        assert _closed_within(sock, 20)


def test_idle_kept_alive_connections_close(limited: DashboardServer) -> None:
    sock = socket.create_connection(("127.0.0.1", limited.port), timeout=30)
    with sock:
        sock.sendall(b"GET /api/capabilities HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _status(sock) == 200
        assert _closed_within(sock, 20)


def test_heads_and_connections_are_bounded(limited: DashboardServer) -> None:
    sock = socket.create_connection(("127.0.0.1", limited.port), timeout=30)
    with sock:  # a head still growing past 4 KiB is refused without waiting for its end
        sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 8192)
        assert _status(sock) == 400
    held = [socket.create_connection(("127.0.0.1", limited.port), timeout=30)
            for _ in range(4)]
    try:
        answer = httpx.get(f"{limited.url}/api/capabilities")
        assert answer.status_code == 503
    finally:
        for sock in held:
            sock.close()


def test_limits_must_be_positive() -> None:
    from reactor.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="header_timeout"):
        ConnectionLimits(header_timeout=0)
    with pytest.raises(ConfigurationError, match="max_connections"):
        ConnectionLimits(max_connections=-1)
