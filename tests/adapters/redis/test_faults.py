"""Fault tests of the Redis adapter: a stopped server raises, a restarted one is used again.

Each test starts its own throwaway ``redis-server`` on a free loopback port (never 6379), so
stopping it cannot disturb anything else.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reactor.errors import RouterError, StorageError
from reactor.model.records import ContextRecord
from reactor.ports.router import Job

pytestmark = pytest.mark.redis

reactor_redis = pytest.importorskip("reactor_redis")

SOCKET_TIMEOUT = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    """One throwaway redis-server process on ``port``."""

    def __init__(self, port: int, directory: Path) -> None:
        self.port = port
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            assert time.monotonic() < deadline, "redis-server did not start"
            assert self.process.poll() is None, "redis-server exited"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = Server(_free_port(), tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _record(context_id: str) -> ContextRecord:
    return ContextRecord(
        context_id=context_id,
        reactor="Orders",
        status="running",
        document='{"x":1}',
        created_at=1.0,
        updated_at=2.0,
    )


def test_a_stopped_server_raises_storage_error_then_the_client_recovers(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}/0?socket_timeout={SOCKET_TIMEOUT}&prefix=faults"
    storage = reactor_redis.storage_from_url(url, context_ttl=3600)
    try:
        storage.contexts.save(_record("c1"))
        assert storage.locks.acquire("k", "me", 30)
        server.stop()
        started = time.monotonic()
        with pytest.raises(StorageError) as caught:
            storage.contexts.load("c1")
        assert caught.value.__cause__ is not None
        with pytest.raises(StorageError):
            storage.locks.acquire("k", "me", 30)
        with pytest.raises(StorageError):
            storage.now()
        # Every failure came back within the socket timeout (x2 for the one retry), not a hang.
        assert time.monotonic() - started < 3 * (2 * SOCKET_TIMEOUT + 1)
        server.start()
        # Same storage object: redis-py reconnects (the data is gone: --save '').
        assert storage.contexts.load("c1") is None
        storage.contexts.save(_record("c2"))
        assert storage.contexts.load("c2") == _record("c2")
        assert storage.locks.acquire("k", "me", 30)
    finally:
        storage.close()


def test_a_stopped_server_raises_router_error_then_the_router_recovers(server: Server) -> None:
    url = f"redis://127.0.0.1:{server.port}/0?socket_timeout={SOCKET_TIMEOUT}&prefix=faults"
    router = reactor_redis.router_from_url(url, visibility_timeout=5)
    try:
        router.enqueue(Job(kind="run", payload={"n": 1}))
        server.stop()
        with pytest.raises(RouterError):
            router.enqueue(Job(kind="run", payload={"n": 2}))
        with pytest.raises(RouterError):
            router.receive(max_jobs=1, wait_seconds=0)
        server.start()
        job = Job(kind="run", payload={"n": 3})
        router.enqueue(job)
        got = router.receive(max_jobs=1, wait_seconds=1)
        assert [d.job for d in got] == [job]
        router.ack(got[0])
    finally:
        router.close()


def test_closing_a_cluster_storage_leaks_no_socket(
    recwarn: pytest.WarningsRecorder, service_url: Callable[[str], str]
) -> None:
    """redis-py drops the cluster's discovery client unclosed; ours closes its seed."""
    import gc

    from reactor.config import storage_from_url

    url = service_url("redis_cluster")
    for _ in range(5):
        storage = storage_from_url(url)
        assert storage.signals is not None
        storage.signals.publish("leak-check", "x")
        storage.close()
        del storage
        gc.collect()
    leaks = [w for w in recwarn.list if issubclass(w.category, ResourceWarning)]
    assert leaks == []
