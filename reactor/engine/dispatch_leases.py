"""Dispatch leases: how long a unit whose job was just enqueued counts as queued, not lost
(docs/workers.md, "Sweep cursors and dispatch leases").

A sweeper cannot ask a queue whether it holds a unit's job, so it judges from durable marks:

* the period marker ``sweeper:dispatch:<unit>`` (:func:`reactor.model.keys.sweep_dispatch_key`)
  that every re-dispatch by a sweeper takes, and that the engine takes too where it enqueues a
  job for a unit the sweepers would otherwise see as lost while that job waits in the queue (a
  collector resuming its owner, an async step resuming its parked owner, a parked run):
  :func:`mark_enqueued`;
* the *settle* time of the sweep chain's lease (a tick of the chain, not ``reactor sweep``): a
  unit whose record was written less than
  :attr:`DispatchLease.settle` seconds ago had its job enqueued right after that write, so it
  is left alone (only a crash between the write and the enqueue loses it; recovering that waits
  ``settle``). ``settle`` grows with the queue's measured latency (the lateness of the sweep
  tick's own job), so a slow queue is not flooded with copies of jobs it is still delivering.

This module sits in the engine layer: the sweepers (:mod:`reactor.jobs.sweepers`) and the
handlers that enqueue units use it alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from reactor.config import Runtime, Settings
from reactor.model.keys import sweep_dispatch_key
from reactor.model.text import escaping_logger
from reactor.ports.capabilities import HasVisibilityTimeout, declares

__all__ = [
    "DEFAULT_LEASE",
    "LATENCY_FACTOR",
    "LEASE_GROWTH",
    "LEASE_INTERVALS",
    "MIN_LEASE_SECONDS",
    "DispatchLease",
    "mark_enqueued",
    "router_visibility",
    "run_unit",
    "runtime_lease",
    "step_unit",
]

log = escaping_logger("reactor.sweeper")

#: The base dispatch lease is at least this many sweep intervals (so the next tick never
#: re-dispatches a unit the previous tick just re-dispatched).
LEASE_INTERVALS = 2
#: The longest dispatch lease, in base leases (bounds the recovery delay of a unit that keeps
#: getting lost).
LEASE_GROWTH = 8
#: The shortest base dispatch lease, in seconds, whatever the settings: queue latency on a
#: loaded backend does not shrink with the sweep interval, so a short interval must not turn
#: every unit waiting in a queue into one more copy per few seconds (docs/workers.md, "Sweep
#: cursors and dispatch leases").
MIN_LEASE_SECONDS = 30.0
#: The sweep chain's lease and settle time are at least this many times the queue latency the
#: tick measured (the lateness of its own job): a job enqueued just before the tick waits about
#: that long, and twice leaves room for the latency to grow while it waits.
LATENCY_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class DispatchLease:
    """How long a sweeper's re-dispatch of one unit keeps other sweeps from re-dispatching it.

    A unit's first re-dispatch in an *episode* is leased for ``base`` seconds; while the unit
    stays lost, every later re-dispatch is leased for the time since the episode started,
    clamped to ``[base, cap]`` -- so re-dispatches of a unit stuck behind a long queue come at
    ``base``, ``2 base``, ``4 base``... then every ``cap`` seconds. The episode marker lives
    :attr:`episode` seconds. Defined in docs/workers.md, "Sweep cursors and dispatch leases".

    Attributes:
        base: the first lease, in seconds (> 0).
        cap: the longest lease, in seconds (>= ``base``).
        settle: seconds after its record's last write during which a unit is taken as queued,
            not lost (>= 0; ``0``: judged by its liveness lock and marks alone). The sweep
            chain sets it (:func:`runtime_lease`); a sweeper called directly gets ``0``.

    Raises:
        ValueError: ``base`` is not positive, ``cap`` is below ``base`` or ``settle`` is
            negative.
    """

    base: float
    cap: float
    settle: float = 0.0

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ValueError(f"DispatchLease.base must be > 0 seconds, got {self.base!r}")
        if not self.cap >= self.base:
            raise ValueError(f"DispatchLease.cap must be >= base, got {self.cap!r}")
        if not self.settle >= 0:
            raise ValueError(f"DispatchLease.settle must be >= 0 seconds, got {self.settle!r}")

    @classmethod
    def from_settings(cls, settings: Settings, *, visibility: float | None = None) -> DispatchLease:
        """The lease of the settings alone (no settle time, no measured latency).

        ``base = max(visibility, LEASE_INTERVALS x sweeper_interval, MIN_LEASE_SECONDS)`` -- a
        job delivered to a worker that died before taking its liveness lock comes back by itself
        after the visibility timeout, the next tick must not re-dispatch what this tick did, and
        a short sweep interval must not re-dispatch queued units faster than a loaded queue
        delivers them; ``cap = LEASE_GROWTH x base``.

        Args:
            settings: the engine settings (``sweeper_interval``, ``visibility_timeout``).
            visibility: the router's delivery lease in seconds, when it has its own
                (default ``settings.visibility_timeout``).

        Returns:
            The lease.
        """
        seen = settings.visibility_timeout if visibility is None else visibility
        base = max(seen, LEASE_INTERVALS * settings.sweeper_interval, MIN_LEASE_SECONDS)
        return cls(base=base, cap=LEASE_GROWTH * base)

    @property
    def episode(self) -> float:
        """Seconds the episode marker lives: ``4 x cap`` (several capped leases, so a unit that
        stays lost keeps its grown lease; then a new episode starts at ``base``)."""
        return 4.0 * self.cap

    def lease_for(self, elapsed: float) -> float:
        """The lease of a re-dispatch ``elapsed`` seconds into the unit's episode.

        Returns:
            ``min(max(base, elapsed), cap)`` seconds.
        """
        return min(max(self.base, elapsed), self.cap)

    def settling(self, written_at: float, now: float) -> bool:
        """Whether a unit whose record was last written at ``written_at`` (epoch seconds) is
        still taken as queued at ``now``: ``now - written_at < settle``."""
        return self.settle > 0 and now - written_at < self.settle


#: The lease of the default :class:`reactor.Settings` (base 60 s, cap 480 s, no settle time),
#: used when a sweeper is called without one.
DEFAULT_LEASE = DispatchLease.from_settings(Settings())


def router_visibility(runtime: Runtime) -> float:
    """The delivery lease jobs get, in seconds: the router's own ``visibility_timeout`` when it
    declares :class:`~reactor.ports.capabilities.HasVisibilityTimeout` with a positive one, else
    the ``visibility_timeout`` setting (the worker's heartbeat and the sweepers' leases both
    use it)."""
    router = runtime.router
    if not declares(router, HasVisibilityTimeout):
        return float(runtime.settings.visibility_timeout)
    seen: object = cast(HasVisibilityTimeout, router).visibility_timeout
    if isinstance(seen, int | float) and not isinstance(seen, bool) and seen > 0:
        return float(seen)
    return float(runtime.settings.visibility_timeout)


def runtime_lease(runtime: Runtime, *, lateness: float | None = None) -> DispatchLease:
    """The dispatch lease of this runtime's sweeps (docs/workers.md, "Sweep cursors and dispatch
    leases").

    ``base`` is :meth:`DispatchLease.from_settings`'s with the router's own
    ``visibility_timeout`` (as the worker's heartbeat uses). A tick of the sweep chain passes
    the queue latency it measured (``lateness``): ``base`` is then raised to ``LATENCY_FACTOR x
    lateness`` and the lease gets a settle time, ``max(visibility, LATENCY_FACTOR x
    lateness)`` -- within one visibility timeout of its last write a unit's job is queued or
    delivered (a delivered job whose worker died comes back by itself), and a queue that is
    ``lateness`` behind delivers it about that much later. ``cap = LEASE_GROWTH x base``.

    Args:
        runtime: the settings and the router.
        lateness: the queue latency the sweep chain's tick measured, in seconds (negative
            counts as ``0``); ``None`` for a sweep outside the chain (``reactor sweep``, a
            direct call): no settle time, a unit without a lock is lost at once.

    Returns:
        The lease.
    """
    visibility = router_visibility(runtime)
    lease = DispatchLease.from_settings(runtime.settings, visibility=visibility)
    if lateness is None:
        return lease
    latency = LATENCY_FACTOR * max(float(lateness), 0.0)
    base = max(lease.base, latency)
    return DispatchLease(base=base, cap=LEASE_GROWTH * base, settle=max(visibility, latency))


def run_unit(context_id: str) -> str:
    """The dispatch unit of a run's ``run`` job: ``run:<context id>``."""
    return f"run:{context_id}"


def step_unit(context_id: str, step_name: str) -> str:
    """The dispatch unit of an async step's ``step`` job: ``step:<context id>:<step>``."""
    return f"step:{context_id}:{step_name}"


def mark_enqueued(runtime: Runtime, unit: str, *, delay: float = 0.0) -> None:
    """Take ``unit``'s dispatch mark before the engine enqueues its job, so that no sweep
    re-dispatches it while the job waits in the queue (docs/workers.md, "Sweep cursors and
    dispatch leases"). The mark lives ``delay`` plus the settings' base lease; a mark that
    already stands is left as it is. Never raises: a failed mark is logged (a sweep may then
    enqueue one copy more, which drops itself against the unit's state).

    Args:
        runtime: the storage (``storage.periods``) and settings.
        unit: the unit, as the sweepers name it (``run:<context id>``,
            ``step:<context id>:<step>``).
        delay: seconds the job is delayed by (a park), added to the mark's life.
    """
    ttl = max(float(delay), 0.0) + runtime_lease(runtime).base
    try:
        runtime.storage.periods.mark(sweep_dispatch_key(unit), ttl=ttl)
    except Exception as exc:  # an optimisation: the enqueue goes ahead without it
        log.warning("event=dispatch_mark_failed unit=%s error=%s: %s",
                    unit, type(exc).__name__, exc)
