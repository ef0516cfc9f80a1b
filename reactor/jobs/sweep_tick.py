"""The self-rescheduling sweep chain (docs/workers.md, "Sweep cursors and dispatch leases").

A tick runs the three sweepers (:mod:`reactor.jobs.sweepers`: runs, async steps, maps), each
over one page from where the previous tick stopped and with the dispatch lease derived from the
settings (docs/workers.md, "Sweep cursors and dispatch leases"), then schedules the next tick.
Scheduling claims the never-released, TTL-expiring lock ``sweeper:window:<n>`` (TTL
``2 x sweeper_interval``) for the next time window ``n = floor(now / interval) + 1`` and
enqueues a ``sweep`` job delayed to the window's start. Only the first claimant of a window
enqueues, so duplicated or redelivered ticks, and several workers started with ``--sweep``,
collapse into one chain: one sweep per interval.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from reactor.config import Runtime
from reactor.engine import sleeps
from reactor.engine.attempt_leases import abandoned_heartbeat_step
from reactor.engine.dispatch_leases import DispatchLease, runtime_lease
from reactor.engine.env import make_env
from reactor.engine.maps.dispatcher import dispatch_batch
from reactor.engine.waiting import waiting_on
from reactor.jobs import observe
from reactor.jobs.sweep_pace import SweepPace, ready_backlog
from reactor.jobs.sweepers import (
    MapSweepCounts,
    SweepCounts,
    sweep_maps,
    sweep_runs,
    sweep_sleeping_runs,
    sweep_steps,
)
from reactor.model.keys import sweep_window_key
from reactor.model.records import ContextRecord, MapMetadata
from reactor.model.text import escaping_logger
from reactor.ports.payloads import SweepPayload, job

__all__ = ["TickCounts", "dispatch_lease", "lateness", "run_sweeps", "schedule_next"]

log = escaping_logger("reactor.sweeper")

C = TypeVar("C", SweepCounts, MapSweepCounts)


@dataclass(frozen=True, slots=True)
class TickCounts:
    """What one tick's sweepers did (``None`` for a sweeper that raised; logged).

    Attributes:
        runs: the run sweeper's counts.
        steps: the async-step sweeper's counts.
        maps: the map sweeper's counts.
        deferred: the ready jobs that made a tick of the chain re-dispatch nothing (no sweeper
            ran: docs/workers.md, "Back-pressure and pace"); ``None`` when the sweepers ran.
        sleeps: the sleeping-run sweeper's counts (docs/schedules.md, "Durable sleep").
    """

    runs: SweepCounts | None
    steps: SweepCounts | None
    maps: MapSweepCounts | None
    deferred: int | None = None
    sleeps: SweepCounts | None = None


def _batch_dispatcher(runtime: Runtime) -> Callable[[MapMetadata], object]:
    """The map sweeper's hook that re-claims a fan-out map's lost batch trigger."""

    env = make_env(runtime)
    return lambda meta: dispatch_batch(env, meta)


def _waiting_on(runtime: Runtime) -> Callable[[ContextRecord], str | None]:
    """The run sweeper's hook that tells a run waiting on an in-flight unit from a lost one."""

    storage = runtime.storage
    return lambda record: waiting_on(storage, record)


def dispatch_lease(runtime: Runtime, *, lateness: float | None = None) -> DispatchLease:
    """The dispatch lease of this runtime's sweeps (docs/workers.md, "Sweep cursors and dispatch
    leases"): :func:`reactor.engine.dispatch_leases.runtime_lease` -- the settings' lease with
    the router's own ``visibility_timeout`` when it has one, grown with the measured queue
    latency, and its settle time.

    Args:
        runtime: the settings and the router.
        lateness: the queue latency measured by a tick of the chain, in seconds
            (:func:`lateness`); ``None`` outside the chain (no settle time).

    Returns:
        The lease (seconds).
    """
    return runtime_lease(runtime, lateness=lateness)


def lateness(runtime: Runtime, window: int) -> float | None:
    """How late a tick of ``window`` runs: seconds from the window's start (when its delayed
    job was due) to now on the storage clock, ``0`` for an early one. The tick's own job waited
    that long in the queue, so it measures the queue's latency at no cost (docs/workers.md,
    "Sweep cursors and dispatch leases").

    Returns:
        The seconds; ``None`` for an ad-hoc tick (``window`` 0, enqueued by an operator): it
        is not part of the chain and sweeps like ``reactor sweep``, without a settle time.
    """
    if window <= 0:
        return None
    return max(runtime.storage.now() - window * runtime.settings.sweeper_interval, 0.0)


def _sweeper_failed(name: str, exc: Exception) -> None:
    """One ``event=sweeper_failed`` line (the exception's type and message); the traceback
    only when the ``reactor.sweeper`` logger is at DEBUG (docs/workers.md, "Running workers"):
    a down backend fails every sweeper the same way, and three tracebacks per tick would bury
    the one line that says so."""
    log.error(
        "event=sweeper_failed sweeper=%s error=%s: %s", name, type(exc).__name__, exc,
        exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
    )


def run_sweeps(
    runtime: Runtime, *, limit: int | None = None, lateness: float | None = None
) -> TickCounts:
    """Run the run, step, map and sleeping-run sweepers once; a failing sweeper never stops
    the others (it is logged as one ``event=sweeper_failed`` line, with the traceback at
    DEBUG).

    Each sweeper reads one page of at most ``limit`` records from its saved cursor and takes a
    dispatch lease (:func:`dispatch_lease`) before each re-enqueue (docs/workers.md, "Sweep
    cursors and dispatch leases"). A tick of the chain (``lateness`` given) re-dispatches
    nothing while ``sweeper_backlog`` jobs are ready, and sizes each sweeper's page to about a
    quarter of ``sweeper_interval`` (:mod:`reactor.jobs.sweep_pace`; docs/workers.md,
    "Back-pressure and pace").

    Args:
        runtime: the storage to scan and the router to re-dispatch on.
        limit: records inspected per sweeper (default ``settings.sweeper_limit``).
        lateness: the queue latency a tick of the sweep chain measured, in seconds
            (:func:`lateness`; it grows the lease and gives it its settle time); ``None``
            (``reactor sweep``, a direct call): units without a lock are recovered at once.

    Returns:
        The counts per sweeper, or a deferred tick's ready count (:attr:`TickCounts.deferred`).
    """
    bound = runtime.settings.sweeper_limit if limit is None else limit
    storage, router = runtime.storage, runtime.router
    chain = lateness is not None
    if chain:
        backlog = ready_backlog(runtime)
        if backlog is not None:
            log.info("event=sweep_deferred ready=%d sweeper_backlog=%s", backlog,
                     runtime.settings.sweeper_backlog)
            return TickCounts(None, None, None, deferred=backlog)
    lease = dispatch_lease(runtime, lateness=lateness)
    pace = SweepPace(storage) if chain else None
    monotonic = runtime.clock.monotonic
    interval = runtime.settings.sweeper_interval

    def paced(name: str, sweep: Callable[[int], C]) -> C | None:
        page = bound if pace is None else pace.page(name, limit=bound, interval=interval)
        started = monotonic()
        try:
            counts = sweep(page)
        except Exception as exc:
            _sweeper_failed(name, exc)
            return None
        if pace is not None:
            pace.observe(name, counts.inspected, monotonic() - started)
        return counts

    runs = paced("runs", lambda page: sweep_runs(
        storage, router, limit=page, lease=lease, waiting_on=_waiting_on(runtime),
        abandoned_step=abandoned_heartbeat_step,
    ))
    steps = paced("steps", lambda page: sweep_steps(storage, router, limit=page, lease=lease))
    maps = paced("maps", lambda page: sweep_maps(
        storage, router, limit=page, dispatch_batch=_batch_dispatcher(runtime), lease=lease
    ))
    env = make_env(runtime)
    woken = paced("sleeps", lambda page: sweep_sleeping_runs(
        storage, lambda run_id: sleeps.wake_due(env, run_id, None, lock_wait=0.0), limit=page
    ))
    if runtime.hooks.middleware:  # docs/observability.md, "Metrics"
        observe.swept(runtime, {
            "runs": runs.redispatched if runs else 0,
            "steps": steps.redispatched if steps else 0,
            "maps": maps.redispatched + maps.recollected + maps.batches if maps else 0,
            "map_rollbacks": (maps.rollback_redispatched + maps.rollback_batches) if maps else 0,
        }, sum(c.errors for c in (runs, steps, maps) if c is not None))
    return TickCounts(runs, steps, maps, sleeps=woken)


def schedule_next(runtime: Runtime, *, after_window: int = 0) -> int | None:
    """Claim the next sweep window and enqueue its tick, delayed to the window's start.

    Args:
        runtime: the storage (window claims, clock) and router.
        after_window: the window of the tick that is scheduling (the next window is at least
            ``after_window + 1``, so a tick delivered slightly early never re-claims its own).

    Returns:
        The window scheduled, or ``None`` when another tick or worker already claimed it.

    Raises:
        StorageError, RouterError: the backend failed.
    """
    interval = runtime.settings.sweeper_interval
    now = runtime.storage.now()
    window = max(math.floor(now / interval) + 1, after_window + 1)
    claimed = runtime.storage.locks.acquire(
        sweep_window_key(window), f"sweeper:{uuid.uuid4()}", 2 * interval
    )
    if not claimed:
        return None
    delay = max(window * interval - now, 0.0)
    runtime.router.enqueue(job(SweepPayload(window=window)), delay)
    log.info("event=sweep_scheduled window=%d delay=%.2f", window, delay)
    return window
