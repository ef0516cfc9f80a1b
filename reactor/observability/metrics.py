"""Metrics: run counts, durations, rollbacks, queue lag, dead letters, parks, lock waits and
sweeper re-dispatches (docs/observability.md, "Metrics").

Every instrument is created once per :class:`Instruments`; attribute values are reactor, step,
job-kind and status names (bounded by the definitions), never run ids.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter

from reactor.middleware import (
    DeadLetterEvent,
    JobEvent,
    LockWaitEvent,
    ParkEvent,
    RollbackEvent,
    RunEvent,
    StepEvent,
    SweepEvent,
)

__all__ = [
    "DEAD_LETTERS",
    "FINAL_RUN_STATUSES",
    "JOB_DURATION",
    "LOCK_WAIT",
    "PARKS",
    "QUEUE_LAG",
    "REDISPATCHES",
    "ROLLBACKS",
    "RUNS_FINISHED",
    "RUNS_STARTED",
    "RUN_DURATION",
    "STEP_DURATION",
    "Instruments",
]

RUNS_STARTED = "reactor.runs.started"
RUNS_FINISHED = "reactor.runs.finished"
RUN_DURATION = "reactor.run.duration"
STEP_DURATION = "reactor.step.duration"
ROLLBACKS = "reactor.rollbacks"
JOB_DURATION = "reactor.job.duration"
QUEUE_LAG = "reactor.job.queue_lag"
DEAD_LETTERS = "reactor.jobs.dead_lettered"
PARKS = "reactor.parks"
LOCK_WAIT = "reactor.lock.wait"
REDISPATCHES = "reactor.sweeper.redispatches"

#: The run statuses :data:`RUNS_FINISHED` counts (``paused``: the run waits for a resume).
FINAL_RUN_STATUSES = frozenset({"completed", "failed", "halted", "cancelled", "paused", "aborted"})


class Instruments:
    """The reactor instruments of one meter (used by
    :class:`reactor.observability.OpenTelemetryMiddleware`).

    Args:
        meter: the meter the instruments are created on.
    """

    def __init__(self, meter: Meter) -> None:
        self.runs_started = meter.create_counter(
            RUNS_STARTED, unit="{run}", description="Runs created.")
        self.runs_finished = meter.create_counter(
            RUNS_FINISHED, unit="{run}",
            description="Runs that reached an outcome, by reactor.run.status.")
        self.run_duration = meter.create_histogram(
            RUN_DURATION, unit="s", description="Duration of one run segment in one process.")
        self.step_duration = meter.create_histogram(
            STEP_DURATION, unit="s",
            description="Duration of one step attempt, undo or compensate.")
        self.rollbacks = meter.create_counter(
            ROLLBACKS, unit="{rollback}", description="Rollbacks finished, by reason and status.")
        self.job_duration = meter.create_histogram(
            JOB_DURATION, unit="s", description="Duration of one job's handler.")
        self.queue_lag = meter.create_histogram(
            QUEUE_LAG, unit="s", description="Time from a job being due to its handler starting.")
        self.dead_letters = meter.create_counter(
            DEAD_LETTERS, unit="{job}", description="Jobs a worker dead-lettered.")
        self.parks = meter.create_counter(
            PARKS, unit="{park}", description="Executions parked in a worker, by reason.")
        self.lock_wait = meter.create_histogram(
            LOCK_WAIT, unit="s",
            description="Time a synchronous execution waited for a lock or semaphore.")
        self.redispatches = meter.create_counter(
            REDISPATCHES, unit="{job}", description="Units the sweepers re-enqueued.")

    def run_started(self, event: RunEvent) -> None:
        """Count a new run (a segment that created its run)."""
        if event.started:
            self.runs_started.add(1, {"reactor.name": event.reactor})

    def run_ended(self, event: RunEvent) -> None:
        """Record a segment's duration; count the run finished when it reached an outcome
        it did not start in."""
        attributes = {"reactor.name": event.reactor, "reactor.run.status": event.status or ""}
        self.run_duration.record(event.duration, attributes)
        if event.status in FINAL_RUN_STATUSES and event.status != event.status_before:
            self.runs_finished.add(1, attributes)

    def step_ended(self, event: StepEvent) -> None:
        """Record a step attempt's duration."""
        self.step_duration.record(event.duration, {
            "reactor.name": event.reactor, "reactor.step.name": event.step,
            "reactor.step.action": event.action, "reactor.step.status": event.status or "",
        })

    def rollback_ended(self, event: RollbackEvent) -> None:
        """Count a rollback that ended (a suspended one counts when it finishes)."""
        if event.status != "suspended":
            self.rollbacks.add(1, {
                "reactor.name": event.reactor, "reactor.rollback.reason": event.reason,
                "reactor.rollback.status": event.status or "",
            })

    def job_started(self, event: JobEvent) -> None:
        """Record a job's queue lag, when it carries its enqueue time."""
        if event.queue_lag is not None:
            self.queue_lag.record(event.queue_lag, {"reactor.job.kind": event.kind})

    def job_ended(self, event: JobEvent) -> None:
        """Record a job's duration."""
        self.job_duration.record(event.duration, {
            "reactor.job.kind": event.kind, "reactor.job.status": event.status or "",
        })

    def dead_lettered(self, event: DeadLetterEvent) -> None:
        """Count a dead letter."""
        self.dead_letters.add(1, {"reactor.job.kind": event.kind})

    def parked(self, event: ParkEvent) -> None:
        """Count a park."""
        self.parks.add(1, {"reactor.name": event.reactor, "reactor.park.reason": event.reason})

    def waited(self, event: LockWaitEvent) -> None:
        """Record a lock or semaphore wait."""
        self.lock_wait.record(event.seconds, {
            "reactor.lock.primitive": event.primitive, "reactor.lock.acquired": event.acquired,
        })

    def swept(self, event: SweepEvent) -> None:
        """Count the units each sweeper re-enqueued."""
        for sweeper, count in event.redispatched.items():
            if count:
                self.redispatches.add(count, {"reactor.sweeper.name": sweeper})
