"""The demo's schedule: a settlement of the captured payments every minute, run by a scheduler
and a worker in the dashboard's process (``./scripts/demo --dashboard``; docs/schedules.md,
"Schedules"; docs/dashboard.md, "Schedules").

:class:`Settlement` totals the ledger's live captures of the installed fake services;
:data:`SETTLEMENT` runs it ``every=60`` seconds, its tick as the ``tick`` input.
:func:`start_settlement` declares it in this process (so the dashboard lists it with its
spec), then runs a :class:`reactor.schedules.Scheduler` thread and a
:class:`reactor.Worker` thread on the runtime. The scheduler takes its first look one period
back (:meth:`~reactor.schedules.Scheduler.tick` at ``now - 60``): the schedule's cursor starts
there, so the tick that fell since is due at once (``catchup="one"``) and the first settlement
has run, with a last and a next tick, by the time the dashboard is opened.
:meth:`ScheduledSettlement.wait_first_run` waits for it, bounded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from reactor import Input, Reactor, RunStatus, Worker, input, step
from reactor.config import Runtime
from reactor.schedules import Schedule, Scheduler, ScheduleView, list_schedules, register

from .services import SERVICES

__all__ = ["PERIOD_SECONDS", "SETTLEMENT", "ScheduledSettlement", "Settlement",
           "start_settlement"]

#: Seconds between two settlements.
PERIOD_SECONDS = 60


class Settlement(Reactor, name="order_fulfilment.settlement"):
    """Totals the captured payments at a tick (docs/schedules.md, "Schedules")."""

    tick = Input(str)

    @step(tick=input("tick"))
    def settle(inputs: Any, ctx: Any) -> dict[str, Any]:
        """``{"tick", "captures", "total"}`` of the ledger's live captures."""
        captures = SERVICES.get().ledger.captures()
        total = sum((c.amount for c in captures), Decimal(0))
        return {"tick": inputs.tick, "captures": len(captures), "total": str(total)}


#: The demo's schedule: :class:`Settlement` every minute (docs/schedules.md, "Declaring a
#: schedule").
SETTLEMENT = Schedule(Settlement, every=PERIOD_SECONDS, name="settlement", tick_input="tick",
                      catchup="one", overlap="skip")


@dataclass
class ScheduledSettlement:
    """The scheduler and the worker :func:`start_settlement` started.

    Attributes:
        runtime: where the settlements run.
        scheduler: the scheduler thread's :class:`~reactor.schedules.Scheduler`.
        worker: the worker that runs the settlements.
    """

    runtime: Runtime
    scheduler: Scheduler
    worker: Worker

    def view(self) -> ScheduleView:
        """The settlement schedule as the dashboard lists it (docs/schedules.md, "Managing
        schedules")."""
        return next(v for v in list_schedules(runtime=self.runtime)
                    if v.name == SETTLEMENT.name)

    def wait_first_run(self, timeout: float = 30.0) -> ScheduleView:
        """Wait (at most ``timeout`` seconds) until the schedule's last run has finished.

        Returns:
            The schedule's view then, or as it is when the time is up.
        """
        deadline = time.monotonic() + timeout
        view = self.view()
        while view.last_run_status is not RunStatus.COMPLETED and time.monotonic() < deadline:
            time.sleep(0.05)
            view = self.view()
        return view

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the scheduler, then the worker."""
        self.scheduler.stop(timeout)
        self.worker.stop(timeout)


def start_settlement(runtime: Runtime) -> ScheduledSettlement:
    """Declare :data:`SETTLEMENT` here and run it: a scheduler thread (first look one period
    back, see the module docstring) and a worker thread on ``runtime``.

    Returns:
        What was started (stop it with :meth:`ScheduledSettlement.stop`).
    """
    register(SETTLEMENT)  # the same schedule again: no change
    scheduler = Scheduler(runtime, poll_seconds=5)
    scheduler.tick(runtime.clock.now() - PERIOD_SECONDS)
    worker = Worker(runtime)
    worker.start()
    scheduler.start()
    return ScheduledSettlement(runtime, scheduler, worker)
