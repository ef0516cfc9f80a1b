"""Re-entrant, owner-tokened TTL locks with fencing tokens, as a pure state machine.

Semantics: docs/protocol.md#locks (``acquire``/``release``/``extend`` and the inspectors), with
the expiry rules of docs/protocol.md#conventions: expiry is judged against the ``now`` passed in
(``expires_at <= now`` is absent) and a TTL of ``None`` means "no expiry". Every fresh
acquisition issues a fencing token (docs/coordination.md#fencing-tokens).

Every operation is ``op(state, now, ...) -> (new_state, result)``; ``state`` ``None`` means the
lock is absent. A no-op returns the very ``state`` it was given, so a caller can skip the write.

* :func:`acquire` — absent, released or lapsed: take it with count 1 and a new fencing token
  ``max(previous token + 1, clock in µs)`` (:func:`reactor.model.coordination.fencing.next_fence`);
  held by the same owner: count + 1, the TTL is reset to ``ttl`` and the token is kept; held by
  another owner: refused (token 0).
* :func:`release` — the owner decrements the count; at 0 the lock becomes a *tombstone* (owner
  cleared, count 0, ``expires_at = now``, token kept) instead of being deleted; a stranger or an
  expired lock gives ``False``. A partial release never touches the TTL.
* :func:`extend` — the owner *sets* the remaining TTL to ``ttl`` (never adds); the count and
  token are left alone; a stranger or an expired lock gives ``False``.

A lapsed lock and a tombstone are both "not held" and both keep their token;
:func:`expiry` (when the whole record may be garbage-collected) is the lock's ``expires_at``
plus :data:`~reactor.model.coordination.fencing.FENCE_RETENTION`, so the next acquisition
still sees the previous token for that long; after that only the clock term protects it.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.model.coordination._expiry import deadline, is_live
from reactor.model.coordination.fencing import FENCE_RETENTION, next_fence
from reactor.model.records import LockInfo

__all__ = ["LockState", "acquire", "expiry", "extend", "held", "info", "live", "release"]


@dataclass(frozen=True, slots=True)
class LockState:
    """One lock record: a holder, or a tombstone that only remembers the last token.

    Attributes:
        owner: the owner token of the holder; ``None`` for a tombstone (released).
        count: the re-entrancy count (at least 1 while held; 0 for a tombstone).
        expires_at: epoch seconds when the hold lapses, ``None`` for never; for a tombstone,
            the instant it was released.
        token: the fencing token of the current (or, for a lapsed lock or a tombstone, the
            last) acquisition; 0 for a record written before tokens existed.
    """

    owner: str | None
    count: int
    expires_at: float | None
    token: int = 0


def live(state: LockState | None, now: float) -> LockState | None:
    """The lock if someone holds it at ``now`` (logical expiry), else ``None``.

    Args:
        state: the stored state, possibly expired or a tombstone.
        now: the current time in epoch seconds.

    Returns:
        ``state`` when it has an owner and has not lapsed; ``None`` otherwise.
    """
    if state is None or state.owner is None or not is_live(state.expires_at, now):
        return None
    return state


def expiry(state: LockState) -> float | None:
    """The instant after which the whole record is garbage (for native TTL / document expiry).

    Args:
        state: the stored state.

    Returns:
        ``expires_at + FENCE_RETENTION`` in epoch seconds (the token outlives the hold by the
        retention of docs/coordination.md#fencing-tokens), ``None`` for a lock without expiry.
    """
    if state.expires_at is None:
        return None
    return state.expires_at + FENCE_RETENTION


def acquire(
    state: LockState | None, now: float, owner: str, ttl: float | None
) -> tuple[LockState | None, int]:
    """Take or re-enter the lock (docs/protocol.md#locks, ``acquire``).

    Args:
        state: the current state (``None`` = absent), possibly lapsed or a tombstone.
        now: the current time in epoch seconds.
        owner: the caller's owner token.
        ttl: seconds until the lock lapses, ``None`` for no expiry; resets the TTL on re-entry.

    Returns:
        ``(new_state, token)`` when ``owner`` now holds the lock: a fresh acquisition gets
        ``max(previous token + 1, clock in µs)``, a re-entry the current token unchanged
        (docs/coordination.md#fencing-tokens). ``(state, 0)`` when another owner holds it.

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number, or the token
            would exceed 2**53 - 1.
    """
    expires_at = deadline(now, ttl)
    current = live(state, now)
    if current is None:
        token = next_fence(0 if state is None else state.token, now)
        return LockState(owner=owner, count=1, expires_at=expires_at, token=token), token
    if current.owner == owner:
        # A holder written before tokens existed (token 0) gets one on its next re-entry.
        token = current.token if current.token > 0 else next_fence(0, now)
        reentered = LockState(
            owner=owner, count=current.count + 1, expires_at=expires_at, token=token
        )
        return reentered, token
    return state, 0


def release(state: LockState | None, now: float, owner: str) -> tuple[LockState | None, bool]:
    """Leave the lock once (docs/protocol.md#locks, ``release``).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        owner: the caller's owner token.

    Returns:
        ``(new_state, True)`` when ``owner`` held it: the count drops by one with the TTL
        unchanged, and at 0 the state becomes a tombstone (owner ``None``, count 0,
        ``expires_at = now``, token kept) that :func:`expiry` retains for
        ``FENCE_RETENTION`` seconds. ``(state, False)`` for a stranger or an absent, released
        or expired lock.
    """
    current = live(state, now)
    if current is None or current.owner != owner:
        return state, False
    if current.count <= 1:
        return LockState(owner=None, count=0, expires_at=now, token=current.token), True
    return (
        LockState(
            owner=owner,
            count=current.count - 1,
            expires_at=current.expires_at,
            token=current.token,
        ),
        True,
    )


def extend(
    state: LockState | None, now: float, owner: str, ttl: float | None
) -> tuple[LockState | None, bool]:
    """Set the lock's remaining TTL (docs/protocol.md#locks, ``extend``).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        owner: the caller's owner token.
        ttl: the new remaining lifetime in seconds (``now + ttl``, never added to the old TTL);
            ``None`` makes the lock permanent.

    Returns:
        ``(new_state, True)`` when ``owner`` holds it (count and token unchanged);
        ``(state, False)`` for a stranger or an absent, released or expired lock.

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
    """
    expires_at = deadline(now, ttl)
    current = live(state, now)
    if current is None or current.owner != owner:
        return state, False
    extended = LockState(
        owner=owner, count=current.count, expires_at=expires_at, token=current.token
    )
    return extended, True


def held(state: LockState | None, now: float) -> bool:
    """Whether anyone holds the lock at ``now`` (``lock_held?``, the sweepers' liveness test).

    Args:
        state: the stored state.
        now: the current time in epoch seconds.

    Returns:
        ``True`` when :func:`live` finds a holder.
    """
    return live(state, now) is not None


def info(state: LockState | None, now: float) -> LockInfo | None:
    """The holder at ``now`` (``lock_info``).

    Args:
        state: the stored state.
        now: the current time in epoch seconds.

    Returns:
        Owner, count, expiry and fencing token of the holder; ``None`` when absent, released
        or expired.
    """
    current = live(state, now)
    if current is None or current.owner is None:
        return None
    return LockInfo(
        owner=current.owner,
        count=current.count,
        expires_at=current.expires_at,
        token=current.token,
    )
