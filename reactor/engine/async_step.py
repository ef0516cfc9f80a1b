"""``async_step`` in the parent run: dispatching a unit and reading its result.

Semantics: docs/workers.md, "Async steps (``async_step``)"; the invariants of
docs/architecture.md, "Execution invariants" (single writer, persist before enqueue, durable
record before signal, liveness and parks). The unit's own job is
:mod:`reactor.jobs.handlers.step`.

**Dispatch** (:func:`reactor.engine.async_dispatch.dispatch`, called by the executor for a step
of kind ``"async_step"``; it lives in its own module because it resolves arguments, and argument
resolution reads units through this one):

1. a record already stored for ``(context, step)`` means the unit was dispatched before (a
   resumed or redelivered parent): re-attach, never re-dispatch;
2. the **dispatch guard** refuses a unit whose step-level lock (or limit-1 semaphore) key is
   held by this execution — the unit would wait in its worker for a hold its own parent keeps
   until it finishes. The refusal is a non-retryable
   :class:`~reactor.errors.AsyncStepDeadlockError` ``Failure``; the body never started,
   so the unit is not compensated (the parent's completed steps roll back as usual);
3. write the ``dispatched`` Step Result Record, record the link in the owning context's
   ``EngineState.async_steps``, checkpoint the root, then enqueue the ``step`` job
   (persist before enqueue). The node counts as complete **for scheduling only**: unrelated
   siblings keep running; the unit's value is never in ``intermediate_results`` and the unit is
   never on the undo stack.

**Readers** (:func:`read_result`, reached from :func:`reactor.engine.arguments.resolve` when a
``result("<unit>")`` template names a dispatched unit):

* a synchronous caller blocks up to ``async_wait_timeout``, measured on the runtime's clock
  (docs/testing.md, "The clock"): it subscribes to the unit's completion channel, re-checks
  the durable record on every wake-up, and polls every ``clamp(timeout / 10, 0.05 s, 5 s)``
  (a lost signal costs latency, never correctness); on a clock other than the system clock
  it waits through ``clock.sleep`` (:func:`reactor.engine.env.wait_for_signal`);
* inside a worker (``Env.in_worker``) the reader **parks** at once
  (:class:`~reactor.engine.parks.Park` with reason ``"async_wait"``, uncapped, re-enqueued
  after ``lock_snooze_base_delay + jitter``) instead of blocking a worker thread — on a small
  pool a blocked reader can starve the very job it waits for. Parks are bounded in total by
  ``async_park_timeout`` measured from the record's ``dispatched_at``.

On success the reader gets the raw value; on failure the ``Failure`` **object** (compensation
is opt-in: a failing unit nobody reads never fails the parent); on a unit halt, the ``Halt``.
A wait that runs out raises :class:`~reactor.errors.AsyncWaitTimeoutError`, which fails
the reading step as an argument error (not retried, not compensated).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import Env, wait_for_signal
from reactor.engine.parks import Park, park_delay
from reactor.errors import AsyncWaitTimeoutError, DeserializationError
from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.engine_state import Waiting
from reactor.model.keys import run_liveness_key, step_completion_channel
from reactor.model.records import StepResultRecord
from reactor.model.results import Failure, Halt, Result, Success
from reactor.model.status import RunStatus
from reactor.ports.payloads import RunPayload, job
from reactor.ports.storage import Storage, Subscription

__all__ = [
    "PARK_SWEEP_GRACE",
    "READER_BACKOFF_FRACTION",
    "READER_BACKOFF_MAX",
    "dispatched_units",
    "outcome_of",
    "read_result",
    "reader_park_delay",
    "reader_value",
    "reading",
    "resume_parked_owner",
    "wait_for_record",
]

log = logging.getLogger("reactor.async_step")

#: Seconds added to a parked unit's ``parked_until`` so ordinary queue latency on its
#: redelivery does not make the step sweeper mistake it for a lost unit (ruby_reactor's
#: ``StepWorker::PARK_SWEEP_GRACE``).
PARK_SWEEP_GRACE = 5.0
#: Bounds of a synchronous reader's fallback poll interval, in seconds.
MIN_POLL = 0.05
MAX_POLL = 5.0

_reader_env: contextvars.ContextVar[Env | None] = contextvars.ContextVar(
    "reactor_async_reader_env", default=None
)


@contextmanager
def reading(env: Env) -> Iterator[None]:
    """Let ``result("<unit>")`` templates resolved in this block wait through ``env``.

    The executor enters it around every execution, the unit handler around its own argument
    resolution (a unit may read another unit).
    """
    token = _reader_env.set(env)
    try:
        yield
    finally:
        _reader_env.reset(token)


def dispatched_units(ctx: Context) -> set[str]:
    """The names of the units ``ctx`` already dispatched (complete for scheduling): the
    links the parent wrote at dispatch (``EngineState.async_steps``)."""
    return set(ctx.engine_state.async_steps)


# ------------------------------------------------------------------------------ readers


def outcome_of(record: StepResultRecord) -> Result:
    """The unit's result stored on a ``completed`` record (``Success``/``Halt``/``Failure``).

    Raises:
        DeserializationError: the stored outcome is malformed.
    """
    decoded = codec.loads(record.outcome) if record.outcome is not None else None
    if isinstance(decoded, Result):
        return decoded
    return Success(decoded)


def reader_value(result: Result) -> Any:
    """What a reader gets: the raw value of a ``Success``; the ``Halt``/``Failure`` itself."""
    if isinstance(result, Halt | Failure):
        return result
    assert isinstance(result, Success)
    return result.value


def _subscribe(storage: Storage, channel: str) -> Subscription | None:
    signals = storage.signals
    if signals is None or not storage.capabilities.signals:
        return None
    try:
        return signals.subscribe(channel)
    except Exception as exc:
        log.warning("event=subscribe_failed channel=%s error=%s", channel, exc)
        return None


def wait_for_record(
    env: Env, context_id: str, step: str, timeout: float | None = None
) -> StepResultRecord:
    """Block until the unit's record is ``completed`` (a synchronous reader).

    Args:
        env: the reader's environment.
        context_id: the context owning the unit.
        step: the unit's name.
        timeout: seconds; ``None`` = ``settings.async_wait_timeout``.

    Returns:
        The completed record.

    Raises:
        AsyncWaitTimeoutError: still not completed at the deadline.
        StorageError: the backend failed.
    """
    bound = env.settings.async_wait_timeout if timeout is None else float(timeout)
    poll = min(max(bound / 10.0, MIN_POLL), MAX_POLL)
    clock = env.clock
    deadline = clock.monotonic() + bound
    subscription = _subscribe(env.storage, step_completion_channel(context_id, step))
    try:
        while True:  # subscribed before the first check: no lost wake-up
            record = env.storage.step_results.get(context_id, step)
            if record is not None and record.status == "completed":
                return record
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise AsyncWaitTimeoutError(
                    f"async_step {step!r} of run {context_id!r} did not complete within "
                    f"{bound:g}s", run_id=context_id, timeout=bound,
                )
            wait_for_signal(clock, subscription, min(poll, remaining))
    finally:
        if subscription is not None:
            subscription.close()


#: A worker reader's park delay grows with its wait: at least this fraction of the seconds the
#: unit has been waited for (docs/workers.md, "Async steps", "Readers back off").
READER_BACKOFF_FRACTION = 0.25
#: ... and at most this many seconds, however long the wait.
READER_BACKOFF_MAX = 30.0


def reader_park_delay(base: float, waited: float) -> float:
    """The delay of a worker reader's park on a unit waited for ``waited`` seconds.

    ``max(base, min(READER_BACKOFF_FRACTION x waited, READER_BACKOFF_MAX))``: a reader re-checks
    a unit that is quick at the contention-park pace (``base``), and one stuck behind a long
    queue less and less often, so waiting readers never crowd out the units they wait for
    (docs/workers.md, "Async steps", "Readers back off").

    Args:
        base: the contention park delay (:func:`reactor.engine.parks.park_delay`), seconds.
        waited: seconds since the unit was dispatched (negative counts as 0).

    Returns:
        Seconds before the reader runs again.
    """
    grown = min(READER_BACKOFF_FRACTION * max(waited, 0.0), READER_BACKOFF_MAX)
    return max(base, grown)


def _park(env: Env, ctx: Context, step: str, dispatched_at: float) -> Park:
    bound = env.settings.async_park_timeout
    waited = env.now() - dispatched_at
    if bound is not None and waited >= bound:
        raise AsyncWaitTimeoutError(
            f"async_step {step!r} of run {ctx.context_id!r} did not complete within the "
            f"async_park_timeout of {bound:g}s (dispatched {waited:.0f}s ago)",
            run_id=ctx.context_id, timeout=bound,
        )
    delay = reader_park_delay(park_delay(env.settings), waited)
    if bound is not None:
        delay = min(delay, max(bound - waited, 0.1))
    ctx.engine_state = replace(
        ctx.engine_state,
        waiting=Waiting(scope=ctx.current_step, primitive="async_step", key=step),
    )
    return Park(delay=delay, reason="async_wait", key=f"{ctx.context_id}:{step}",
                step=ctx.current_step)


def read_result(ctx: Context, step: str) -> Any:
    """Resolve ``result(step)`` for an async unit dispatched by ``ctx`` (see module docstring).

    Raises:
        LookupError: ``step`` is not a unit ``ctx`` dispatched, or no execution is reading
            (the caller reports "step has no result").
        AsyncWaitTimeoutError: the wait ran out (sync: ``async_wait_timeout``; worker:
            ``async_park_timeout`` since dispatch).
        Park: inside a worker, while the unit is not completed.
    """
    env = _reader_env.get()
    ref = ctx.engine_state.async_steps.get(step)
    if env is None or ref is None:
        raise LookupError(f"step {step!r} has no result")
    record = env.storage.step_results.get(ctx.context_id, step)
    if record is None or record.status != "completed":
        if env.in_worker:
            dispatched_at = record.dispatched_at if record is not None else ref.dispatched_at
            raise _park(env, ctx, step, dispatched_at)
        record = wait_for_record(env, ctx.context_id, step)
    waiting = ctx.engine_state.waiting
    if waiting is not None and waiting.primitive == "async_step":
        ctx.engine_state = replace(ctx.engine_state, waiting=None)
    return reader_value(outcome_of(record))


def resume_parked_owner(env: Env, root_context_id: str, reactor: str) -> bool:
    """After a unit completed in a worker: resume its owner when the owner is parked on a
    unit and nobody holds it (docs/workers.md, "Async steps (`async_step`)").

    A reader parked in a worker keeps its run's liveness lock as a stamp until its ``run``
    job comes back; if that job was lost, the stamp lapsed and only a sweep would move the
    run again, one dispatch lease later (a completion signal reaches no process). So the
    unit's handler, once its terminal record is stored, enqueues the owner's ``run`` job
    itself when the stored root is ``running``, parked on an ``async_step`` (its ``waiting``
    note) and its ``async:<id>`` lock is free. A live stamp or a running execution holds the
    lock: its own job comes back, nothing is enqueued. An extra job meets the run's lock or
    its new state and does nothing harmful (docs/architecture.md, "Execution invariants").
    Costs one lock read per completed unit, plus one run read when the lock is free.

    Args:
        env: the unit's environment (in a worker).
        root_context_id: the root run owning the unit.
        reactor: the root's registered reactor name.

    Returns:
        Whether the owner's ``run`` job was enqueued.

    Raises:
        StorageError, RouterError: a backend failed (the unit's record is already stored:
            the run sweeper still recovers the run).
    """
    storage = env.storage
    if storage.locks.held(run_liveness_key(root_context_id)):
        return False
    record = storage.contexts.load(root_context_id)
    if record is None:
        return False
    try:
        root = Context.from_document(checkpoints.stored_document(record))
    except DeserializationError:
        return False  # the run handler quarantines it when its job comes
    waiting = root.engine_state.waiting
    if root.status is not RunStatus.RUNNING or waiting is None or (
        waiting.primitive != "async_step"
    ):
        return False
    mark_enqueued(env.runtime, run_unit(root_context_id))  # queued, not lost, to the sweeper
    env.runtime.router.enqueue(job(RunPayload(context_id=root_context_id, reactor=reactor)))
    log.info("event=async_owner_resumed run_id=%s unit=%s", root_context_id, waiting.key)
    return True
