"""Multi-window fixed-window rate limits as a pure state machine.

Windows are :class:`reactor.model.records.RateWindow`, the denying window index is **0-based**
and ``retry_after`` is a float number of seconds.

One state holds every window's counter of one rate-limit key. A window's bucket at ``now`` is
``floor(now / seconds)``; its counter lives ``2 x seconds`` from the hit that created it, which
always outlives the bucket itself.

**A key's clock never goes back** (docs/coordination.md#clock-skew; docs/protocol.md#rate-limits).
Clients whose clocks differ share one key, so a caller may find a stored counter of a bucket
*newer* than its own: it is counted in that newest bucket (:func:`effective_bucket`), never in
its own older one, and a stored bucket is never replaced by an older one. Without that, two
clients skewed by less than a second reset each other's counters at every window boundary and
over-admit without limit.

:func:`hit` runs in two passes, all or none:

1. for each window in order, if the count of its effective bucket is >= its limit, deny with
   ``retry_after`` = the seconds, on the caller's clock, until that bucket ends (at least
   :data:`MIN_RETRY_AFTER`) and the window's 0-based index. Nothing is charged; a window whose
   effective bucket is newer than its stored counter (or that has none) gets an empty counter
   of that bucket, so the key remembers the newest bucket any caller reached;
2. otherwise charge every window in its effective bucket.

A window is identified by its name *and* length (:func:`window_id`), so two windows that share
either one still count separately; a window listed twice in one call is charged twice.

Guarantees with clients skewed by at most ``s`` seconds from true time, ``s < seconds / 2``
(proved in docs/coordination.md#clock-skew): each bucket admits at most ``limit`` hits, a bucket
is never counted again once a newer one is stored, and any interval of true time of length
``L`` admits at most ``limit x (ceil((L + 2s) / seconds) + 1)`` hits per window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reactor.model.coordination._expiry import is_live
from reactor.model.records import RateDecision, RateWindow

__all__ = [
    "MIN_RETRY_AFTER",
    "RateCounters",
    "WindowCounter",
    "bucket_of",
    "count",
    "effective_bucket",
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
        bucket: ``floor(now / window.seconds)`` of the bucket being counted, ``now`` being the
            clock of the call that created the counter; the newest bucket any call reached.
        count: admissions charged in that bucket (0 when only denied calls reached it).
        expires_at: epoch seconds when the counter is garbage (``2 x seconds`` after the call
            that created it).
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


def _stored(state: RateCounters | None, now: float, window: RateWindow) -> WindowCounter | None:
    """``window``'s counter in ``state`` if it is still live at ``now``."""
    if state is None:
        return None
    counter = state.windows.get(window_id(window))
    if counter is None or not is_live(counter.expires_at, now):
        return None
    return counter


def _effective(state: RateCounters | None, now: float, window: RateWindow) -> tuple[int, int]:
    """``(bucket, count)`` a caller at ``now`` is counted in for ``window``.

    The caller's own bucket, unless a live stored counter holds a bucket at least as new: then
    that bucket and its count (a caller whose clock is behind never reopens an older bucket).
    """
    bucket = bucket_of(window, now)
    counter = _stored(state, now, window)
    if counter is not None and counter.bucket >= bucket:
        return counter.bucket, counter.count
    return bucket, 0


def effective_bucket(state: RateCounters | None, now: float, window: RateWindow) -> int:
    """The bucket a caller at ``now`` is counted in (docs/coordination.md#clock-skew).

    Args:
        state: the key's counters (``None`` = never charged).
        now: the caller's clock in epoch seconds.
        window: the window.

    Returns:
        ``max(bucket_of(window, now), b)`` where ``b`` is the bucket of the window's live
        stored counter (ignored when there is none): the newest bucket any caller reached.
    """
    return _effective(state, now, window)[0]


def count(state: RateCounters | None, now: float, window: RateWindow) -> int:
    """Admissions charged in ``window``'s effective bucket at ``now`` (``rate_limit_count``).

    Args:
        state: the key's counters.
        now: the caller's clock in epoch seconds.
        window: the window to read.

    Returns:
        The count of :func:`effective_bucket`, 0 when that bucket was never charged.
    """
    return _effective(state, now, window)[1]


def retry_after(window: RateWindow, now: float, bucket: int | None = None) -> float:
    """Seconds on the caller's clock until ``bucket`` rolls over, at least :data:`MIN_RETRY_AFTER`.

    Args:
        window: the window.
        now: the caller's clock in epoch seconds.
        bucket: the bucket being waited out; default the caller's own, ``bucket_of(window,
            now)``. :func:`hit` passes the effective bucket, which may be newer than the
            caller's own when its clock is behind (docs/coordination.md#clock-skew).

    Returns:
        ``(bucket + 1) x window.seconds - now``, at least :data:`MIN_RETRY_AFTER`.
    """
    if bucket is None:
        bucket = bucket_of(window, now)
    remaining = (bucket + 1) * window.seconds - now
    return max(remaining, MIN_RETRY_AFTER)


def _live_counters(state: RateCounters | None, now: float) -> dict[str, WindowCounter]:
    if state is None:
        return {}
    return {wid: c for wid, c in state.windows.items() if is_live(c.expires_at, now)}


def _record_buckets(
    state: RateCounters | None,
    now: float,
    windows: Sequence[RateWindow],
    effective: Sequence[tuple[int, int]],
) -> RateCounters | None:
    """``state`` with an empty counter for every window whose effective bucket is not stored.

    Returns ``state`` itself (nothing to write) when every window's effective bucket is stored.
    """
    counters: dict[str, WindowCounter] | None = None
    for window, (bucket, _count) in zip(windows, effective, strict=True):
        stored = _stored(state, now, window)
        if stored is not None and stored.bucket == bucket:
            continue
        if counters is None:
            counters = _live_counters(state, now)
        counters[window_id(window)] = WindowCounter(bucket, 0, now + 2 * window.seconds)
    return state if counters is None else RateCounters(windows=counters)


def hit(
    state: RateCounters | None, now: float, windows: Sequence[RateWindow]
) -> tuple[RateCounters | None, RateDecision]:
    """Check every window and charge all of them only if all admit.

    Each window is judged in its :func:`effective_bucket`: the caller's own bucket, or the
    newer one a caller with a faster clock already stored (docs/coordination.md#clock-skew).

    Args:
        state: the key's counters (``None`` = never charged).
        now: the caller's clock in epoch seconds.
        windows: the windows, checked in order.

    Returns:
        ``(new_state, RateDecision(True))`` when admitted: every window's effective bucket is
        charged once per listing, and lapsed counters are dropped. Otherwise ``(state',
        RateDecision(False, retry_after, index))`` for the first full window, where
        ``retry_after`` counts on the caller's clock to the end of that window's effective
        bucket; nothing is charged, and ``state'`` is ``state`` itself unless some window's
        effective bucket was not stored yet, which then gets an empty counter (so the key's
        clock never goes back).
    """
    if not windows:
        return state, RateDecision(allowed=True)
    effective = [_effective(state, now, window) for window in windows]
    for index, (window, (bucket, current)) in enumerate(zip(windows, effective, strict=True)):
        if current >= window.limit:
            return _record_buckets(state, now, windows, effective), RateDecision(
                allowed=False, retry_after=retry_after(window, now, bucket), window_index=index
            )
    counters = _live_counters(state, now)
    for window, (bucket, _count) in zip(windows, effective, strict=True):
        wid = window_id(window)
        existing = counters.get(wid)
        if existing is not None and existing.bucket == bucket:
            counters[wid] = WindowCounter(bucket, existing.count + 1, existing.expires_at)
        else:
            counters[wid] = WindowCounter(bucket, 1, now + 2 * window.seconds)
    return RateCounters(windows=counters), RateDecision(allowed=True)
