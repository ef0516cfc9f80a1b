"""Property test of the JSON API against its own OpenAPI schema (docs/dashboard.md, "API"):
for every operation of ``/api/openapi.json``, schemathesis's Hypothesis strategies generate
requests — valid ones and malformed ones — that are sent to a running dashboard, and no answer
may be a server error or carry a traceback. The store holds a few real runs (completed, failed,
paused), so generated ids, cursors and filters meet data too.

The cases are drawn with Hypothesis directly (``APIOperation.as_strategy``) rather than through
schemathesis's pytest plugin, which does not support this pytest version.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor.config import Runtime
from reactor.dashboard import DashboardServer, create_app
from tests.dashboard.conftest import TOKEN
from tests.dashboard.reactors import Review, Shop, controls

SCHEMA = schemathesis.openapi.from_dict(create_app().openapi())
OPERATIONS = {f"{op.method.upper()} {op.path}": op
              for op in (found.ok() for found in SCHEMA.get_all_operations())}


@pytest.fixture
def stocked(memory: Runtime) -> Runtime:
    """A store with a completed, a failed and a paused run."""
    Shop.run(order_id="o-1", items=["a", "bad-1"], card_token="secret-token-value")
    controls["ship_fails"] = True
    Shop.run(order_id="o-2", items=["a"], card_token="secret-token-value")
    controls["ship_fails"] = False
    Review.run(order_id="r-1")
    return memory


def test_every_endpoint_is_fuzzed() -> None:
    assert len(OPERATIONS) == 20


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_no_generated_request_is_a_server_error(
    name: str, stocked: Runtime, dashboards: dict[str, DashboardServer]
) -> None:
    base_url = dashboards["acting"].url
    operation = OPERATIONS[name]

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data: Any) -> None:
        case = data.draw(operation.as_strategy())
        response = case.call(base_url=base_url, timeout=60,
                             headers={"authorization": f"Bearer {TOKEN}"})
        assert response.status_code < 500, (case.method, case.formatted_path, response.text)
        assert "Traceback" not in response.text
        if response.status_code >= 400:
            assert {"error", "message"} <= set(response.json())

    check()
