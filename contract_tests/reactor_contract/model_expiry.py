"""What "expire" means on the pure coordination states (shared by probes and the model test).

The probe protocol (:mod:`reactor_contract.probe`) lets a test make a coordination record lapse
now. For adapters built on the generic stores, and for the reference model the model-based test
compares against, that is a change of the model state's expiry fields: one definition here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from reactor.model.coordination import ordered_locks as ordered_model
from reactor.model.coordination import rate_limits as rate_model
from reactor.model.coordination import semaphores as semaphore_model

__all__ = ["DEAD_TIMER", "ORDERED_FIELDS", "shift_expiry"]

#: A timer stamp older than any poison-pill timeout (epoch second 0 is a real, ancient timer).
DEAD_TIMER = 0.0

#: Probe member names of an ordered lock's timed fields -> ``OrderedLockRecord`` attributes.
ORDERED_FIELDS: dict[str, str] = {
    "next": "next_nonce",
    "cursor": "cursor",
    "timers": "timers",
    "first_failed": "first_failed",
    "epoch": "epoch",
}


def shift_expiry(concern: str, state: Any, at: float, member: str | None) -> Any:
    """The coordination ``state`` with its expiry (or one member's) moved to ``at``.

    This is what :meth:`reactor_contract.probe.Probe.expire` means for a coordination concern,
    expressed on the pure model's states (``reactor.model.coordination``): the generic probe
    applies it to stored documents and the model-based test to the reference model.

    Args:
        concern: ``"lock"``, ``"semaphore"``, ``"rate_limit"``, ``"period"`` or
            ``"ordered_lock"``.
        state: the model state (live).
        at: the new expiry, epoch seconds.
        member: a semaphore holder; for ordered locks a nonce (its timer is made dead, i.e.
            stamped at :data:`DEAD_TIMER`) or a field name of :data:`ORDERED_FIELDS`.

    Raises:
        KeyError: the concern has no such member.
    """
    if concern == "lock":
        if member is not None:
            raise KeyError(f"locks have no members, got {member!r}")
        if state.owner is None:
            return state  # a released lock (a tombstone) has no hold to lapse
        return dataclasses.replace(state, expires_at=at)
    if concern == "period":
        if member is not None:
            raise KeyError(f"period markers have no members, got {member!r}")
        return dataclasses.replace(state, expires_at=at)
    if concern == "semaphore":
        assert isinstance(state, semaphore_model.SemaphoreLeases)
        holders = dict(state.holders)
        if member is None:
            holders = dict.fromkeys(holders, at)
        elif member in holders:
            holders[member] = at
        else:
            raise KeyError(f"semaphore holder {member!r} holds no lease")
        return dataclasses.replace(state, holders=holders)
    if concern == "rate_limit":
        if member is not None:
            raise KeyError(f"rate limits have no members, got {member!r}")
        assert isinstance(state, rate_model.RateCounters)
        return dataclasses.replace(
            state,
            windows={
                wid: dataclasses.replace(c, expires_at=at) for wid, c in state.windows.items()
            },
        )
    assert isinstance(state, ordered_model.OrderedLockRecord)
    if member is not None and member.isdigit():
        nonce = int(member)
        if state.timers is None or nonce not in state.timers.value:
            raise KeyError(f"ordered-lock nonce {nonce} has no timer")
        timers = dict(state.timers.value)
        timers[nonce] = DEAD_TIMER
        return dataclasses.replace(state, timers=dataclasses.replace(state.timers, value=timers))
    names = list(ORDERED_FIELDS.values()) if member is None else [ORDERED_FIELDS[member]]
    changes = {
        name: dataclasses.replace(getattr(state, name), expires_at=at)
        for name in names
        if getattr(state, name) is not None
    }
    return dataclasses.replace(state, **changes)
