"""The jobs of a test environment: what is queued, and how it is run synchronously.

A :class:`reactor.testing.TestEnvironment` runs jobs in one of two ways (``jobs=``):

* ``"queued"`` (the default): jobs wait in an in-process queue (a
  :class:`reactor.memory.LocalRouter` without worker threads) until the test runs them with
  ``env.run_until_idle()``, ``env.run_pending()`` or ``env.clock.advance(...)``. They run
  through the real :class:`reactor.jobs.worker.Worker`, in the test's thread, exactly as a
  deployed worker runs them: retries are re-enqueued with their delay, readers of async steps
  park, fan-out maps roll back in a distributed way.
* ``"inline"``: every job runs inside the call that enqueued it (an
  :class:`reactor.memory.InlineRouter`), so a background run or a fan-out map has finished
  when ``run()`` returns; only delayed jobs wait for the clock.

:class:`PendingJob` describes one queued job (docs/testing.md, "Running jobs to completion").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from reactor.config import Runtime
from reactor.jobs.handlers import bind_inline
from reactor.jobs.worker import Worker
from reactor.memory.routers import InlineRouter, LocalRouter
from reactor.ports.router import Delivery, Job

__all__ = ["JobMode", "PendingJob"]

#: How a test environment runs jobs: ``"queued"`` or ``"inline"`` (module docstring).
JobMode = Literal["queued", "inline"]


@dataclass(frozen=True)
class PendingJob:
    """One job waiting in a test environment's queue.

    Attributes:
        kind: the job kind (``run``, ``step``, ``map_element``, ``map_collect``,
            ``map_element_rollback``, ``sweep``, ``interrupt_timeout``).
        job_id: the job's id.
        due_at: when it becomes due, in epoch seconds on the environment's clock.
        due_in: seconds from now until it is due (``0`` when it is due now).
        attempt: how many times this job chain was re-enqueued (parks, retries).
        reactor: the registered reactor name the job names, when it names one.
        run_id: the run the job works on (the owner run for ``step`` jobs), when it names one.
        step: the step of a ``step`` job (the interrupt's step path of an
            ``interrupt_timeout`` job), else ``None``.
        map_id: the fan-out map of a map job, else ``None``.
        payload: the job's whole payload (identities only).
    """

    kind: str
    job_id: str
    due_at: float
    due_in: float
    attempt: int
    reactor: str | None
    run_id: str | None
    step: str | None
    map_id: str | None
    payload: Mapping[str, Any]

    @classmethod
    def of(cls, job: Job, due_at: float, now: float) -> PendingJob:
        """Describe ``job``, due at ``due_at`` (epoch seconds), as seen at ``now``."""
        payload = dict(job.payload)

        def text(*keys: str) -> str | None:
            for key in keys:
                found = payload.get(key)
                if isinstance(found, str) and found:
                    return found
            return None

        return cls(
            kind=job.kind,
            job_id=job.id,
            due_at=due_at,
            due_in=max(due_at - now, 0.0),
            attempt=job.attempt,
            reactor=text("reactor"),
            run_id=text("context_id", "root_context_id"),
            step=text("step_name", "step"),
            map_id=text("map_id"),
            payload=payload,
        )

    def describe(self) -> str:
        """One line naming the job: its kind, reactor, run, step or map, and when it is due."""
        parts = [f"{self.kind} job"]
        if self.reactor:
            parts.append(f"reactor={self.reactor}")
        if self.run_id:
            parts.append(f"run={self.run_id}")
        if self.step:
            parts.append(f"step={self.step}")
        if self.map_id:
            parts.append(f"map={self.map_id}")
        for key in ("index", "position"):
            if key in self.payload:
                parts.append(f"{key}={self.payload[key]}")
        parts.append("due now" if self.due_in <= 0 else f"due in {self.due_in:g}s")
        return " ".join(parts)


class _TrackedQueue(LocalRouter):
    """A :class:`LocalRouter` without threads that remembers when each of its jobs is due.

    Only the public router methods are overridden (each calls the router's own first), so the
    queue behaves exactly like ``local://?workers=0``; the bookkeeping adds what a test needs
    and a router does not offer: the pending jobs and the next due time.
    """

    def __init__(self, clock: Callable[[], float], visibility_timeout: float) -> None:
        super().__init__(clock=clock, workers=0, visibility_timeout=visibility_timeout)
        self._now = clock
        self._due: dict[str, list[tuple[float, Job]]] = {}
        self._book = threading.Lock()

    def _add(self, job: Job, due_at: float) -> None:
        with self._book:
            self._due.setdefault(job.id, []).append((due_at, job))

    def _drop(self, job: Job) -> None:
        with self._book:
            entries = self._due.get(job.id)
            if entries:
                entries.pop(0)
                if not entries:
                    del self._due[job.id]

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        job_id = super().enqueue(job, delay_seconds)
        self._add(job, self._now() + float(delay_seconds))
        return job_id

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        letter = self.get_dead_letter(letter_id)
        job_id = super().requeue_dead_letter(letter_id)
        if job_id is not None and letter is not None:
            self._add(letter.to_job(), self._now())
        return job_id

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        deliveries = super().receive(max_jobs, 0)  # never waits: nothing else runs jobs
        for delivery in deliveries:  # leased: due again when the lease lapses
            self._drop(delivery.job)
            self._add(delivery.job, self._now() + self.visibility_timeout)
        return deliveries

    def ack(self, delivery: Delivery) -> None:
        super().ack(delivery)
        self._drop(delivery.job)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        super().retry(delivery, delay_seconds)
        self._drop(delivery.job)
        self._add(delivery.job, self._now() + float(delay_seconds))

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        super().dead_letter(delivery, reason)
        self._drop(delivery.job)

    def pending(self) -> list[tuple[float, Job]]:
        """``(due_at, job)`` of every job not yet acked or dead-lettered, earliest first."""
        with self._book:
            entries = [entry for listed in self._due.values() for entry in listed]
        return sorted(entries, key=lambda entry: entry[0])


class JobDriver(Protocol):
    """How an environment runs its jobs (one implementation per :data:`JobMode`)."""

    router: LocalRouter | InlineRouter

    def pending(self) -> list[tuple[float, Job]]:
        """``(due_at, job)`` of every queued job, earliest first."""
        ...

    def run_due(self, max_jobs: int) -> int:
        """Run the jobs due now (and those they enqueue that are due now); how many ran."""
        ...


class QueuedDriver:
    """Jobs wait in a :class:`_TrackedQueue`; a :class:`Worker` runs them in this thread."""

    def __init__(self, clock: Callable[[], float], visibility_timeout: float) -> None:
        self.router: _TrackedQueue = _TrackedQueue(clock, visibility_timeout)
        self._worker: Worker | None = None

    def bind(self, runtime: Runtime) -> None:
        """Create the worker over ``runtime`` (whose router is :attr:`router`)."""
        self._worker = Worker(runtime, threads=1, poll_seconds=0.0, liveness_wait=0.0)

    @property
    def worker(self) -> Worker:
        """The worker that runs the jobs (after :meth:`bind`)."""
        assert self._worker is not None, "the driver is not bound to a runtime"
        return self._worker

    def pending(self) -> list[tuple[float, Job]]:
        return self.router.pending()

    def run_due(self, max_jobs: int) -> int:
        return self.worker.run_pending(max_jobs) if max_jobs > 0 else 0


class InlineDriver:
    """Jobs run inside ``enqueue`` (:class:`InlineRouter`); delayed ones wait for the clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.router: InlineRouter = InlineRouter(clock=clock)

    def bind(self, runtime: Runtime) -> None:
        """Bind the router to the job handlers of ``runtime``."""

        bind_inline(runtime)

    def pending(self) -> list[tuple[float, Job]]:
        return [(job.not_before or 0.0, job) for job in self.router.pending()]

    def run_due(self, max_jobs: int) -> int:
        return self.router.run_due() if max_jobs > 0 else 0
