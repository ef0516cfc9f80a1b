"""The protocol's optional fast paths, with the composition of required calls each one
replaces (docs/protocol.md, "Optional fast paths").

Each fast path is a capability (:mod:`reactor.ports.capabilities`): these functions call the
adapter's own method when it declares one and otherwise make the calls it stands for, one by
one (the generic stores and any adapter written without them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, cast

from reactor.model.records import ContextDelta, ContextRecord, ElementStart, Fence, LockClaim
from reactor.ports.capabilities import (
    AppendsContexts,
    BeginsAndSettlesElements,
    EnqueuesMany,
    LocksWithContexts,
    ReadsClaimsWhenAppending,
    ReadsClaimsWhenTaking,
    SavesContextsTogether,
    SettlesAndReleases,
    declares,
)
from reactor.ports.router import Job, JobSink
from reactor.ports.storage import ContextStore, MapStore, Storage

T = TypeVar("T")

__all__ = [
    "append_reading_claims",
    "append_releasing",
    "begin_element",
    "enqueue_all",
    "load_taking",
    "load_taking_claims",
    "save_all",
    "save_releasing",
    "save_taking",
    "settle_element",
    "settle_releasing",
]


def save_all(contexts: ContextStore, records: Sequence[ContextRecord]) -> None:
    """Unfenced whole saves of ``records`` (``save_many`` of a
    :class:`~reactor.ports.capabilities.SavesContextsTogether` store, else ``save`` each).

    Raises:
        ContextTooLargeError, StorageError: as ``ContextStore.save``.
    """
    if declares(contexts, SavesContextsTogether):
        cast(SavesContextsTogether, contexts).save_many(records)
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
    if declares(router, EnqueuesMany):
        return cast(EnqueuesMany, router).enqueue_many(jobs)
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
    if declares(maps, BeginsAndSettlesElements):
        return cast(BeginsAndSettlesElements, maps).begin_element(map_id, index, context_id)
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
    if declares(maps, BeginsAndSettlesElements):
        return cast(BeginsAndSettlesElements, maps).settle_element(
            map_id, index, value, failed_context=failed_context
        )
    if failed_context is not None:
        maps.set_failed_context(map_id, failed_context)
    maps.put_result(map_id, index, value)
    return maps.add_to_counter(map_id, -1)


def settle_releasing(
    storage: Storage, map_id: str, index: int, value: str, *,
    failed_context: str | None = None, fence: Fence,
) -> int:
    """``settle_releasing`` of a :class:`~reactor.ports.capabilities.SettlesAndReleases` map
    store, else its composition: :func:`settle_element`, then the release of ``fence.key``
    (an element job's last two writes: docs/fan_out.md).

    Returns:
        The counter after the decrement.

    Raises:
        ValueError: ``index`` is negative.
        StorageError: the backend failed.
    """
    maps = storage.maps
    if declares(maps, SettlesAndReleases):
        return cast(SettlesAndReleases, maps).settle_releasing(
            map_id, index, value, failed_context=failed_context, fence=fence
        )
    remaining = settle_element(maps, map_id, index, value, failed_context=failed_context)
    _release_quietly(storage, fence.key, fence.owner)
    return remaining


def save_taking(storage: Storage, record: ContextRecord, claim: LockClaim) -> int:
    """``save_taking`` of a :class:`~reactor.ports.capabilities.LocksWithContexts` context
    store, else its composition: acquire, then save fenced with the new token (the lock
    released again when the save raises).

    Returns:
        The fencing token of the hold taken (the record written), or 0 when another owner
        holds the lock (nothing written).

    Raises:
        ContextTooLargeError, StorageError: as ``ContextStore.save`` (the lock not held).
    """
    contexts = storage.contexts
    if declares(contexts, LocksWithContexts):
        return cast(LocksWithContexts, contexts).save_taking(record, claim)
    return _under_claim(
        storage, claim,
        lambda token: contexts.save(record, fence=Fence(claim.key, claim.owner, token)),
    )[0]


def load_taking(
    storage: Storage, context_id: str, claim: LockClaim
) -> tuple[int, ContextRecord | None]:
    """``load_taking`` of a :class:`~reactor.ports.capabilities.LocksWithContexts` context
    store, else its composition: acquire, then load (the lock released again when the load
    raises).

    Returns:
        ``(token, record or None)`` when the lock was taken, ``(0, None)`` when another owner
        holds it.

    Raises:
        DeserializationError, StorageError: as ``ContextStore.load`` (the lock not held).
    """
    contexts = storage.contexts
    if declares(contexts, LocksWithContexts):
        return cast(LocksWithContexts, contexts).load_taking(context_id, claim)
    return _under_claim(storage, claim, lambda _token: contexts.load(context_id))


def load_taking_claims(
    storage: Storage, context_id: str, claim: LockClaim, step_paths: Sequence[str]
) -> tuple[int, ContextRecord | None, dict[str, str] | None]:
    """``load_taking_claims`` of a :class:`~reactor.ports.capabilities.ReadsClaimsWhenTaking`
    context store, else :func:`load_taking` alone: the claims are then not read (the caller
    reads them when it needs them, one request more).

    Returns:
        ``(token, record or None, claims)``: ``claims`` is ``{step_path: payload}`` for the
        claimed paths among ``step_paths`` when the store read them with the record, ``None``
        when it did not; ``(0, None, None)`` when another owner holds the lock.

    Raises:
        DeserializationError, StorageError: as ``ContextStore.load`` (the lock not held).
    """
    contexts = storage.contexts
    if step_paths and declares(contexts, ReadsClaimsWhenTaking):
        token, record, claims = cast(ReadsClaimsWhenTaking, contexts).load_taking_claims(
            context_id, claim, step_paths
        )
        return token, record, (claims if token else None)
    token, record = load_taking(storage, context_id, claim)
    return token, record, None


def append_reading_claims(
    storage: Storage, delta: ContextDelta, fence: Fence | None, step_paths: Sequence[str]
) -> tuple[bool, dict[str, str] | None]:
    """``append_reading_claims`` of a
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenAppending` context store, else
    ``AppendsContexts.append`` alone (nothing, ``(False, None)``, on a store without it): the
    claims are then not read (``None``; the caller reads them itself when it needs them, one
    request more).

    Returns:
        ``(appended, claims)``: ``claims`` is ``{step_path: payload}`` for the claimed paths
        when the store read them with the append, ``None`` when it did not (or nothing was
        appended).

    Raises:
        StaleWriterError, ContextTooLargeError, StorageError: as ``AppendsContexts.append``.
    """
    contexts = storage.contexts
    if step_paths and declares(contexts, ReadsClaimsWhenAppending):
        appended, claims = cast(ReadsClaimsWhenAppending, contexts).append_reading_claims(
            delta, fence, step_paths
        )
        return appended, (claims if appended else None)
    if not declares(contexts, AppendsContexts):
        return False, None  # no incremental checkpoints: the caller saves the whole context
    appender = cast(AppendsContexts, contexts)
    appended = appender.append(delta) if fence is None else appender.append(delta, fence=fence)
    return bool(appended), None


def _under_claim(
    storage: Storage, claim: LockClaim, then: Callable[[int], T]
) -> tuple[int, T | None]:
    """Acquire ``claim``; only when granted, ``then(token)`` (the lock released again when it
    raises). ``(token, what it returned)``, or ``(0, None)`` when another owner holds it."""
    token = int(storage.locks.acquire(claim.key, claim.owner, claim.ttl))
    if not token:
        return 0, None
    try:
        return token, then(token)
    except BaseException:
        _release_quietly(storage, claim.key, claim.owner)
        raise


def append_releasing(
    storage: Storage, delta: ContextDelta, fence: Fence, *, announce: str | None = None
) -> bool:
    """``append_releasing`` of a :class:`~reactor.ports.capabilities.LocksWithContexts`
    context store, else its composition: a fenced append, then (when it appended) the
    release of ``fence.key`` and, given ``announce``, the publication of ``delta.status`` on
    that signals channel (best effort, when the storage has signals).

    Returns:
        Whether the segment was appended (``False``: nothing written, the lock still held).

    Raises:
        StaleWriterError, ContextTooLargeError, StorageError: as ``AppendsContexts.append``.
    """
    contexts = storage.contexts
    if declares(contexts, LocksWithContexts):
        return cast(LocksWithContexts, contexts).append_releasing(delta, fence, announce=announce)
    if not declares(contexts, AppendsContexts):
        return False  # no incremental checkpoints: the caller saves the whole context
    if not cast(AppendsContexts, contexts).append(delta, fence=fence):
        return False
    _release_quietly(storage, fence.key, fence.owner)
    _publish_quietly(storage, announce, delta.status)
    return True


def save_releasing(
    storage: Storage, record: ContextRecord, fence: Fence, *, announce: str | None = None
) -> None:
    """``save_releasing`` of a :class:`~reactor.ports.capabilities.LocksWithContexts` context
    store, else its composition: a fenced save, then the release of ``fence.key`` and the
    announcement (as :func:`append_releasing`).

    Raises:
        StaleWriterError, ContextTooLargeError, StorageError: as ``ContextStore.save``.
    """
    contexts = storage.contexts
    if declares(contexts, LocksWithContexts):
        cast(LocksWithContexts, contexts).save_releasing(record, fence, announce=announce)
        return
    contexts.save(record, fence=fence)
    _release_quietly(storage, fence.key, fence.owner)
    _publish_quietly(storage, announce, record.status)


def _publish_quietly(storage: Storage, channel: str | None, message: str) -> None:
    """Publish ``message`` on ``channel`` when given and the storage has signals; signals only
    shorten waits, so a failure is ignored (waiters re-read the record)."""
    signals = storage.signals
    if channel is None or signals is None or not storage.capabilities.signals:
        return
    try:
        signals.publish(channel, message)
    except Exception:
        pass


def _release_quietly(storage: Storage, key: str, owner: str) -> None:
    """Release ``key`` held by ``owner``; a failure only leaves it to lapse with its TTL."""
    try:
        storage.locks.release(key, owner)
    except Exception:
        pass
