"""Shared expiry arithmetic of the coordination state machines (docs/protocol.md#conventions).

Every coordination state carries its own ``expires_at`` (epoch seconds, ``None`` = never) and is
judged against the ``now`` passed to the transition: anything with ``expires_at <= now`` is
absent. A TTL of ``None`` means "no expiry"; a TTL must otherwise be a positive finite number of
seconds (a TTL of 0 is never sent to a backend).
"""

from __future__ import annotations

import math

__all__ = ["deadline", "is_live", "latest"]


def deadline(now: float, ttl: float | None) -> float | None:
    """The expiry of something stamped at ``now`` with ``ttl`` seconds to live.

    Args:
        now: the current time in epoch seconds.
        ttl: seconds to live, or ``None`` for no expiry.

    Returns:
        ``now + ttl``, or ``None`` when ``ttl`` is ``None``.

    Raises:
        ValueError: ``ttl`` is not a positive finite number (or ``None``).
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not (ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return now + ttl


def is_live(expires_at: float | None, now: float) -> bool:
    """Whether something expiring at ``expires_at`` still exists at ``now``.

    Args:
        expires_at: epoch seconds, or ``None`` for never.
        now: the current time in epoch seconds.

    Returns:
        ``True`` unless ``expires_at <= now``.
    """
    return expires_at is None or expires_at > now


def latest(*expiries: float | None) -> float | None:
    """The latest of several expiries, where ``None`` (never) beats any time.

    Args:
        *expiries: expiries in epoch seconds or ``None``; at least one.

    Returns:
        ``None`` when any is ``None``, else the maximum.

    Raises:
        ValueError: no expiry was given.
    """
    if not expiries:
        raise ValueError("latest() needs at least one expiry")
    if any(e is None for e in expiries):
        return None
    return max(e for e in expiries if e is not None)
