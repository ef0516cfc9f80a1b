"""Multi-window fixed-window rate limits as a pure state machine.

Source: storage-protocol.md §2.10 "Rate limits" (``rate_limit_check_and_increment``), with the
Python protocol's conventions: windows are :class:`reactor.ports.records.RateWindow`, the
denying window index is **0-based**, and ``retry_after`` is a float.

One state holds every window's counter of one rate-limit key. A window's bucket is
``floor(now / seconds)``; its counter lives ``2 x seconds`` from the hit that created it (the
Ruby TTL set when the counter first becomes 1), which always outlives the bucket itself.

:func:`hit` runs in two passes, all or none:

1. for each window in order, if its current count >= its limit, deny with
   ``retry_after = seconds - (now mod seconds)`` (at least :data:`MIN_RETRY_AFTER`) and the
   window's 0-based index; nothing is charged;
2. otherwise charge every window.

A window is identified by its name *and* length (:func:`window_id`), so two windows that share
either one still count separately; a window listed twice in one call is charged twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reactor.model.coordination._expiry import is_live
from reactor.ports.records import RateDecision, RateWindow

__all__ = [
    "MIN_RETRY_AFTER",
    "RateCounters",
    "WindowCounter",
    "bucket_of",
    "count",
    "expiry",
    "hit",
    "retry_after",
    "window_id",
]

#: The smallest ``retry_after`` a denial reports, in seconds (errors.py ``RateLimitExceeded``).
MIN_RETRY_AFTER = 0.1


@dataclass(frozen=True, slots=True)
class WindowCounter:
    """The counter of one window's current bucket.

    Attributes:
        bucket: ``floor(now / window.seconds)`` of the bucket being counted.
        count: admissions charged in that bucket.
        expires_at: epoch seconds when the counter is garbage (``2 x seconds`` after its first
            hit).
    """

    bucket: int
    count: int
    expires_at: float


@dataclass(frozen=True, slots=True)
class RateCounters:
    """Every window counter of one rate-limit key.

    Attributes:
        windows: ``{window_id(window): counter}``; never mutated.
    """

    windows: Mapping[str, WindowCounter] = field(default_factory=dict)


def window_id(window: RateWindow) -> str:
    """The stable identity of a window inside a key's state: ``"<name>/<seconds as float>"``."""
    return f"{window.name}/{float(window.seconds)!r}"


def bucket_of(window: RateWindow, now: float) -> int:
    """The window's bucket number at ``now``: ``floor(now / window.seconds)``."""
    return math.floor(now / window.seconds)


def expiry(state: RateCounters) -> float | None:
    """The instant after which every counter is garbage (``None`` when there are none)."""
    return max((c.expires_at for c in state.windows.values()), default=None)


def _current(state: RateCounters | None, now: float, window: RateWindow) -> int:
    if state is None:
        return 0
    counter = state.windows.get(window_id(window))
    if counter is None or not is_live(counter.expires_at, now):
        return 0
    if counter.bucket != bucket_of(window, now):
        return 0
    return counter.count


def count(state: RateCounters | None, now: float, window: RateWindow) -> int:
    """Admissions charged in ``window``'s current bucket at ``now`` (``rate_limit_count``).

    Args:
        state: the key's counters.
        now: the current time in epoch seconds.
        window: the window to read.

    Returns:
        The count, 0 when the bucket was never charged.
    """
    return _current(state, now, window)


def retry_after(window: RateWindow, now: float) -> float:
    """Seconds until ``window``'s current bucket rolls over, at least :data:`MIN_RETRY_AFTER`."""
    remaining = (bucket_of(window, now) + 1) * window.seconds - now
    return max(remaining, MIN_RETRY_AFTER)


def hit(
    state: RateCounters | None, now: float, windows: Sequence[RateWindow]
) -> tuple[RateCounters | None, RateDecision]:
    """Check every window and charge all of them only if all admit.

    Args:
        state: the key's counters (``None`` = never charged).
        now: the current time in epoch seconds.
        windows: the windows, checked in order.

    Returns:
        ``(new_state, RateDecision(True))`` when admitted; ``(state, RateDecision(False,
        retry_after, index))`` for the first full window, with nothing charged. Counters of
        other windows survive until they expire; expired ones are dropped on a charge.
    """
    for index, window in enumerate(windows):
        if _current(state, now, window) >= window.limit:
            return state, RateDecision(
                allowed=False, retry_after=retry_after(window, now), window_index=index
            )
    if not windows:
        return state, RateDecision(allowed=True)
    counters: dict[str, WindowCounter] = {}
    if state is not None:
        counters = {wid: c for wid, c in state.windows.items() if is_live(c.expires_at, now)}
    for window in windows:
        wid = window_id(window)
        bucket = bucket_of(window, now)
        existing = counters.get(wid)
        if existing is not None and existing.bucket == bucket:
            counters[wid] = WindowCounter(bucket, existing.count + 1, existing.expires_at)
        else:
            counters[wid] = WindowCounter(bucket, 1, now + 2 * window.seconds)
    return RateCounters(windows=counters), RateDecision(allowed=True)
