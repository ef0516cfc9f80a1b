"""Fixtures of the dashboard tests (docs/dashboard.md): real dashboards served on background
threads of the test process (``reactor.dashboard.start_dashboard``, on a free loopback port),
an HTTP client, and the backends the API is tested on (memory and Redis).

The dashboards are built with ``runtime=None``, so they follow whatever runtime the test
configured (``reactor.config.current()``): one pair of servers serves every test.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from reactor import config
from reactor.config import Runtime
from reactor.dashboard import DashboardServer, start_dashboard
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.secrets import ENV_VAR, generate_key
from tests.backends import backend_urls
from tests.dashboard.reactors import HOLDING, controls

#: The action token of the test dashboard.
TOKEN = "dashboard-test-token"
#: The API backends (docs/dashboard.md: "every backend"; these two are tested end to end).
API_BACKENDS = ("memory", "redis")


class Api:
    """A small HTTP client for one dashboard."""

    def __init__(self, server: DashboardServer) -> None:
        self.server = server
        self.client = httpx.Client(base_url=server.url, timeout=60.0, follow_redirects=False)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.client.get(path, params=params or None)

    def json(self, path: str, expect: int = 200, **params: Any) -> Any:
        response = self.get(path, **params)
        assert response.status_code == expect, (response.status_code, response.text)
        return response.json()

    def post(self, path: str, body: Any = None, *, token: str | None = TOKEN,
             headers: dict[str, str] | None = None) -> httpx.Response:
        sent = dict(headers or {})
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        return self.client.post(path, json=body, headers=sent)

    def close(self) -> None:
        self.client.close()


@pytest.fixture(scope="session")
def dashboards() -> Iterator[dict[str, DashboardServer]]:
    """Two dashboards on the current runtime: one with actions (token), one read-only."""
    acting = start_dashboard(None, token=TOKEN)
    reading = start_dashboard(None)
    yield {"acting": acting, "reading": reading}
    acting.stop()
    reading.stop()


@pytest.fixture
def api(dashboards: dict[str, DashboardServer]) -> Iterator[Api]:
    """A client of the dashboard that has actions enabled."""
    client = Api(dashboards["acting"])
    yield client
    client.close()


@pytest.fixture
def read_only_api(dashboards: dict[str, DashboardServer]) -> Iterator[Api]:
    """A client of the read-only dashboard."""
    client = Api(dashboards["reading"])
    yield client
    client.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret key, so redact=True inputs are sealed at rest on every backend."""
    key = generate_key()
    monkeypatch.setenv(ENV_VAR, key)
    return key


def _reset_switches() -> None:
    controls.update(ship_fails=False, card_declined=False)
    HOLDING.reset()


def configure_backend(name: str, service_url: Callable[[str], str]) -> Runtime:
    """A fresh runtime on ``name`` (jobs wait in the router until a test runs a worker);
    contention parks are due at once so a test drives them with ``Worker.run_pending``."""
    settings = {"lock_snooze_base_delay": 0.0, "lock_snooze_jitter": 0.0}
    if name == "memory":
        return config.configure(storage=MemoryStorage(), router=LocalRouter(), **settings)
    storage, router = backend_urls(name, service_url, f"dash{uuid.uuid4().hex[:10]}",
                                   area="dashboard")
    return config.configure(storage=storage, router=router, **settings)


@pytest.fixture(params=API_BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], keys: str
) -> Iterator[Runtime]:
    """The runtime of one API backend, configured as the process runtime."""
    _reset_switches()
    runtime = configure_backend(request.param, service_url)
    yield runtime
    HOLDING.release.set()
    config.reset()


@pytest.fixture
def memory(keys: str) -> Iterator[Runtime]:
    """The embedded memory backend only."""
    _reset_switches()
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(),
                               lock_snooze_base_delay=0.0, lock_snooze_jitter=0.0)
    yield runtime
    HOLDING.release.set()
    config.reset()
