"""Coordination primitives as pure state machines (docs/architecture.md, "Layers").

Locks, semaphores, rate limits, periods and ordered locks are defined once, here, as pure
functions ``op(state, now, *args) -> (new_state, result)`` over small frozen dataclass states
(``None`` = absent). There is no I/O and no clock read: every expiry is part of the state and is
judged against the ``now`` passed in (``expires_at <= now`` is absent; a TTL of ``None`` never
expires). A backend only supplies atomicity around them (a mutex, a compare-and-set loop, a Lua
script that behaves exactly like them). Sources:

* :mod:`~reactor.model.coordination.locks` — docs/protocol.md#locks;
* :mod:`~reactor.model.coordination.semaphores` — docs/protocol.md#semaphores (per-holder leases);
* :mod:`~reactor.model.coordination.rate_limits` — docs/protocol.md#rate-limits;
* :mod:`~reactor.model.coordination.periods` — docs/protocol.md#periods, first-wins;
* :mod:`~reactor.model.coordination.ordered_locks` — docs/protocol.md#ordered-locks;
* :mod:`~reactor.model.coordination.fencing` — the fencing-token formula shared by lock tokens
  and ordered-lock epochs, with its retention and clock assumption
  (docs/coordination.md#fencing-tokens);
* :mod:`~reactor.model.coordination.reference` — :class:`ReferenceCoordination`, the five store
  protocols over a dict and a settable clock, for model-based contract tests.

The operation functions share names across primitives (``acquire``, ``release``, ``reset``), so
they are reached through their modules: ``locks.acquire(...)``, ``semaphores.acquire(...)``.
:func:`deadline` (TTL validation and ``now + ttl``) and :func:`is_live` are the shared expiry
rules, public for adapters that validate arguments before a native fast path.
"""

from __future__ import annotations

from reactor.model.coordination import (
    fencing,
    locks,
    ordered_locks,
    periods,
    rate_limits,
    reference,
    semaphores,
)
from reactor.model.coordination._expiry import deadline, is_live
from reactor.model.coordination.locks import LockState
from reactor.model.coordination.ordered_locks import OrderedLockRecord, Timed
from reactor.model.coordination.periods import (
    Every,
    PeriodMarkState,
    bucket,
    bucket_key,
    period_seconds,
    ttl_seconds,
)
from reactor.model.coordination.rate_limits import RateCounters, WindowCounter
from reactor.model.coordination.reference import ReferenceCoordination, SettableClock
from reactor.model.coordination.semaphores import SemaphoreLeases

__all__ = [
    "Every",
    "LockState",
    "OrderedLockRecord",
    "PeriodMarkState",
    "RateCounters",
    "ReferenceCoordination",
    "SemaphoreLeases",
    "SettableClock",
    "Timed",
    "WindowCounter",
    "bucket",
    "bucket_key",
    "deadline",
    "fencing",
    "is_live",
    "locks",
    "ordered_locks",
    "period_seconds",
    "periods",
    "rate_limits",
    "reference",
    "semaphores",
    "ttl_seconds",
]
