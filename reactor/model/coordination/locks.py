"""Re-entrant, owner-tokened TTL locks as a pure state machine.

Source: storage-protocol.md §2.8 "Locks" (``lock_acquire``/``lock_release``/``lock_extend`` and
the inspectors), with the ARCHITECTURE §2 fixes: expiry is judged against the ``now`` passed in
(``expires_at <= now`` is absent) and a TTL of ``None`` means "no expiry".

Every operation is ``op(state, now, ...) -> (new_state, result)``; ``state`` ``None`` means the
lock is absent. A no-op returns the very ``state`` it was given, so a caller can skip the write.

* :func:`acquire` — absent: take it with count 1; held by the same owner: count + 1 and the TTL
  is reset to ``ttl``; held by another owner: refused.
* :func:`release` — the owner decrements the count and the lock is deleted at 0; a stranger or an
  expired lock gives ``False``. Releasing never touches the TTL.
* :func:`extend` — the owner *sets* the remaining TTL to ``ttl`` (never adds); the count is left
  alone; a stranger or an expired lock gives ``False``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.model.coordination._expiry import deadline, is_live
from reactor.ports.records import LockInfo

__all__ = ["LockState", "acquire", "expiry", "extend", "held", "info", "live", "release"]


@dataclass(frozen=True, slots=True)
class LockState:
    """One lock.

    Attributes:
        owner: the owner token of the holder.
        count: the re-entrancy count (at least 1).
        expires_at: epoch seconds when the lock lapses, ``None`` for never.
    """

    owner: str
    count: int
    expires_at: float | None


def live(state: LockState | None, now: float) -> LockState | None:
    """The lock if it exists at ``now``, else ``None`` (logical expiry).

    Args:
        state: the stored state, possibly expired.
        now: the current time in epoch seconds.
    """
    if state is None or not is_live(state.expires_at, now):
        return None
    return state


def expiry(state: LockState) -> float | None:
    """The instant after which the whole state is garbage (for native TTL / document expiry)."""
    return state.expires_at


def acquire(
    state: LockState | None, now: float, owner: str, ttl: float | None
) -> tuple[LockState | None, bool]:
    """Take or re-enter the lock (storage-protocol.md §2.8 ``lock_acquire``).

    Args:
        state: the current state (``None`` = absent).
        now: the current time in epoch seconds.
        owner: the caller's owner token.
        ttl: seconds until the lock lapses, ``None`` for no expiry; resets the TTL on re-entry.

    Returns:
        ``(new_state, True)`` when ``owner`` now holds the lock, ``(state, False)`` otherwise.

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
    """
    expires_at = deadline(now, ttl)
    current = live(state, now)
    if current is None:
        return LockState(owner=owner, count=1, expires_at=expires_at), True
    if current.owner == owner:
        return LockState(owner=owner, count=current.count + 1, expires_at=expires_at), True
    return state, False


def release(state: LockState | None, now: float, owner: str) -> tuple[LockState | None, bool]:
    """Leave the lock once (storage-protocol.md §2.8 ``lock_release``).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        owner: the caller's owner token.

    Returns:
        ``(new_state, True)`` when ``owner`` held it: the count drops by one and the state is
        ``None`` at 0; the TTL is unchanged. ``(state, False)`` for a stranger or an absent or
        expired lock.
    """
    current = live(state, now)
    if current is None or current.owner != owner:
        return state, False
    if current.count <= 1:
        return None, True
    return LockState(owner=owner, count=current.count - 1, expires_at=current.expires_at), True


def extend(
    state: LockState | None, now: float, owner: str, ttl: float | None
) -> tuple[LockState | None, bool]:
    """Set the lock's remaining TTL (storage-protocol.md §2.8 ``lock_extend``).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        owner: the caller's owner token.
        ttl: the new remaining lifetime in seconds (``now + ttl``, never added to the old TTL);
            ``None`` makes the lock permanent.

    Returns:
        ``(new_state, True)`` when ``owner`` holds it (count unchanged); ``(state, False)`` for a
        stranger or an absent or expired lock.

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
    """
    expires_at = deadline(now, ttl)
    current = live(state, now)
    if current is None or current.owner != owner:
        return state, False
    return LockState(owner=owner, count=current.count, expires_at=expires_at), True


def held(state: LockState | None, now: float) -> bool:
    """Whether anyone holds the lock at ``now`` (``lock_held?``, the sweepers' liveness test)."""
    return live(state, now) is not None


def info(state: LockState | None, now: float) -> LockInfo | None:
    """The holder at ``now`` (``lock_info``), or ``None`` when absent or expired."""
    current = live(state, now)
    if current is None:
        return None
    return LockInfo(owner=current.owner, count=current.count, expires_at=current.expires_at)
