"""A reactor's suspend switch (docs/operations.md, "Suspend and unsuspend"): while it is on,
every top-level run of the reactor that an execution continues — started after the switch was
set, handed to a worker, resumed — stops at its next step boundary and is stored
``suspended``, as a run suspended on its own is (:mod:`reactor.engine.run_control.suspension`).

**Stored as a lock.** The switch is the lock :func:`reactor.model.keys.reactor_suspension_key`
held with no expiry (a TTL of ``None``) by an owner whose text is the switch's
:class:`~reactor.model.engine_state.Suspension` (``encode()``: reason, who, when; the
claim text a run's own suspend request has). Setting it is one ``LockStore.acquire`` (first
writer wins: a second operator's switch keeps the first one's reason), clearing it one
``release`` by that owner, reading it one ``info``. No port gains an operation.

**Cached.** An execution checks the switch before each step, so the read is cached per storage
object and reactor in this process for at most :data:`STALENESS` seconds (on the runtime
clock's ``monotonic()``): a switch set in another process is seen within that much time plus
the step in flight; set or cleared in this process, at once (the cache is written through).
"""

from __future__ import annotations

import logging
import threading
import weakref

from reactor.engine.env import Env
from reactor.errors import DeserializationError, LockAcquisitionError
from reactor.model.engine_state import Suspension
from reactor.model.keys import reactor_suspension_key

__all__ = ["STALENESS", "cached", "read", "switch_off", "switch_on"]

log = logging.getLogger("reactor.suspend")

#: The longest a process keeps a reactor's switch as it read it, in seconds (the staleness
#: bound of :func:`cached`).
STALENESS = 1.0

#: ``{storage: {reactor: (monotonic seconds read at, switch or None)}}``.
_Cache = dict[str, tuple[float, Suspension | None]]
_CACHE: weakref.WeakKeyDictionary[object, _Cache] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()

#: Tries of a set or clear that meets another operator's change between its read and write.
_TRIES = 5


def _decoded(reactor: str, owner: str) -> Suspension:
    """The switch an owner text holds; the defaults when unreadable (someone set it)."""
    try:
        return Suspension.decode(owner)
    except DeserializationError as exc:  # a text another writer left: still a switch
        log.warning("event=reactor_suspension_unreadable reactor=%s error=%s", reactor, exc)
        return Suspension()


def read(env: Env, reactor: str) -> Suspension | None:
    """The reactor's switch as stored now (one lock-store read; the cache is refreshed).

    Args:
        env: the runtime's environment.
        reactor: the registered reactor name.

    Returns:
        The switch (reason, who, when), or ``None`` when it is off.

    Raises:
        StorageError: the lock store failed.
    """
    info = env.storage.locks.info(reactor_suspension_key(reactor))
    found = None if info is None else _decoded(reactor, info.owner)
    _remember(env, reactor, found)
    return found


def cached(env: Env, reactor: str) -> Suspension | None:
    """The reactor's switch as this process read it at most :data:`STALENESS` seconds ago
    (runtime clock), else read now (see the module docstring).

    Raises:
        StorageError: the lock store failed (a read was due).
    """
    try:
        per_storage = _CACHE.get(env.storage)  # no lock: a read of a dict
    except TypeError:  # not weakly referenceable
        per_storage = None
    if per_storage is not None:
        seen = per_storage.get(reactor)
        if seen is not None and 0.0 <= env.clock.monotonic() - seen[0] < STALENESS:
            return seen[1]
    return read(env, reactor)


def switch_on(env: Env, reactor: str, asked: Suspension) -> Suspension:
    """Set the reactor's switch (first writer wins).

    Args:
        env: the runtime's environment.
        reactor: the registered reactor name.
        asked: the switch to set: reason, who, when (``resume`` is not used).

    Returns:
        The switch that stands: ``asked``, or the one another operator set first.

    Raises:
        LockAcquisitionError: other operators changed the switch under this call every time.
        StorageError: the lock store failed.
    """
    key = reactor_suspension_key(reactor)
    locks = env.storage.locks
    for _ in range(_TRIES):
        if locks.acquire(key, asked.encode(), None):
            _remember(env, reactor, asked)
            log.info("event=reactor_suspension_set reactor=%s by=%s", reactor, asked.by)
            return asked
        standing = read(env, reactor)
        if standing is not None:
            return standing
    raise _kept_changing(reactor)


def switch_off(env: Env, reactor: str) -> Suspension | None:
    """Clear the reactor's switch.

    Args:
        env: the runtime's environment.
        reactor: the registered reactor name.

    Returns:
        The switch cleared, or ``None`` when it was off.

    Raises:
        LockAcquisitionError: other operators changed the switch under this call every time.
        StorageError: the lock store failed.
    """
    key = reactor_suspension_key(reactor)
    locks = env.storage.locks
    for _ in range(_TRIES):
        info = locks.info(key)
        if info is None:
            _remember(env, reactor, None)
            return None
        # a re-entrant owner (the same text set twice) is released as often as it was taken
        if all(locks.release(key, info.owner) for _ in range(info.count)):
            _remember(env, reactor, None)
            log.info("event=reactor_suspension_cleared reactor=%s", reactor)
            return _decoded(reactor, info.owner)
    raise _kept_changing(reactor)


def _kept_changing(reactor: str) -> LockAcquisitionError:
    """The error of a set or clear that met other operators' changes :data:`_TRIES` times."""
    return LockAcquisitionError(
        f"the suspend switch of reactor {reactor!r} kept changing under this call; try again",
        key=reactor_suspension_key(reactor),
    )


def _per_storage(env: Env) -> _Cache | None:
    """This storage's cache (``None``: a storage that cannot be weakly referenced is read
    every time)."""
    storage = env.storage
    with _CACHE_LOCK:
        try:
            per_storage = _CACHE.get(storage)
            if per_storage is None:
                per_storage = _CACHE[storage] = {}
        except TypeError:
            return None
    return per_storage


def _remember(env: Env, reactor: str, found: Suspension | None) -> None:
    """Keep what was read or written for :func:`cached`."""
    per_storage = _per_storage(env)
    if per_storage is not None:
        per_storage[reactor] = (env.clock.monotonic(), found)
