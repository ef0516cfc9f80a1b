"""The one renewal policy of every lease reactor keeps alive, as pure arithmetic.

Locks, semaphore leases, ordered-lock heartbeats, run and element liveness locks and a worker's
job visibility are all leases: valid for ``lease`` seconds after the last successful renewal.
Their renewers (:class:`reactor.coordination.heartbeat.Heartbeat`) follow these rules,
defined in ``docs/coordination.md`` ("Renewal and loss"):

* **Interval.** Renew every ``lease / 3`` seconds — no floor, so even the shortest lease gets
  three chances per lifetime (:func:`renew_interval`).
* **Deadline.** The holder's own deadline is the *start* of the last successful renewal (or of
  the acquire) plus ``lease``, on the renewer's monotonic clock. The store stamped its expiry
  no earlier than that call started, so while the deadline has not passed nobody else can hold
  the lease (clock rates being equal).
* **Errors.** A renewal that raises (a storage outage) is retried promptly with jittered
  exponential backoff (:func:`retry_delay`), never later than a fraction of the time left, so
  transient errors inside a lease never lose it.
* **Loss.** The hold is lost when a renewal answers ``False`` (the store says someone else holds
  it, or it lapsed) or when the deadline passes without a successful renewal — whichever comes
  first; a renewal still in flight at the deadline does not save it.
* **Minimum.** A lease shorter than :data:`MIN_LEASE` cannot be honoured on a loaded machine and
  is rejected where it is declared (``DefinitionError`` for ``with_*`` declarations).
"""

from __future__ import annotations

import math

__all__ = [
    "DEADLINE_MARGIN",
    "DEADLINE_RATE",
    "MIN_LEASE",
    "POLL_BASE",
    "POLL_MAX",
    "RETRY_BASE",
    "RETRY_FLOOR",
    "holder_lease",
    "poll_delay",
    "renew_interval",
    "retry_delay",
    "validate_lease",
]

#: The shortest lease (lock TTL, semaphore lease, ordered-lock poison-pill timeout, liveness
#: TTL) reactor accepts for a hold it renews, in seconds: renewed every 1/3 s, it leaves two
#: more renewals (plus prompt retries) before the deadline.
MIN_LEASE = 1.0

#: The first retry delay after a failed renewal, in seconds (doubled per further failure).
RETRY_BASE = 0.05

#: The shortest retry delay, in seconds (a renewer never spins).
RETRY_FLOOR = 0.02


#: The fixed part of the margin a holder keeps before its lease's end, in seconds: backends
#: round expiries (milliseconds) and their clocks may run slightly faster than the holder's
#: monotonic clock, so the holder gives the lease up a little before the store could.
DEADLINE_MARGIN = 0.02

#: The part of the margin proportional to the lease (clock-rate difference, 1 ms per second).
DEADLINE_RATE = 0.001


def holder_lease(lease: float, skew: float = 0.0) -> float:
    """Seconds after a successful acquire/extend *started* that the holder may rely on its lease.

    ``lease - skew - (DEADLINE_MARGIN + DEADLINE_RATE * lease)``: the store's expiry is stamped
    no earlier than the call started, minus the clock-skew budget of application-clock backends
    (another process's clock may run ahead), minus a margin for expiry rounding and clock-rate
    differences (``docs/coordination.md``, "Renewal and loss").

    Args:
        lease: the lease length in seconds.
        skew: the storage's clock-skew budget in seconds.

    Returns:
        The holder's lease in seconds (may be <= 0 when ``lease`` does not exceed ``skew``).
    """
    return lease - skew - (DEADLINE_MARGIN + DEADLINE_RATE * lease)


def renew_interval(lease: float) -> float:
    """Seconds between the start of one successful renewal and the next one.

    Args:
        lease: the lease length in seconds (> 0).

    Returns:
        ``lease / 3``.

    Raises:
        ValueError: ``lease`` is not a positive finite number.
    """
    if isinstance(lease, bool) or not (lease > 0 and math.isfinite(lease)):
        raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
    return lease / 3.0


def retry_delay(failures: int, time_left: float, interval: float, jitter: float) -> float:
    """Seconds to wait before retrying after ``failures`` consecutive failed renewals.

    Exponential from :data:`RETRY_BASE` (doubling per failure), capped by the normal renew
    ``interval`` and by a quarter of the ``time_left`` before the deadline, so several retries
    always fit inside the lease; scaled by ``jitter`` so a fleet does not retry in lockstep.

    Args:
        failures: consecutive failures so far (>= 1).
        time_left: seconds until the holder's deadline (may be <= 0).
        interval: the normal renew interval in seconds.
        jitter: a factor in ``[0.5, 1.0]`` (random in production, fixed in tests).

    Returns:
        The delay in seconds, at least :data:`RETRY_FLOOR`.
    """
    backoff = RETRY_BASE * 2.0 ** max(failures - 1, 0)
    bound = min(backoff, interval, max(time_left, 0.0) / 4.0)
    return max(bound * jitter, RETRY_FLOOR)


def validate_lease(what: str, lease: float) -> float:
    """Check that ``lease`` is one a renewer can honour.

    Args:
        what: names the field in the error, e.g. ``"with_lock(ttl=)"``.
        lease: seconds.

    Returns:
        ``float(lease)``.

    Raises:
        ValueError: ``lease`` is not a finite number >= :data:`MIN_LEASE` (callers wrap it in
            their own typed error, e.g. ``DefinitionError``).
    """
    if (
        isinstance(lease, bool)
        or not isinstance(lease, int | float)
        or not math.isfinite(lease)
        or lease < MIN_LEASE
    ):
        raise ValueError(
            f"{what} must be a finite number of seconds >= {MIN_LEASE:g} (the shortest lease "
            f"the renewer can keep alive: it renews every lease/3), got {lease!r}"
        )
    return float(lease)


#: The first delay of a caller polling a held lock or a full semaphore, in seconds.
POLL_BASE = 0.05

#: The longest delay between two polls of a waiting caller, in seconds.
POLL_MAX = 1.0


def poll_delay(attempt: int, remaining: float, jitter: float) -> float:
    """Seconds a waiting caller sleeps before its next try (exponential, jittered, bounded).

    A waiter for a held lock or a full semaphore backs off ``POLL_BASE * 2**(attempt-1)``
    (at most :data:`POLL_MAX`), scaled by ``jitter`` so waiters spread out, and never past its
    own wait deadline — so a waiter costs a few writes per second at most, not 20.

    Args:
        attempt: failed tries so far (>= 1).
        remaining: seconds left of the caller's ``wait``.
        jitter: a factor in ``[0.5, 1.0]``.

    Returns:
        The delay in seconds, > 0 and <= ``remaining`` (when ``remaining`` > 0).
    """
    backoff = min(POLL_BASE * 2.0 ** max(attempt - 1, 0), POLL_MAX) * jitter
    return max(min(backoff, remaining), 0.0) or RETRY_FLOOR
