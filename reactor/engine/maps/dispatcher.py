"""Dispatching a fan-out map's elements (docs/fan_out.md, "What happens"; storage:
docs/protocol.md#maps).

The owner's first batch, each element job's next batch and the sweepers' re-dispatch of a lost
batch all go through :func:`dispatch_batch`: it claims the next ``batch_size`` indexes
(``MapStore.advance_offset``, so concurrent claimers get disjoint ranges), stores a pending
context per element (:func:`materialize`: persist before enqueue) and enqueues one
``map_element`` job each. A map that stopped (an atomic element failed, or its owner's cancel
request stands) settles the indexes it claims as *skipped* instead (:func:`settle_skipped`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reactor import registry
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.engine import fast_paths, secret_policy
from reactor.engine.arguments import resolve, resolve_arguments
from reactor.engine.checkpoint import load_context, whole_record
from reactor.engine.env import Env
from reactor.engine.maps.results import encode_slot
from reactor.errors import ArgumentResolutionError, ContextTooLargeError
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.engine_state import EngineState
from reactor.model.keys import CANCEL_CLAIM_PATH
from reactor.model.records import ContextRecord, MapMetadata
from reactor.model.run_records import MapMembership
from reactor.model.status import RunStatus
from reactor.ports.payloads import MapCollectPayload, MapElementPayload, job

__all__ = [
    "PATH",
    "dispatch_batch",
    "element_context_id",
    "element_definition",
    "element_is_stopped_status",
    "enqueue_collector",
    "load_parent",
    "map_items",
    "materialize",
    "owner_cancel_requested",
    "settle_skipped",
]

log = logging.getLogger("reactor.map")

#: ``MapMetadata.extra`` key: compose step names from the owner record to the map's context.
PATH = "path"

_ELEMENT_NAMESPACE = uuid.UUID("5f0b5d1e-6a57-4c1f-9d43-7a1f3f0e8b21")


def element_context_id(map_id: str, index: int) -> str:
    """The stable context id of element ``index`` of ``map_id`` (a UUID5).

    Stable, so a re-dispatched element resumes its own stored context instead of starting a
    second one.
    """
    return str(uuid.uuid5(_ELEMENT_NAMESPACE, f"{map_id}:{index}"))


def map_items(source: Any) -> Sequence[Any]:
    """A map step's resolved ``source`` as a sequence of elements.

    Raises:
        ArgumentResolutionError: ``source`` is a string, bytes, a mapping or not iterable.
    """
    if isinstance(source, str | bytes | Mapping) or not isinstance(source, Iterable):
        raise ArgumentResolutionError(
            f"map source must be a sequence of elements, got {type(source).__name__}"
        )
    return source if isinstance(source, Sequence) else list(source)


def load_parent(env: Env, meta: MapMetadata) -> tuple[ReactorDefinition, Context] | None:
    """Load the context that owns the map step from its owner record.

    Returns:
        ``(definition, context)``, or ``None`` when the owner record is gone or the path no
        longer leads to a context.

    Raises:
        UnknownReactorError: the parent reactor is not registered here.
        DeserializationError: the owner record is malformed.
    """
    owner = load_context(env, meta.owner_context_id)
    if owner is None:
        return None
    parent: Context | None = owner
    for step in meta.extra.get(PATH) or []:
        parent = parent.child(str(step)) if parent is not None else None
    if parent is None:
        return None
    definition: ReactorDefinition = registry.get(meta.parent_reactor).definition
    definition.register_codec_types()
    return definition, parent


def materialize(
    env: Env,
    meta: MapMetadata,
    indexes: Sequence[int],
    *,
    items: Sequence[Any] | None = None,
    parent: Context | None = None,
) -> list[int]:
    """Store a pending element context for each of ``indexes`` (persist before enqueue).

    The pending context holds the element's resolved raw inputs (validated by the element job)
    or, when they could not be resolved, the error (the job fails the element).

    Args:
        env: the environment.
        meta: the map.
        indexes: element indexes.
        items: the map's source, when the caller already resolved it (the owner's first batch).
        parent: the context owning the map step, when the caller has it.

    Returns:
        The indexes whose context was stored (an index whose parent can no longer be read is
        left out: its slot stays missing and the job reports it).
    """
    definition: ReactorDefinition | None = None
    if parent is None:
        loaded = load_parent(env, meta)
        if loaded is None:
            log.warning("event=map_parent_missing map_id=%s", meta.map_id)
            return []
        definition, parent = loaded
    else:
        definition = registry.get(meta.parent_reactor).definition
    assert definition is not None and parent is not None
    spec = definition.steps[meta.step_name]
    source_error: str | None = None
    if items is None:
        try:
            items = map_items(resolve(spec.source, parent)) if spec.source is not None else []
        except ArgumentResolutionError as exc:
            source_error, items = str(exc), []
    element_definition = definition.children[meta.step_name]
    stamp = definition_id(element_definition)
    root_id = parent.root_context_id or parent.context_id
    deadline = parent.engine_state.deadline  # the owner's: a fan-out map's parent is its root
    seal = secret_policy.sealer(env)
    now = env.now()
    records: list[ContextRecord] = []
    for index in indexes:
        ctx = Context(
            context_id=element_context_id(meta.map_id, index),
            reactor=element_definition.name,
            redacted=definition.child_redacted(meta.step_name, parent.redacted),
            parent_context_id=parent.context_id,
            root_context_id=root_id,
            map_metadata=MapMembership(
                map_step=meta.step_name, map_id=meta.map_id, index=index,
                parent_reactor=meta.parent_reactor,
            ),
            created_at=now,
            updated_at=now,
        )
        try:
            if source_error is not None:
                raise ArgumentResolutionError(source_error)
            if index >= len(items):
                raise ArgumentResolutionError(
                    f"map source has {len(items)} elements now, element {index} is gone"
                )
            ctx.inputs = resolve_arguments(spec, parent, element=items[index])
            # raw inputs: the element's job validates them
            ctx.engine_state = EngineState(
                validate_inputs=True, definition=stamp, deadline=deadline
            )
            records.append(whole_record(env, ctx, seal))
        except (ArgumentResolutionError, codec.EncodeError, ContextTooLargeError) as exc:
            ctx.inputs = {}
            # the element's job fails it with this reason
            ctx.engine_state = EngineState(
                argument_error=f"{type(exc).__name__}: {exc}", definition=stamp
            )
            records.append(whole_record(env, ctx, seal))
    fast_paths.save_all(env.storage.contexts, records)  # one request where the store can
    return list(indexes)


def enqueue_collector(env: Env, map_id: str) -> None:
    """Enqueue the map's collector (it checks the slots itself: extra calls are harmless)."""
    env.runtime.router.enqueue(job(MapCollectPayload(map_id=map_id)))


def settle_skipped(env: Env, meta: MapMetadata, indexes: Iterable[int]) -> int:
    """Store a *skipped* slot for each of ``indexes`` (never-started elements of a stopped map)
    and take them off the counter; enqueue the collector when it reaches 0.

    Returns:
        How many indexes were settled.
    """
    maps = env.storage.maps
    text = encode_slot(None)
    settled = 0
    for index in indexes:
        maps.put_result(meta.map_id, index, text)
        settled += 1
    if settled:
        remaining = maps.add_to_counter(meta.map_id, -settled)
        log.info(
            "event=map_skipped map_id=%s settled=%d remaining=%d", meta.map_id, settled, remaining
        )
        if remaining <= 0:
            enqueue_collector(env, meta.map_id)
    return settled


def dispatch_batch(
    env: Env,
    meta: MapMetadata,
    *,
    items: Sequence[Any] | None = None,
    parent: Context | None = None,
) -> range:
    """Claim the next throw of ``meta.batch_size`` indexes and dispatch it.

    Mirrors ``Map::Dispatcher``: the reservation is ``advance_offset`` (atomic), so concurrent
    claimers get disjoint ranges. When the map has already stopped (a failed context is
    recorded), the claimed range and every index after it are settled as skipped instead.
    A cancel request of the owner (docs/run-control.md, "Cancel"), read once per throw, or
    its deadline passed (docs/concepts.md, "Run deadlines"), stops the map the same way: a
    cancel accepted while the owner's execution was dispatching the map (and never noticed,
    or died) lets no further throw run; the owner, resumed by the collector once the running
    elements settled, rolls back what ran.

    An owner stored ``suspended`` (docs/operations.md, "Suspend and unsuspend") holds the
    throw back: nothing is claimed, so the indexes stay unreached (no sweep takes them for
    lost); its unsuspend lets the throws go on (the owner's ``run`` job throws the next batch
    once the last one's trigger settled: :func:`reactor.engine.maps.fan_out.run_fan_out`),
    and so does the map sweeper, which calls this again for a lost trigger.

    Args:
        env: the environment (storage and router).
        meta: the map.
        items: the source, when the caller already resolved it.
        parent: the context owning the map step, when the caller has it.

    Returns:
        The claimed range (empty when every index was already claimed, or the throw was held
        back).

    Raises:
        StorageError, RouterError: a backend failed.
    """
    maps = env.storage.maps
    size = max(meta.batch_size, 1)
    stopped = maps.failed_context(meta.map_id) is not None
    if not stopped and parent is None:  # the owner's state decides the throw (one read)
        loaded = load_parent(env, meta)
        parent = loaded[1] if loaded is not None else None
    if not stopped and parent is not None and parent.status is RunStatus.SUSPENDED:
        # held back: nothing claimed; unsuspend (the owner's adopt) or the sweeper throws it
        log.info("event=map_throw_held map_id=%s owner=%s (the run is suspended)",
                 meta.map_id, meta.owner_context_id)
        return range(0)
    stop = maps.advance_offset(meta.map_id, size)
    claimed = range(stop - size, min(stop, meta.count))
    if not claimed:
        return claimed
    if not stopped and (_deadline_passed(env, parent)
                        or owner_cancel_requested(env, meta.owner_context_id)):
        maps.set_failed_context(meta.map_id, f"cancel:{meta.owner_context_id}")
        log.info("event=cancel_stopped_map run_id=%s map_id=%s at=batch",
                 meta.owner_context_id, meta.map_id)
        stopped = True
    if stopped:
        rest_stop = maps.advance_offset(meta.map_id, meta.count)
        rest = range(rest_stop - meta.count, min(rest_stop, meta.count))
        settle_skipped(env, meta, [*claimed, *rest])
        return claimed
    ready = materialize(env, meta, list(claimed), items=items, parent=parent)
    fast_paths.enqueue_all(env.runtime.router, [
        job(MapElementPayload(map_id=meta.map_id, index=index, atomic=meta.atomic))
        for index in ready
    ])
    return claimed


def _deadline_passed(env: Env, parent: Context | None) -> bool:
    """Whether the deadline of the map's owner (``parent``, read with the throw) passed on
    the runtime clock (docs/concepts.md, "Run deadlines")."""
    deadline = parent.engine_state.deadline if parent is not None else None
    return deadline is not None and env.now() >= deadline


def owner_cancel_requested(env: Env, owner_context_id: str) -> bool:
    """Whether a cancel request stands for root run ``owner_context_id`` (one claims-store
    read of its :data:`CANCEL_CLAIM_PATH` claim; docs/run-control.md, "Cancel").

    Raises:
        StorageError: the claims store failed.
    """
    claims = env.storage.claims.interrupt_resumes(owner_context_id, [CANCEL_CLAIM_PATH])
    return claims.get(CANCEL_CLAIM_PATH) is not None


def element_definition(meta: MapMetadata) -> ReactorDefinition:
    """The element reactor's definition (resolved by registered name).

    Raises:
        UnknownReactorError: the element reactor is not registered in this process.
    """
    definition: ReactorDefinition = registry.get(meta.element_reactor).definition
    definition.register_codec_types()
    return definition


def element_is_stopped_status(ctx: Context) -> bool:
    """Whether a stored element context already finished (its result can be rebuilt)."""
    return ctx.status in (
        RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.HALTED, RunStatus.CANCELLED,
    )
