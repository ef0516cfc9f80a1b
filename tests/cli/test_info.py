"""``reactor info``: the storage and router in use (credentials hidden), queue depth, delayed
jobs, dead letters, sweep index sizes and live workers, ``unknown`` where an adapter cannot
tell cheaply (docs/workers.md, "Running workers")."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner

from reactor import cli, config
from reactor.cli._common import display_url
from reactor.ports import Job
from reactor.ports.inspection import QueueInspector, SweepIndexInspector

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    yield
    config.reset()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://user:pw@host:6379/0", "redis://user:***@host:6379/0"),
        ("rediss://:pw@host/0?prefix=a", "rediss://:***@host/0?prefix=a"),
        ("redis://token@host/0", "redis://***@host/0"),
        ("mongodb://u:p%40ss@h1,h2/db?authSource=admin", "mongodb://u:***@h1,h2/db?authSource=admin"),
        ("sqs://q?region=eu-west-1&aws_secret_access_key=s3cr3t",
         "sqs://q?region=eu-west-1&aws_secret_access_key=***"),
        ("memory://", "memory://"),
        ("local://?workers=0", "local://?workers=0"),
    ],
)
def test_display_url_hides_credentials(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_info_on_memory_prints_every_figure_or_unknown() -> None:
    out = runner.invoke(cli.app, ["info", "--storage", "memory://", "--router", "local://"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == [
        f"reactor: {cli.package_version()}",
        "storage: memory:// (MemoryStorage)",
        "router: local:// (LocalRouter)",
        "queue: ready=0 delayed=0 in_flight=0",
        "dead letters: 0",
        "sweep indexes: unknown",
        "live workers: unknown",
    ]


def test_info_reports_a_failing_backend_on_stderr_with_exit_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactor.errors import RouterError
    from reactor.memory import LocalRouter

    def down(self: LocalRouter) -> object:
        raise RouterError("queue down\nsecond line")

    monkeypatch.setattr(LocalRouter, "queue_stats", down)
    out = runner.invoke(cli.app, ["info", "--storage", "memory://"])
    assert out.exit_code == 1, out.output
    assert out.stdout == ""
    assert out.stderr.strip() == "error: RouterError: queue down second line"


@pytest.mark.redis
def test_info_on_redis_counts_the_queue_and_the_indexes(
    service_url: Callable[[str], str],
) -> None:
    url = f"{service_url('redis')}?prefix=info-{uuid.uuid4().hex[:10]}"
    router = config.router_from_url(url)
    storage = config.storage_from_url(url)
    assert isinstance(router, QueueInspector)
    assert isinstance(storage, SweepIndexInspector)
    try:
        for n in range(3):
            router.enqueue(Job(kind="sweep", payload={"n": n}))
        router.enqueue(Job(kind="sweep", payload={"n": "later"}), delay_seconds=3600)
        [first] = router.receive(1)
        router.dead_letter(first, "for the test")
        [_leased] = router.receive(1)  # stays in flight; this router is a live consumer
        out = runner.invoke(cli.app, ["info", "--storage", url, "--router", url])
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        assert lines[1] == f"storage: {url} (RedisStorage)"
        assert lines[2] == f"router: {url} (RedisRouter)"
        assert lines[3:] == [
            "queue: ready=1 delayed=1 in_flight=1",
            "dead letters: 1",
            "sweep indexes: runs=0 steps=0 maps=0 map_rollbacks=0",
            "live workers: 1",
        ]
    finally:
        router.close()
        storage.close()


@pytest.mark.dynamodb
def test_info_on_sqs_reports_the_approximate_queue_counts(
    service_url: Callable[[str], str],
) -> None:
    url = (f"sqs://info-{uuid.uuid4().hex[:10]}?region=us-east-1"
           f"&endpoint_url={service_url('moto')}")
    router = config.router_from_url(url)
    assert isinstance(router, QueueInspector)
    try:
        for n in range(2):
            router.enqueue(Job(kind="sweep", payload={"n": n}))
        router.enqueue(Job(kind="sweep", payload={"n": "later"}), delay_seconds=600)
        [first] = router.receive(1)
        router.dead_letter(first, "for the test")
        out = runner.invoke(cli.app, ["info", "--storage", "memory://", "--router", url])
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        assert lines[3:] == [
            "queue: ready=1 delayed=1 in_flight=0",
            "dead letters: 1",
            "sweep indexes: unknown",
            "live workers: unknown",
        ]
    finally:
        router.close()
