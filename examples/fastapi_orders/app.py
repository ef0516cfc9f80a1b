"""An order endpoint that starts a saga of ``async def`` steps with ``await Order.arun(...)``.

The saga (:class:`Order`, ``max_concurrency = 3``: docs/concepts.md, "Concurrency")::

    reserve (ReserveStock) ─────┐
    authorise (AuthorisePayment) ├──> confirm (ConfirmOrder: capture + commit the stock)
    fraud_check (ScreenFraud) ──┘

The three independent steps run at the same time, so an order takes about two I/O waits
(theirs, overlapped, then ``confirm``'s) instead of four. Every step body is ``async def`` and
its I/O is simulated by :meth:`Services.io` (``await asyncio.sleep(io_seconds)``, 0.02 s by
default). Under ``await Order.arun(...)`` the bodies run on the server's event loop and the
engine's blocking work (storage, checkpoints) runs in reactor's thread pool, so the loop keeps
serving other requests while a saga is in flight (docs/concepts.md, "Async steps").

When a step fails, the branches in flight finish, the failed step is compensated and every
completed step is undone, newest first (docs/concepts.md, "Rollback"): an order that runs out
of stock voids the payment authorisation and withdraws the fraud clearance made next to it.

The endpoints (built by :func:`create_app`):

* ``POST /orders`` (:func:`place_order`): ``await Order.arun(...)``; 201 with the run id, 409
  when the saga failed and was rolled back, 422 for invalid inputs.
* ``POST /orders-threaded`` (:func:`place_order_threaded`): the same saga with the blocking
  ``Order.run(...)`` in a thread of the server's thread pool (``run_in_threadpool``); the same
  answers. The comparison baseline of ``benchmarks/fastapi_orders.py``.
* ``GET /orders/{run_id}`` (:func:`order_status`): the stored run (``await Order.afind``);
  404 for an unknown id.

The fake services (:class:`Inventory`, :class:`Payments`, :class:`FraudDesk`) live in this
process; steps reach them through :data:`SERVICES`.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from fastapi import APIRouter, FastAPI, HTTPException, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

import reactor
from reactor import (
    DispatchHandle,
    Failure,
    Input,
    Paused,
    Reactor,
    RunNotFoundError,
    RunStatus,
    Step,
    Success,
    result,
    step,
)
from reactor.runs import RunView

__all__ = [
    "CREDIT_LIMIT",
    "DEFAULT_IO_SECONDS",
    "DEFAULT_STOCK",
    "FRAUD_MAX_QUANTITY",
    "SERVICES",
    "AuthorisePayment",
    "ConfirmOrder",
    "ConfirmedOrder",
    "FraudDesk",
    "FraudSuspected",
    "Inventory",
    "Order",
    "OrderAccepted",
    "OrderRejected",
    "OrderRequest",
    "OrderStatus",
    "OutOfStock",
    "PaymentDeclined",
    "Payments",
    "ReserveStock",
    "ScreenFraud",
    "ServiceError",
    "ServiceRegistry",
    "Services",
    "TraceItem",
    "UnknownSku",
    "create_app",
    "order_status",
    "place_order",
    "place_order_threaded",
    "router",
]

#: Seconds each simulated service call waits (:meth:`Services.io`), unless a
#: :class:`Services` is built with another ``io_seconds``.
DEFAULT_IO_SECONDS: Final = 0.02

#: Free units per SKU of a fresh :class:`Inventory`.
DEFAULT_STOCK: Final[Mapping[str, int]] = {"WIDGET": 1_000, "GADGET": 50, "GIZMO": 5}

#: :class:`Payments` declines any authorisation above this amount.
CREDIT_LIMIT: Final = Decimal("5000")

#: :class:`FraudDesk` flags any order of more units than this.
FRAUD_MAX_QUANTITY: Final = 100


# --------------------------------------------------------------------------------------------
# the fake services
# --------------------------------------------------------------------------------------------


class ServiceError(Exception):
    """Base of the errors the fake services raise on purpose.

    Attributes:
        retryable: ``False``: retrying the same call cannot succeed, so reactor stops the
            step's retries at once (docs/concepts.md, "Retries").
    """

    retryable = False


class UnknownSku(ServiceError):
    """The SKU is not in the inventory."""


class OutOfStock(ServiceError):
    """Fewer free units of the SKU than the order asks for."""


class PaymentDeclined(ServiceError):
    """The payment provider declined the authorisation (amount above :data:`CREDIT_LIMIT`)."""


class FraudSuspected(ServiceError):
    """The fraud desk flagged the order (more than :data:`FRAUD_MAX_QUANTITY` units)."""


class _Ids:
    """Thread-safe sequential ids with a prefix (``"hold-1"``, ``"hold-2"``, ...)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            return f"{self._prefix}-{next(self._counter)}"


@dataclass
class _Hold:
    key: str
    sku: str
    quantity: int
    state: str = "held"  # held -> committed | released


class Inventory:
    """Free stock per SKU and the holds placed on it (thread-safe).

    A hold takes units out of the free stock (``held``); :meth:`commit` makes it final
    (``committed``); :meth:`release` gives the units back (``released``).

    Args:
        stock: free units per SKU (default :data:`DEFAULT_STOCK`); copied.
    """

    def __init__(self, stock: Mapping[str, int] | None = None) -> None:
        self._lock = threading.Lock()
        self._free = dict(DEFAULT_STOCK if stock is None else stock)
        self._holds: dict[str, _Hold] = {}
        self._ids = _Ids("hold")

    def available(self, sku: str) -> int:
        """Free units of ``sku`` (0 for an unknown SKU)."""
        with self._lock:
            return self._free.get(sku, 0)

    def hold_state(self, hold_id: str) -> str:
        """``"held"``, ``"committed"`` or ``"released"``.

        Raises:
            KeyError: no such hold.
        """
        with self._lock:
            return self._holds[hold_id].state

    def holds_for(self, key: str) -> dict[str, str]:
        """Hold id -> state of every hold placed under ``key`` (a run id)."""
        with self._lock:
            return {i: h.state for i, h in self._holds.items() if h.key == key}

    def reserve(self, key: str, sku: str, quantity: int) -> str:
        """Takes ``quantity`` free units of ``sku`` under the idempotency key ``key``.

        Returns:
            The hold id.

        Raises:
            UnknownSku: ``sku`` is not in the inventory.
            OutOfStock: fewer than ``quantity`` units are free.
        """
        with self._lock:
            if sku not in self._free:
                raise UnknownSku(f"unknown SKU {sku!r}")
            free = self._free[sku]
            if quantity > free:
                raise OutOfStock(
                    f"out of stock: {sku} has {free} units free, {quantity} requested"
                )
            self._free[sku] = free - quantity
            hold_id = self._ids.next()
            self._holds[hold_id] = _Hold(key, sku, quantity)
            return hold_id

    def commit(self, hold_id: str) -> None:
        """Makes a ``held`` hold final (``committed``); a no-op for any other state."""
        with self._lock:
            hold = self._holds[hold_id]
            if hold.state == "held":
                hold.state = "committed"

    def uncommit(self, hold_id: str) -> None:
        """Turns a ``committed`` hold back into a ``held`` one (idempotent)."""
        with self._lock:
            hold = self._holds[hold_id]
            if hold.state == "committed":
                hold.state = "held"

    def release(self, hold_id: str) -> bool:
        """Gives a ``held`` hold's units back (idempotent).

        Returns:
            ``True`` when units were given back by this call.
        """
        with self._lock:
            hold = self._holds.get(hold_id)
            if hold is None or hold.state != "held":
                return False
            hold.state = "released"
            self._free[hold.sku] += hold.quantity
            return True

    def release_key(self, key: str) -> int:
        """Releases every ``held`` hold placed under ``key``.

        Returns:
            How many holds were released.
        """
        with self._lock:
            ids = [i for i, h in self._holds.items() if h.key == key and h.state == "held"]
        return sum(self.release(hold_id) for hold_id in ids)


@dataclass
class _Authorisation:
    key: str
    amount: Decimal
    state: str = "authorised"  # authorised -> captured | voided


class Payments:
    """A payment provider's authorisations (thread-safe).

    An authorisation reserves an amount (``authorised``), :meth:`capture` takes it
    (``captured``), :meth:`void` cancels it (``voided``).

    Args:
        credit_limit: authorisations above this amount are declined (default
            :data:`CREDIT_LIMIT`).
    """

    def __init__(self, credit_limit: Decimal = CREDIT_LIMIT) -> None:
        self._lock = threading.Lock()
        self._limit = credit_limit
        self._auths: dict[str, _Authorisation] = {}
        self._ids = _Ids("auth")

    def state(self, authorisation_id: str) -> str:
        """``"authorised"``, ``"captured"`` or ``"voided"``.

        Raises:
            KeyError: no such authorisation.
        """
        with self._lock:
            return self._auths[authorisation_id].state

    def authorisations_for(self, key: str) -> dict[str, str]:
        """Authorisation id -> state of every authorisation made under ``key`` (a run id)."""
        with self._lock:
            return {i: a.state for i, a in self._auths.items() if a.key == key}

    def authorise(self, key: str, amount: Decimal) -> str:
        """Authorises ``amount`` under the idempotency key ``key``.

        Returns:
            The authorisation id.

        Raises:
            PaymentDeclined: ``amount`` is above the credit limit.
        """
        if amount > self._limit:
            raise PaymentDeclined(f"payment declined: {amount} is above the limit of {self._limit}")
        with self._lock:
            auth_id = self._ids.next()
            self._auths[auth_id] = _Authorisation(key, amount)
            return auth_id

    def capture(self, authorisation_id: str) -> None:
        """Takes an ``authorised`` amount (``captured``); a no-op for any other state."""
        with self._lock:
            auth = self._auths[authorisation_id]
            if auth.state == "authorised":
                auth.state = "captured"

    def refund(self, authorisation_id: str) -> None:
        """Gives a ``captured`` amount back, leaving it ``authorised`` (idempotent)."""
        with self._lock:
            auth = self._auths[authorisation_id]
            if auth.state == "captured":
                auth.state = "authorised"

    def void(self, authorisation_id: str) -> bool:
        """Cancels an ``authorised`` authorisation (idempotent).

        Returns:
            ``True`` when this call voided it.
        """
        with self._lock:
            auth = self._auths.get(authorisation_id)
            if auth is None or auth.state != "authorised":
                return False
            auth.state = "voided"
            return True

    def void_key(self, key: str) -> int:
        """Voids every ``authorised`` authorisation made under ``key``.

        Returns:
            How many were voided.
        """
        with self._lock:
            ids = [i for i, a in self._auths.items() if a.key == key and a.state == "authorised"]
        return sum(self.void(auth_id) for auth_id in ids)


class FraudDesk:
    """A fraud screening service: clears orders, or flags them (thread-safe).

    A clearance (``cleared``) is withdrawn (``withdrawn``) when its order is rolled back, so
    the same order placed again is screened again.

    Args:
        max_quantity: orders of more units are flagged (default :data:`FRAUD_MAX_QUANTITY`).
    """

    def __init__(self, max_quantity: int = FRAUD_MAX_QUANTITY) -> None:
        self._lock = threading.Lock()
        self._max = max_quantity
        self._clearances: dict[str, tuple[str, str]] = {}  # id -> (key, state)
        self._ids = _Ids("screening")

    def clearances_for(self, key: str) -> dict[str, str]:
        """Screening id -> state of every clearance given under ``key`` (a run id)."""
        with self._lock:
            return {i: s for i, (k, s) in self._clearances.items() if k == key}

    def screen(self, key: str, sku: str, quantity: int, amount: Decimal) -> str:
        """Screens an order under the idempotency key ``key``.

        Returns:
            The screening id of the clearance.

        Raises:
            FraudSuspected: more than the allowed units in one order.
        """
        if quantity > self._max:
            raise FraudSuspected(
                f"fraud suspected: {quantity} units of {sku} in one order (at most {self._max})"
            )
        with self._lock:
            screening_id = self._ids.next()
            self._clearances[screening_id] = (key, "cleared")
            return screening_id

    def withdraw(self, screening_id: str) -> bool:
        """Withdraws a clearance (idempotent).

        Returns:
            ``True`` when this call withdrew it.
        """
        with self._lock:
            key, state = self._clearances.get(screening_id, ("", ""))
            if state != "cleared":
                return False
            self._clearances[screening_id] = (key, "withdrawn")
            return True


@dataclass
class Services:
    """The fake services the saga's steps call, and the I/O wait each call simulates.

    Attributes:
        io_seconds: seconds :meth:`io` waits per service call (default
            :data:`DEFAULT_IO_SECONDS`).
        inventory: the stock (default: :data:`DEFAULT_STOCK`).
        payments: the payment provider.
        fraud: the fraud desk.
    """

    io_seconds: float = DEFAULT_IO_SECONDS
    inventory: Inventory = field(default_factory=Inventory)
    payments: Payments = field(default_factory=Payments)
    fraud: FraudDesk = field(default_factory=FraudDesk)

    async def io(self, operation: str) -> None:
        """Simulates the network round trip of one service call: ``await
        asyncio.sleep(io_seconds)`` on the running loop (override it to gate a call in a
        test).

        Args:
            operation: which call waits (``"reserve"``, ``"authorise"``, ``"screen"``,
                ``"confirm"``, ``"release"``, ``"void"``, ``"withdraw"``, ``"reopen"``).
        """
        await asyncio.sleep(self.io_seconds)


class ServiceRegistry:
    """Where steps find the current :class:`Services` (one slot, thread-safe): steps are
    declared once per process, the services are installed by :func:`create_app`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: Services | None = None

    def install(self, services: Services) -> None:
        """Makes ``services`` the current services."""
        with self._lock:
            self._services = services

    def get(self) -> Services:
        """The current services.

        Raises:
            RuntimeError: none were installed (no :func:`create_app` yet).
        """
        with self._lock:
            services = self._services
        if services is None:
            raise RuntimeError("no services installed: build the app with create_app() first")
        return services


#: The registry the steps read; :func:`create_app` installs the app's services in it (one app
#: per process: a second ``create_app`` replaces the first one's services).
SERVICES: Final = ServiceRegistry()


# --------------------------------------------------------------------------------------------
# the saga
# --------------------------------------------------------------------------------------------


def _key(body: Step) -> str:
    """The idempotency key of a step's service calls: its run's id."""
    return body.context.run_id if body.context is not None else "direct-call"


class ReserveStock(Step):
    """Holds ``quantity`` units of ``sku`` in the inventory.

    Returns:
        ``{"hold_id": str}``.

    Fails (not retried) with :class:`UnknownSku` or :class:`OutOfStock`.
    """

    sku = Input(str, min_length=1)
    quantity = Input(int, gt=0)

    async def run(self) -> dict[str, str]:
        """Reserves the units (after one simulated I/O wait)."""
        services = SERVICES.get()
        await services.io("reserve")
        return {"hold_id": services.inventory.reserve(_key(self), self.inputs.sku,
                                                      self.inputs.quantity)}

    async def undo(self) -> bool:
        """Releases the hold ``run`` placed (idempotent)."""
        services = SERVICES.get()
        await services.io("release")
        return services.inventory.release(self.result["hold_id"])

    async def compensate(self) -> int:
        """Releases anything the failed attempt held under this run's key (idempotent)."""
        services = SERVICES.get()
        await services.io("release")
        return services.inventory.release_key(_key(self))


class AuthorisePayment(Step):
    """Authorises ``amount`` with the payment provider.

    Returns:
        ``{"authorisation_id": str}``.

    Fails (not retried) with :class:`PaymentDeclined`.
    """

    amount = Input(Decimal, gt=0)

    async def run(self) -> dict[str, str]:
        """Authorises the amount (after one simulated I/O wait)."""
        services = SERVICES.get()
        await services.io("authorise")
        return {"authorisation_id": services.payments.authorise(_key(self), self.inputs.amount)}

    async def undo(self) -> bool:
        """Voids the authorisation ``run`` made (idempotent)."""
        services = SERVICES.get()
        await services.io("void")
        return services.payments.void(self.result["authorisation_id"])

    async def compensate(self) -> int:
        """Voids any authorisation the failed attempt made under this run's key."""
        services = SERVICES.get()
        await services.io("void")
        return services.payments.void_key(_key(self))


class ScreenFraud(Step):
    """Screens the order with the fraud desk.

    Returns:
        ``{"screening_id": str}``.

    Fails (not retried) with :class:`FraudSuspected`. Has no ``compensate``: a flagged
    screening leaves nothing behind.
    """

    sku = Input(str, min_length=1)
    quantity = Input(int, gt=0)
    amount = Input(Decimal, gt=0)

    async def run(self) -> dict[str, str]:
        """Screens the order (after one simulated I/O wait)."""
        services = SERVICES.get()
        await services.io("screen")
        return {"screening_id": services.fraud.screen(
            _key(self), self.inputs.sku, self.inputs.quantity, self.inputs.amount
        )}

    async def undo(self) -> bool:
        """Withdraws the clearance, so the order is screened again if placed again."""
        services = SERVICES.get()
        await services.io("withdraw")
        return services.fraud.withdraw(self.result["screening_id"])


class ConfirmOrder(Step):
    """Captures the payment and commits the stock hold: the order is placed.

    Returns:
        ``{"order_id", "sku", "quantity", "amount": Decimal, "hold_id", "authorisation_id",
        "screening_id"}`` (the :class:`ConfirmedOrder` fields; ``order_id`` is the run id).
    """

    hold_id = Input(str, min_length=1)
    authorisation_id = Input(str, min_length=1)
    screening_id = Input(str, min_length=1)
    sku = Input(str)
    quantity = Input(int)
    amount = Input(Decimal)

    async def run(self) -> dict[str, Any]:
        """Captures and commits (after one simulated I/O wait)."""
        services = SERVICES.get()
        await services.io("confirm")
        services.payments.capture(self.inputs.authorisation_id)
        services.inventory.commit(self.inputs.hold_id)
        return {
            "order_id": _key(self),
            "sku": self.inputs.sku,
            "quantity": self.inputs.quantity,
            "amount": self.inputs.amount,
            "hold_id": self.inputs.hold_id,
            "authorisation_id": self.inputs.authorisation_id,
            "screening_id": self.inputs.screening_id,
        }

    async def undo(self) -> None:
        """Reopens the order (refunds the capture, uncommits the hold), so the undos of the
        earlier steps can void and release them (``Order.undo(run_id)`` of a completed
        order: docs/concepts.md, "Stored runs")."""
        services = SERVICES.get()
        await services.io("reopen")
        services.payments.refund(self.inputs.authorisation_id)
        services.inventory.uncommit(self.inputs.hold_id)


class Order(Reactor, name="examples.fastapi_orders.order"):
    """Places an order: reserve, authorise and screen at the same time, then confirm.

    Inputs: ``sku`` (non-empty), ``quantity`` (units, > 0), ``amount`` (a ``Decimal`` > 0, in
    the shop's currency). An input outside these bounds fails the run before any step runs,
    with ``validation_errors`` (docs/concepts.md, "A synchronous run").

    ``max_concurrency = 3``: ``reserve``, ``authorise`` and ``fraud_check`` depend on nothing
    but the inputs, so they run as concurrent branches; ``confirm`` waits for all three
    (docs/concepts.md, "Concurrency"). The run's value is ``confirm``'s result.
    """

    max_concurrency = 3
    sku = Input(str, min_length=1)
    quantity = Input(int, gt=0)
    amount = Input(Decimal, gt=0)

    reserve = step(ReserveStock)
    authorise = step(AuthorisePayment)
    fraud_check = step(ScreenFraud)
    confirm = step(
        ConfirmOrder,
        hold_id=result("reserve", "hold_id"),
        authorisation_id=result("authorise", "authorisation_id"),
        screening_id=result("fraud_check", "screening_id"),
    )
    returns = "confirm"


# --------------------------------------------------------------------------------------------
# the HTTP API
# --------------------------------------------------------------------------------------------


class OrderRequest(BaseModel):
    """The body of ``POST /orders``: its shape only (FastAPI answers 422 for a malformed
    body); the bounds (quantity and amount > 0) are the saga's inputs' own (:class:`Order`).

    Attributes:
        sku: the product's SKU (e.g. ``"WIDGET"``).
        quantity: units ordered.
        amount: the order total, a decimal (``"19.99"`` or ``19.99``).
    """

    model_config = ConfigDict(extra="forbid")

    sku: str
    quantity: int
    amount: Decimal


class ConfirmedOrder(BaseModel):
    """A placed order (``confirm``'s result).

    Attributes:
        order_id: the order's id (its run id).
        sku: the SKU.
        quantity: units.
        amount: the captured total.
        hold_id: the committed stock hold.
        authorisation_id: the captured payment authorisation.
        screening_id: the fraud desk's clearance.
    """

    order_id: str
    sku: str
    quantity: int
    amount: Decimal
    hold_id: str
    authorisation_id: str
    screening_id: str


class OrderAccepted(BaseModel):
    """201 answer of ``POST /orders``: the saga completed.

    Attributes:
        run_id: the stored run's id (``GET /orders/{run_id}``).
        status: ``"completed"``.
        order: the placed order.
    """

    run_id: str
    status: RunStatus
    order: ConfirmedOrder


class OrderRejected(BaseModel):
    """409 (the saga failed and was rolled back) or 422 (the saga refused its inputs) answer
    of ``POST /orders``.

    Attributes:
        run_id: the stored run's id (``GET /orders/{run_id}`` shows its rollback).
        status: ``"failed"``.
        step: the step that failed (``None`` when the inputs were refused).
        error: the failure's message (e.g. ``"out of stock: GIZMO has 5 units free, 6
            requested"``).
        validation_errors: field -> messages, when the inputs were refused.
    """

    run_id: str | None
    status: RunStatus
    step: str | None
    error: str
    validation_errors: dict[str, list[str]] = {}


class TraceItem(BaseModel):
    """One entry of a run's trace (docs/concepts.md, "Stored runs").

    Attributes:
        type: ``run``, ``failed``, ``compensate``, ``undo``, ...
        step: the step's name.
        detail: a short message (a failure's message), if any.
    """

    type: str
    step: str | None
    detail: str | None


class OrderStatus(BaseModel):
    """200 answer of ``GET /orders/{run_id}``: a stored run.

    Attributes:
        run_id: the run's id.
        status: ``running``, ``completed``, ``failed``, ...
        trace: what ran, oldest first (``run``, ``failed``, ``compensate``, ``undo`` entries).
        undo_stack: the completed steps not rolled back, oldest first.
        error: the failure's message for a failed run, else ``None``.
    """

    run_id: str
    status: RunStatus
    trace: list[TraceItem]
    undo_stack: list[str]
    error: str | None


def _answer(outcome: Success | Failure | Paused | DispatchHandle) -> OrderAccepted | JSONResponse:
    """The HTTP answer of a saga's outcome: 201 body, or a 409/422 :class:`OrderRejected`."""
    if isinstance(outcome, Success):
        assert outcome.run_id is not None
        return OrderAccepted(
            run_id=outcome.run_id,
            status=RunStatus.COMPLETED,
            order=ConfirmedOrder.model_validate(outcome.value),
        )
    if isinstance(outcome, Failure):
        refused = outcome.step_name is None and bool(outcome.validation_errors)
        rejected = OrderRejected(
            run_id=outcome.run_id,
            status=RunStatus.FAILED,
            step=outcome.step_name,
            # an exception with no message (e.g. TimeoutError()) is named by its class
            error=outcome.message or outcome.exception_class or "failed",
            validation_errors={k: list(v) for k, v in outcome.validation_errors.items()},
        )
        return JSONResponse(
            status_code=(status.HTTP_422_UNPROCESSABLE_CONTENT if refused
                         else status.HTTP_409_CONFLICT),
            content=rejected.model_dump(mode="json"),
        )
    # Order has no interrupt and no background: it never pauses nor moves to a worker.
    raise RuntimeError(f"unexpected outcome of the order saga: {outcome!r}")


#: The order endpoints; :func:`create_app` mounts them.
router: Final = APIRouter()

_POST_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    status.HTTP_409_CONFLICT: {
        "model": OrderRejected,
        "description": "The saga failed (out of stock, payment declined, fraud suspected) "
                       "and was rolled back.",
    },
    status.HTTP_422_UNPROCESSABLE_CONTENT: {
        "description": "A malformed body (FastAPI's validation error), or inputs the saga "
                       "refused (an OrderRejected with validation_errors, e.g. amount <= 0).",
    },
}


@router.post(
    "/orders",
    status_code=status.HTTP_201_CREATED,
    response_model=OrderAccepted,
    responses=_POST_RESPONSES,
)
async def place_order(order: OrderRequest) -> OrderAccepted | JSONResponse:
    """Places an order by running the :class:`Order` saga with ``await Order.arun(...)``.

    The engine's blocking work runs in reactor's thread pool and the steps' ``async def``
    bodies run on this server's event loop, which keeps serving other requests meanwhile
    (docs/concepts.md, "Async steps").

    Args:
        order: the request body.

    Returns:
        201 :class:`OrderAccepted` when the saga completed; else a ``JSONResponse`` with an
        :class:`OrderRejected`: 409 when a step failed (the saga was rolled back:
        docs/concepts.md, "Rollback"), 422 when the saga refused its inputs (quantity or
        amount not above 0). A malformed body is FastAPI's own 422.
    """
    outcome = await Order.arun(sku=order.sku, quantity=order.quantity, amount=order.amount)
    return _answer(outcome)


@router.post(
    "/orders-threaded",
    status_code=status.HTTP_201_CREATED,
    response_model=OrderAccepted,
    responses=_POST_RESPONSES,
)
async def place_order_threaded(order: OrderRequest) -> OrderAccepted | JSONResponse:
    """:func:`place_order` with the blocking ``Order.run(...)`` in a thread of the server's
    thread pool (``run_in_threadpool``: anyio's, 40 threads by default); the async bodies run
    on reactor's own loop (docs/concepts.md, "Async steps"). The baseline of
    ``benchmarks/fastapi_orders.py``.

    Args:
        order: the request body.

    Returns:
        The same answers as :func:`place_order`.
    """
    outcome = await run_in_threadpool(
        Order.run, sku=order.sku, quantity=order.quantity, amount=order.amount
    )
    return _answer(outcome)


@router.get(
    "/orders/{run_id}",
    response_model=OrderStatus,
    responses={status.HTTP_404_NOT_FOUND: {"description": "No order run has this id."}},
)
async def order_status(run_id: str) -> OrderStatus:
    """Reads a stored order run with ``await Order.afind(run_id)`` (off the event loop).

    Args:
        run_id: the ``run_id`` a ``POST /orders`` answered.

    Returns:
        200 :class:`OrderStatus`.

    Raises:
        HTTPException: 404 when no run of :class:`Order` has this id (``afind`` raises
            ``RunNotFoundError``: docs/concepts.md, "Stored runs").
    """
    try:
        view: RunView = await Order.afind(run_id)
    except RunNotFoundError as exc:
        raise HTTPException(status_code=status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    return OrderStatus(
        run_id=view.run_id,
        status=view.status,
        trace=[TraceItem(type=e.type, step=e.step, detail=e.detail) for e in view.trace],
        undo_stack=list(view.undo_stack),
        error=None if view.failure is None else view.failure.message,
    )


def create_app(storage_url: str = "memory://", *, services: Services | None = None) -> FastAPI:
    """Builds the orders app: configures reactor, installs the fake services, mounts
    :data:`router`.

    ``reactor.configure(storage=storage_url, router="inline://")`` replaces the process's
    runtime; the app reads and writes its runs there (one app per process). Serve it with
    ``uvicorn --factory examples.fastapi_orders.app:create_app``.

    Args:
        storage_url: where runs are stored: ``"memory://"`` (default, in-process) or e.g.
            ``"redis://127.0.0.1:6379/0"``.
        services: the fake services the steps call (default: a fresh :class:`Services`:
            :data:`DEFAULT_STOCK`, :data:`DEFAULT_IO_SECONDS` per call); installed in
            :data:`SERVICES`, replacing those of an earlier app.

    Returns:
        The FastAPI app.

    Raises:
        ConfigurationError: ``storage_url`` names no known storage, or it cannot be opened.
    """
    reactor.configure(storage=storage_url, router="inline://")
    SERVICES.install(services if services is not None else Services())
    app = FastAPI(
        title="reactor orders",
        description="Places orders with a saga of async steps (examples/fastapi_orders).",
    )
    app.include_router(router)
    return app
