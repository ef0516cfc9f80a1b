"""Fan-out maps: dispatch one job per element, adopt the settled outcome (docs/fan_out.md;
storage: docs/protocol.md#maps).

A ``map_step(..., fan_out=FanOut(batch_size=N))`` is a **hand-off point**:

1. The run reaching it (the *owner*: the stored root record that holds the step's context)
   records a fan-out ``map_ref`` (``{"type": "map_ref", "map_id", "fan_out": True, "count"}``)
   in ``composed_contexts[step]`` — the ``map_operations`` marker — and **saves itself**, then
   initialises the map (:meth:`MapStore.init` with a :class:`MapMetadata`, counter = count,
   offset = 0) and dispatches the first batch
   (:func:`~reactor.engine.maps.dispatcher.dispatch_batch`). It then raises
   :class:`MapDispatched`: a synchronous caller returns a
   :class:`~reactor.engine.dispatch.DispatchHandle`, a worker releases the run.
2. :func:`~reactor.engine.maps.dispatcher.dispatch_batch` reserves ``[offset, offset + N)``
   with ``advance_offset``, stores one *pending* element context per index (its resolved
   inputs, so the job payload carries identities only: persist, then enqueue) and enqueues
   one ``map_element`` job per index. The element that ends a batch dispatches the next one
   (back pressure). Once the map has stopped
   (``atomic`` failure or a halt), a claim settles every undispatched index as *skipped*
   instead (:func:`~reactor.engine.maps.dispatcher.settle_skipped`).
3. The element jobs (:mod:`reactor.jobs.handlers.map_element`) store their result slot by
   index and decrement the counter; the one reaching 0 enqueues the collector
   (:mod:`reactor.jobs.handlers.map_collect`), which checks the slots, claims the owner signal
   once and enqueues the owner's ``run`` job.
4. The owner re-enters the map step, finds the marker and **adopts** the outcome — it never
   re-dispatches: ``Success(MapResultEnumerator)``; the element's ``Halt``; or, for an atomic
   failure, the failed element's ``Failure`` after the completed elements were rolled back
   (distributed, :mod:`reactor.engine.maps.rollback`). Re-entered before the map settled (e.g.
   by the run sweeper), it hands off again; when the last batch's trigger settled while
   the owner was suspended (its throw was held back), it throws the next batch first.

A map inside a map element never fans out: it runs inline (:func:`fans_out`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.engine.arguments import resolve
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle, stored_result
from reactor.engine.env import Env
from reactor.engine.maps import rollback as map_rollback
from reactor.engine.maps.dispatcher import PATH, dispatch_batch, map_items
from reactor.engine.maps.results import MapResultEnumerator, decode_slot
from reactor.engine.state import InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import (
    ArgumentResolutionError,
    DeserializationError,
)
from reactor.model.context import Context
from reactor.model.records import MapMetadata
from reactor.model.results import Failure, Halt, Paused, Success
from reactor.model.run_records import MapRef, UndoEntry

__all__ = [
    "MapDispatched",
    "caller_result",
    "fan_out_entry",
    "fans_out",
    "is_fan_out_ref",
    "run_fan_out",
]

log = logging.getLogger("reactor.map")

class MapDispatched(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by a fan-out map step once its run is saved and its elements are dispatched.

    A ``BaseException`` (like :class:`reactor.engine.background.HandOff`) so no user
    ``except Exception`` swallows it. The run was saved **before** the elements were
    enqueued; whoever catches this must not save the context again.

    Attributes:
        context_id: the owner run (the stored record) the collector will resume.
        reactor: its registered reactor name.
        step: the map step.
        map_id: the map.
    """

    def __init__(self, context_id: str, reactor: str, step: str, map_id: str) -> None:
        super().__init__(f"map {step!r} ({map_id}) handed off to its element jobs")
        self.context_id = context_id
        self.reactor = reactor
        self.step = step
        self.map_id = map_id


def is_fan_out_ref(value: Any) -> bool:
    """Whether ``value`` (a ``composed_contexts`` entry or an undo entry) names a fan-out map."""
    return isinstance(value, MapRef | UndoEntry) and bool(value.fan_out) and isinstance(
        value.map_id, str
    )


def fans_out(state: RunState, spec: StepSpec) -> bool:
    """Whether map step ``spec`` runs as a fan-out map in ``state``.

    Only when it declares ``fan_out`` and runs in a stored root run: a map nested in a map
    element runs inline, and so does a map inside a composed child (a resumed owner resumes its
    embedded child and would find the map's marker, but the distributed paths from inside a
    child are not covered yet; see ``docs/fan_out.md``, "What happens").
    """
    record = state.checkpoint.context
    return (
        spec.kind == "map" and spec.fan_out is not None
        and record.map_metadata is None and state.ctx is record
    )


def fan_out_entry(step: str, map_id: str, count: int) -> UndoEntry:
    """The undo-stack entry of a completed fan-out map (no per-element list: the elements are
    found through the map's element index when it is rolled back)."""
    return UndoEntry(
        step=step, kind="map", arguments={"map_id": map_id}, result=None,
        map_id=map_id, fan_out=True, count=count,
    )


def _path_to(root: Context, target: Context) -> list[str] | None:
    if root is target:
        return []
    for name, child in root.composed_contexts.items():
        if isinstance(child, Context):
            below = _path_to(child, target)
            if below is not None:
                return [name, *below]
    return None


# ------------------------------------------------------------------------------ owner side


def run_fan_out(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run fan-out map step ``spec``: dispatch it the first time, adopt its outcome afterwards.

    Returns:
        The adopted outcome (see the module docstring), or an immediate ``Success`` for an
        empty source, or a ``Failure`` when the source cannot be resolved.

    Raises:
        MapDispatched: the elements were dispatched (or are still running): the run was saved
            and must be handed off.
        reactor.engine.maps.rollback.RollbackHandedOff: an atomic failure's distributed rollback
            is in progress (the run must be saved as ``rolling_back``).
    """
    ctx = state.ctx
    name = spec.name
    ref = ctx.map_ref(name)
    if ref is not None and ref.is_fan_out:
        return _adopt(state, spec, ref.map_id, ref.count or 0)
    try:
        items = map_items(resolve(spec.source, ctx)) if spec.source is not None else []
    except ArgumentResolutionError as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    map_id = uuid.uuid4().hex
    count = len(items)
    if count == 0:
        return StepOutcome(
            Success(MapResultEnumerator(map_id, 0)), {}, body_started=False,
            undo_entry=fan_out_entry(name, map_id, 0),
        )
    ctx.composed_contexts[name] = MapRef(map_id=map_id, fan_out=True, count=count)
    state.in_flight = InFlight(step=name, kind="map", arguments={"map_id": map_id},
                               body_started=True)
    state.checkpoint.save()  # the marker first: a resumed owner adopts, never re-dispatches
    meta = _start(state, spec, map_id, count)
    dispatch_batch(state.env, meta, items=items, parent=ctx)
    record = state.checkpoint.context
    log.info(
        "event=map_dispatched map_id=%s step=%s count=%d batch_size=%d owner=%s",
        map_id, name, count, meta.batch_size, record.context_id,
    )
    raise MapDispatched(record.context_id, record.reactor, name, map_id)


def _start(state: RunState, spec: StepSpec, map_id: str, count: int) -> MapMetadata:
    """Record the map (metadata, counter, offset 0); idempotent (NX on the metadata)."""
    assert spec.fan_out is not None
    record = state.checkpoint.context
    maps = state.env.storage.maps
    meta = MapMetadata(
        map_id=map_id,
        count=count,
        parent_context_id=state.ctx.context_id,
        parent_reactor=state.definition.name,
        step_name=spec.name,
        element_reactor=state.definition.children[spec.name].name,
        owner_context_id=record.context_id,
        owner_reactor=record.reactor,
        batch_size=spec.fan_out.batch_size,
        atomic=spec.atomic,
        created_at=state.now(),
        extra={PATH: _path_to(record, state.ctx) or []},
    )
    if not maps.init(meta):
        meta = maps.metadata(map_id) or meta
    maps.init_offset(map_id, 0)
    return meta


def _adopt(state: RunState, spec: StepSpec, map_id: str, count: int) -> StepOutcome:
    env = state.env
    maps = env.storage.maps
    name = spec.name
    record = state.checkpoint.context
    if maps.metadata(map_id) is None:  # the owner was saved but the map never recorded
        meta = _start(state, spec, map_id, count)
        if maps.offset(map_id) == 0:
            dispatch_batch(env, meta, parent=state.ctx)
        raise MapDispatched(record.context_id, record.reactor, name, map_id)
    if maps.count_results(map_id) < count:  # still running: wait for the collector's signal
        _throw_held_back(env, map_id, count, state.ctx)
        raise MapDispatched(record.context_id, record.reactor, name, map_id)
    stopper = _stopper(env, map_id)
    if stopper is None:
        ref = state.ctx.map_ref(name)
        assert ref is not None
        # started: names every element whose context a late rollback misses
        state.ctx.composed_contexts[name] = replace(ref, started=count)
        return StepOutcome(
            Success(MapResultEnumerator(map_id, count)), {"map_id": map_id},
            body_started=True, undo_entry=fan_out_entry(name, map_id, count),
        )
    index, result = stopper
    if isinstance(result, Halt):
        return StepOutcome(
            result, {"map_id": map_id}, body_started=True,
            undo_entry=fan_out_entry(name, map_id, count),
        )
    attributed = [f.in_map(name, index) for f in result.rollback_failures]
    rolled = map_rollback.roll_back_fan_out(state, name, map_id, kind="compensate")
    failure = replace(result, rollback_failures=[*attributed, *rolled], run_id=None)
    return StepOutcome(failure, {}, body_started=True)


def _throw_held_back(env: Env, map_id: str, count: int, owner: Context) -> None:
    """Throw the next batch of a map whose last throw was held back while its owner was
    suspended (docs/operations.md, "Suspend and unsuspend"), now that the owner runs again.

    The last claimed batch's trigger (its highest index) settled, yet indexes remain
    unclaimed on a map that goes on: the trigger found the owner suspended and threw
    nothing. A trigger that settled and is throwing right now may throw too: two batches
    are then in flight at once (disjoint ranges: every element still runs once).
    """
    maps = env.storage.maps
    offset = maps.offset(map_id)
    if offset is None or offset <= 0 or offset >= count:
        return  # nothing thrown yet (dispatched above), or every index claimed
    if maps.failed_context(map_id) is not None:
        return
    if maps.result_slots(map_id, [offset - 1])[0] is None:
        return  # the trigger has not settled: it throws the next batch itself
    meta = maps.metadata(map_id)
    if meta is not None:
        dispatch_batch(env, meta, parent=owner)


def _stopper(env: Env, map_id: str) -> tuple[int, Failure | Halt] | None:
    """The element that stopped the map (atomic failure or halt): ``(index, result)``."""
    failed_id = env.storage.maps.failed_context(map_id)
    if failed_id is None:
        return None
    try:
        element = load_context(env, failed_id)
    except DeserializationError:
        element = None
    if element is not None and element.map_metadata is not None:
        index = element.map_metadata.index
        text = env.storage.maps.result_slots(map_id, [index])[0]
        result = decode_slot(text) if text is not None else None
        if isinstance(result, Failure | Halt):
            return index, result
        if element.failure is not None:
            return index, element.failure
    message = f"map element context {failed_id} failed and is no longer readable"
    return -1, Failure(message, retryable=False)


def caller_result(
    env: Env, dispatched: MapDispatched
) -> DispatchHandle | Success | Failure | Paused:
    """What a synchronous caller returns once its run handed off at a fan-out map.

    Returns:
        The run's final result when it already finished (the inline router runs every job
        before ``enqueue`` returns) or its ``Paused`` when it stopped at an interrupt after
        the map, else a :class:`DispatchHandle` to wait on.
    """
    stored = load_context(env, dispatched.context_id)
    if stored is not None and (result := stored_result(stored)) is not None:
        return result
    return DispatchHandle(
        run_id=dispatched.context_id,
        job_id="",
        reactor=dispatched.reactor,
        results=dict(stored.intermediate_results) if stored is not None else {},
        runtime=env.runtime,
    )
