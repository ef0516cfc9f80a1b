"""Schedules: reactors started at times, exactly one run per tick across any number of
schedulers (docs/schedules.md, "Schedules").

* :mod:`.spec`: :class:`Schedule`, the declaration and its checks;
* :mod:`.ticks`: when a schedule ticks (cron with ``cronsim`` in a ``zoneinfo`` time zone, or
  a period) and its deterministic jitter;
* :mod:`.records`: the stored document of a schedule (definition and shared state);
* :mod:`.declared`: the schedules declared in code (:func:`register`);
* :mod:`.scheduler`: :class:`Scheduler`, which decides ticks and starts their runs;
* :mod:`.admin`: add, pause, resume, remove and :func:`list_schedules`, the read API of the CLI
  and the dashboard.

The package sits between the engine and the jobs (docs/architecture.md, "Layers"): it starts
runs through the engine's idempotency keys, and the worker runs a :class:`Scheduler` in a
thread (``reactor worker --schedules``).
"""

from __future__ import annotations

from reactor.schedules.admin import (
    ScheduleView,
    add_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from reactor.schedules.declared import declared, register, unregister
from reactor.schedules.scheduler import MISSED_AFTER, Scheduler, TickOutcome, idempotency_key
from reactor.schedules.spec import Schedule
from reactor.schedules.ticks import jitter_for, tick_text

__all__ = [
    "MISSED_AFTER",
    "Schedule",
    "ScheduleView",
    "Scheduler",
    "TickOutcome",
    "add_schedule",
    "declared",
    "idempotency_key",
    "jitter_for",
    "list_schedules",
    "pause_schedule",
    "register",
    "remove_schedule",
    "resume_schedule",
    "tick_text",
    "unregister",
]
