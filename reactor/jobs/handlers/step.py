"""The ``step`` job: run one ``async_step`` unit (docs/workers.md, "Async steps";
docs/architecture.md, "Job kinds").

1. Resolve the root's reactor by registered name (unknown: a poison job).
2. Take the per-unit liveness lock ``async_step:<ctx>:<step>``
   (:func:`reactor.model.keys.step_liveness_key`); a live holder means a concurrent duplicate
   delivery: drop this one. The inline router skips the lock.
3. A ``completed`` record means a redelivery of a finished unit: drop it (``already_completed?``:
   the liveness lock only drops *concurrent* duplicates; a swept park whose redelivery arrives
   late is sequential).
4. Load the **root** context and find the owning (possibly composed) context. The unit **never
   writes it back** (single writer, docs/architecture.md, "Execution invariants"): every fact
   about the unit lives on its own Step Result Record. A missing root, context or step is a terminal
   failure record; an unreadable root is quarantined (stored ``failed`` with its text and the
   reason, :mod:`reactor.engine.quarantine`) and the unit completes with that failure, so no
   sweep re-dispatches either.
5. Run the step exactly as a same-process leaf step (:func:`reactor.engine.step_runner.run_leaf`):
   argument resolution and contract validation before any coordination is taken, step-level
   coordination under the derived owner ``async_step:<ctx>:<step>`` (so a redelivery re-adopts
   its own detached lock), retries **inside the job** waiting on the runtime's clock.
6. Contention **parks**: the record is stamped ``parked_until = now + delay + grace``, ``waiting``
   and ``contention_attempts``; the unit's own park state — detached holds, ordered-lock ticket,
   attempts used (the parked attempt given back) — is saved in ``record.data`` and restored on
   the redelivery, with, for views, when the unit first started and what it waits on
   (docs/protocol.md#step-results); the job is re-enqueued with the delay and
   ``contention_attempts + 1``. Parks are capped by ``lock_snooze_max_attempts`` (ordered-lock
   and async waits are not): at the cap the unit completes with a non-retryable
   :class:`~reactor.errors.SnoozeLimitError` failure, its parked holds released and its
   ordered-lock place given up.
7. A final ``Failure`` whose body started runs the unit's own ``compensate`` once, recorded on
   the record (``data["compensation"]``). A result the codec cannot store (an unregistered
   type, nested deeper than :data:`reactor.model.codec.MAX_DEPTH`) is such a failure,
   non-retryable: the body never runs again for it.
8. The terminal ``completed`` record (``outcome`` = codec JSON of the ``Success``/``Halt``/
   ``Failure``) is written **before** the completion signal (durable record before signal).
9. Then, the unit's lock released, an owner parked on a unit whose liveness lock is free (its
   ``run`` job was lost: nobody hears the signal) is resumed by enqueueing its ``run`` job
   (:func:`reactor.engine.async_step.resume_parked_owner`).

In a worker with async slots (docs/workers.md, "Async slots") a unit whose body is ``async
def`` (:func:`reactor.jobs.slot_jobs.awaits_on_loop`) runs through this same handler in a
slot: the waits for its body and, on the system clock, its retry waits suspend the job
instead of blocking the thread (:mod:`reactor.engine.handback`); every step above is
unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reactor import registry
from reactor.coordination.ordered_lock import OrderedLock
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import async_step, handback, invoke, observe
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.coordination import release_parked
from reactor.engine.dispatch import publish_completion
from reactor.engine.env import Env
from reactor.engine.liveness import liveness_lock
from reactor.engine.parks import Park
from reactor.engine.quarantine import quarantine
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome, run_leaf
from reactor.errors import DeserializationError, SnoozeLimitError, UnknownReactorError
from reactor.jobs.job_context import JobContext
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import KeyedTicket, ParkedHold
from reactor.model.keys import step_completion_channel, step_liveness_key
from reactor.model.records import StepResultRecord
from reactor.model.results import Failure, Result
from reactor.model.text import escaping_logger
from reactor.ports.clock import SystemClock
from reactor.ports.payloads import StepPayload

__all__ = ["handle_step", "unit_owner"]

log = escaping_logger("reactor.worker")

#: ``record.data`` keys of a parked unit's own state.
DATA_TICKET = "ordered_lock"
DATA_HOLDS = "parked_holds"
DATA_ATTEMPTS = "attempts"
DATA_COMPENSATION = "compensation"
#: When the unit first started running (epoch seconds), for views: dashboards merge the unit's
#: run into its parent's trace by it (docs/dashboard.md, "Run page").
DATA_STARTED = "started_at"
#: What a parked unit waits on: ``{"scope", "primitive", "key"}``, for views.
DATA_WAITING = "waiting"


def unit_owner(step_context_id: str, step_name: str) -> str:
    """The coordination owner of a unit: derived, never random and never the root id.

    Never the root: the unit must not re-enter its dispatching execution's holds. Never random:
    a park detaches the unit's lock and the redelivery must re-adopt it as the same owner.
    """
    return step_liveness_key(step_context_id, step_name)


class _NoWrite(Checkpointer):
    """The unit's checkpointer: the unit never writes its parent's context (single writer)."""

    def save(self, *, force: bool = True) -> None:
        """Do nothing: the unit's facts live on its Step Result Record."""


def _find(ctx: Context, target: str) -> Context | None:
    if ctx.context_id == target:
        return ctx
    for child in ctx.composed_contexts.values():
        if isinstance(child, Context) and (found := _find(child, target)) is not None:
            return found
    return None


class _Unit:
    """One delivery of one unit."""

    def __init__(self, jc: JobContext, payload: StepPayload, env: Env) -> None:
        self.jc = jc
        self.payload = payload
        self.env = env
        self.context_id = payload.step_context_id
        self.step = payload.step_name
        self.record: StepResultRecord | None = None
        self.started_at: float | None = None
        #: This delivery stored the unit's terminal record.
        self.completed_now = False

    # -------------------------------------------------------------- records

    def _base(self) -> StepResultRecord:
        now = self.env.now()
        return self.record or StepResultRecord(
            context_id=self.context_id, step_name=self.step, status="dispatched",
            root_context_id=self.payload.root_context_id, reactor=self.payload.reactor,
            dispatched_at=now, updated_at=now,
        )

    def complete(self, result: Result, data: dict[str, Any] | None = None) -> None:
        """Write the terminal record, then publish the completion signal."""
        storage = self.env.storage
        kept = {k: v for k, v in (data or {}).items() if v is not None}
        record = replace(
            self._base(), status="completed", updated_at=self.env.now(), parked_until=None,
            waiting=None, contention_attempts=self.payload.contention_attempts,
            outcome=codec.dumps(result), data=kept,
        )
        storage.step_results.put(record)  # durable record first, then the signal
        self.record = record
        self.completed_now = True
        log.info("event=async_step_completed context_id=%s step=%s outcome=%s",
                 self.context_id, self.step, type(result).__name__)
        signals = storage.signals
        if signals is not None and storage.capabilities.signals:
            try:
                signals.publish(step_completion_channel(self.context_id, self.step), "done")
            except Exception as exc:  # best effort: readers re-check the record
                log.warning("event=publish_failed step=%s error=%s", self.step, exc)

    def fail(self, message: str) -> None:
        """Complete with a permanent failure (missing parent, context or step)."""
        log.warning("event=async_step_unrunnable context_id=%s step=%s reason=%s",
                    self.context_id, self.step, message)
        self.complete(Failure(message, retryable=False, step_name=self.step))

    # -------------------------------------------------------------- running

    def run(self) -> None:
        self.record = self.env.storage.step_results.get(self.context_id, self.step)
        if self.record is not None and self.record.status == "completed":
            log.info("event=async_step_duplicate_dropped context_id=%s step=%s",
                     self.context_id, self.step)
            return
        try:
            root = load_context(self.env, self.payload.root_context_id)
        except DeserializationError as exc:  # unreadable root: store it failed, fail the unit
            quarantined = quarantine(self.env, self.payload.root_context_id, exc)
            if quarantined is None:  # readable after all, or not ours to judge (raises)
                root = load_context(self.env, self.payload.root_context_id)
            else:
                self.fail(str(exc))
                publish_completion(self.env.storage, quarantined)
                return
        if root is None:
            self.fail(f"the parent run {self.payload.root_context_id!r} is not stored")
            return
        ctx = _find(root, self.context_id)
        if ctx is None:
            self.fail(f"context {self.context_id!r} is not part of run {root.context_id!r}")
            return
        try:
            definition = registry.get(ctx.reactor).definition
        except UnknownReactorError:
            self.fail(f"reactor {ctx.reactor!r} of context {self.context_id!r} is unknown")
            return
        definition.register_codec_types()
        spec = definition.steps.get(self.step)
        if spec is None or spec.kind != "async_step":
            self.fail(f"{definition.name} has no async_step {self.step!r}")
            return
        self._restore(ctx)
        started = self.record.data.get(DATA_STARTED) if self.record is not None else None
        self.started_at = started if isinstance(started, int | float) else self.env.now()
        state = RunState(
            definition, ctx, self.env, _NoWrite(self.env, root),
            coordination_owner=unit_owner(self.context_id, self.step),
            on_ordered_ticket=self._keep_ticket,
        )
        state.ctx.current_step = self.step
        try:
            with async_step.reading(self.env):
                outcome = run_leaf(state, spec)
        except Park as park:
            self._park(state, definition, park)
            return
        self._finish(state, spec, outcome)

    def _keep_ticket(self, step: str, ticket: KeyedTicket) -> None:
        """Store a newly assigned step-level ordered ticket on the unit's record before the
        turn starts, so a unit recovered after a crash keeps its place in line (the line waits
        for the recovered unit, not for the poison-pill timeout)."""
        record = self._base()
        data = {**record.data, DATA_TICKET: ticket.to_json()}
        self.record = replace(record, updated_at=self.env.now(), data=data)
        self.env.storage.step_results.put(self.record)

    def _restore(self, ctx: Context) -> None:
        """Put the unit's park state (from its record) where the engine looks for it."""
        data = dict(self.record.data) if self.record is not None else {}
        state = replace(ctx.engine_state, waiting=None)
        try:
            if data.get(DATA_TICKET) is not None:
                ticket = KeyedTicket.from_json(data[DATA_TICKET], f"data.{DATA_TICKET}")
                state = state.with_step_ticket(self.step, ticket)
            holds = data.get(DATA_HOLDS)
            if holds:
                if not isinstance(holds, list):
                    raise DeserializationError(f"record field 'data.{DATA_HOLDS}' is not a list")
                state = state.with_parked_holds(self.step, [
                    ParkedHold.from_json(h, f"data.{DATA_HOLDS}[{i}]") for i, h in enumerate(holds)
                ])
        except DeserializationError as exc:  # only this handler writes it: never expected
            log.warning("event=async_step_park_state_unreadable context_id=%s step=%s error=%s",
                        self.context_id, self.step, exc)
        ctx.engine_state = state
        attempts = data.get(DATA_ATTEMPTS)
        counted = isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 0
        ctx.count_attempts(self.step, attempts if counted else None)

    def _park_state(self, ctx: Context) -> dict[str, Any]:
        ticket = ctx.engine_state.step_ordered_tickets.get(self.step)
        holds = ctx.engine_state.parked_holds.get(self.step)
        attempts = ctx.attempts_of(self.step)
        waiting = ctx.engine_state.waiting
        return {
            DATA_TICKET: ticket.to_json() if ticket is not None else None,
            DATA_HOLDS: [hold.to_json() for hold in holds] if holds else None,
            # attempts that failed before the park; the parked attempt is given back
            DATA_ATTEMPTS: attempts if isinstance(attempts, int) else None,
            DATA_STARTED: self.started_at,
            DATA_WAITING: waiting.to_json() if waiting is not None else None,
        }

    def _park(self, state: RunState, definition: ReactorDefinition, park: Park) -> None:
        ctx = state.ctx
        settings = self.env.settings
        attempt = self.payload.contention_attempts + 1
        limit = settings.lock_snooze_max_attempts
        if park.capped and limit is not None and attempt > limit:
            self._give_up(ctx, park, attempt)
            return
        saved = {k: v for k, v in self._park_state(ctx).items() if v is not None}
        now = self.env.now()
        record = replace(
            self._base(), status="dispatched", updated_at=now,
            parked_until=now + park.delay + async_step.PARK_SWEEP_GRACE,
            waiting=park.key, contention_attempts=attempt, data=saved,
        )
        self.env.storage.step_results.put(record)
        self.record = record
        log.info(
            "event=async_step_parked context_id=%s step=%s reason=%s key=%s delay=%.2f "
            "attempt=%d", self.context_id, self.step, park.reason, park.key, park.delay, attempt,
        )
        self.jc.requeue(
            self.payload.model_copy(update={"contention_attempts": attempt}), park.delay
        )

    def _give_up(self, ctx: Context, park: Park, attempt: int) -> None:
        """At the park cap: release what the parks kept, give the ordered place up, fail."""
        storage = self.env.storage
        for entry in ctx.engine_state.parked_holds.get(self.step, ()):
            release_parked(storage, entry)
        ticket = ctx.engine_state.step_ordered_tickets.get(self.step)
        if ticket is not None:
            OrderedLock(storage.ordered_locks, ticket.key).advance(ticket.ticket)
        error = SnoozeLimitError(
            f"async_step {self.step!r} gave up after {attempt} contention attempts on "
            f"{park.reason} {park.key or ''}".strip(),
            reason=park.reason, key=park.key, attempts=attempt,
        )
        log.warning("event=async_step_contention_exhausted step=%s key=%s attempts=%d",
                    self.step, park.key, attempt)
        self.complete(Failure(error, retryable=False, step_name=self.step))

    def _finish(self, state: RunState, spec: StepSpec, outcome: StepOutcome) -> None:
        result = outcome.result
        if not isinstance(result, Failure):
            try:  # a value the record cannot hold fails the unit once, never re-runs it
                codec.dumps(result)
            except codec.EncodeError as exc:
                result = Failure(exc, retryable=False, traceback=invoke.trimmed_traceback(exc))
        ctx = state.ctx
        data: dict[str, Any] = {
            DATA_ATTEMPTS: ctx.attempts_of(self.step),
            DATA_STARTED: self.started_at,
        }
        if isinstance(result, Failure):
            result = replace(result, step_name=self.step, reactor_name=state.definition.name,
                             inputs=state.definition.redact_arguments(self.step,
                                                                      outcome.arguments))
            if outcome.body_started and invoke.has_compensate(spec):
                with observe.step(state, self.step, "compensate", kind=spec.kind,
                                  arguments=outcome.arguments) as seen:
                    compensation = invoke.call_compensate(
                        spec, outcome.arguments, result, state.step_context(self.step)
                    ).result
                    seen.done(compensation)
                data[DATA_COMPENSATION] = (
                    {"status": "failed", "message": compensation.message}
                    if isinstance(compensation, Failure) else {"status": "completed"}
                )
        self.complete(result, data)


def handle_step(jc: JobContext, payload: StepPayload) -> None:
    """Run one ``step`` job (see the module docstring).

    Raises:
        UnknownReactorError: the payload names no registered reactor (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    # poison check (reactors by registered name only); the root's codec types before its load
    registry.get(payload.reactor).definition.register_codec_types()
    env = jc.env()
    if isinstance(env.clock, SystemClock):  # in an async slot a retry wait hands its thread back
        env = replace(env, sleep=handback.sleeper(env.sleep))
    unit = _Unit(jc, payload, env)
    if jc.inline:  # nested in the dispatching thread: no cross-process race
        unit.run()
        return
    lock = liveness_lock(env, step_liveness_key(payload.step_context_id, payload.step_name))
    if not lock.try_acquire():
        log.info("event=async_step_duplicate_dropped context_id=%s step=%s reason=live_lock",
                 payload.step_context_id, payload.step_name)
        return
    try:
        unit.run()
    finally:
        try:
            lock.release()
        except Exception:  # the lock lapses with its TTL
            pass
    if unit.completed_now:  # a parked owner whose own job was lost moves now, not a sweep later
        async_step.resume_parked_owner(env, payload.root_context_id, payload.reactor)
