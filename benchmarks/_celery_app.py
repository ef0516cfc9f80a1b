"""The Celery side of benchmarks/celery_compare.py: one app and its trivial tasks.

Imported twice: by the benchmark (as ``_celery_app``, benchmarks/ being its script directory)
to send tasks, and by the worker subprocess it starts (``celery -A benchmarks._celery_app
worker ...``, run from the repository root). Tasks are named explicitly (``bench.*``) so both
imports register the same names.

The broker and the result backend are the same Redis database, read from the environment
variable ``REACTOR_BENCH_CELERY_URL`` (default ``redis://127.0.0.1:6379/13``); the benchmark
sets it for the worker and configures its own copy of the app with :func:`configure`. With
``REACTOR_BENCH_CELERY_ACKS_LATE=1`` tasks are acknowledged after they ran (reactor's worker
acks a job after running it, docs/workers.md) instead of Celery's default, before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from celery import Celery  # type: ignore[import-untyped]

__all__ = ["ACKS_LATE_ENV", "URL_ENV", "a", "add", "app", "b", "c", "configure", "total"]

#: The environment variable naming the broker and result backend.
URL_ENV = "REACTOR_BENCH_CELERY_URL"
#: ``1``: ``task_acks_late``.
ACKS_LATE_ENV = "REACTOR_BENCH_CELERY_ACKS_LATE"

app = Celery("reactor_bench")


def configure(url: str, acks_late: bool = False) -> None:
    """Point the app at ``url`` (broker and result backend both)."""
    app.conf.update(
        broker_url=url,
        result_backend=url,
        broker_connection_retry_on_startup=True,
        task_acks_late=acks_late,
        # plain JSON both ways, as reactor's payloads; no extra per-task metadata stored
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )


configure(
    os.environ.get(URL_ENV, "redis://127.0.0.1:6379/13"),
    os.environ.get(ACKS_LATE_ENV, "") == "1",
)


def _task(name: str) -> Callable[[Callable[..., int]], Any]:
    """``app.task(name=name)``, typed: the decorated function becomes a Celery task."""
    decorate: Callable[[Callable[..., int]], Any] = app.task(name=name)
    return decorate


@_task("bench.add")
def add(i: int) -> int:
    """A chord header task: one trivial step."""
    return i + 1


@_task("bench.total")
def total(results: list[int]) -> int:
    """The chord callback: how many header results came back."""
    return len(results)


@_task("bench.a")
def a(start: int) -> int:
    """The first task of the 3-task chain (reactor's saga: three steps adding one)."""
    return start + 1


@_task("bench.b")
def b(x: int) -> int:
    """The second task of the chain."""
    return x + 1


@_task("bench.c")
def c(x: int) -> int:
    """The third task of the chain."""
    return x + 1
