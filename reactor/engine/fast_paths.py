"""The protocol's optional fast paths, with the composition of required calls each one
replaces (docs/protocol.md, "Optional fast paths").

Each fast path is a capability (:mod:`reactor.ports.capabilities`): these functions call the
adapter's own method when it declares one and otherwise make the calls it stands for, one by
one (the generic stores and any adapter written without them).
"""

from __future__ import annotations

from collections.abc import Sequence

from reactor.model.records import ContextRecord, ElementStart
from reactor.ports.capabilities import (
    BeginsAndSettlesElements,
    EnqueuesMany,
    SavesContextsTogether,
)
from reactor.ports.router import Job, JobSink
from reactor.ports.storage import ContextStore, MapStore

__all__ = ["begin_element", "enqueue_all", "save_all", "settle_element"]


def save_all(contexts: ContextStore, records: Sequence[ContextRecord]) -> None:
    """Unfenced whole saves of ``records`` (``save_many`` of a
    :class:`~reactor.ports.capabilities.SavesContextsTogether` store, else ``save`` each).

    Raises:
        ContextTooLargeError, StorageError: as ``ContextStore.save``.
    """
    if isinstance(contexts, SavesContextsTogether):
        contexts.save_many(records)
        return
    for record in records:
        contexts.save(record)


def enqueue_all(router: JobSink, jobs: Sequence[Job]) -> list[str]:
    """Queue ``jobs`` (:class:`~reactor.ports.capabilities.EnqueuesMany`, else one by one).

    Returns:
        The job ids, in order.

    Raises:
        EncodeError, RouterError: as ``JobSink.enqueue``.
    """
    if isinstance(router, EnqueuesMany):
        return router.enqueue_many(jobs)
    return [router.enqueue(job) for job in jobs]


def begin_element(
    maps: MapStore, map_id: str, index: int, context_id: str | None
) -> ElementStart:
    """``begin_element`` of a :class:`~reactor.ports.capabilities.BeginsAndSettlesElements`
    store, else its composition (metadata, slot, failed context, then
    the append of a fresh element).

    Raises:
        ValueError: ``index`` is negative.
        StorageError: the backend failed.
    """
    if isinstance(maps, BeginsAndSettlesElements):
        return maps.begin_element(map_id, index, context_id)
    if index < 0:
        raise ValueError(f"element index must be >= 0, got {index!r}")
    meta = maps.metadata(map_id)
    settled = maps.result_slots(map_id, [index])[0] is not None
    failed = maps.failed_context(map_id)
    position = None
    if context_id is not None and meta is not None and not settled and failed is None:
        position = maps.append_element(map_id, context_id)
    return ElementStart(meta, settled, failed, position)


def settle_element(
    maps: MapStore, map_id: str, index: int, value: str, *, failed_context: str | None = None
) -> int:
    """``settle_element`` of a :class:`~reactor.ports.capabilities.BeginsAndSettlesElements`
    store, else its composition (failed context, slot, counter).

    Returns:
        The counter after the decrement.

    Raises:
        ValueError: ``index`` is negative.
        StorageError: the backend failed.
    """
    if isinstance(maps, BeginsAndSettlesElements):
        return maps.settle_element(map_id, index, value, failed_context=failed_context)
    if failed_context is not None:
        maps.set_failed_context(map_id, failed_context)
    maps.put_result(map_id, index, value)
    return maps.add_to_counter(map_id, -1)
