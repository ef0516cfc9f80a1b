"""The backends the every-backend engine tests run on (docs/testing.md).

One place builds the storage and router URLs of a backend in a fresh namespace, so every
such test runs on the same servers that ``scripts/test`` starts: the standalone Redis, the
MongoDB wire server, mongomock, DynamoDB + SQS on moto's server and the private PostgreSQL
cluster (schema ``reactor_tests``; memory needs no URL).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from reactor import config
from reactor.config import Runtime
from reactor.memory import LocalRouter, MemoryStorage
from reactor.testing import TestClock

__all__ = ["BACKENDS", "backend_urls", "configure_on", "work_until"]

#: Every backend an engine guarantee is tested on.
BACKENDS = ("memory", "redis", "mongomock", "mongodb", "dynamodb", "postgres")


def backend_urls(
    name: str, service_url: Callable[[str], str], token: str, *, area: str = "tests"
) -> tuple[str, str]:
    """``(storage URL, router URL)`` of backend ``name`` in namespace ``token``.

    Args:
        name: one of :data:`BACKENDS` but ``"memory"``.
        service_url: the ``service_url`` fixture (tests/conftest.py).
        token: the namespace (a URL ``prefix``), fresh per test.
        area: names the mongomock database, the DynamoDB table and the SQS queue.

    Raises:
        ValueError: ``name`` is ``"memory"`` or unknown.
    """
    if name == "redis":
        url = f"{service_url('redis')}?prefix={token}"
        return url, url
    if name == "mongomock":
        url = f"mongomock://{area}/reactor?prefix={token}_"
        return url, url
    if name == "mongodb":
        url = f"{service_url('mongodb_wire')}&prefix={token}_"
        return url, url
    if name == "dynamodb":
        moto = service_url("moto")
        return (
            f"dynamodb://reactor-{area}?region=us-east-1&endpoint_url={moto}&prefix={token}"
            "&clock_skew_budget=0.25",
            f"sqs://{area}?region=us-east-1&endpoint_url={moto}&prefix={token}",
        )
    if name == "postgres":
        url = f"{service_url('postgres')}?schema=reactor_tests&prefix={token}"
        return url, url
    raise ValueError(f"no URLs for backend {name!r}")


def configure_on(
    name: str, service_url: Callable[[str], str], clock: TestClock, *, area: str,
    **settings: Any,
) -> Runtime:
    """Configure the runtime on backend ``name`` (a fresh namespace; ``memory``: in-process,
    its storage and router on ``clock``), with ``clock`` as the runtime clock. The caller
    resets the configuration (``config.reset()``) when done.

    Args:
        name: one of :data:`BACKENDS`.
        service_url: the ``service_url`` fixture (tests/conftest.py).
        clock: the runtime's test clock.
        area: names the mongomock database, the DynamoDB table and the SQS queue.
        settings: more settings for ``config.configure`` (e.g. ``secret_keys``).
    """
    if name == "memory":
        return config.configure(
            storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock), clock=clock,
            **settings,
        )
    storage_url, router_url = backend_urls(
        name, service_url, f"{area[:2]}{uuid.uuid4().hex[:10]}", area=area
    )
    return config.configure(storage=storage_url, router=router_url, clock=clock, **settings)


def work_until(runtime: Runtime, done: Callable[[], bool], seconds: float = 60.0) -> None:
    """Run the jobs due on ``runtime``'s router in this thread (a ``Worker``'s
    ``run_pending``) until ``done()`` holds; fails the test after ``seconds`` of real time (a
    remote router's delays are real time, so this polls it every 0.05 s).

    Args:
        runtime: the runtime whose router and storage the jobs use.
        done: the probe that says the awaited state was reached.
        seconds: the most real time to wait.
    """
    from reactor.jobs.worker import Worker

    worker = Worker(runtime, liveness_wait=0.0)
    limit = time.monotonic() + seconds
    while not done():
        worker.run_pending()
        assert time.monotonic() < limit, "the awaited state never came"
        time.sleep(0.05)
