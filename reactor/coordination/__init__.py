"""Coordination clients used by the engine and by users directly.

They wrap the coordination sub-stores of :class:`reactor.ports.Storage` with waiting,
auto-extension and typed errors; the semantics live in :mod:`reactor.model.coordination`.
"""

from __future__ import annotations

from reactor.coordination.lock import Lock
from reactor.coordination.ordered_lock import OrderedLock
from reactor.coordination.period import Period
from reactor.coordination.rate_limit import (
    NAMED_WINDOWS,
    RateLimit,
    RateLimitRegistry,
    registry,
    windows_from,
)
from reactor.coordination.semaphore import Semaphore

__all__ = [
    "NAMED_WINDOWS",
    "Lock",
    "OrderedLock",
    "Period",
    "RateLimit",
    "RateLimitRegistry",
    "Semaphore",
    "registry",
    "windows_from",
]
