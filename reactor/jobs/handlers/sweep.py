"""The ``sweep`` job: one tick of the sweep chain (:mod:`reactor.jobs.sweep_tick`).

Runs the sweepers, then always schedules the next tick (even when a sweeper failed), claimed
per time window so duplicated ticks collapse into one chain. An ad-hoc tick (``window`` 0, e.g.
enqueued by an operator) also continues the chain if none is scheduled for the next window.
"""

from __future__ import annotations

from reactor.jobs.job_context import JobContext
from reactor.jobs.sweep_tick import lateness, run_sweeps, schedule_next
from reactor.model.text import escaping_logger
from reactor.ports.payloads import SweepPayload

__all__ = ["handle_sweep"]

log = escaping_logger("reactor.sweeper")


def handle_sweep(jc: JobContext, payload: SweepPayload) -> None:
    """Run one sweep tick and schedule the next one.

    Raises:
        StorageError, RouterError: scheduling the next tick failed (the worker retries the
            job; the retried tick sweeps again, which is harmless).
    """
    late = lateness(jc.runtime, payload.window)
    counts = run_sweeps(jc.runtime, lateness=late)
    log.info(
        "event=sweep_tick window=%d lateness=%s runs=%s steps=%s maps=%s deferred=%s",
        payload.window, "-" if late is None else f"{late:.1f}", counts.runs, counts.steps,
        counts.maps, "-" if counts.deferred is None else counts.deferred,
    )
    schedule_next(jc.runtime, after_window=payload.window)
