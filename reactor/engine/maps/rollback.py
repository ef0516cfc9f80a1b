"""Rolling back a fan-out map: distributed in a worker, in process elsewhere (docs/fan_out.md,
"Rollback"; storage: docs/protocol.md#map-rollbacks).

**Distributed** (the owner runs in a worker, holding its liveness lock):

1. :func:`roll_back_fan_out` starts the rollback once (:meth:`MapRollbackStore.start`, with
   ``total`` = the length of the map's element index) and, when it created the records, claims
   the first batch of positions — counted from the **tail** of the element index, newest
   element first — and enqueues one ``map_element_rollback`` job per position.
2. Each job (:func:`roll_back_element`, via :mod:`reactor.jobs.handlers.map_element_rollback`)
   skips a position that already has an outcome, takes the element's ``map_element:`` lock
   (contended: re-queued up to ``lock_snooze_max_attempts`` times, then reported
   ``element_in_flight``), replays the element's undo stack **saving after each entry** (a
   redelivery resumes after the last one), stores its outcome first-wins — ``undone``,
   ``failed`` (its failures tagged with ``map_step`` and ``element_index``), ``not_needed`` or
   ``context_unavailable`` — and, at a batch boundary, claims the next batch.
3. When outcomes are missing, the owner raises :class:`RollbackHandedOff`; the run handler
   saves the run as ``rolling_back``, marks the hand-off and checks for settlement itself
   (:func:`hand_off`). Whichever side sees both "settled" and "handed off" **second** claims the
   signal (:func:`signal_owner_if_settled`) and enqueues the owner's ``run`` job.
4. The resumed owner re-enters the same rollback, finds it settled and aggregates
   (:func:`aggregate`): failures in position order, and every started element index no outcome
   named reported as ``context_unavailable``; then the rest of the run's rollback goes on.

**In process** (a synchronous caller, ``Reactor.undo``): the same element rollback, run in the
calling thread over the element index from the tail in chunks of
:data:`~reactor.dsl.fan_out.ROLLBACK_CHUNK` (100) ids, never all at once.

With the inline router every job runs nested inside ``enqueue``, so the rollback is settled
before the owner checks and it never hands off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from reactor.coordination.lock import Lock
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fan_out import DEFAULT_BATCH_SIZE, ROLLBACK_CHUNK
from reactor.engine import fast_paths
from reactor.engine.checkpoint import Checkpointer, decode_context, load_context
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer, Liveness, liveness_lock
from reactor.engine.maps.outcomes import (
    decode_failures,
    element_failure,
    encode_failures,
    in_flight,
    unavailable,
)
from reactor.engine.rollback import roll_back_child
from reactor.engine.state import RunState
from reactor.errors import DeserializationError, LockAcquisitionError
from reactor.model.context import Context
from reactor.model.keys import map_element_key
from reactor.model.records import ContextRecord, LockClaim, MapRollbackMetadata, RollbackOutcome
from reactor.model.results import RollbackFailure
from reactor.model.status import RunStatus
from reactor.ports.payloads import MapElementRollbackPayload, RunPayload, job
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = [
    "Contended",
    "RollbackHandedOff",
    "aggregate",
    "dispatch_rollback_batch",
    "distributed",
    "encode_failures",
    "hand_off",
    "in_flight",
    "roll_back_element",
    "roll_back_fan_out",
    "roll_back_in_process",
    "signal_owner_if_settled",
    "unavailable",
]

log = logging.getLogger("reactor.map")

#: Outcome pages read while aggregating.
OUTCOME_PAGE = 500
#: Seconds an in-process rollback waits for an element's lock before reporting it in flight.
ELEMENT_LOCK_WAIT = 2.0

#: Element statuses whose undo stack is replayed (a failed element rolled itself back), and
#: ``cancelled``: rolled back by an earlier job for this position that stopped before storing
#: its outcome; :func:`reactor.engine.rollback.roll_back_child` returns the failures that job
#: saved on the element instead of replaying anything.
_UNDOABLE = (RunStatus.COMPLETED, RunStatus.HALTED, RunStatus.ABORTED, RunStatus.CANCELLED)


class RollbackHandedOff(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the owner while a distributed map rollback still has outstanding positions.

    The run handler saves the run as ``rolling_back`` and calls :func:`hand_off`; the last
    element-rollback job (or the owner itself) resumes the run once every position settled.

    Attributes:
        map_id: the map being rolled back.
        step: the map step.
    """

    def __init__(self, map_id: str, step: str) -> None:
        super().__init__(f"rollback of map {step!r} ({map_id}) handed off to its element jobs")
        self.map_id = map_id
        self.step = step


@dataclass(frozen=True, slots=True)
class Contended:
    """An element's lock was held by a live job: nothing was stored (never an outcome).

    Attributes:
        index: the element index.
    """

    index: int


def distributed(state: RunState) -> bool:
    """Whether ``state`` runs inside a worker as the owner (a fenced, lock-holding execution),
    so a fan-out map's rollback is handed to element jobs instead of running in process."""
    return isinstance(state.checkpoint, FencedCheckpointer) and (
        state.checkpoint.context.map_metadata is None
    )


def _started(state: RunState, step: str) -> int | None:
    ref = state.ctx.map_ref(step)
    return None if ref is None else ref.started


# ------------------------------------------------------------------------------ one element


def roll_back_element(
    env: Env,
    map_id: str,
    element_id: str | None,
    step: str,
    definition: ReactorDefinition,
    *,
    use_lock: bool = True,
    wait: float = 0.0,
    position: int | None = None,
) -> RollbackOutcome | Contended:
    """Roll back one map element: replay its undo stack under its ``map_element:`` lock.

    A completed (or halted, or aborted) element is undone, its context saved after every
    undone entry; a failed element already rolled itself back and an element that never ran
    did nothing (``not_needed``); a missing context is ``context_unavailable``. The undo stack
    is replayed by :func:`reactor.engine.rollback.roll_back_child`, given
    :func:`roll_back_fan_out` for a fan-out map inside the element (docs/fan_out.md,
    "Rollback").

    The rule of every job that replays an undo stack (docs/protocol.md, "Rollback jobs: lock
    before read"): the element's lock is taken **before** the context whose undo stack is
    replayed is read (together with it, in one request where the store can), and the
    position's stored outcome is checked again under the lock. A first read without the lock
    only names the lock (the element's index); its undo stack is never replayed, so a
    duplicate job that waited for the lock sees what the job before it undid and saved.

    Args:
        env: the environment.
        map_id: the map.
        element_id: the element context id (``None``: a hole in the element index).
        step: the map step's name (set on failures as ``map_step``).
        definition: the element reactor's definition.
        use_lock: take the element's lock (``False`` on the inline router).
        wait: seconds to wait for a held lock.
        position: the rollback position this job settles; its outcome, when one is stored by
            the time the lock is held, is returned as is (nothing replayed). ``None``: an
            in-process rollback (no outcomes).

    Returns:
        The outcome to store (or the one already stored), or :class:`Contended` when the lock
        is held by a live job.

    Raises:
        StorageError: a backend failed (the lock, if taken, is released).
        Park: ``env.in_worker`` and an undo/compensate of the element waits on its own lock or
            semaphore (docs/coordination.md, "Rollback"): the element's context was saved with
            its rollback in progress and the element's lock released; re-run the job later.
    """
    if element_id is None:
        return unavailable(step)
    ctx = _load_element(env, element_id)  # names the lock only: never replayed when locked
    if ctx is None:
        return unavailable(step)
    index = -1 if ctx.map_metadata is None else ctx.map_metadata.index
    hold: Liveness | None = None
    record: ContextRecord | None = None
    if use_lock:
        lock = liveness_lock(env, map_element_key(map_id, index), wait=wait)
        try:
            if wait > 0:
                lock.acquire()
                record = _load_record(env, element_id, lock)
            else:
                started = lock.monotonic()
                token, record = fast_paths.load_taking(
                    env.storage, element_id,
                    LockClaim(key=lock.key, owner=lock.owner, ttl=lock.ttl),
                )
                if not token:
                    return Contended(index)
                lock.adopt(token, started)
        except LockAcquisitionError:
            return Contended(index)
        except DeserializationError:
            return unavailable(step)  # the lock is not held (released by the load)
        hold = Liveness(element_id, lock)
    try:
        if hold is not None:
            if position is not None:
                stored = env.storage.map_rollbacks.outcome(map_id, position)
                if stored is not None:  # a duplicate job settled it while this one waited
                    return stored
            try:
                ctx = None if record is None else decode_context(env, record)
            except DeserializationError:
                ctx = None
            if ctx is None:
                return unavailable(step)
        needs = ctx.status in _UNDOABLE or (
            ctx.status is RunStatus.RUNNING and bool(ctx.undo_stack or ctx.rollback)
        )
        if not needs:
            return RollbackOutcome(index=index, outcome="not_needed")
        checkpoint: Checkpointer = (
            Checkpointer(env, ctx) if hold is None else FencedCheckpointer(env, ctx, hold)
        )
        failures = [f.in_map(step, index) for f in roll_back_child(
            RunState(definition, ctx, env, checkpoint), roll_back_fan_out=roll_back_fan_out
        )]
        return RollbackOutcome(
            index=index, outcome="failed" if failures else "undone",
            failures=encode_failures(failures),
        )
    finally:
        if hold is not None:
            hold.release()  # never raises; the lock lapses with its TTL anyway


def _load_element(env: Env, element_id: str) -> Context | None:
    """The element's stored context; ``None`` when it is missing or unreadable."""
    try:
        return load_context(env, element_id)
    except DeserializationError:
        return None


def _load_record(env: Env, element_id: str, lock: Lock) -> ContextRecord | None:
    """Read the element's record under its lock, just taken; the lock is released again
    when the read raises.

    Raises:
        DeserializationError, StorageError: as ``ContextStore.load`` (the lock released).
    """
    try:
        return env.storage.contexts.load(element_id)
    except BaseException:
        lock.release()
        raise


# ------------------------------------------------------------------------------ owner side


def roll_back_fan_out(
    state: RunState, step: str, map_id: str, *, kind: str = "undo"
) -> list[RollbackFailure]:
    """Roll back every started element of fan-out map ``map_id`` (the owner's side).

    Args:
        state: the owner's state (the map step's context).
        step: the map step.
        map_id: the map.
        kind: ``"undo"`` (a completed map) or ``"compensate"`` (an atomic failure).

    Returns:
        The rollback failures, in position order (newest element first), each with
        ``map_step``/``element_index``.

    Raises:
        RollbackHandedOff: distributed, and some positions have no outcome yet.
    """
    definition = state.definition.children[step]
    definition.register_codec_types()
    started = _started(state, step)
    if not distributed(state):
        return roll_back_in_process(state.env, definition, step, map_id, started=started)
    env = state.env
    storage = env.storage
    forward = storage.maps.metadata(map_id)
    record = state.checkpoint.context
    created, meta = storage.map_rollbacks.start(MapRollbackMetadata(
        map_id=map_id,
        total=storage.maps.count_elements(map_id),
        batch_size=forward.batch_size if forward is not None else DEFAULT_BATCH_SIZE,
        step_name=step,
        owner_context_id=record.context_id,
        owner_reactor=record.reactor,
        element_reactor=definition.name,
        started_at=env.now(),
        kind=kind,
    ))
    if created:
        log.info("event=map_rollback_started map_id=%s step=%s total=%d batch_size=%d",
                 map_id, step, meta.total, meta.batch_size)
        dispatch_rollback_batch(storage, env.runtime.router, meta)
    if storage.map_rollbacks.count_outcomes(map_id) >= meta.total:
        return aggregate(env, step, map_id, started=started)
    raise RollbackHandedOff(map_id, step)


def dispatch_rollback_batch(
    storage: Storage, router: Router, meta: MapRollbackMetadata
) -> range:
    """Claim the next batch of rollback positions and enqueue one rollback job per position
    (docs/fan_out.md, "Rollback").

    Args:
        storage: the storage holding the rollback's positions.
        router: where the ``map_element_rollback`` jobs go.
        meta: the map's rollback record (its ``batch_size`` bounds the claim).

    Returns:
        The claimed positions (empty when every position was already claimed).
    """
    positions = storage.map_rollbacks.claim_positions(meta.map_id, meta.batch_size)
    for position in positions:
        router.enqueue(job(MapElementRollbackPayload(map_id=meta.map_id, position=position)))
    return positions


def aggregate(env: Env, step: str, map_id: str, *, started: int | None) -> list[RollbackFailure]:
    """The failures of a settled distributed rollback, read in bounded pages.

    ``failed`` and ``element_in_flight`` outcomes contribute their failures in position order.
    When the number of started elements is known (a completed map), every index in
    ``[0, started)`` that no outcome named is reported as ``context_unavailable`` (its context
    expired); otherwise one unnamed entry per ``context_unavailable`` outcome.

    The indexes named are taken from the outcomes themselves, as they are read, into a bitmap
    of ``started`` bits (1.25 KB per 10,000 elements): an adapter whose "seen" mark is a second
    write after the outcome (:class:`reactor.generic.map_rollbacks`) may not have written it
    yet when the last outcome settles the rollback.
    """
    rollbacks = env.storage.map_rollbacks
    reported: list[RollbackFailure] = []
    unnamed = 0
    seen = _Bitmap(started or 0)
    for _position, outcome in rollbacks.outcomes(map_id, page_size=OUTCOME_PAGE):
        if outcome.index is not None:
            seen.add(outcome.index)
        if outcome.outcome == "context_unavailable" and outcome.index is None:
            unnamed += 1
        if outcome.outcome in ("failed", "element_in_flight"):
            reported.extend(decode_failures(outcome.failures))
    failures = [*_unseen(step, started, unnamed, seen), *reported]
    log.info("event=map_rollback_completed map_id=%s step=%s failed=%d",
             map_id, step, len(failures))
    return failures


class _Bitmap:
    """A fixed-size set of small non-negative ints (one bit each)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._bits = bytearray((size + 7) // 8)

    def add(self, index: int) -> None:
        if 0 <= index < self.size:
            self._bits[index >> 3] |= 1 << (index & 7)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and 0 <= index < self.size and bool(
            self._bits[index >> 3] & (1 << (index & 7))
        )


def _unseen(
    step: str, started: int | None, unnamed: int, seen: _Bitmap
) -> list[RollbackFailure]:
    if started is None:
        return [element_failure(step, None, "context_unavailable", "context expired")] * unnamed
    return [
        element_failure(step, i, "context_unavailable", "context expired")
        for i in range(started) if i not in seen
    ]


def roll_back_in_process(
    env: Env,
    definition: ReactorDefinition,
    step: str,
    map_id: str,
    *,
    started: int | None,
    chunk: int = ROLLBACK_CHUNK,
) -> list[RollbackFailure]:
    """Roll back a fan-out map's elements in the calling thread, ``chunk`` ids per read from the
    tail of the element index.

    Returns:
        The failures (``context_unavailable`` entries first, then per element, newest first).
    """
    maps = env.storage.maps
    total = maps.count_elements(map_id)
    reported: list[RollbackFailure] = []
    seen = _Bitmap(started or 0)
    unnamed = 0
    for position in range(0, total, chunk):
        ids = maps.element_ids_from_tail(map_id, position=position, count=chunk, total=total)
        for element_id in ids:
            outcome = roll_back_element(env, map_id, element_id, step, definition,
                                        wait=ELEMENT_LOCK_WAIT)
            if isinstance(outcome, Contended):
                outcome = in_flight(step, outcome.index)
            if outcome.index is None:
                unnamed += 1
                continue
            seen.add(outcome.index)
            if outcome.outcome in ("failed", "element_in_flight"):
                reported.extend(decode_failures(outcome.failures))
    return [*_unseen(step, started, unnamed, seen), *reported]


def signal_owner_if_settled(env: Env, map_id: str) -> bool:
    """Resume the owner once every position has an outcome **and** the owner handed off.

    Exactly one caller wins the signal claim and enqueues the owner's ``run`` job.

    Returns:
        Whether this call enqueued the owner.
    """
    rollbacks = env.storage.map_rollbacks
    meta = rollbacks.metadata(map_id)
    if meta is None or rollbacks.count_outcomes(map_id) < meta.total:
        return False
    if not rollbacks.handed_off(map_id) or not rollbacks.claim_signal(map_id):
        return False
    env.runtime.router.enqueue(
        job(RunPayload(context_id=meta.owner_context_id, reactor=meta.owner_reactor))
    )
    log.info("event=map_rollback_signalled map_id=%s owner=%s", map_id, meta.owner_context_id)
    return True


def hand_off(env: Env, checkpoint: Checkpointer, handed: RollbackHandedOff) -> None:
    """The owner's side of the hand-off: save the run as ``rolling_back``, mark the hand-off,
    then resume itself if the rollback settled meanwhile.

    Args:
        env: the worker's environment.
        checkpoint: the owner's fenced checkpointer (its context is the run).
        handed: the raised hand-off.

    Raises:
        LockLost: the owner lost its liveness lock (nothing was written).
    """
    ctx = checkpoint.context
    ctx.status = RunStatus.ROLLING_BACK
    checkpoint.save()
    env.storage.map_rollbacks.mark_handed_off(handed.map_id)
    log.info("event=map_rollback_handed_off map_id=%s step=%s owner=%s",
             handed.map_id, handed.step, ctx.context_id)
    signal_owner_if_settled(env, handed.map_id)
