"""Fencing tokens: numbers that only ever grow, per key, across idle expiry and restarts.

Semantics: ``docs/coordination.md#fencing-tokens``. A lock's fencing token
(:func:`reactor.model.coordination.locks.acquire`) and an ordered lock's epoch
(:func:`reactor.model.coordination.ordered_locks.assign`) are both minted by :func:`next_fence`::

    new = max(previous + 1, floor(storage clock in integer microseconds))

where ``previous`` is the last value issued for the key, read from the stored record while the
store still holds it. When the record lapses or is released, the store keeps it (the lock as a
*tombstone*: owner cleared, token kept; the ordered lock as its lapsed epoch field) for
:data:`FENCE_RETENTION` more seconds before its native TTL (Redis ``PEXPIREAT``, a MongoDB TTL
index, a DynamoDB TTL attribute, the memory store's purge) may collect it. Once it is gone the
clock term alone must exceed every earlier value, which holds because:

* every value is at most the clock at the moment it was issued plus the number of values issued
  within the same microsecond (a round trip to the store takes longer than that, so the excess is
  0 or a handful, never seconds), and
* a record is only collected :data:`FENCE_RETENTION` seconds after it stopped being live, which
  is after it was issued.

**Assumption** (the one thing the guarantee rests on): the storage clock never goes back by more
than :data:`FENCE_RETENTION` seconds, and on backends judged by application clocks
(``Capabilities.clock == "application"``: DynamoDB, the SQLite example, the memory store) any two
clocks that read or collect the same records differ by at most :data:`CLOCK_SKEW_BUDGET`;
:data:`FENCE_RETENTION` is five times that budget. A store whose clock stands still (a test's
manual clock) must not collect a record while its clock has not moved past the retention either.

Values stay below 2**53 (:data:`MAX_FENCE`) so they survive Lua numbers (doubles), JSON and
DynamoDB numbers exactly: the clock term reaches 2**53 µs in the year 2255.
"""

from __future__ import annotations

import math

__all__ = ["CLOCK_SKEW_BUDGET", "FENCE_RETENTION", "MAX_FENCE", "clock_micros", "next_fence"]

#: Seconds two application clocks sharing a store may differ by (the DynamoDB adapter's default
#: ``clock_skew_budget``); docs/coordination.md#fencing-tokens.
CLOCK_SKEW_BUDGET = 1.0
#: Seconds a released or lapsed record keeps its last fencing value before it may be collected
#: (at least twice :data:`CLOCK_SKEW_BUDGET`); docs/coordination.md#fencing-tokens.
FENCE_RETENTION = 5.0
#: The largest fencing value: integers up to 2**53 are exact as doubles (Lua, JSON).
MAX_FENCE = 2**53 - 1


def clock_micros(now: float) -> int:
    """The storage clock as integer microseconds (``floor(now * 1e6)``).

    Args:
        now: the storage clock in epoch seconds.

    Returns:
        Whole microseconds since the epoch (0 or more for any ``now >= 0``).
    """
    return math.floor(now * 1_000_000)


def next_fence(previous: int, now: float) -> int:
    """The next fencing value of a key: ``max(previous + 1, clock_micros(now))``.

    Args:
        previous: the last value issued for the key that the store still holds (0 when it holds
            none: never used, or collected after :data:`FENCE_RETENTION`).
        now: the storage clock in epoch seconds.

    Returns:
        A value strictly greater than ``previous`` and at least the clock in microseconds
        (docs/coordination.md#fencing-tokens).

    Raises:
        ValueError: the value would reach 2**53 (a corrupted ``previous`` or a clock past the
            year 2255), where doubles stop being exact.
    """
    value = max(previous + 1, clock_micros(now))
    if value > MAX_FENCE:
        raise ValueError(f"fencing value {value} would exceed 2**53 - 1")
    return value
