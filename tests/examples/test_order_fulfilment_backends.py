"""``./scripts/demo --workers N`` honours ``REACTOR_STORAGE_URL`` and ``REACTOR_ROUTER_URL``
(scripts/demo's header): the runs land in the storage the variables name, and the jobs go
through the router they name."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from examples.order_fulfilment.run import load_orders, main, run_demo
from examples.order_fulfilment.saga_workers import FulfilInWorkers
from examples.order_fulfilment.services import Services
from reactor import config
from reactor.model.secrets import ENV_VAR, generate_key
from tests.backends import backend_urls

LIMIT = 12


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A runtime configured by the demo, and a secret key: a storage outside this process
    refuses the card token in clear (docs/security.md, "Secure by default")."""
    monkeypatch.setenv(ENV_VAR, generate_key())
    config.reset()
    yield
    config.reset()


def _stored_statuses(storage_url: str, run_ids: list[str]) -> dict[str, str]:
    """The status of each run as a separate storage client on ``storage_url`` reads it."""
    storage = config.storage_from_url(storage_url)
    try:
        found = {}
        for run_id in run_ids:
            record = storage.contexts.load(run_id)
            assert record is not None, f"run {run_id} is not in {storage_url}"
            assert record.reactor == FulfilInWorkers.definition.name
            found[run_id] = record.status
        return found
    finally:
        storage.close()


def test_workers_store_their_runs_in_the_storage_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage_url = f"sqlite:///{tmp_path / 'demo.db'}"
    monkeypatch.setenv(config.STORAGE_URL_ENV, storage_url)
    monkeypatch.setenv(config.ROUTER_URL_ENV, "local://")
    out = io.StringIO()
    code = main(["--limit", str(LIMIT), "--workers", "2"], console=Console(file=out, width=160))
    text = out.getvalue()
    assert code == 0, text
    assert "SQLiteStorage / LocalRouter" in text and "Invariants hold" in text
    page = config.current().storage.contexts.scan(limit=LIMIT + 10)
    views = [FulfilInWorkers.find(summary.context_id) for summary in page]
    assert len(views) == LIMIT
    stored = _stored_statuses(storage_url, [v.run_id for v in views])
    assert stored == {v.run_id: v.status.value for v in views}
    assert set(stored.values()) <= {"completed", "failed"}


def test_workers_use_the_router_and_storage_of_a_redis_url(
    service_url: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    storage_url, router_url = backend_urls("redis", service_url, f"demo{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv(config.STORAGE_URL_ENV, storage_url)
    monkeypatch.setenv(config.ROUTER_URL_ENV, router_url)
    orders = load_orders(limit=LIMIT)
    report = run_demo(orders, Services.create(), workers=2)
    assert report.violations == []
    runtime = config.current()
    assert (type(runtime.storage).__name__, type(runtime.router).__name__) == (
        "RedisStorage", "RedisRouter")
    run_ids = [o.run_id for o in report.outcomes if o.run_id is not None]
    assert len(run_ids) == LIMIT
    stored = _stored_statuses(storage_url, run_ids)
    assert stored == {o.run_id: o.status for o in report.outcomes}

