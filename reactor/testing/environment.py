"""``TestEnvironment``: an isolated in-memory runtime with a controllable clock.

Entering a :class:`TestEnvironment` installs, as the process's active runtime, a fresh
:class:`reactor.memory.MemoryStorage` and an in-process router that share one
:class:`reactor.testing.TestClock`; leaving it puts the previous runtime back exactly as it
was (not closed, not reconfigured) and changes no environment variable. The test clock is
also the runtime's clock (:attr:`reactor.config.Runtime.clock`), so the engine's waits in the
caller (retries, coordination, reads of ``async_step`` results) advance it instead of
sleeping. The ``reactor_env`` pytest fixture (:mod:`reactor.testing.plugin`) is one of these
(docs/testing.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from types import TracebackType
from typing import Any, cast

from pydantic import ValidationError

from reactor import config
from reactor.config import Runtime, Settings
from reactor.engine.coroutines import off_loop
from reactor.errors import ConfigurationError
from reactor.facade import Reactor
from reactor.jobs.sweep_tick import run_sweeps
from reactor.memory.routers import InlineRouter, LocalRouter
from reactor.memory.storage import MemoryStorage
from reactor.middleware import Middleware
from reactor.ports.router import DeadLetter
from reactor.ports.storage import Storage
from reactor.testing.clock import DEFAULT_START, TestClock
from reactor.testing.errors import NotIdleError
from reactor.testing.faults import ErrorSpec, StepFault, StepFaults, StorageFault, StorageFaults
from reactor.testing.jobs import InlineDriver, JobMode, PendingJob, QueuedDriver

__all__ = ["DEFAULT_MAX_JOBS", "DEFAULT_MAX_SECONDS", "TestEnvironment"]

#: The most jobs :meth:`TestEnvironment.run_until_idle` runs before it gives up.
DEFAULT_MAX_JOBS = 10_000
#: The most seconds :meth:`TestEnvironment.run_until_idle` moves the clock before it gives up
#: (one day: a retry or park schedule longer than that is almost certainly a loop).
DEFAULT_MAX_SECONDS = 86_400.0


class TestEnvironment:
    """An isolated in-memory runtime for testing your reactors; a context manager.

    ``with TestEnvironment() as env:`` installs it; ``MyReactor.run(...)``, ``find``, ``undo``
    and every job then use its storage and router. Nothing really sleeps: time moves only
    through :attr:`clock` (docs/testing.md).

    Args:
        jobs: ``"queued"`` (default): background runs, async steps and fan-out elements wait
            in a queue until :meth:`run_until_idle`, :meth:`run_pending` or
            ``clock.advance`` runs them through the real worker, in the test's thread.
            ``"inline"``: each job runs inside the call that enqueued it (use it when a
            synchronous run reads an ``async_step``'s result); only delayed jobs wait for the
            clock (docs/testing.md, "Queued or inline jobs").
        start: the clock's start, in epoch seconds.
        middleware: the :class:`reactor.middleware.Middleware` the runtime runs, in order
            (e.g. an ``OpenTelemetryMiddleware`` on an in-memory exporter;
            docs/observability.md, "Middleware").
        **settings: engine settings (:class:`reactor.Settings` fields, durations in seconds).
            ``REACTOR_*`` environment variables are *not* read: a test sees the same settings
            on every machine.

    Raises:
        ConfigurationError: an unknown or invalid setting.
        ValueError: an unknown ``jobs`` mode, or a non-finite ``start``.
    """

    __test__ = False  # not a pytest test class, whatever module imports it

    def __init__(self, *, jobs: JobMode = "queued", start: float = DEFAULT_START,
                 middleware: Sequence[Middleware] = (), **settings: Any) -> None:
        if jobs not in ("queued", "inline"):
            raise ValueError(f"jobs must be 'queued' or 'inline', got {jobs!r}")
        try:
            self.settings = Settings(**settings)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid reactor settings: {exc}") from exc
        self.jobs: JobMode = jobs
        self.clock = TestClock(start)
        self._driver: QueuedDriver | InlineDriver = (
            QueuedDriver(self.clock, self.settings.visibility_timeout)
            if jobs == "queued" else InlineDriver(self.clock)
        )
        self.storage = MemoryStorage(context_ttl=self.settings.context_ttl, clock=self.clock)
        storage = cast(Storage, self.storage)  # a MemorySignalStore is a SignalStore
        self.runtime = Runtime(storage=storage, router=self._driver.router,
                               settings=self.settings, clock=self.clock,
                               middleware=tuple(middleware))
        self._driver.bind(self.runtime)
        self._step_faults = StepFaults()
        self._storage_faults = StorageFaults(storage)
        self._previous: Runtime | None = None
        self._active = False
        self._closed = False

    @property
    def router(self) -> LocalRouter | InlineRouter:
        """The in-process router (a :class:`reactor.memory.LocalRouter` without worker
        threads for ``jobs="queued"``, an :class:`reactor.memory.InlineRouter` for
        ``"inline"``)."""
        return self._driver.router

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> TestEnvironment:
        """Install the environment as the active runtime (see :meth:`start`)."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Restore the previous runtime (see :meth:`close`)."""
        self.close()

    async def __aenter__(self) -> TestEnvironment:
        """``async with TestEnvironment() as env:`` in an async test: install the environment
        as the active runtime (see :meth:`start`; docs/testing.md, "Async tests")."""
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Restore the previous runtime (see :meth:`close`)."""
        self.close()

    def start(self) -> None:
        """Make this environment (and so its test clock) the process's active runtime,
        remembering the one that was there.

        Raises:
            RuntimeError: the environment is already active or was closed (build a new one
                per test).
        """
        if self._active or self._closed:
            raise RuntimeError("a TestEnvironment is entered once; build a new one per test")
        # Swapped in, not configured: configure() would close the previous runtime's storage
        # and router, which the test must get back untouched.
        self._previous = config.swap(self.runtime)
        self.clock._attach(self._advance_to)
        self._active = True

    def close(self) -> None:
        """Disarm every fault, put the previous runtime back, and close this
        environment's storage and router; idempotent.

        When another runtime was made active meanwhile (a ``configure()`` inside the test),
        that one is closed and replaced by the previous one as well.
        """
        if not self._active:
            self._closed = True
            return
        self._active = False
        self._closed = True
        self.clock._attach(None)
        self._step_faults.restore_all()
        self._storage_faults.restore_all()
        current = config.swap(self._previous)
        self._previous = None
        if current is not None and current is not self.runtime:  # configured inside the test
            current.router.close()
            current.storage.close()
        self.router.close()
        self.storage.close()

    # -- running jobs ----------------------------------------------------------------------

    def pending_jobs(self) -> list[PendingJob]:
        """The jobs still queued, earliest due first (docs/testing.md, "Running jobs to
        completion").

        Returns:
            One :class:`reactor.testing.PendingJob` per queued job; ``[]`` when idle.
        """
        now = self.clock.now()
        return [PendingJob.of(job, due_at, now) for due_at, job in self._driver.pending()]

    def run_pending(self, *, max_jobs: int = DEFAULT_MAX_JOBS) -> int:
        """Run the jobs due now, and those they enqueue that are due now, without moving
        the clock.

        Args:
            max_jobs: the most jobs to run.

        Returns:
            How many jobs ran.

        Raises:
            NotIdleError: jobs due now were still pending after ``max_jobs`` jobs.
        """
        ran = self._driver.run_due(max_jobs)
        if ran >= max_jobs and self._due_now():
            raise NotIdleError(f"ran {ran} jobs (max_jobs) and more are due now",
                               self.pending_jobs())
        return ran

    def run_until_idle(
        self, *, max_jobs: int = DEFAULT_MAX_JOBS, max_seconds: float = DEFAULT_MAX_SECONDS
    ) -> int:
        """Run every queued job to the end, moving the clock to each delayed job's due time,
        until no job is left (docs/testing.md, "Running jobs to completion").

        Background runs, async steps, fan-out elements and their collectors, distributed map
        rollbacks, worker retries and parks all run, in due order, through the real worker;
        a retry delay of 30 s takes no real time, the clock just moves 30 s.

        Args:
            max_jobs: the most jobs to run before giving up.
            max_seconds: the most seconds to move the clock before giving up.

        Returns:
            How many jobs ran.

        Raises:
            NotIdleError: a bound was reached with jobs still queued; the error names them
                (kind, reactor, run, step or map, and when each is due).
            ValueError: a bound is negative or not finite.
        """
        if max_jobs < 0 or not math.isfinite(max_seconds) or max_seconds < 0:
            raise ValueError("max_jobs and max_seconds must be finite numbers >= 0")
        deadline = self.clock.now() + max_seconds
        ran = 0
        while True:
            ran += self._driver.run_due(max_jobs - ran)
            pending = self._driver.pending()
            if not pending:
                return ran
            if ran >= max_jobs:
                raise NotIdleError(f"ran {ran} jobs (max_jobs={max_jobs})", self.pending_jobs())
            due_at = pending[0][0]
            if due_at > deadline:
                raise NotIdleError(
                    f"the next job is due {due_at - self.clock.now():g}s from now, past "
                    f"max_seconds={max_seconds:g} of moving the clock", self.pending_jobs(),
                )
            self.clock._move_to(due_at)

    async def arun_pending(self, *, max_jobs: int = DEFAULT_MAX_JOBS) -> int:
        """:meth:`run_pending` for an async test: the jobs run off the test's event loop,
        and their ``async def`` step bodies run on it (docs/testing.md, "Async tests").

        Args:
            max_jobs: the most jobs to run.

        Returns:
            How many jobs ran.

        Raises:
            NotIdleError: as :meth:`run_pending`.
        """
        return await off_loop(self.run_pending, max_jobs=max_jobs)

    async def arun_until_idle(
        self, *, max_jobs: int = DEFAULT_MAX_JOBS, max_seconds: float = DEFAULT_MAX_SECONDS
    ) -> int:
        """:meth:`run_until_idle` for an async test: the jobs run off the test's event loop,
        and their ``async def`` step bodies run on it (docs/testing.md, "Async tests").

        Args:
            max_jobs: the most jobs to run before giving up.
            max_seconds: the most seconds to move the clock before giving up.

        Returns:
            How many jobs ran.

        Raises:
            NotIdleError: as :meth:`run_until_idle`.
            ValueError: as :meth:`run_until_idle`.
        """
        return await off_loop(self.run_until_idle, max_jobs=max_jobs, max_seconds=max_seconds)

    async def aadvance(self, seconds: float) -> float:
        """``clock.advance(seconds)`` for an async test: the jobs due on the way run off the
        test's event loop, their ``async def`` step bodies on it (docs/testing.md, "Async
        tests").

        Args:
            seconds: how far to move, in seconds.

        Returns:
            The new time in epoch seconds.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
            NotIdleError: as ``clock.advance``.
        """
        return await off_loop(self.clock.advance, seconds)

    def _due_now(self) -> bool:
        pending = self._driver.pending()
        return bool(pending) and pending[0][0] <= self.clock.now()

    def _advance_to(self, target: float) -> None:
        """``clock.advance``: run the jobs due up to ``target`` at their due times, in order,
        then leave the clock at ``target``."""
        ran = 0
        while True:
            ran += self._driver.run_due(DEFAULT_MAX_JOBS - ran)
            if ran >= DEFAULT_MAX_JOBS and self._due_now():
                raise NotIdleError(f"ran {ran} jobs while advancing the clock",
                                   self.pending_jobs())
            pending = self._driver.pending()
            due = [due_at for due_at, _ in pending if due_at > self.clock.now()]
            if not due or min(due) > target:
                break
            self.clock._move_to(min(due))
        self.clock._move_to(target)
        self._driver.run_due(DEFAULT_MAX_JOBS)

    def dead_letters(self) -> list[DeadLetter]:
        """The jobs the worker gave up on (poison jobs, or a handler failing on every
        delivery), oldest first."""
        return self.router.dead_letters(1000)

    def sweep(self) -> None:
        """Run the sweepers once, as a worker's sweep tick does: runs, async steps and maps
        whose worker died (their lock lapsed) are re-dispatched; run the re-dispatched jobs
        with :meth:`run_until_idle` (docs/workers.md, "Running workers")."""

        run_sweeps(self.runtime)

    # -- faults ----------------------------------------------------------------------------

    def fail_step(
        self,
        reactor: type[Reactor],
        step: str,
        *,
        on_attempt: int | Collection[int] | None = 1,
        error: ErrorSpec = None,
    ) -> StepFault:
        """Make one step of one reactor raise on chosen attempts (docs/testing.md, "Injecting
        faults").

        The step's body does not run on those attempts: the error is raised in its place, so
        the engine handles it like any failure of that step (retried under its ``Retries``,
        then compensated, and the completed steps undone). Other attempts run the real body.
        The fault lasts until :meth:`StepFault.remove` or the end of the environment.

        Args:
            reactor: the reactor class (for a fan-out or map element, the element reactor;
                for a composed child, the child reactor).
            step: the name of a leaf step (``step`` or ``async_step``) of ``reactor``.
            on_attempt: the attempt number (1-based) that fails, several of them, or
                ``None`` for every attempt.
            error: the exception to raise: an instance, or a class built with a message;
                default :class:`reactor.testing.InjectedFault` (retryable).

        Returns:
            The :class:`reactor.testing.StepFault` (``raised`` counts its raises).

        Raises:
            TypeError: ``reactor`` is not a Reactor class.
            ValueError: no such step, a compose or map step, or a bad ``on_attempt``.
        """
        return self._step_faults.arm(reactor, step, on_attempt, error)

    def storage_fails(
        self,
        *,
        on_call: int = 1,
        method: str | None = None,
        times: int = 1,
        error: ErrorSpec = None,
    ) -> StorageFault:
        """Make storage calls raise :class:`reactor.StorageError`, as an outage would
        (docs/testing.md, "Injecting faults").

        Calls are counted from now; calls number ``on_call`` to ``on_call + times - 1``
        raise, the others reach the storage.

        Args:
            on_call: the first counted call (1-based) that raises.
            method: what is counted: ``None`` (every storage call), a sub-store such as
                ``"contexts"`` or ``"locks"``, or one method such as ``"contexts.save"``.
            times: how many consecutive counted calls raise.
            error: the exception to raise instead (an instance or a class); default a
                ``StorageError`` naming the call.

        Returns:
            The :class:`reactor.testing.StorageFault` (``calls`` lists the counted calls).

        Raises:
            ValueError: ``on_call`` or ``times`` below 1, or ``method`` names no sub-store
                or method of the storage.
        """
        return self._storage_faults.arm(on_call, method, times, error)
