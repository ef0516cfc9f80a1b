"""``reactor ping``: a reachable backend answers ``ok``; an unreachable one fails fast with
exit 1 and one stderr line naming it (docs/workers.md, "Running workers")."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner

from reactor import cli, config

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    yield
    config.reset()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts TCP connections (the kernel's backlog) and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()  # the abandoned ping thread's connection is reset and it ends


def test_memory_backends_answer() -> None:
    out = runner.invoke(cli.app, ["ping", "--storage", "memory://", "--router", "local://"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].startswith("storage memory://: ok (")
    assert lines[1].startswith("router local://: ok (")
    assert out.stderr == ""


def test_a_refused_port_fails_with_one_line_naming_the_backend() -> None:
    url = f"redis://user:hunter2@127.0.0.1:{_closed_port()}/0"
    out = runner.invoke(cli.app, ["ping", "--storage", url, "--timeout", "30"])
    assert out.exit_code == 1, out.output
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: storage redis://user:***@127.0.0.1:")
    assert "unreachable: StorageError:" in lines[0]
    assert "hunter2" not in out.output


def test_a_backend_that_never_answers_fails_at_the_timeout(silent_server: int) -> None:
    url = f"redis://127.0.0.1:{silent_server}/0"
    out = runner.invoke(cli.app, ["ping", "--storage", url, "--timeout", "0.2"])
    assert out.exit_code == 1, out.output
    assert out.stderr.strip() == (
        f"error: storage redis://127.0.0.1:{silent_server}/0 unreachable: "
        "no answer within 0.2 s"
    )


def test_the_router_is_pinged_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    out = runner.invoke(cli.app, ["ping", "--storage", "memory://", "--router", url])
    assert out.exit_code == 1, out.output
    assert out.stdout.startswith("storage memory://: ok")
    assert out.stderr.startswith(f"error: router {url} unreachable: RouterError:")
    monkeypatch.setenv("REACTOR_ROUTER_URL", url)
    out = runner.invoke(cli.app, ["ping", "--storage", "memory://"])
    assert out.exit_code == 1 and f"router {url} unreachable" in out.stderr
    # the flag wins over the environment
    out = runner.invoke(cli.app, ["ping", "--storage", "memory://", "--router", "local://"])
    assert out.exit_code == 0, out.output


def test_a_bad_url_is_a_configuration_error() -> None:
    out = runner.invoke(cli.app, ["ping", "--storage", "nosuch://x"])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith("error: bad storage URL nosuch://x: no reactor.storages adapter")


@pytest.mark.redis
def test_a_live_redis_answers(service_url: Callable[[str], str]) -> None:
    url = service_url("redis")
    out = runner.invoke(cli.app, ["ping", "--storage", url, "--router", url])
    assert out.exit_code == 0, out.output
    assert f"storage {url}: ok" in out.stdout and f"router {url}: ok" in out.stdout
