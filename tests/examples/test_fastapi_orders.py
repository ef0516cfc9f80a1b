"""Behaviour of the FastAPI orders example (examples/fastapi_orders/): ``POST /orders`` runs
the saga with ``await Order.arun`` (docs/concepts.md, "Async steps"), ``POST /orders-threaded``
with ``Order.run`` in a thread, ``GET /orders/{run_id}`` reads the stored run.

Requests go through ``httpx.AsyncClient`` over ``ASGITransport``: the app runs on the test's
own event loop (one ``asyncio.run`` per test). Waits are proven with events and barriers, never
with timing: a bound (``_BOUND`` seconds) only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI

from examples.fastapi_orders.app import (
    DEFAULT_STOCK,
    FRAUD_MAX_QUANTITY,
    Services,
    create_app,
)
from reactor import Reactor, Success, config, step

_T = TypeVar("_T")

#: Seconds after which a wait that should already be over fails the test (never a pacing).
_BOUND = 30.0

ENDPOINTS = ("/orders", "/orders-threaded")


@dataclass
class ProbeServices(Services):
    """The example's services with no I/O delay, recording every simulated call and the loop
    it ran on; ``gates[operation]`` is awaited before that call proceeds."""

    io_seconds: float = 0.0
    calls: list[str] = field(default_factory=list)
    loops: list[asyncio.AbstractEventLoop] = field(default_factory=list)
    gates: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)

    async def io(self, operation: str) -> None:
        self.calls.append(operation)
        self.loops.append(asyncio.get_running_loop())
        gate = self.gates.get(operation)
        if gate is not None:
            await gate()
        await super().io(operation)


class NotAnOrder(Reactor, name="tests.examples.fastapi_orders.not_an_order"):
    """Another reactor: its runs are not orders."""

    @step()
    def noop(inputs: Any, ctx: Any) -> int:
        return 1


@pytest.fixture
def services() -> ProbeServices:
    return ProbeServices()


@pytest.fixture
def app(services: ProbeServices) -> Iterator[FastAPI]:
    """The example app on a fresh ``memory://`` runtime (``create_app`` configures reactor)."""
    yield create_app("memory://", services=services)
    config.reset()


def _drive(app: FastAPI, scenario: Callable[[httpx.AsyncClient], Awaitable[_T]]) -> _T:
    """Runs ``scenario`` with a client of ``app`` on a fresh event loop; closes both."""

    async def main() -> _T:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orders.test") as client:
            return await scenario(client)

    return asyncio.run(main())


def _post(app: FastAPI, path: str, body: dict[str, Any]) -> httpx.Response:
    async def scenario(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post(path, json=body)

    return _drive(app, scenario)


def _get(app: FastAPI, path: str) -> httpx.Response:
    async def scenario(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(path)

    return _drive(app, scenario)


def _trace(app: FastAPI, run_id: str) -> list[tuple[str, str | None]]:
    response = _get(app, f"/orders/{run_id}")
    assert response.status_code == 200, response.text
    return [(entry["type"], entry["step"]) for entry in response.json()["trace"]]


# ------------------------------------------------------------------------------- success


@pytest.mark.parametrize("path", ENDPOINTS)
def test_an_order_completes_every_step_and_is_stored(
    app: FastAPI, services: ProbeServices, path: str
) -> None:
    response = _post(app, path, {"sku": "WIDGET", "quantity": 3, "amount": "29.97"})

    assert response.status_code == 201, response.text
    body = response.json()
    run_id = body["run_id"]
    assert body["status"] == "completed"
    order = body["order"]
    assert order["order_id"] == run_id
    assert (order["sku"], order["quantity"], Decimal(order["amount"])) == (
        "WIDGET", 3, Decimal("29.97"))
    # every step called its service; confirm made the order final
    assert sorted(services.calls) == ["authorise", "confirm", "reserve", "screen"]
    assert services.inventory.available("WIDGET") == DEFAULT_STOCK["WIDGET"] - 3
    assert services.inventory.holds_for(run_id) == {order["hold_id"]: "committed"}
    assert services.payments.authorisations_for(run_id) == {
        order["authorisation_id"]: "captured"}
    assert services.fraud.clearances_for(run_id) == {order["screening_id"]: "cleared"}

    stored = _get(app, f"/orders/{run_id}")
    assert stored.status_code == 200
    view = stored.json()
    assert (view["run_id"], view["status"], view["error"]) == (run_id, "completed", None)
    ran = [entry["step"] for entry in view["trace"] if entry["type"] == "run"]
    assert sorted(ran[:3]) == ["authorise", "fraud_check", "reserve"]
    assert ran[3:] == ["confirm"]


def test_arun_runs_the_async_bodies_on_the_callers_loop_and_run_on_reactors(
    app: FastAPI, services: ProbeServices
) -> None:
    """docs/concepts.md, "Async steps": under ``arun`` the bodies run on the awaiting loop;
    under the blocking ``run`` (the threaded endpoint) on reactor's own loop."""
    body = {"sku": "WIDGET", "quantity": 1, "amount": "9.99"}

    async def scenario(client: httpx.AsyncClient) -> asyncio.AbstractEventLoop:
        assert (await client.post("/orders", json=body)).status_code == 201
        return asyncio.get_running_loop()

    test_loop = _drive(app, scenario)
    assert len(services.loops) == 4 and set(services.loops) == {test_loop}

    services.loops.clear()

    async def threaded(client: httpx.AsyncClient) -> asyncio.AbstractEventLoop:
        assert (await client.post("/orders-threaded", json=body)).status_code == 201
        return asyncio.get_running_loop()

    caller = _drive(app, threaded)
    assert len(services.loops) == 4 and caller not in set(services.loops)


def test_the_three_independent_steps_run_at_the_same_time(
    app: FastAPI, services: ProbeServices
) -> None:
    """``max_concurrency = 3`` (docs/concepts.md, "Concurrency"): reserve, authorise and
    fraud_check each wait at a barrier of three, which only breaks when all three run at once
    (one step at a time would time out at the barrier and fail the order)."""
    barrier: asyncio.Barrier | None = None

    async def meet() -> None:
        assert barrier is not None
        await asyncio.wait_for(barrier.wait(), _BOUND)

    services.gates.update(reserve=meet, authorise=meet, screen=meet)

    async def scenario(client: httpx.AsyncClient) -> httpx.Response:
        nonlocal barrier
        barrier = asyncio.Barrier(3)
        return await client.post("/orders", json={"sku": "GADGET", "quantity": 2,
                                                  "amount": "40"})

    response = _drive(app, scenario)
    assert response.status_code == 201, response.text
    assert services.calls[-1] == "confirm"


# ------------------------------------------------------------------------------- failures


FAILING_ORDERS = [
    pytest.param({"sku": "GIZMO", "quantity": 6, "amount": "60"}, "reserve",
                 "out of stock: GIZMO has 5 units free, 6 requested", id="out-of-stock"),
    pytest.param({"sku": "NOPE", "quantity": 1, "amount": "10"}, "reserve",
                 "unknown SKU 'NOPE'", id="unknown-sku"),
    pytest.param({"sku": "WIDGET", "quantity": 2, "amount": "6000"}, "authorise",
                 "payment declined: 6000 is above the limit of 5000", id="declined"),
    pytest.param({"sku": "WIDGET", "quantity": FRAUD_MAX_QUANTITY + 1, "amount": "100"},
                 "fraud_check",
                 f"fraud suspected: {FRAUD_MAX_QUANTITY + 1} units of WIDGET in one order "
                 f"(at most {FRAUD_MAX_QUANTITY})", id="fraud"),
]

#: The two other branches of each failing step: they finish and are undone.
_SIBLINGS = {
    "reserve": {"authorise", "fraud_check"},
    "authorise": {"reserve", "fraud_check"},
    "fraud_check": {"reserve", "authorise"},
}


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize(("body", "failed_step", "message"), FAILING_ORDERS)
def test_a_failing_order_is_rolled_back_and_answers_409(
    app: FastAPI, services: ProbeServices, path: str, body: dict[str, Any],
    failed_step: str, message: str,
) -> None:
    response = _post(app, path, body)

    assert response.status_code == 409, response.text
    answer = response.json()
    run_id = answer["run_id"]
    assert answer == {"run_id": run_id, "status": "failed", "step": failed_step,
                      "error": message, "validation_errors": {}}
    # the failed step was compensated, its finished siblings undone; confirm never ran
    trace = _trace(app, run_id)
    assert ("failed", failed_step) in trace
    assert ("compensate", failed_step) in trace
    assert {s for kind, s in trace if kind == "undo"} == _SIBLINGS[failed_step]
    assert all(s != "confirm" for _, s in trace)
    assert "confirm" not in services.calls
    # nothing is left held, authorised or cleared, and the stock is whole again
    assert set(services.inventory.holds_for(run_id).values()) <= {"released"}
    assert set(services.payments.authorisations_for(run_id).values()) <= {"voided"}
    assert set(services.fraud.clearances_for(run_id).values()) <= {"withdrawn"}
    for sku, units in DEFAULT_STOCK.items():
        assert services.inventory.available(sku) == units
    stored = _get(app, f"/orders/{run_id}").json()
    assert (stored["status"], stored["error"], stored["undo_stack"]) == ("failed", message, [])


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize(("body", "field_name"), [
    pytest.param({"sku": "WIDGET", "quantity": 1, "amount": "0"}, "amount", id="zero-amount"),
    pytest.param({"sku": "WIDGET", "quantity": 1, "amount": "-5"}, "amount",
                 id="negative-amount"),
    pytest.param({"sku": "WIDGET", "quantity": 0, "amount": "5"}, "quantity", id="no-units"),
    pytest.param({"sku": "", "quantity": 1, "amount": "5"}, "sku", id="blank-sku"),
])
def test_inputs_the_saga_refuses_answer_422_and_run_no_step(
    app: FastAPI, services: ProbeServices, path: str, body: dict[str, Any], field_name: str
) -> None:
    response = _post(app, path, body)

    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["status"] == "failed" and answer["step"] is None
    assert list(answer["validation_errors"]) == [field_name]
    assert field_name in answer["error"]
    assert services.calls == []
    assert _trace(app, answer["run_id"]) == []


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("body", [
    pytest.param({"sku": "WIDGET", "quantity": 1}, id="missing-amount"),
    pytest.param({"sku": "WIDGET", "quantity": "many", "amount": "5"}, id="quantity-not-int"),
    pytest.param({"sku": "WIDGET", "quantity": 1, "amount": "lots"}, id="amount-not-decimal"),
    pytest.param({"sku": "WIDGET", "quantity": 1, "amount": "5", "coupon": "X"},
                 id="unknown-field"),
    pytest.param(["WIDGET", 1, "5"], id="not-an-object"),
])
def test_a_malformed_body_answers_422_without_starting_a_saga(
    app: FastAPI, services: ProbeServices, path: str, body: Any
) -> None:
    response = _post(app, path, body)

    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert all(error["loc"][0] == "body" for error in detail)
    assert services.calls == []


def test_an_unknown_run_id_answers_404(app: FastAPI) -> None:
    response = _get(app, "/orders/no-such-run")

    assert response.status_code == 404
    assert "no-such-run" in response.json()["detail"]


def test_another_reactors_run_is_not_an_order(app: FastAPI) -> None:
    other = NotAnOrder.run()
    assert isinstance(other, Success) and other.run_id is not None

    response = _get(app, f"/orders/{other.run_id}")

    assert response.status_code == 404
    assert other.run_id in response.json()["detail"]


# ------------------------------------------------------------------------------- the loop


def test_the_event_loop_serves_other_requests_while_a_saga_is_in_flight(
    app: FastAPI, services: ProbeServices
) -> None:
    """While ``reserve`` waits (on the server's loop) for an event the test sets, the same
    loop answers another request (read off the loop through the pool) and runs a trivial
    coroutine; only then is the saga released, and it completes."""
    entered = asyncio.Event()
    release = asyncio.Event()

    async def hold_reserve() -> None:
        entered.set()
        await release.wait()

    services.gates["reserve"] = hold_reserve

    async def scenario(client: httpx.AsyncClient) -> None:
        order = asyncio.create_task(
            client.post("/orders", json={"sku": "WIDGET", "quantity": 1, "amount": "5"})
        )
        await asyncio.wait_for(entered.wait(), _BOUND)

        async def trivial() -> str:
            await asyncio.sleep(0)
            return "done"

        assert await asyncio.wait_for(trivial(), _BOUND) == "done"
        unknown = await asyncio.wait_for(client.get("/orders/not-yet"), _BOUND)
        assert unknown.status_code == 404
        assert not order.done()  # the saga is still held at reserve

        release.set()
        response = await asyncio.wait_for(order, _BOUND)
        assert response.status_code == 201, response.text
        run_id = response.json()["run_id"]
        stored = await client.get(f"/orders/{run_id}")
        assert stored.json()["status"] == "completed"

    _drive(app, scenario)
    assert services.calls[-1] == "confirm"
