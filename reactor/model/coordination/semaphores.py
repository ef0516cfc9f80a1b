"""Counting semaphores as per-holder leases, as a pure state machine.

Semantics: docs/protocol.md#semaphores. The state is ``{limit, holders: {token: expires_at}}``,
replacing ruby_reactor's token lists, whose slots leak when a holder dies. A dead holder's
lease simply expires, so capacity is never lost.

Every operation is ``op(state, now, ...) -> (new_state, result)``; ``state`` ``None`` means the
semaphore is absent (never used, reset, or every lease released or expired). A no-op returns
the very ``state`` it was given.

* :func:`acquire` — expired leases are dropped; a holder that already has a live lease renews it
  (``True``); otherwise the holder gets a lease while fewer than ``limit`` live leases exist.
  Initialisation is implicit: the limit is fixed by the acquire that creates the semaphore and
  stays while any lease is live (like ruby_reactor's ``semaphore_init`` NX sentinel); an empty
  semaphore adopts the next caller's limit.
* :func:`release` — removes only the caller's own lease; ``False`` when it has none.
* :func:`extend` — renews the caller's own live lease to ``now + lease``; an expired lease is
  never revived (its slot may already be taken).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reactor.model.coordination._expiry import deadline, is_live
from reactor.model.records import SemaphoreState

__all__ = [
    "SemaphoreLeases",
    "acquire",
    "check_arguments",
    "expiry",
    "extend",
    "live",
    "release",
    "reset",
    "view",
]


@dataclass(frozen=True, slots=True)
class SemaphoreLeases:
    """One semaphore: its limit and its holders' leases.

    Attributes:
        limit: the maximum number of concurrent live leases (>= 0).
        holders: ``{holder token: lease expiry in epoch seconds}``; never mutated (each
            transition builds a new mapping). May contain expired leases; see :func:`live`.
    """

    limit: int
    holders: Mapping[str, float] = field(default_factory=dict)


def live(state: SemaphoreLeases | None, now: float) -> SemaphoreLeases | None:
    """The semaphore with its expired leases dropped, or ``None`` when no lease is live.

    Args:
        state: the stored state.
        now: the current time in epoch seconds.
    """
    if state is None:
        return None
    holders = {token: at for token, at in state.holders.items() if is_live(at, now)}
    if not holders:
        return None
    if len(holders) == len(state.holders):
        return state
    return SemaphoreLeases(limit=state.limit, holders=holders)


def expiry(state: SemaphoreLeases) -> float | None:
    """The instant after which every lease has expired (``None`` when there are no leases)."""
    return max(state.holders.values(), default=None)


def check_arguments(limit: int | None, lease: float) -> float:
    """Validate a semaphore call's arguments, as every operation here does first.

    Args:
        limit: the limit (an ``int >= 0``), or ``None`` when the call takes none.
        lease: the lease in seconds (a positive finite number).

    Returns:
        ``lease`` unchanged.

    Raises:
        ValueError: ``limit`` is negative (or a bool) or ``lease`` is not positive and finite.
    """
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        raise ValueError(f"semaphore limit must be an int >= 0, got {limit!r}")
    if deadline(0.0, lease) is None:
        raise ValueError("a semaphore lease needs a finite duration")
    return lease


def acquire(
    state: SemaphoreLeases | None, now: float, holder: str, limit: int, lease: float
) -> tuple[SemaphoreLeases | None, bool]:
    """Lease a slot for ``holder`` (docs/protocol.md#semaphores).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        holder: the caller's holder token.
        limit: the limit to create the semaphore with when it is absent (>= 0); a semaphore
            with live leases keeps the limit it was created with.
        lease: seconds the lease lives (> 0).

    Returns:
        ``(new_state, True)`` when ``holder`` now has a lease (new or renewed to
        ``now + lease``); ``(state, False)`` when every slot is leased to others.

    Raises:
        ValueError: ``limit`` is negative or ``lease`` is not a positive finite number.
    """
    check_arguments(limit, lease)
    current = live(state, now)
    effective = limit if current is None else current.limit
    holders = dict(current.holders) if current is not None else {}
    if holder not in holders and len(holders) >= effective:
        return state, False
    holders[holder] = now + lease
    return SemaphoreLeases(limit=effective, holders=holders), True


def release(
    state: SemaphoreLeases | None, now: float, holder: str
) -> tuple[SemaphoreLeases | None, bool]:
    """Give back ``holder``'s lease.

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        holder: the caller's holder token.

    Returns:
        ``(new_state, True)`` when ``holder`` had a live lease (the state is ``None`` once no
        lease is left); ``(state, False)`` otherwise (expired lease, double release, forged
        token, reset).
    """
    current = live(state, now)
    if current is None or holder not in current.holders:
        return state, False
    holders = {token: at for token, at in current.holders.items() if token != holder}
    if not holders:
        return None, True
    return SemaphoreLeases(limit=current.limit, holders=holders), True


def extend(
    state: SemaphoreLeases | None, now: float, holder: str, lease: float
) -> tuple[SemaphoreLeases | None, bool]:
    """Renew ``holder``'s live lease to ``now + lease`` seconds.

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        holder: the caller's holder token.
        lease: the new remaining lifetime in seconds (> 0).

    Returns:
        ``(new_state, True)`` when renewed; ``(state, False)`` when ``holder`` has no live lease.

    Raises:
        ValueError: ``lease`` is not a positive finite number.
    """
    check_arguments(None, lease)
    current = live(state, now)
    if current is None or holder not in current.holders:
        return state, False
    holders = dict(current.holders)
    holders[holder] = now + lease
    return SemaphoreLeases(limit=current.limit, holders=holders), True


def reset(state: SemaphoreLeases | None, now: float) -> tuple[SemaphoreLeases | None, None]:
    """Drop every lease (operators). The result is always the absent state."""
    del state, now
    return None, None


def view(state: SemaphoreLeases | None, now: float) -> SemaphoreState | None:
    """The limit and live leases at ``now``; ``None`` when absent or every lease expired."""
    current = live(state, now)
    if current is None:
        return None
    return SemaphoreState(limit=current.limit, holders=dict(current.holders))
