"""The ``map_element`` job: run one element of a fan-out map (docs/fan_out.md;
docs/architecture.md, "Job kinds").

1. Take the element's liveness lock ``map_element:<map>:<index>`` (auto-extended); a live
   holder means a duplicate delivery: drop this one. The inline router skips the lock.
2. Load the element's context (stored pending by the dispatcher), in one request with the
   lock where the store can (docs/protocol.md, "Optional fast paths"). An unreadable element (or
   owner) context is quarantined — stored ``failed`` with its text and the reason
   (:mod:`reactor.engine.quarantine`) — and the element settles as a failure carrying that
   reason, so no sweep re-dispatches it.
3. Begin (one request where the store can: ``begin_element``, docs/protocol.md, "Optional
   fast paths"): read the map's metadata (gone: nothing to do), whether the index's slot is
   stored (the element settled before: nothing runs again; the collector is re-triggered if
   the map looks settled, in case the first delivery died before triggering it) and the map's
   failed context; a **fresh** (pending) element is appended to the map's element index
   unless the map already stopped, in which case it skips itself. A context that is gone is
   rebuilt from the parent first. A running context resumes where it stopped; a finished one
   only has its result re-read.
4. Settle (one request where the store can: ``settle_element``): an atomic failure or a halt
   records the element as the map's failed context (first wins), the slot is stored by index
   (a re-run overwrites, never duplicates) and the counter decremented; then the lock is
   released (in the same request where the store can), the element that ends a batch
   dispatches the next one, and the job that brings the counter to 0 enqueues the collector.

An element this process's definition of its reactor cannot continue (docs/deploys.md,
"Compatibility rules"; judged before the begin for a pending one) is handed back to a worker
announcing its definition, else held ``needs_version`` (the map waits) with its job brought
back later; a worker that can continue it gives it its previous status back and runs it
(docs/deploys.md, "Routing by version").

Contention **parks** an element like any unit in a worker (docs/coordination.md,
"Contention"; docs/fan_out.md, "What happens"): a lock, semaphore, rate limit or ordered
lock of the element's reactor or of one of its steps that is taken saves the element context
(its holds recorded) and re-enqueues this job after the park delay, with ``attempt`` + 1 for a
capped park; the element's lock is released and its dispatch mark taken for the delay, so no
sweep enqueues a copy meanwhile. An element never admitted gives up after
``lock_snooze_max_attempts`` capped parks: it settles as a ``Failure(SnoozeLimitError)``.
"""

from __future__ import annotations

from dataclasses import replace

from reactor import registry
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import compatibility, executor, fast_paths, observe
from reactor.engine.checkpoint import Checkpointer, decode_context, load_context
from reactor.engine.compatibility import Incompatibility
from reactor.engine.coordination import is_admitted
from reactor.engine.dispatch import publish_completion, stored_result
from reactor.engine.dispatch_leases import mark_enqueued
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer, Liveness, liveness_lock
from reactor.engine.maps.dispatcher import (
    dispatch_batch,
    element_context_id,
    element_definition,
    element_is_stopped_status,
    enqueue_collector,
    materialize,
)
from reactor.engine.maps.results import encode_slot
from reactor.engine.parks import Park, snooze_limit_failure
from reactor.engine.quarantine import quarantine
from reactor.engine.start import invalid_inputs
from reactor.engine.state import RunState
from reactor.errors import (
    ArgumentResolutionError,
    DeserializationError,
    InputValidationError,
    LockLost,
)
from reactor.jobs import version_routing
from reactor.jobs.job_context import JobContext
from reactor.model.context import Context
from reactor.model.keys import map_element_key
from reactor.model.records import ContextRecord, LockClaim, MapMetadata
from reactor.model.results import Failure, Halt, Paused, Success
from reactor.model.status import RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.payloads import MapElementPayload

__all__ = ["handle_map_element", "run_element"]

log = escaping_logger("reactor.map")

ElementResult = Success | Failure | Halt


def handle_map_element(jc: JobContext, payload: MapElementPayload) -> None:
    """Run one ``map_element`` job (see the module docstring).

    Raises:
        UnknownReactorError: the element reactor is not registered (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    # In a worker, contention parks instead of blocking a handler thread (docs/architecture.md,
    # "Execution invariants"); inline, the element runs nested in its caller, which waits.
    env = jc.env()
    map_id, index = payload.map_id, payload.index
    hold: Liveness | None = None
    element_id = element_context_id(map_id, index)
    loaded: ContextRecord | _Reload | None = _RELOAD
    if not jc.inline:
        lock = liveness_lock(env, map_element_key(map_id, index))
        started = lock.monotonic()
        try:  # the lock and the element's context in one request where the store can
            token, loaded = fast_paths.load_taking(
                env.storage, element_id, LockClaim(key=lock.key, owner=lock.owner, ttl=lock.ttl)
            )
            if token:
                lock.adopt(token, started)
        except DeserializationError:  # unreadable: take the lock alone; _load quarantines it
            token, loaded = (lock.token if lock.try_acquire() else 0), _RELOAD
        if not token:
            log.info("event=map_element_busy map_id=%s index=%d (a live job holds it)",
                     map_id, index)
            return
        hold = Liveness(element_id, lock)
    try:
        outcome = _settle(env, payload, hold, loaded)
    except Park as park:  # saved with its holds recorded; the lock is released below
        log.info("event=map_element_parked map_id=%s index=%d reason=%s key=%s delay=%.2f "
                 "attempt=%d", map_id, index, park.reason, park.key, park.delay, payload.attempt)
        mark_enqueued(jc.runtime, map_element_key(map_id, index), delay=park.delay)
        jc.requeue(
            payload.model_copy(update={"attempt": payload.attempt + 1}) if park.capped
            else payload, park.delay,
        )
        return
    except _Refused as refused:  # docs/deploys.md, "Routing by version"
        _refused(jc, env, payload, hold, refused)
        return
    except LockLost as exc:
        log.warning("event=map_element_lock_lost map_id=%s index=%d error=%s",
                    map_id, index, exc)
        if hold is not None:
            hold.lock = None  # not ours any more
        return
    finally:
        if hold is not None:
            hold.release()
    if outcome is None:
        return
    meta, remaining = outcome
    if (index + 1) % max(meta.batch_size, 1) == 0 and index + 1 < meta.count:
        dispatch_batch(env, meta)
    if remaining <= 0:
        enqueue_collector(env, map_id)


class _Reload:
    """The element's context was not read with its lock: :func:`_load` reads it."""


_RELOAD = _Reload()


def _settle(
    env: Env, payload: MapElementPayload, hold: Liveness | None,
    loaded: ContextRecord | _Reload | None = _RELOAD,
) -> tuple[MapMetadata, int] | None:
    """Run (or skip, or re-read) the element and settle it: its slot stored and the counter
    decremented in one request where the store can (:mod:`reactor.engine.fast_paths`).

    Returns:
        ``(the map's metadata, the counter after this element)``, or ``None`` when nothing
        was settled (the map is gone, the index out of range, a duplicate delivery).
    """
    maps = env.storage.maps
    map_id, index = payload.map_id, payload.index
    element_id = element_context_id(map_id, index)
    result: ElementResult | None = None
    unreadable: _Unreadable | None = None
    broken: DeserializationError | None = None
    if isinstance(loaded, _Reload):
        try:
            loaded = env.storage.contexts.load(element_id)
        except DeserializationError as exc:  # decided below, once the slot is known unsettled
            loaded, broken = None, exc
    ctx: Context | None = None
    decoded = False
    # A settled element's context is never decoded (so never quarantined): its undo stack
    # belongs to the map's rollback. Only a pending one is read before the begin, which
    # appends it to the element index when the map goes on.
    fresh = loaded is not None and loaded.status == RunStatus.PENDING.value
    if fresh or (loaded is not None and loaded.status == RunStatus.NEEDS_VERSION.value):
        ctx, unreadable = _decoded(env, element_id, loaded, None)
        if ctx is not None:
            _judge(ctx)  # before the begin appends it (docs/deploys.md, "Routing by version")
        decoded, fresh = True, ctx is not None and ctx.status is RunStatus.PENDING
    start = fast_paths.begin_element(maps, map_id, index, element_id if fresh else None)
    meta = start.metadata
    if meta is None:
        log.warning("event=map_missing map_id=%s index=%d", map_id, index)
        return None
    if index >= meta.count:
        log.warning("event=map_index_out_of_range map_id=%s index=%d count=%d",
                    map_id, index, meta.count)
        return None
    if start.settled:
        if maps.count_results(map_id) >= meta.count:
            enqueue_collector(env, map_id)
        return None
    if not decoded and (loaded is not None or broken is not None):
        ctx, unreadable = _decoded(env, element_id, loaded, broken)
    definition = element_definition(meta)
    atomic = meta.atomic if payload.atomic is None else payload.atomic
    if ctx is None and unreadable is None:
        try:
            _materialize(env, meta, index)
            ctx = _load(env, element_id)
        except _Unreadable as error:
            unreadable = error
        fresh = ctx is not None and ctx.status is RunStatus.PENDING
        if fresh and start.failed_context is None:
            maps.append_element(map_id, element_id)  # before its first save: fresh only
    if unreadable is not None:
        result = Failure(unreadable.error, retryable=False, reactor_name=definition.name)
    elif ctx is None:
        result = Failure(f"map element {index}: its context and its parent are gone",
                         retryable=False, reactor_name=definition.name)
    elif fresh:
        if start.failed_context is None:  # appended by begin_element (or just above)
            result = run_element(env, definition, ctx, hold, attempt=payload.attempt)
        # else: the map stopped before this element started (skipped)
    elif element_is_stopped_status(ctx):
        stored = stored_result(ctx)
        assert not isinstance(stored, Paused)  # a map element never pauses
        result = stored
    else:
        _judge(ctx)  # docs/deploys.md, "Compatibility rules"
        result = run_element(env, definition, ctx, hold, attempt=payload.attempt)
    failed = result is not None and (
        isinstance(result, Halt) or (isinstance(result, Failure) and atomic)
    )
    # the failed context before the slot: the owner reads it when it sees every slot
    fence = None if hold is None else hold.fence()
    if fence is None:
        remaining = fast_paths.settle_element(
            maps, map_id, index, encode_slot(result),
            failed_context=element_id if failed else None,
        )
    else:  # the element's last write releases its lock, in one request where the store can
        remaining = fast_paths.settle_releasing(
            env.storage, map_id, index, encode_slot(result),
            failed_context=element_id if failed else None, fence=fence,
        )
        assert hold is not None
        hold.released_with_write()
    log.info("event=map_element_settled map_id=%s index=%d outcome=%s", map_id, index,
             "skipped" if result is None else type(result).__name__.lower())
    return meta, remaining


class _Refused(Exception):
    """This process's element definition cannot continue the element (nothing was saved)."""

    def __init__(self, found: Incompatibility, ctx: Context,
                 definition: ReactorDefinition) -> None:
        super().__init__(found.reason)
        self.found = found
        self.ctx = ctx
        self.definition = definition


def _judge(ctx: Context) -> None:
    """Judge the element ``ctx`` against this process's definition of its reactor
    (docs/deploys.md, "Compatibility rules"); a held (``needs_version``) element it can
    continue gets its previous status back, in memory (saved by its first checkpoint).

    Raises:
        _Refused: the definition cannot continue it.
        UnknownReactorError: its reactor is not registered here (poison).
    """
    definition: ReactorDefinition = registry.get(ctx.reactor).definition
    found = compatibility.judge(definition, ctx, forward=ctx.rollback is None)
    if found is not None:
        raise _Refused(found, ctx, definition)
    held = ctx.engine_state.needs_version
    if ctx.status is RunStatus.NEEDS_VERSION and held is not None:
        ctx.status = RunStatus.parse(held.status)
        ctx.engine_state = replace(ctx.engine_state, needs_version=None)
        log.info("event=map_element_version_resumed context_id=%s status=%s",
                 ctx.context_id, held.status)


def _refused(
    jc: JobContext, env: Env, payload: MapElementPayload, hold: Liveness | None,
    refused: _Refused,
) -> None:
    """Hand the element's job back to a worker announcing its definition; else hold the
    element ``needs_version`` (the map waits for it) and, in a worker, bring the job back
    after :data:`~reactor.jobs.version_routing.HELD_ELEMENT_DELAY` seconds (docs/deploys.md,
    "Routing by version")."""
    ctx = refused.ctx
    if version_routing.hand_back(jc, payload, ctx.reactor, ctx.engine_state.definition,
                                 refused.found):
        return
    if ctx.status is not RunStatus.NEEDS_VERSION:
        compatibility.hold(ctx, refused.found, refused.definition, env.clock.now())
        (Checkpointer(env, ctx) if hold is None else FencedCheckpointer(env, ctx, hold)).save()
    if jc.inline:  # no other worker: Reactor.resume_version continues it
        return
    delay = version_routing.HELD_ELEMENT_DELAY
    mark_enqueued(jc.runtime, map_element_key(payload.map_id, payload.index), delay=delay)
    jc.requeue(payload.model_copy(update={"hand_backs": 0}), delay)


class _Unreadable(Exception):
    """A context the element needs could not be decoded; it was quarantined."""

    def __init__(self, error: DeserializationError) -> None:
        super().__init__(str(error))
        self.error = error


def _materialize(env: Env, meta: MapMetadata, index: int) -> None:
    """Store the element's pending context from its owner; an unreadable owner is quarantined.

    Raises:
        _Unreadable: the owner record could not be decoded (it is now stored ``failed``).
    """
    try:
        materialize(env, meta, [index])
    except DeserializationError as exc:
        owner_id = meta.owner_context_id or meta.parent_context_id
        log.warning("event=map_owner_unreadable map_id=%s owner=%s error=%s",
                    meta.map_id, owner_id, exc)
        quarantined = quarantine(env, owner_id, exc)
        if quarantined is None:  # readable after all (codec types now registered), or raises
            materialize(env, meta, [index])
            return
        publish_completion(env.storage, quarantined)
        raise _Unreadable(exc) from exc


def _decoded(
    env: Env, element_id: str, record: ContextRecord | None,
    broken: DeserializationError | None,
) -> tuple[Context | None, _Unreadable | None]:
    """Decode the element's loaded ``record`` (``broken``: its load already failed):
    ``(context, None)``, or ``(None, the error)`` once an unreadable one was quarantined."""
    try:
        if broken is not None:
            raise broken
        return (None if record is None else decode_context(env, record)), None
    except DeserializationError as exc:
        try:
            return _quarantined(env, element_id, exc), None
        except _Unreadable as error:
            return None, error


def _load(env: Env, element_id: str) -> Context | None:
    """Load the element context; an unreadable one is quarantined
    (``reactor.engine.quarantine``).

    Raises:
        _Unreadable: the element context, or (through ``materialize``) its owner, is unreadable.
    """
    try:
        return load_context(env, element_id)
    except DeserializationError as exc:
        return _quarantined(env, element_id, exc)


def _quarantined(env: Env, element_id: str, exc: DeserializationError) -> Context | None:
    """Quarantine the unreadable element context ``element_id`` (stored ``failed`` with its
    text and the reason); its context when it turned out readable after all.

    Raises:
        _Unreadable: it was quarantined.
    """
    log.warning("event=map_element_unreadable context_id=%s error=%s", element_id, exc)
    if quarantine(env, element_id, exc) is None:  # readable after all, or raises
        return load_context(env, element_id)
    raise _Unreadable(exc) from exc


def run_element(
    env: Env, definition: ReactorDefinition, ctx: Context, hold: Liveness | None, *,
    attempt: int = 0,
) -> ElementResult:
    """Start a pending element context, or continue a running one, and return its result.

    Args:
        env: the environment (``in_worker``: contention parks).
        definition: the element reactor.
        ctx: the element context (status ``pending`` or ``running``).
        hold: the element's lock (writes are fenced on it), ``None`` on the inline router.
        attempt: the capped parks of this element so far (``MapElementPayload.attempt``).

    Returns:
        The element run's result, with ``run_id`` set: a ``Failure(SnoozeLimitError)``,
        stored, when an element never admitted parks again after ``lock_snooze_max_attempts``
        capped parks (docs/coordination.md, "Contention").

    Raises:
        Park: in a worker, on contention (the element context was saved with its holds
            recorded; the caller re-enqueues the job after ``Park.delay``).
        LockLost: the element lock lapsed (nothing more was written).
    """
    with observe.run(env, ctx, "element", started=ctx.status is RunStatus.PENDING):
        return _run_element(env, definition, ctx, hold, attempt)


def _run_element(
    env: Env, definition: ReactorDefinition, ctx: Context, hold: Liveness | None,
    attempt: int,
) -> ElementResult:
    checkpoint: Checkpointer = (
        Checkpointer(env, ctx) if hold is None else FencedCheckpointer(env, ctx, hold)
    )
    error = ctx.engine_state.argument_error
    if error is not None:
        ctx.engine_state = replace(ctx.engine_state, argument_error=None)
        failure = Failure(ArgumentResolutionError(error), retryable=False,
                          reactor_name=definition.name)
        ctx.status = RunStatus.FAILED
        ctx.failure = failure
        checkpoint.save()
        return failure.with_run_id(ctx.context_id)
    if ctx.engine_state.validate_inputs:
        raw = dict(ctx.inputs)
        try:
            ctx.inputs = definition.contract.validate(raw)
        except InputValidationError as exc:
            ctx.engine_state = replace(ctx.engine_state, validate_inputs=False)
            return invalid_inputs(ctx, checkpoint, definition, raw, exc).with_run_id(
                ctx.context_id
            )
        ctx.engine_state = replace(ctx.engine_state, validate_inputs=False)
    state = RunState(definition, ctx, env, checkpoint)
    try:
        result = (
            executor.conclude_failure(state) if ctx.rollback is not None
            else executor.execute(state)
        )
    except Park as park:
        gave_up = snooze_limit_failure(park, attempt, env.settings, ctx,
                                       admitted=is_admitted(ctx))
        if gave_up is None:
            raise
        # Never admitted (nothing ran): stored failed without rollback, as a run at its cap.
        result = gave_up
        checkpoint.save()
        log.warning("event=snooze_limit context_id=%s reason=%s key=%s attempts=%d",
                    ctx.context_id, park.reason, park.key, attempt)
    # A map element never pauses: its reactor declares no interrupt (definition check).
    assert not isinstance(result, Paused)
    return result.with_run_id(ctx.context_id)
