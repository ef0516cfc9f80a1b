"""Running one leaf step: resolve arguments, enforce the contract, run the body with retries.

docs/concepts.md, "A synchronous run" (retry loop, then argument resolution, contract
enforcement, step coordination, body, signal catch):

* an argument resolution error fails the step at once — not retried, not compensated;
* the ``Step`` class's input contract is enforced before **every** attempt; a violation is
  never retried and (the body not having started) never compensated;
* the body's ``Failure`` is retried per the step's :class:`~reactor.dsl.retries.Retries`,
  waiting through the run's retry wait (``Env.sleep``: the runtime clock's, or the run's own
  ``sleep=``); ``retryable=False`` stops at once;
* a transactional step's attempt runs in a transaction of its own, rolled back unless the
  attempt succeeded (:mod:`reactor.engine.step_transactions`);
* a step with ``Timeouts`` gives each attempt's body the tighter of ``per_attempt`` and what
  is left of ``total``: the time its bodies ran and its retry waits took, on the runtime
  clock (a step-level lock or semaphore wait, the contract check and the middleware around an
  attempt are not counted); past it the attempt fails with ``StepTimeout``. A worker that
  hands a retry wait to the queue keeps what was used in ``retry_context`` (the wait counted
  as its declared delay), so ``total`` spans the executions of the step (docs/concepts.md,
  "Time limits");
* a retry whose wait would end after the run's deadline is not waited for: the step ends
  with a ``RunDeadlineExceeded`` failure at once (docs/concepts.md, "Run deadlines").
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from reactor.dsl.declarations import StepSpec
from reactor.dsl.retries import NO_RETRIES, Retries
from reactor.dsl.timeouts import Timeouts
from reactor.engine import attempt_leases, invoke, observe, step_transactions
from reactor.engine.arguments import resolve_arguments
from reactor.engine.coordination import StepCoordination
from reactor.engine.heartbeat_writes import HeartbeatWriter, write_interval
from reactor.engine.retries import attempt_with_retries
from reactor.engine.run_control import deadline
from reactor.engine.state import InFlight, RunState
from reactor.errors import ArgumentResolutionError, InputValidationError
from reactor.model import codec
from reactor.model.heartbeats import Heartbeats, LastHeartbeat
from reactor.model.masking import mask_plain_secrets
from reactor.model.results import Failure, Result
from reactor.model.run_records import UndoEntry
from reactor.ports.capabilities import StepTransaction

__all__ = ["StepOutcome", "retry_policy", "run_leaf", "timeout_policy"]

_log = logging.getLogger("reactor.engine")

_T = TypeVar("_T")


@dataclass
class StepOutcome:
    """What running one step (of any kind) produced.

    Attributes:
        result: the step's result.
        arguments: the arguments the body saw (validated for class steps).
        body_started: whether user work started (decides compensation).
        undo_entry: the undo-stack entry to push on success (``None`` for leaf steps, whose
            entry the executor builds).
    """

    result: Result
    arguments: dict[str, Any]
    body_started: bool
    undo_entry: UndoEntry | None = None


def retry_policy(spec: StepSpec) -> Retries:
    """The effective policy: ``step(..., retries=)``, else the Step class's, else one attempt."""
    if spec.retries is not None:
        return spec.retries
    if spec.step_class is not None and spec.step_class.retries is not None:
        return spec.step_class.retries
    return NO_RETRIES


def timeout_policy(spec: StepSpec) -> Timeouts | None:
    """The effective time limits: ``step(..., timeouts=)``, else the Step class's, else none
    (docs/concepts.md, "Time limits")."""
    if spec.timeouts is not None:
        return spec.timeouts
    if spec.step_class is not None:
        return spec.step_class.timeouts
    return None


def _shortest_limit(limit: invoke.AttemptLimit | None) -> float | None:
    """The shortest of an attempt's time left and its heartbeat limit, in seconds (``None``:
    no limit)."""
    if limit is None:
        return None
    shortest = min(limit.seconds, math.inf if limit.heartbeat is None else limit.heartbeat)
    return shortest if math.isfinite(shortest) else None


def run_leaf(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run leaf step ``spec`` to its final result (all attempts)."""
    ctx = state.ctx
    name = spec.name
    try:
        arguments = resolve_arguments(spec, ctx)
    except ArgumentResolutionError as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    in_flight = InFlight(step=name, kind="step", arguments=arguments)
    state.in_flight = in_flight
    coordination = StepCoordination.for_step(state, spec)
    timeouts = timeout_policy(spec)
    clock = state.env.clock
    # Of ``total``: the runtime clock's seconds in bodies and retry waits, with what earlier
    # executions used when a worker handed a retry wait to the queue.
    spent = ctx.time_spent(name) if timeouts is not None else 0.0
    # The step's heartbeats over its attempts, from the last one an earlier execution kept.
    beats = Heartbeats(ctx.kept_heartbeat(name), wall=state.env.clock.now)

    def store_heartbeat(last: LastHeartbeat) -> None:
        """Keep ``last`` in the run's ``retry_context`` and checkpoint the run: fenced, by
        the executor's thread, the run's only writer (docs/concepts.md, "Heartbeats")."""
        ctx.keep_heartbeat(name, _storable(last, name, _secrets(state, name, in_flight)))
        state.checkpoint.save()

    # In a worker (a root run whose retries go to the queue) the last heartbeat is stored
    # while the attempt runs, so a worker killed mid-step leaves it to the next attempt.
    writer = (
        HeartbeatWriter(name, beats, write_interval(timeouts.heartbeat), store_heartbeat)
        if timeouts is not None and timeouts.heartbeat is not None
        and state.retry_wait is not None else None
    )

    def counted(call: Callable[[], _T]) -> _T:
        """``call()``, its time on the runtime clock added to ``spent``."""
        nonlocal spent
        began = clock.monotonic()
        try:
            return call()
        finally:
            spent += clock.monotonic() - began

    def run_attempt(n: int) -> Result:
        args = arguments
        if spec.step_class is not None:
            try:
                args = spec.step_class.contract.validate(arguments, step_name=name)
            except InputValidationError as exc:
                return Failure(exc, retryable=False, validation_errors=exc.field_errors)
        in_flight.arguments = args

        limit: invoke.AttemptLimit | None = None
        if timeouts is not None:
            seconds, kind = timeouts.limit(spent)
            if seconds is not None or timeouts.heartbeat is not None:
                limit = invoke.AttemptLimit(
                    math.inf if seconds is None else seconds, kind or "per_attempt", name, n,
                    timeouts.heartbeat, beats, writer,
                )
                if seconds is not None and seconds <= 0:  # the total is used up: no start
                    error = limit.error()
                    return Failure(error, retryable=False)

        def body() -> Result:
            def call(transaction: StepTransaction | None) -> invoke.Invocation:
                in_flight.body_started = True
                last = beats.start(n)  # the attempt shows life from its start
                context = state.step_context(
                    name, attempt=n, transaction=transaction, heartbeats=beats,
                    last_heartbeat=last,
                )
                if timeouts is None:
                    return invoke.call_run(spec, args, context)
                return counted(lambda: invoke.call_run(spec, args, context, limit))

            shortest = _shortest_limit(limit)
            if state.retry_wait is None or shortest is None:
                return step_transactions.run_body(state, spec, call).result
            # in a worker, the run's lock and the job's visibility end with the attempt's
            # shortest limit while it runs: a dead worker's step is taken over that soon
            with attempt_leases.leases_at_most(state, shortest):
                return step_transactions.run_body(state, spec, call).result

        return body() if coordination is None else coordination.attempt(args, body)

    def attempt(n: int) -> Result:  # one middleware step scope per attempt
        with observe.step(state, name, kind=spec.kind, attempt=n, arguments=arguments) as seen:
            result = run_attempt(n)
            seen.done(result)
            return result

    def on_retry(failed_attempt: int, delay: float, failure: Failure) -> None:
        ctx.count_attempts(name, failed_attempt)
        state.trace(
            "retry", name, attempt=failed_attempt,
            detail=f"retrying in {delay:g}s after: {failure.message}",
        )

    def wait(delay: float) -> None:
        if state.retry_wait is not None:
            # The worker hands the wait to the queue (it raises RetryLater, and the context
            # is saved): the next execution goes on from what was used of ``total``, the
            # wait counted as its declared delay, and reads the last heartbeat.
            if timeouts is not None and timeouts.total is not None:
                ctx.keep_time_spent(name, spent + delay)
            if beats.last is not None:
                ctx.keep_heartbeat(
                    name, _storable(beats.last, name, _secrets(state, name, in_flight))
                )
        if timeouts is None:
            sleep(delay)
        else:
            counted(lambda: sleep(delay))

    # A step resumed after a worker re-enqueued its retry continues its attempt count.
    done = ctx.attempts_of(name) or 0
    sleep = state.retry_wait or state.env.sleep
    def cut(failed_attempt: int, delay: float, failure: Failure) -> Failure | None:
        # a retry that would start after the run's deadline is not waited for
        return deadline.retry_cut(state.checkpoint.context, state.env.now(), delay, name,
                                  failure)

    result, used = attempt_with_retries(
        retry_policy(spec), attempt, on_retry=on_retry, cut=cut,
        sleep_fn=wait,
        first_attempt=done + 1,
    )
    if used > 1:
        ctx.count_attempts(name, used)
    if timeouts is not None and ctx.time_spent(name):
        ctx.keep_time_spent(name, None)
    if ctx.kept_heartbeat(name) is not None:
        ctx.keep_heartbeat(name, None)
    if coordination is not None:
        coordination.finish(result)
    return StepOutcome(result, in_flight.arguments, body_started=in_flight.body_started)


def _secrets(state: RunState, step: str, in_flight: InFlight) -> list[Any]:
    """The plain secret values a heartbeat of ``step`` may hold: the run's ``redact=True``
    inputs and the step's secret arguments (docs/security.md, "What is encrypted")."""
    ctx, arguments = state.ctx, in_flight.arguments
    values = [ctx.inputs[n] for n in ctx.redacted if n in ctx.inputs]
    names = state.definition.secret_arguments(step, arguments, ctx.redacted)
    values.extend(arguments[n] for n in names)
    return values


def _storable(last: LastHeartbeat, step: str, secrets: list[Any]) -> LastHeartbeat:
    """``last`` as the run can store it: every secret value in its details shown as
    ``"[REDACTED]"`` (a secret is never stored in clear, and views show it masked), and
    details the codec cannot encode dropped (logged), so a heartbeat never fails the save
    that hands a retry to the queue, nor the one that stores it while the attempt runs."""
    try:  # first: what the codec refuses (a cycle, nesting past MAX_DEPTH) is never walked
        codec.dumps(last.details).encode("utf-8")  # a lone surrogate fails only here
    except (codec.EncodeError, ValueError, RecursionError) as exc:
        _log.warning("event=heartbeat_details_unstorable step=%s error=%s (kept without its "
                     "details)", step, exc)
        return replace(last, details=None)
    masked = mask_plain_secrets(last.details, secrets)
    return last if masked is last.details else replace(last, details=masked)
