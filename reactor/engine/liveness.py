"""The run liveness lock ``async:<id>`` (docs/architecture.md, "Liveness locks and keys").

Every executing root — a synchronous caller, a worker, a hand-off caller until its final save —
holds ``async:<context_id>`` with a fresh owner token, TTL ``context_lock_ttl``, extended every
``ttl/3`` by a thread. The lock is the run's single-writer token and its liveness signal: the run
sweeper re-dispatches a ``running`` run only when the lock is gone.

Re-entrancy: on the inline router a ``run`` job executes nested inside the
thread that enqueued it, which already holds the lock; the nested execution skips the lock
instead of contending with itself. This module tracks, per thread, the runs whose lock the
thread holds: a context variable holding an immutable set, replaced (never mutated) on every
change, so a new thread starts with none, as with a thread-local.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from reactor.coordination.lock import Lock
from reactor.engine import fast_paths
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import Env
from reactor.errors import LockAcquisitionError, LockLost
from reactor.model.context import Context
from reactor.model.keys import run_liveness_key
from reactor.model.records import ContextDelta, ContextRecord, Fence, LockClaim
from reactor.model.status import TERMINAL_STATUSES

__all__ = [
    "FencedCheckpointer",
    "Liveness",
    "held",
    "held_here",
    "lease_remaining",
    "liveness_lock",
    "take",
    "take_loading",
]

_log = logging.getLogger("reactor.engine")

#: The runs whose liveness lock this thread holds (ambient run state; an immutable set, so no
#: two threads or contexts ever share one object).
_held: ContextVar[frozenset[str]] = ContextVar("reactor_liveness_held", default=frozenset())


def _hold_here(context_id: str) -> None:
    _held.set(_held.get() | {context_id})


def _drop_here(context_id: str) -> None:
    ids = _held.get()
    if context_id in ids:
        _held.set(ids - {context_id})


def held_here(context_id: str) -> bool:
    """Whether the current thread already holds ``async:<context_id>`` (inline re-entry)."""
    return context_id in _held.get()


class Liveness:
    """One execution's hold on a run's liveness lock.

    Attributes:
        context_id: the run.
        lock: the lock handle; ``None`` for a re-entrant hold (the enclosing execution in this
            thread owns the lock and releases it).
    """

    def __init__(
        self, context_id: str, lock: Lock | None, *, pending: bool = False,
        release_with_final_save: bool = False,
    ) -> None:
        self.context_id = context_id
        self.lock = lock
        self.pending = pending and lock is not None
        self.release_with_final_save = release_with_final_save
        #: The signal channel the releasing final save publishes the run's status on (the
        #: run's completion), ``None``: none; :attr:`announced` tells whether it did.
        self.announce: str | None = None
        self.announced = False
        #: The run's claims (``{step_path: payload}``) the store read in the request that took
        #: the lock and loaded the run (:func:`take_loading`); ``None``: not read with it.
        self.claims_read: dict[str, str] | None = None
        if lock is not None:
            _hold_here(context_id)

    def claim(self) -> LockClaim:
        """The lock a :attr:`pending` hold takes with the run's first save.

        Raises:
            AssertionError: the hold has no lock handle.
        """
        lock = self.lock
        assert lock is not None
        return LockClaim(key=lock.key, owner=lock.owner, ttl=lock.ttl)

    def adopt(self, token: int, started: float) -> None:
        """A :attr:`pending` hold was taken by a write that returned ``token`` (the request
        started at ``started``, the lock's :meth:`~reactor.coordination.lock.Lock.monotonic`
        reading); the lock is now held and auto-extended."""
        lock = self.lock
        assert lock is not None
        lock.adopt(token, started)
        self.pending = False

    def forgo(self) -> None:
        """Give up a :attr:`pending` hold without taking it (another owner holds the lock, or
        the run's only save is its final one); its saves are unfenced from now on."""
        self.pending = False
        self.lock = None
        _drop_here(self.context_id)

    def released_with_write(self) -> None:
        """The run's final write released the lock in the same request (docs/protocol.md,
        "Optional fast paths"): stop extending it; :meth:`release` is a no-op from now on."""
        lock, self.lock = self.lock, None
        _drop_here(self.context_id)
        if lock is not None:
            lock.released_elsewhere()

    def check(self) -> None:
        """Fence a write: raise unless this execution still owns the lock.

        Raises:
            LockLost: the lock lapsed (its extender could not run, or the storage lost it) and
                another execution may own the run now; the caller must stop without writing.
        """
        lock = self.lock
        if lock is None or self.pending:
            return
        if lock.lost is not None:
            raise lock.lost
        if not lock.held_by_me():
            raise LockLost(f"liveness lock {lock.key!r} lapsed; another execution owns the run")

    def fence(self) -> Fence | None:
        """The fence of this hold for a context save (docs/workers.md, "Stale writers and
        fenced saves").

        Returns:
            ``Fence(key, owner, token)`` of the held lock, or ``None`` for a re-entrant or
            released hold (or a lock whose store reported no token), whose saves are unfenced.
        """
        lock = self.lock
        if lock is None or self.pending or lock.token < 1:
            return None
        return Fence(key=lock.key, owner=lock.owner, token=lock.token)

    def release(self) -> None:
        """Release the lock (after the final save: save before release); never raises."""
        lock, self.lock = self.lock, None
        if lock is None:
            return
        _drop_here(self.context_id)
        if self.pending:  # never taken
            self.pending = False
            return
        try:
            lock.release()
        except Exception:  # the lock lapses with its TTL anyway
            pass

    @contextmanager
    def lease_at_most(self, seconds: float) -> Iterator[None]:
        """Hold the run's lock with leases of at most ``seconds`` in the scope (a heartbeat
        step's attempt in a worker: a dead worker's lock lapses within that much;
        docs/concepts.md, "Heartbeats"), then with the lock's own lease again.

        A hold not taken yet (:attr:`pending`) takes the lock with the shorter lease; a
        re-entrant or released hold, or one whose lease is already that short, is left as it
        is. A failed change is logged (``event=lease_change_failed``) and the hold goes on
        with the lease it has (a lost lock fails the next fenced save); never raises.

        Args:
            seconds: the shorter lease, in seconds (a valid lease for the lock: at least
                ``MIN_LEASE`` and above the storage's clock-skew budget).
        """
        lock = self.lock
        if lock is None or lock.ttl is None or not seconds < lock.ttl:
            yield
            return
        original = lock.ttl
        self._set_ttl(lock, seconds)
        try:
            yield
        finally:
            if self.lock is lock:
                self._set_ttl(lock, original)

    def _set_ttl(self, lock: Lock, seconds: float) -> None:
        if self.pending:  # taken with the run's next save: with this lease
            lock.ttl = seconds
            return
        try:
            lock.change_ttl(seconds)
        except Exception as exc:
            _log.warning("event=lease_change_failed key=%s seconds=%.2f error=%s", lock.key,
                         seconds, type(exc).__name__)

    def park(self, seconds: float) -> None:
        """Keep the lock for ``seconds`` more without extending it, then let it lapse.

        A parked or retry-delayed run keeps its lock as a ``parked_until`` stamp, so the sweeper
        does not mistake it for a lost run while it waits; once the
        delay is over the lock lapses and the re-enqueued job (or, if that job was lost, the
        sweeper) takes over. Never raises.
        """
        lock, self.lock = self.lock, None
        if lock is None:
            return
        _drop_here(self.context_id)
        if self.pending:  # never taken: nothing to keep
            self.pending = False
            return
        lock.detach()
        try:
            if not lock.extend(max(seconds, 0.001)):
                lock.release()
        except Exception:
            pass


def lease_remaining(env: Env, key: str) -> float | None:
    """Seconds until the current holder's lease on lock ``key`` lapses unless it renews
    (one ``LockStore.info`` read), for a job that found the lock held: a dead holder's lease
    has lapsed once that long has passed, so a re-try after it finds the lock free, and only
    a live holder (one that renewed) still holds it (docs/workers.md, "Decisions").

    Args:
        env: the execution environment (its storage and its wall clock).
        key: the lock key.

    Returns:
        The remaining seconds (``>= 0``); ``None`` when the lock is free, has no expiry, or
        the read failed (the caller keeps its own delay).
    """
    try:
        info = env.storage.locks.info(key)
    except Exception:  # a hint only: the caller's own delay stands
        return None
    if info is None or info.expires_at is None:
        return None
    return max(info.expires_at - env.now(), 0.0)


def liveness_lock(env: Env, key: str, *, wait: float = 0.0) -> Lock:
    """A liveness lock handle on ``key``: a fresh owner, TTL ``context_lock_ttl``,
    auto-extended under the renewal policy, the holder's deadline shortened by the storage's
    clock-skew budget (``docs/coordination.md``, "Renewal and loss", "Clock skew").

    Args:
        env: the execution environment (storage, settings, and the clock a ``wait`` polls on;
            the holder's deadline stays on the real monotonic clock its renewal runs on).
        key: the lock key (``async:<id>``, a map element's or collector's key, ...).
        wait: seconds :meth:`Lock.acquire` keeps trying (0 = one try).

    Raises:
        ValueError: ``context_lock_ttl`` does not exceed the storage's clock-skew budget.
    """
    return Lock(
        env.storage.locks, key, ttl=env.settings.context_lock_ttl, wait=wait,
        skew=env.storage.capabilities.clock_skew, clock=env.clock,
    )


def take(env: Env, context_id: str, *, wait: float = 0.0) -> Liveness | None:
    """Take ``async:<context_id>`` with a fresh owner (auto-extended every ``ttl/3``).

    Args:
        env: the execution environment (storage and ``context_lock_ttl``).
        context_id: the run.
        wait: seconds to keep polling a held lock (0 = one try).

    Returns:
        The hold (re-entrant when this thread already holds the lock), or ``None`` when
        another owner holds it.

    Raises:
        StorageError: the backend failed.
    """
    if held_here(context_id):
        return Liveness(context_id, None)
    lock = liveness_lock(env, run_liveness_key(context_id), wait=wait)
    if wait > 0:
        try:
            lock.acquire()
        except LockAcquisitionError:
            return None
    elif not lock.try_acquire():
        return None
    return Liveness(context_id, lock)


@contextmanager
def held(env: Env, context_id: str) -> Iterator[Liveness]:
    """Hold ``async:<context_id>`` for the duration of a synchronous execution.

    The lock is taken with the run's first save, in one request where the store can
    (:func:`reactor.engine.fast_paths.save_taking`: nothing can sweep a run before it is
    stored), and released with its final save. A fresh run id is never contended; if it
    somehow is, the run proceeds without the lock (the sweeper only ever re-dispatches, and a
    duplicate meets the live record).

    Yields:
        The hold (released on exit, after the execution's final save).
    """
    if held_here(context_id):
        hold = Liveness(context_id, None)
    else:
        hold = Liveness(
            context_id, liveness_lock(env, run_liveness_key(context_id)), pending=True,
            release_with_final_save=True,
        )
    try:
        yield hold
    finally:
        hold.release()


def take_loading(
    env: Env, context_id: str, *, wait: float = 0.0, claim_paths: Sequence[str] = ()
) -> tuple[Liveness | None, ContextRecord | None]:
    """Take ``async:<context_id>`` and load the run in one request where the store can
    (:func:`reactor.engine.fast_paths.load_taking_claims`); a contended lock is then waited
    for as :func:`take` waits, and the run loaded after.

    Args:
        env: the execution environment.
        context_id: the run.
        wait: seconds to keep polling a held lock (0 = one try).
        claim_paths: claims of the run to read in the same request where the store can
            (:attr:`Liveness.claims_read`; the run's cancel request).

    Returns:
        ``(hold, record or None)``; ``(None, None)`` when another owner holds the lock. The
        hold releases the lock with the run's final save; its :attr:`Liveness.claims_read`
        holds the claims read with the record, ``None`` when the store did not read them.

    Raises:
        DeserializationError: the stored record is unreadable (the lock is not held).
        StorageError: the backend failed (the lock is not held).
    """
    if held_here(context_id):
        return Liveness(context_id, None), env.storage.contexts.load(context_id)
    lock = liveness_lock(env, run_liveness_key(context_id), wait=wait)
    started = lock.monotonic()
    token, record, claims = fast_paths.load_taking_claims(
        env.storage, context_id, LockClaim(key=lock.key, owner=lock.owner, ttl=lock.ttl),
        claim_paths,
    )
    if token:
        lock.adopt(token, started)
        taken = Liveness(context_id, lock, release_with_final_save=True)
        taken.claims_read = claims
        return taken, record
    if wait <= 0:
        return None, None
    hold = take(env, context_id, wait=wait)
    if hold is None:
        return None, None
    hold.release_with_final_save = True
    try:
        return hold, env.storage.contexts.load(context_id)
    except BaseException:
        hold.release()
        raise


class FencedCheckpointer(Checkpointer):
    """A :class:`Checkpointer` that refuses to write once the execution lost its liveness lock.

    Used by worker executions and synchronous runs that hold a run lock: a writer stalled past
    its lock's TTL (a long GC pause, a frozen VM) must not overwrite the progress of the
    execution that took the run over (single writer): every save carries the hold's fence,
    checked by the store atomically inside the write itself (docs/workers.md, "Stale writers
    and fenced saves"). No separate round trip asks whether the lock is still held.

    Args:
        env: the execution environment.
        record_context: the run's context.
        liveness: the execution's hold.
    """

    def __init__(self, env: Env, record_context: Context, liveness: Liveness) -> None:
        super().__init__(env, record_context)
        self.liveness = liveness

    def fence(self) -> Fence | None:
        """The hold's fence (:meth:`Liveness.fence`): the store refuses the save atomically
        once a newer holder of the lock saved the record."""
        return self.liveness.fence()

    def write_whole(self, record: ContextRecord) -> None:
        """A full save: the one that takes a :attr:`Liveness.pending` hold (when the run goes
        on after it), or the final one that releases a hold with
        :attr:`Liveness.release_with_final_save`, each in one request where the store can
        (:mod:`reactor.engine.fast_paths`); else fenced as :meth:`Checkpointer.write_whole`.
        """
        live, storage = self.liveness, self.env.storage
        lock = live.lock
        if lock is not None and live.pending:
            if self._final():  # the run's only save: nothing to guard after it
                live.forgo()
                storage.contexts.save(record)
                return
            started = lock.monotonic()
            token = fast_paths.save_taking(storage, record, live.claim())
            if token:
                live.adopt(token, started)
                return
            live.forgo()  # another owner holds it: proceed unlocked (see :func:`held`)
            storage.contexts.save(record)
            return
        fence = live.fence()
        if fence is not None and self._releases():
            fast_paths.save_releasing(storage, record, fence, announce=live.announce)
            live.released_with_write()
            live.announced = live.announce is not None
            return
        super().write_whole(record)

    def write_segment(self, delta: ContextDelta) -> bool:
        """An incremental checkpoint; the final one releases a hold with
        :attr:`Liveness.release_with_final_save` (and publishes on :attr:`Liveness.announce`)
        in the same request where the store can."""
        live = self.liveness
        fence = live.fence()
        if fence is not None and self._releases():
            appended = fast_paths.append_releasing(
                self.env.storage, delta, fence, announce=live.announce
            )
            if appended:
                live.released_with_write()
                live.announced = live.announce is not None
            return appended
        return super().write_segment(delta)

    def _final(self) -> bool:
        return self.context.status in TERMINAL_STATUSES

    def _releases(self) -> bool:
        return self.liveness.release_with_final_save and self._final()

    def save(self, *, force: bool = True) -> None:
        """Save fenced with the hold's token (see :meth:`Checkpointer.save`), after the local
        check of a loss the heartbeat already saw.

        Raises:
            LockLost: the heartbeat found the liveness lock taken or lapsed (nothing is
                written).
            StaleWriterError: a :class:`LockLost`: a newer holder already saved the run
                (nothing is written).
        """
        if self.liveness.lock is not None and self.liveness.lock.lost is not None:
            raise self.liveness.lock.lost
        super().save(force=force)
