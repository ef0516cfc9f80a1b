"""The demo runner: process the dataset, review the large orders, summarise, show one failed
run, verify invariants.

``python -m examples.order_fulfilment [--limit N] [--orders PATH] [--show ORDER_ID] [--workers N]
[--review-threshold AMOUNT|off]`` (what ``./scripts/demo`` runs) processes the orders one after
another — sequentially, so which order runs out of stock is the same on every run (no seed, no
clock). Orders whose total is above the review threshold
(:data:`~examples.order_fulfilment.saga.REVIEW_THRESHOLD`) run
:class:`~examples.order_fulfilment.saga.FulfilWithReview` and pause at its ``manual_review``
interrupt; once every order was processed, the demo plays the reviewer
(:func:`review_paused`, :func:`demo_reviewer`): it resumes each paused run by its correlation id,
approving most and rejecting bulk orders (the rejected run fails and is rolled back), and sends
one malformed payload first to show it refused and counted. Then it prints:

1. a summary table (completed, failed and fully rolled back, rollback failures, reviews,
   elapsed seconds) and the breakdown of failure reasons;
2. the manual reviews, and the service audit log of a rejected order (the saga's undo);
3. the stored trace of one failed run, read back with ``Fulfil.find(run_id)``;
4. the invariant check over the fake services' final state (see :func:`check_invariants`).

With ``--workers N`` the runs move to background workers instead: every order runs
:class:`~examples.order_fulfilment.saga_workers.FulfilInWorkers` (``Background(all=True)``, the
payment capture as an ``async_step``) on the storage and router ``REACTOR_STORAGE_URL`` and
``REACTOR_ROUTER_URL`` name (default: the embedded memory storage and a local router; see
:func:`worker_runtime`), served by ``N`` in-process :class:`reactor.jobs.worker.Worker`
threads. All orders are submitted, then
awaited; which order runs out of stock then depends on the workers' interleaving, and the same
invariant check must hold. The worker variant has no manual review.

The exit code is 0 when every invariant holds, 1 when one is violated, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from reactor import (
    DispatchHandle,
    Failure,
    Halt,
    InterruptPayloadError,
    Paused,
    Reactor,
    ReactorError,
    Worker,
    config,
)
from reactor.config import Runtime
from reactor.memory import LocalRouter, MemoryStorage

from .models import Order, ReviewDecision
from .saga import REVIEW_THRESHOLD, Fulfil, FulfilWithReview, needs_review, review_correlation_id
from .services import ORDERS_PATH, SERVICES, ServiceError, Services

__all__ = [
    "BULK_UNITS",
    "REVIEWER",
    "DemoReport",
    "Outcome",
    "Review",
    "check_invariants",
    "demo_reviewer",
    "failure_reason",
    "load_orders",
    "main",
    "process_orders",
    "process_orders_in_workers",
    "render_reviews",
    "render_run",
    "render_summary",
    "review_paused",
    "run_demo",
    "scheduled_retry_delays",
    "worker_runtime",
]

#: Failure reasons in display order (``ServiceError.code`` values).
REASONS: tuple[str, ...] = (
    "invalid_order", "out_of_stock", "card_declined", "undeliverable_address", "carrier_outage",
    "review_rejected",
)

#: ``exception_class`` suffixes -> reason, for failures whose error is only a message string
#: (e.g. read back from storage).
_CLASS_REASONS: dict[str, str] = {
    "InvalidOrder": "invalid_order",
    "OutOfStock": "out_of_stock",
    "CardDeclined": "card_declined",
    "Undeliverable": "undeliverable_address",
    "CarrierUnavailable": "carrier_outage",
    "ReviewRejected": "review_rejected",
}

#: Who the demo's reviewer is (:func:`demo_reviewer`).
REVIEWER = "ops.lena"

#: The demo's reviewer rejects an order holding this many units (or more) of one SKU.
BULK_UNITS = 3


@dataclass(frozen=True)
class Outcome:
    """What happened to one order.

    Attributes:
        order_id: the order.
        run_id: the stored run's id (for ``Fulfil.find``, or ``FulfilWithReview.find`` when
            ``reviewed``).
        status: ``"completed"``, ``"failed"``, ``"halted"``, or ``"paused"`` (waiting at its
            manual review: only until :func:`review_paused` resumed it).
        reason: for a failure, its :data:`REASONS` code (or ``"other"``); else ``None``.
        step: the step that failed, or the interrupt a paused run waits at.
        message: the failure message (``""`` on success).
        rollback_failures: one ``"step kind: message"`` line per undo/compensate that failed.
        reviewed: the order ran :class:`~examples.order_fulfilment.saga.FulfilWithReview`
            (its total is above the review threshold).
    """

    order_id: str
    run_id: str | None
    status: Literal["completed", "failed", "halted", "paused"]
    reason: str | None = None
    step: str | None = None
    message: str = ""
    rollback_failures: tuple[str, ...] = ()
    reviewed: bool = False


@dataclass(frozen=True)
class Review:
    """One manual review the demo gave (:func:`review_paused`).

    Attributes:
        order_id: the reviewed order.
        run_id: its paused (then resumed) run.
        total: the order total, in ``currency``.
        currency: the order currency.
        decision: the payload that was accepted.
        refused: the fields named by the malformed payloads refused before it (empty when
            none was sent).
        attempts: malformed payloads the interrupt counted (``InterruptPayloadError.attempts``).
        status: the run's status after the resume (``"completed"`` or ``"failed"``).
    """

    order_id: str
    run_id: str
    total: Decimal
    currency: str
    decision: ReviewDecision
    refused: tuple[str, ...] = ()
    attempts: int = 0
    status: str = ""


@dataclass
class DemoReport:
    """The result of :func:`run_demo`.

    Attributes:
        orders: the orders processed, in order.
        outcomes: one :class:`Outcome` per order, same order.
        elapsed: seconds spent processing (wall clock).
        violations: invariant violations found by :func:`check_invariants` (empty = all good).
        retry_sleeps: every in-process retry sleep (seconds) the engine asked for, in order
            (synchronous mode; empty in worker mode, where nothing sleeps).
        workers: worker threads the runs ran in (0 = synchronously, in the caller).
        worker_retry_delays: every retry delay (seconds) scheduled in worker mode (a retry
            re-enqueues the run with its delay), read from the runs' traces.
        reviews: the manual reviews given, in order (:func:`review_paused`).
        review_threshold: the amount above which orders were reviewed (``None``: none was).
    """

    orders: list[Order]
    outcomes: list[Outcome]
    elapsed: float
    violations: list[str]
    retry_sleeps: list[float] = field(default_factory=list)
    workers: int = 0
    worker_retry_delays: list[float] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    review_threshold: Decimal | None = None

    def counts(self) -> Counter[str]:
        """``{"completed": n, "failed": n, "halted": n, "paused": n, "rollback_failures": n,
        "reviewed": n}`` (``reviewed``: reviews given)."""
        counts: Counter[str] = Counter(o.status for o in self.outcomes)
        counts["rollback_failures"] = sum(len(o.rollback_failures) for o in self.outcomes)
        counts["reviewed"] = len(self.reviews)
        return counts

    def reasons(self) -> Counter[str]:
        """Failure reason -> number of failed orders."""
        return Counter(o.reason for o in self.outcomes if o.reason is not None)

    def digest(self) -> str:
        """A short hash of every order's status and reason (equal across runs of one input)."""
        text = "\n".join(f"{o.order_id} {o.status} {o.reason}" for o in self.outcomes)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# loading and processing
# --------------------------------------------------------------------------------------------


def load_orders(path: Path = ORDERS_PATH, limit: int | None = None) -> list[Order]:
    """Reads and validates orders from a JSON Lines file.

    Args:
        path: the file (one order object per line; blank lines are skipped).
        limit: read at most this many orders (``None`` = all).

    Returns:
        The orders in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not valid JSON or not a valid order (the message names the line).
    """
    orders: list[Order] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if limit is not None and len(orders) >= limit:
                break
            if not line.strip():
                continue
            try:
                orders.append(Order.model_validate_json(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: invalid order: {exc}") from exc
    return orders


def _service_error(error: Any, depth: int = 0) -> ServiceError | None:
    """Finds the :class:`ServiceError` behind a failure's error (nested failures, causes)."""
    if depth > 8 or error is None:
        return None
    if isinstance(error, ServiceError):
        return error
    if isinstance(error, Failure):
        return _service_error(error.error, depth + 1)
    if isinstance(error, BaseException):
        return _service_error(error.__cause__ or error.__context__, depth + 1)
    return None


def failure_reason(failure: Failure) -> str:
    """Classifies a failed run by the service error that caused it.

    Args:
        failure: the run's ``Failure``.

    Returns:
        One of :data:`REASONS`, or ``"other"`` for anything unexpected.
    """
    found = _service_error(failure.error)
    if found is not None:
        return found.code
    name = (failure.exception_class or "").rsplit(".", 1)[-1]
    if name in _CLASS_REASONS:
        return _CLASS_REASONS[name]
    message = failure.message
    for code in REASONS:
        if message.startswith(code) or f"{code}:" in message:
            return code
    return "other"


def _outcome(order: Order, outcome: Any, *, reviewed: bool = False) -> Outcome:
    """Turns a run result into an :class:`Outcome`."""
    run_id = getattr(outcome, "run_id", None)
    if isinstance(outcome, Failure):
        return Outcome(
            order_id=order.id,
            run_id=run_id,
            status="failed",
            reason=failure_reason(outcome),
            step=outcome.step_name,
            message=outcome.message,
            rollback_failures=tuple(
                f"{rf.step} {rf.kind}: {rf.message}" for rf in outcome.rollback_failures
            ),
            reviewed=reviewed,
        )
    if isinstance(outcome, Paused):
        return Outcome(order.id, run_id, "paused", step=outcome.step, reviewed=reviewed)
    if isinstance(outcome, Halt):
        return Outcome(order.id, run_id, "halted", message=str(outcome.reason),
                       reviewed=reviewed)
    return Outcome(order.id, run_id, "completed", reviewed=reviewed)


def process_orders(
    orders: Iterable[Order], *, sleep: Callable[[float], None] | None = None,
    review_threshold: Decimal | None = REVIEW_THRESHOLD,
) -> list[Outcome]:
    """Runs the fulfilment saga once per order: :class:`~examples.order_fulfilment.saga.Fulfil`,
    or :class:`~examples.order_fulfilment.saga.FulfilWithReview` for an order whose total is
    above ``review_threshold`` (its run pauses at ``manual_review``: outcome ``"paused"``).

    The services must be installed in :data:`SERVICES` first. Orders run one after another.

    Args:
        orders: the orders.
        sleep: the function retry back-offs sleep with (seconds); ``None`` = the runtime
            clock's (``reactor.configure(clock=...)``; the system clock by default: real
            sleeping).
        review_threshold: review orders above this total (order currency); ``None``: none.

    Returns:
        One :class:`Outcome` per order, in order.
    """
    outcomes = []
    for order in orders:
        inputs = {"order": order, "card_token": order.card_token()}
        reviewed = needs_review(order, review_threshold)
        reactor_cls: type[Reactor] = FulfilWithReview if reviewed else Fulfil
        outcomes.append(_outcome(order, reactor_cls.execute(inputs, sleep=sleep),
                                 reviewed=reviewed))
    return outcomes


def demo_reviewer(order: Order) -> ReviewDecision:
    """The demo's stand-in for a human reviewer: rejects bulk orders, approves the rest.

    Args:
        order: a paused order.

    Returns:
        A rejection when a line holds :data:`BULK_UNITS` or more units of one SKU (a reseller
        pattern), else an approval; both signed by :data:`REVIEWER`.
    """
    bulk = next((line for line in order.lines if line.quantity >= BULK_UNITS), None)
    if bulk is not None:
        return ReviewDecision(approved=False, reviewer=REVIEWER,
                              note=f"bulk: {bulk.quantity} x {bulk.sku}")
    return ReviewDecision(approved=True, reviewer=REVIEWER, note="customer verified")


#: The malformed payload :func:`review_paused` sends first (a form that lost its reviewer
#: and sent ``approved`` as text): refused, and counted as one attempt.
_MALFORMED_REVIEW: dict[str, Any] = {"approved": "yes"}


def review_paused(
    orders: Sequence[Order], outcomes: Sequence[Outcome], *,
    reviewer: Callable[[Order], ReviewDecision] = demo_reviewer, malformed_first: bool = True,
) -> tuple[list[Outcome], list[Review]]:
    """Resumes every run paused at its manual review with the reviewer's decision.

    Each run is named by its correlation id (``review:<order id>``), as a review tool that
    never saw the run id would, and resumed in this thread: an approval runs the rest of the
    saga (shipping, confirmation), a rejection fails ``apply_review`` and rolls the run back.
    A resumed run's retry back-offs wait on the runtime clock (``reactor.configure(clock=...)``).
    The services must be installed in :data:`SERVICES`.

    Args:
        orders: the orders (as given to :func:`process_orders`).
        outcomes: their outcomes; the ``"paused"`` ones are reviewed.
        reviewer: decides each paused order (default :func:`demo_reviewer`).
        malformed_first: send one malformed payload before the first decision, to show it is
            refused (the run stays paused; one attempt counted).

    Returns:
        ``(outcomes, reviews)``: the outcomes with every reviewed order's final one, and one
        :class:`Review` per resumed run, in order.

    Raises:
        ReactorError: a resume failed for another reason than the decision (e.g. the review
            expired: ``InterruptExpiredError``).
    """
    by_id = {order.id: order for order in orders}
    final: list[Outcome] = []
    reviews: list[Review] = []
    for outcome in outcomes:
        if outcome.status != "paused":
            final.append(outcome)
            continue
        order = by_id[outcome.order_id]
        correlation_id = review_correlation_id(order.id)
        refused: tuple[str, ...] = ()
        attempts = 0
        if malformed_first and not reviews:
            try:
                FulfilWithReview.resume(correlation_id=correlation_id,
                                        payload=_MALFORMED_REVIEW, step="manual_review")
            except InterruptPayloadError as exc:
                refused, attempts = tuple(sorted(exc.field_errors)), exc.attempts
        decision = reviewer(order)
        done = FulfilWithReview.resume(
            correlation_id=correlation_id, payload=decision.model_dump(mode="json"),
            step="manual_review",
        )
        after = _outcome(order, done, reviewed=True)
        final.append(after)
        reviews.append(Review(order.id, outcome.run_id or "", order.total, order.currency,
                              decision, refused, attempts, after.status))
    return final, reviews


#: Park delay of the worker demo (seconds, plus up to as much jitter): a reader waiting for
#: its capture unit parks, and comes back this soon.
WORKER_PARK_DELAY = 0.05


def worker_runtime() -> Runtime:
    """Configure the process-wide runtime of the worker demo (``--workers N``).

    The storage is ``REACTOR_STORAGE_URL`` when set (e.g. ``redis://localhost:6379/0`` or the
    example adapter's ``sqlite:///tmp/demo.db``), else a fresh embedded memory storage; the
    router is ``REACTOR_ROUTER_URL`` when set, else a local router. A ``local://`` router is
    built here, without embedded workers: the demo's own :class:`~reactor.jobs.worker.Worker`
    threads serve it. Parks come back after :data:`WORKER_PARK_DELAY` seconds (plus jitter).

    Returns:
        The configured runtime.

    Raises:
        ConfigurationError: a URL names no installed adapter or is malformed.
        StorageError, RouterError: the backend cannot be reached.
    """
    storage_url = os.environ.get(config.STORAGE_URL_ENV) or None
    router_url = os.environ.get(config.ROUTER_URL_ENV) or None
    own_router = router_url is None or router_url.startswith("local://")
    return config.configure(
        storage=storage_url if storage_url else MemoryStorage(),
        router=LocalRouter() if own_router else router_url,
        lock_snooze_base_delay=WORKER_PARK_DELAY, lock_snooze_jitter=WORKER_PARK_DELAY,
    )


def process_orders_in_workers(
    orders: Sequence[Order], *, workers: int = 2, timeout: float = 120.0
) -> list[Outcome]:
    """Runs :class:`~examples.order_fulfilment.saga_workers.FulfilInWorkers` per order in
    background workers and waits for every run.

    Configures the process-wide runtime (:func:`worker_runtime`: ``REACTOR_STORAGE_URL`` and
    ``REACTOR_ROUTER_URL`` when set, else a fresh embedded memory storage and a local router),
    served by ``workers`` in-process :class:`~reactor.jobs.worker.Worker` threads (left
    configured afterwards, so the runs can be read back with ``FulfilInWorkers.find``). The
    services must be installed in :data:`SERVICES` first: they live in this process, so the
    workers are this process's threads whatever the backend.

    Args:
        orders: the orders (all submitted first, then awaited in order).
        workers: handler threads.
        timeout: seconds to wait for each run (counted from when its wait starts).

    Returns:
        One :class:`Outcome` per order, in order.

    Raises:
        AsyncWaitTimeoutError: a run did not finish within ``timeout``.
    """
    from .saga_workers import FulfilInWorkers

    runtime = worker_runtime()
    worker = Worker(runtime, threads=workers, poll_seconds=0.05)
    worker.start()
    try:
        started = []
        for order in orders:
            inputs = {"order": order, "card_token": order.card_token()}
            started.append(FulfilInWorkers.execute(inputs, runtime=runtime))
        outcomes = []
        for order, handle in zip(orders, started, strict=True):
            done = handle.wait(timeout) if isinstance(handle, DispatchHandle) else handle
            outcomes.append(_outcome(order, done))
        return outcomes
    finally:
        worker.stop(timeout=10)


# --------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------


def check_invariants(
    orders: Sequence[Order], outcomes: Sequence[Outcome], services: Services,
    *, initial_stock: dict[str, int] | None = None, reactor_cls: type[Reactor] = Fulfil,
    extra_attempts: Mapping[str, int] | None = None,
    review_threshold: Decimal | None = None, reviews: Sequence[Review] = (),
) -> list[str]:
    """Verifies the fake services' final state against the outcomes.

    Per failed order: no active reservation, no live capture, no open authorization, no booked
    shipment, no queued e-mail, the stored run is ``failed`` with an empty undo stack and no
    rollback failure. Per completed order: exactly its line items reserved (one reservation per
    line), one live capture of exactly its total in its currency, one captured authorization,
    one booked shipment, one queued confirmation to the customer. Globally: stock is conserved
    per SKU and never negative, captured money per currency equals the completed orders'
    totals, the audit log holds no card token, and carrier-outage orders were tried exactly
    ``SHIPMENT_RETRIES.max_attempts`` times (plus at most their ``extra_attempts``).

    Manual review (see :func:`review_paused`): no run is left paused; an order ran with review
    exactly when its total is above ``review_threshold``; every reviewed order that completed
    was approved (its stored ``manual_review`` result is an approving
    :class:`~examples.order_fulfilment.models.ReviewDecision`, and its run paused there first);
    every rejected order stored the rejection, and its audit log shows the saga undid its work
    (its capture refunded, every reservation released); each :class:`Review` matches its
    order's final outcome.

    Args:
        orders: the orders processed.
        outcomes: their outcomes (same order).
        services: the services they ran against.
        initial_stock: ``{sku: on_hand}`` at the start (default: the catalog's ``on_hand``).
        reactor_cls: the reactor the runs without review belong to (read back with
            ``reactor_cls.find``); reviewed runs are read with ``FulfilWithReview.find``.
        extra_attempts: ``{order_id: n}``, booking attempts an order may have on top of
            ``max_attempts`` because ``n`` of its attempts ran in a job execution that did not
            end cleanly (a killed worker: step bodies run at least once across crashes). The
            chaos soak (:mod:`.soak`) passes it; default none.
        review_threshold: the threshold the orders ran with (``None``: no order may have been
            reviewed).
        reviews: the reviews given (:func:`review_paused`).

    Returns:
        Human-readable violations; empty when every invariant holds.
    """
    from .saga import SHIPMENT_RETRIES

    inv, ledger, carrier, mailer = (services.inventory, services.ledger, services.carrier,
                                    services.mailer)
    problems: list[str] = []
    expected_captured: dict[str, Decimal] = {}
    review_of = {review.order_id: review for review in reviews}

    for order, out in zip(orders, outcomes, strict=True):
        oid = order.id
        problems.extend(_review_problems(order, out, review_of.get(oid), review_threshold,
                                         services))
        cls = FulfilWithReview if out.reviewed else reactor_cls
        reservations = inv.reservations(oid)
        captures = ledger.captures(oid)
        auths = ledger.authorizations(oid)
        open_auths = [a for a in auths if a.status == "authorized"]
        shipments = carrier.shipments(oid)
        messages = mailer.messages(oid)
        if out.status == "failed":
            for what, items in (("active reservation", reservations), ("live capture", captures),
                                ("open authorization", open_auths),
                                ("booked shipment", shipments), ("queued e-mail", messages)):
                if items:
                    problems.append(f"{oid} failed but has {len(items)} {what}(s)")
            if out.rollback_failures:
                problems.append(f"{oid}: rollback failures: {list(out.rollback_failures)}")
            extra = (extra_attempts or {}).get(oid, 0)
            if out.reason == "carrier_outage" and not (
                    SHIPMENT_RETRIES.max_attempts <= carrier.attempts(oid)
                    <= SHIPMENT_RETRIES.max_attempts + extra):
                expected = str(SHIPMENT_RETRIES.max_attempts) + (f" (+{extra})" if extra else "")
                problems.append(f"{oid}: carrier tried {carrier.attempts(oid)} times, expected "
                                f"{expected}")
            if out.run_id is not None:
                view = cls.find(out.run_id)
                if view.status != "failed" or view.undo_stack:
                    problems.append(f"{oid}: stored run is {view.status} with undo stack "
                                    f"{list(view.undo_stack)}")
        elif out.status == "completed":
            held = sorted((r.sku, r.quantity) for r in reservations)
            wanted = sorted((line.sku, line.quantity) for line in order.lines)
            if held != wanted:
                problems.append(f"{oid} completed but holds {held}, expected {wanted}")
            if len(captures) != 1 or captures[0].amount != order.total or (
                    captures[0].currency != order.currency):
                problems.append(f"{oid} completed but captures are {captures}")
            if [a.status for a in auths] != ["captured"]:
                problems.append(f"{oid} completed but authorizations are {auths}")
            if len(shipments) != 1:
                problems.append(f"{oid} completed but has {len(shipments)} booked shipments")
            if len(messages) != 1 or messages[0].to != order.customer.email:
                problems.append(f"{oid} completed but has queued e-mails {messages}")
            expected_captured[order.currency] = (
                expected_captured.get(order.currency, Decimal("0")) + order.total)

    stock = initial_stock or {sku: item.on_hand for sku, item in inv.catalog.items()}
    units_held: Counter[str] = Counter()
    for reservation in inv.reservations():
        units_held[reservation.sku] += reservation.quantity
    for sku, on_hand in stock.items():
        free = inv.free(sku)
        if free < 0 or free + units_held[sku] != on_hand:
            problems.append(f"stock of {sku} not conserved: free {free} + held "
                            f"{units_held[sku]} != {on_hand}")
    captured: dict[str, Decimal] = {}
    for cap in ledger.captures():
        captured[cap.currency] = captured.get(cap.currency, Decimal("0")) + cap.amount
    for currency in set(captured) | set(expected_captured):
        got = captured.get(currency, Decimal("0"))
        want = expected_captured.get(currency, Decimal("0"))
        if got != want:
            problems.append(f"captured {got} {currency}, completed orders total {want}")
    tokens = {order.card_token() for order in orders}
    for event in services.audit.events():
        text = json.dumps(event.detail, default=str)
        if any(token in text for token in tokens):
            problems.append(f"audit event {event.seq} contains a card token")
            break
    unknown = set(review_of) - {order.id for order in orders}
    if unknown:
        problems.append(f"reviews of orders not processed: {sorted(unknown)}")
    return problems


def _review_problems(
    order: Order, out: Outcome, review: Review | None, threshold: Decimal | None,
    services: Services,
) -> list[str]:
    """The manual-review invariants of one order (see :func:`check_invariants`)."""
    oid = order.id
    problems: list[str] = []
    if out.status == "paused":
        problems.append(f"{oid} is still paused at {out.step}")
    above = needs_review(order, threshold)
    if out.reviewed != above:
        problems.append(f"{oid} (total {order.total} {order.currency}) ran "
                        f"{'with' if out.reviewed else 'without'} manual review, threshold "
                        f"{threshold}")
    if review is not None and (not out.reviewed or review.status != out.status):
        problems.append(f"{oid}: review says {review.status}, outcome is {out.status}"
                        f"{'' if out.reviewed else ' without review'}")
    if not out.reviewed or out.run_id is None:
        return problems
    view = FulfilWithReview.find(out.run_id)
    stored = view.results.get("manual_review")
    paused = any(e.type == "paused" and e.step == "manual_review" for e in view.trace)
    if out.status == "completed":
        if review is None or not isinstance(stored, ReviewDecision) or not stored.approved:
            problems.append(f"{oid} completed without an approved manual review "
                            f"(stored: {stored!r})")
        if not paused:
            problems.append(f"{oid} completed but its run never paused for review")
    if out.reason == "review_rejected":
        if review is None or not isinstance(stored, ReviewDecision) or stored.approved:
            problems.append(f"{oid} failed as rejected without a stored rejection "
                            f"(stored: {stored!r})")
        actions = [e.action for e in services.audit.events(oid)]
        lines = len(order.lines)
        if (actions.count("capture"), actions.count("refund")) != (1, 1) or (
                actions.count("reserve") != lines or actions.count("release") != lines):
            problems.append(f"{oid} was rejected but its audit log does not show the capture "
                            f"refunded and {lines} reservation(s) released: {actions}")
    return problems


# --------------------------------------------------------------------------------------------
# the demo
# --------------------------------------------------------------------------------------------


class _RecordingSleep:
    """A sleep function that records each delay and then (optionally) really sleeps."""

    def __init__(self, real: bool) -> None:
        self.delays: list[float] = []
        self._real = real

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self._real:
            time.sleep(seconds)


def run_demo(orders: Sequence[Order], services: Services, *, real_sleep: bool = True,
             workers: int = 0, review_threshold: Decimal | None = REVIEW_THRESHOLD,
             reviewer: Callable[[Order], ReviewDecision] = demo_reviewer) -> DemoReport:
    """Installs ``services``, processes ``orders``, reviews the paused ones and checks the
    invariants.

    Args:
        orders: the orders to process.
        services: fresh services (their catalog gives the starting stock).
        real_sleep: ``False`` records retry delays without waiting (for tests; synchronous
            mode only: in workers a retry re-enqueues the run with its delay).
        workers: 0 runs :class:`~examples.order_fulfilment.saga.Fulfil` synchronously; ``N``
            runs the worker variant in ``N`` worker threads
            (:func:`process_orders_in_workers`; no manual review there).
        review_threshold: orders above this total (order currency) pause for a manual review,
            given by ``reviewer`` once every order was processed (:func:`review_paused`);
            ``None``: no review. Ignored with ``workers``.
        reviewer: decides each review (default :func:`demo_reviewer`).

    Returns:
        The :class:`DemoReport`.
    """
    sleep = _RecordingSleep(real_sleep)
    reviews: list[Review] = []
    threshold = None if workers else review_threshold
    with SERVICES.use(services):
        started = time.perf_counter()
        if workers:
            from .saga_workers import FulfilInWorkers

            outcomes = process_orders_in_workers(orders, workers=workers)
            reactor_cls: type[Reactor] = FulfilInWorkers
        else:
            outcomes = process_orders(orders, sleep=sleep, review_threshold=threshold)
            outcomes, reviews = review_paused(orders, outcomes, reviewer=reviewer)
            reactor_cls = Fulfil
        elapsed = time.perf_counter() - started
        violations = check_invariants(orders, outcomes, services, reactor_cls=reactor_cls,
                                      review_threshold=threshold, reviews=reviews)
    delays = scheduled_retry_delays(outcomes, reactor_cls) if workers else []
    return DemoReport(list(orders), outcomes, elapsed, violations, sleep.delays,
                      workers=workers, worker_retry_delays=delays, reviews=reviews,
                      review_threshold=threshold)


_RETRY_DETAIL = re.compile(r"retrying in ([0-9.eE+-]+)s")


def scheduled_retry_delays(outcomes: Iterable[Outcome], reactor_cls: type[Reactor]) -> list[float]:
    """The retry delays (seconds) the engine scheduled for the stored runs of ``outcomes``.

    In workers a retry does not sleep: the run is re-enqueued with its delay, and the delay
    is recorded in the run's trace (a ``retry`` entry, "retrying in <delay>s after: ...").

    Returns:
        Every scheduled delay, run by run, oldest first.
    """
    delays: list[float] = []
    for outcome in outcomes:
        if outcome.run_id is None:
            continue
        for entry in reactor_cls.find(outcome.run_id).trace:
            match = _RETRY_DETAIL.match(entry.detail or "") if entry.type == "retry" else None
            if match is not None:
                delays.append(float(match.group(1)))
    return delays


def render_summary(console: Console, report: DemoReport) -> None:
    """Prints the summary table and the failure reasons breakdown."""
    counts = report.counts()
    total = len(report.outcomes)
    summary = Table(title="Order fulfilment", show_header=True)
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    runtime = config.current()
    summary.add_row(
        "storage / router",
        f"{type(runtime.storage).__name__} / {type(runtime.router).__name__}",
    )
    summary.add_row(
        "ran in",
        f"background workers ({report.workers} worker threads)" if report.workers
        else "the caller (synchronous)",
    )
    summary.add_row("orders processed", str(total))
    summary.add_row("completed", str(counts["completed"]))
    summary.add_row("failed and fully rolled back",
                    str(sum(1 for o in report.outcomes
                            if o.status == "failed" and not o.rollback_failures)))
    summary.add_row("rollback failures", str(counts["rollback_failures"]))
    if report.review_threshold is not None:
        approved = sum(1 for r in report.reviews if r.decision.approved)
        summary.add_row(f"paused for manual review (total > {report.review_threshold})",
                        f"{len(report.reviews)} ({approved} approved, "
                        f"{len(report.reviews) - approved} rejected)")
    if counts["halted"]:
        summary.add_row("halted", str(counts["halted"]))
    if counts["paused"]:
        summary.add_row("still paused", str(counts["paused"]))
    if report.workers:
        summary.add_row("retry delays scheduled in workers (s)",
                        f"{sum(report.worker_retry_delays):.2f}")
    else:
        summary.add_row("in-process retry sleep (s)", f"{sum(report.retry_sleeps):.2f}")
    summary.add_row("elapsed (s)", f"{report.elapsed:.2f}")
    summary.add_row("orders / s", f"{total / report.elapsed:.0f}" if report.elapsed else "-")
    summary.add_row("outcome digest", report.digest())
    console.print(summary)

    reasons = report.reasons()
    breakdown = Table(title="Failure reasons", show_header=True)
    breakdown.add_column("reason")
    breakdown.add_column("failed step")
    breakdown.add_column("orders", justify="right")
    breakdown.add_column("% of all", justify="right")
    breakdown.add_column("first order")
    for reason in [*REASONS, *sorted(set(reasons) - set(REASONS))]:
        failed = [o for o in report.outcomes if o.reason == reason]
        steps = ", ".join(sorted({o.step or "?" for o in failed})) or "-"
        share = f"{100 * len(failed) / total:.1f}" if total else "-"
        breakdown.add_row(reason, steps, str(len(failed)), share,
                          failed[0].order_id if failed else "-")
    console.print(breakdown)


def render_reviews(console: Console, report: DemoReport, services: Services) -> None:
    """Prints the manual reviews and the service audit log of the first rejected order.

    Args:
        console: where to print.
        report: the demo's report (its :attr:`DemoReport.reviews`).
        services: the services the orders ran against (for the undo each rejection caused).
    """
    if not report.reviews:
        return
    table = Table(title=f"Manual review of orders above {report.review_threshold} (resumed "
                        "by correlation id review:<order>)", show_header=True)
    for column in ("order", "total", "decision", "reviewer", "note", "run",
                   "undone by the rollback"):
        table.add_column(column, no_wrap=column != "note")
    for review in report.reviews:
        undone = "-"
        if not review.decision.approved:
            actions = [e.action for e in services.audit.events(review.order_id)]
            later = actions[actions.index("capture") + 1:] if "capture" in actions else []
            undone = ", ".join(f"{a} x{later.count(a)}" if later.count(a) > 1 else a
                               for a in dict.fromkeys(later)) or "-"
        table.add_row(review.order_id, f"{review.total} {review.currency}",
                      "approved" if review.decision.approved else "rejected",
                      review.decision.reviewer, review.decision.note or "", review.status,
                      undone)
    console.print(table)
    for review in report.reviews:
        if review.refused:
            malformed = json.dumps(_MALFORMED_REVIEW)
            console.print(f"{review.order_id}: the malformed payload {malformed} sent "
                          f"first was refused (invalid: {', '.join(review.refused)}); attempt "
                          f"{review.attempts} was counted and the run stayed paused.")
    rejected = next((r for r in report.reviews if not r.decision.approved), None)
    if rejected is not None:
        console.print(f"[bold]{rejected.order_id}[/bold] was rejected at its review: the run "
                      "failed at apply_review and the saga undid its work, newest first "
                      "(refund the capture, void the authorization, release the stock):")
        _render_audit(console, services, rejected.order_id)


def _render_audit(console: Console, services: Services, order_id: str) -> None:
    """Prints the service audit log of one order."""
    audit = Table(title=f"Service audit log of {order_id}", show_header=True)
    for col in ("#", "service", "action", "ref", "detail"):
        audit.add_column(col)
    for event in services.audit.events(order_id):
        detail = ", ".join(f"{k}={v}" for k, v in event.detail.items())
        audit.add_row(str(event.seq), event.service, event.action, event.ref, detail)
    console.print(audit)


def render_run(console: Console, run_id: str, services: Services | None = None,
               reactor_cls: type[Reactor] = Fulfil) -> None:
    """Prints a stored run as ``Fulfil.find(run_id)`` returns it (plus its audit events).

    Args:
        console: where to print.
        run_id: the run.
        services: if given, the order's service audit events are printed too.
        reactor_cls: the reactor the run belongs to.
    """
    view = reactor_cls.find(run_id)
    order = view.inputs.get("order")
    order_id = getattr(order, "id", "?")
    console.print(f"[bold]Run {view.run_id}[/bold]  reactor={view.reactor}  order={order_id}  "
                  f"status=[bold]{view.status}[/bold]")
    console.print(f"  inputs: card_token={view.inputs.get('card_token')!s}, "
                  f"order.payment.token={getattr(getattr(order, 'payment', None), 'token', '?')}")
    if view.failure is not None:
        f = view.failure
        error_class = (f.exception_class or "").rsplit(".", 1)[-1]
        console.print(f"  failure: step={f.step_name} error={f.message!r} ({error_class})")
        console.print(f"  rollback failures: {len(f.rollback_failures)}")
        for rf in f.rollback_failures:
            console.print(f"    - {rf.step} {rf.kind} ({rf.reason}): {rf.message}")
    for name, child in view.children.items():
        console.print(f"  composed run {name!r}: {child.reactor} status={child.status}, "
                      f"inputs={ {k: str(v) for k, v in child.inputs.items()} }")
    console.print(f"  undo stack after the run: {list(view.undo_stack) or 'empty'}")
    console.print(f"  results kept: {sorted(view.results)}")
    trace = Table(title=f"Trace of {order_id}", show_header=True)
    trace.add_column("#", justify="right")
    trace.add_column("run")
    trace.add_column("entry")
    trace.add_column("step")
    trace.add_column("attempt", justify="right")
    trace.add_column("detail")
    rows = [("saga", e) for e in view.trace]
    rows += [(f"{name}", e) for name, child in view.children.items() for e in child.trace]
    rows.sort(key=lambda row: row[1].at)
    for n, (where, e) in enumerate(rows, 1):
        trace.add_row(str(n), where, e.type, e.step or "", str(e.attempt or ""),
                      (e.detail or "")[:70])
    console.print(trace)
    if services is not None and isinstance(order_id, str):
        _render_audit(console, services, order_id)


def _pick_failed(report: DemoReport, order_id: str | None) -> Outcome | None:
    """The failed run to show: ``order_id``'s, else the first carrier outage, else any."""
    failed = [o for o in report.outcomes if o.status == "failed" and o.run_id]
    if order_id is not None:
        return next((o for o in report.outcomes if o.order_id == order_id and o.run_id), None)
    for reason in ("carrier_outage", "card_declined", "out_of_stock"):
        for o in failed:
            if o.reason == reason:
                return o
    return failed[0] if failed else None


def main(
    argv: Sequence[str] | None = None, console: Console | None = None, *,
    real_sleep: bool = True,
) -> int:
    """The command line entry point (see the module docstring).

    Args:
        argv: arguments (default ``sys.argv[1:]``).
        console: where to print (default: a new rich console on stdout).
        real_sleep: ``False`` skips the retry back-off waits (they are still recorded).

    Returns:
        The exit code: 0 all invariants hold, 1 a violation, 2 bad arguments or data.
    """
    parser = argparse.ArgumentParser(prog="python -m examples.order_fulfilment",
                                     description="Run the order fulfilment saga demo.")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="process only the first N orders")
    parser.add_argument("--orders", type=Path, default=ORDERS_PATH, metavar="PATH",
                        help="orders file (JSON Lines)")
    parser.add_argument("--show", default=None, metavar="ORDER_ID",
                        help="print the trace of this order's run instead of a failed one")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="run every order in background workers (N worker threads, payment "
                             "capture as an async_step) instead of synchronously")
    parser.add_argument("--review-threshold", type=_threshold, default=REVIEW_THRESHOLD,
                        metavar="AMOUNT",
                        help=f"orders above this total pause for a manual review (default "
                             f"{REVIEW_THRESHOLD}; 'off': none; synchronous mode only)")
    args = parser.parse_args(argv)
    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze the tables into 80
            console = Console(width=120)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.workers < 0:
        parser.error("--workers must be at least 0")
    try:
        orders = load_orders(args.orders, args.limit)
    except (OSError, ValueError) as exc:
        console.print(f"[red]cannot load orders: {exc}[/red]")
        return 2
    services = Services.create()
    try:
        report = run_demo(orders, services, real_sleep=real_sleep, workers=args.workers,
                          review_threshold=args.review_threshold)
    except ReactorError as exc:
        console.print(f"[red]the engine raised {type(exc).__name__}: {exc}[/red]")
        return 1
    render_summary(console, report)
    render_reviews(console, report, services)
    shown = _pick_failed(report, args.show)
    if shown is not None and shown.run_id is not None:
        if args.workers:
            from .saga_workers import FulfilInWorkers

            render_run(console, shown.run_id, services, reactor_cls=FulfilInWorkers)
        else:
            render_run(console, shown.run_id, services,
                       reactor_cls=FulfilWithReview if shown.reviewed else Fulfil)
    elif args.show is not None:
        console.print(f"[yellow]no run for order {args.show}[/yellow]")
    if report.violations:
        console.print(f"[red bold]INVARIANTS VIOLATED ({len(report.violations)}):[/red bold]")
        for line in report.violations[:25]:
            console.print(f"  - {line}")
        return 1
    reviewed = (
        f" Every order above {report.review_threshold} ran with a manual review: the "
        f"{sum(1 for r in report.reviews if r.decision.approved)} approved shipped, the "
        f"{sum(1 for r in report.reviews if not r.decision.approved)} rejected were refunded "
        "and their stock released; no run is left paused."
        if report.review_threshold is not None else ""
    )
    console.print(
        f"[green bold]Invariants hold[/green bold] for {len(orders)} orders: every failed "
        "order left no stock reserved, no money captured, no shipment and no e-mail; every "
        "completed order holds exactly its reservations, one capture, one shipment and one "
        f"e-mail; stock and money are conserved.{reviewed}"
    )
    return 0


def _threshold(text: str) -> Decimal | None:
    """Parses ``--review-threshold``: a non-negative amount, or ``off``/``none``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if text.strip().lower() in ("off", "none"):
        return None
    try:
        amount = Decimal(text)
    except ArithmeticError:
        raise argparse.ArgumentTypeError(
            f"--review-threshold: {text!r} is not an amount (e.g. 400 or 250.50) or 'off'"
        ) from None
    if not amount.is_finite() or amount < 0:
        raise argparse.ArgumentTypeError(
            f"--review-threshold: {text!r} must be a finite amount of at least 0"
        )
    return amount
