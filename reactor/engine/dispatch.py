"""``DispatchHandle``: what a caller gets when a run moved to a background worker.

docs/workers.md, "Background runs" (Ruby's ``DispatchResult(job_id, execution_id,
intermediate_results)``). Durable record before signal: a worker writes the run's terminal state
to storage **before** publishing on the run's completion channel
(:func:`reactor.model.keys.run_completion_channel`); a waiter subscribes, then always re-checks
the durable record, with a fallback poll of ``clamp(timeout / 10, 0.05 s, 5 s)``, so a lost
signal (or a storage without signals) costs latency, never correctness.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reactor import config, registry
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.coroutines import off_loop
from reactor.engine.env import make_env, wait_for_signal
from reactor.errors import (
    AsyncWaitTimeoutError,
    RunNotFoundError,
    RunStateError,
    UnknownReactorError,
)
from reactor.model.context import Context
from reactor.model.keys import run_completion_channel
from reactor.model.results import Failure, Halt, Paused, Success
from reactor.model.status import RunStatus
from reactor.ports.capabilities import KnowsConsumers
from reactor.ports.storage import Storage, Subscription

__all__ = ["DispatchHandle", "publish_completion", "stored_result", "wait_for_run"]

log = logging.getLogger("reactor.dispatch")

#: Bounds of the waiter's fallback poll interval, in seconds.
MIN_POLL = 0.05
MAX_POLL = 5.0


def stored_result(ctx: Context) -> Success | Failure | Paused | None:
    """The final result of a stored run (or its pause), rebuilt from its context.

    Args:
        ctx: the stored context.

    Returns:
        ``Success`` (the ``returns`` step's value, or all results) for ``completed``; ``Halt``
        (reason and step from the trace's ``halt`` entry) for ``halted``; the stored
        ``Failure`` for ``failed`` and for ``failed_paused`` (held before its rollback:
        docs/operations.md, "Pause, rewind, fork"); for ``cancelled``, the stored ``Failure`` of
        :class:`~reactor.errors.RunCancelledError` of a run ``Reactor.cancel`` stopped
        (docs/run-control.md, "Cancel"); a ``Failure(RunStateError)`` for ``aborted`` and for
        a run ``Reactor.undo`` cancelled; ``Paused`` for a run ``paused`` at an interrupt
        (it waits for ``Reactor.resume``: docs/run-control.md, "Interrupts"); ``None`` while
        the run is not finished. Every result carries ``run_id``.
    """
    run_id = ctx.context_id
    status = ctx.status
    if status is RunStatus.COMPLETED:
        try:
            returns = registry.get(ctx.reactor).definition.returns
        except UnknownReactorError:
            returns = None
        return Success(ctx.returned_value(returns), run_id=run_id)
    if status is RunStatus.HALTED:
        entry = ctx.last_trace("halt")
        if entry is None:
            return Halt(None, run_id=run_id)
        return Halt(entry.detail, step_name=entry.step, run_id=run_id)
    if status is RunStatus.FAILED or (
        status is RunStatus.FAILED_PAUSED and ctx.failure is not None
    ):
        if ctx.failure is not None:
            return ctx.failure.with_run_id(run_id)
        return Failure("the run failed", retryable=False, reactor_name=ctx.reactor,
                       run_id=run_id)
    pending = ctx.engine_state.interrupt
    if status is RunStatus.PAUSED and pending is not None:
        return Paused(
            step=pending.step, correlation_id=pending.correlation_id, timeout=pending.timeout,
            deadline=pending.deadline, expiry=pending.expiry,
            max_attempts=pending.max_attempts, attempts=pending.attempts, run_id=run_id,
        )
    if status is RunStatus.CANCELLED and ctx.engine_state.cancel is not None and (
        ctx.failure is not None
    ):
        return ctx.failure.with_run_id(run_id)
    if status in (RunStatus.CANCELLED, RunStatus.ABORTED):
        error = RunStateError(
            f"run {run_id!r} is {status.value}", run_id=run_id, status=status.value
        )
        return Failure(error, retryable=False, reactor_name=ctx.reactor, run_id=run_id)
    return None


def publish_completion(storage: Storage, ctx: Context) -> None:
    """Publish a finished run on its completion channel (after its terminal state was saved).

    Best effort: a storage without signals, or a failed publish, only costs waiters latency.
    """
    signals = storage.signals
    if signals is None or not storage.capabilities.signals:
        return
    try:
        signals.publish(run_completion_channel(ctx.context_id), ctx.status.value)
    except Exception as exc:
        log.warning("event=publish_failed context_id=%s error=%s", ctx.context_id, exc)


def _subscribe(storage: Storage, run_id: str) -> Subscription | None:
    signals = storage.signals
    if signals is None or not storage.capabilities.signals:
        return None
    try:
        return signals.subscribe(run_completion_channel(run_id))
    except Exception as exc:
        log.warning("event=subscribe_failed context_id=%s error=%s", run_id, exc)
        return None


def wait_for_run(
    runtime: Runtime,
    run_id: str,
    timeout: float | None = None,
    *,
    monotonic: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Success | Failure | Paused:
    """Block until stored run ``run_id`` is finished (or paused at an interrupt) and return
    its result.

    The run is read first: a finished run costs that one read, no subscription. An unfinished
    one is subscribed to (its completion channel, when the storage has signals) and read
    again before the first wait, so a completion published in between is not waited for.

    Args:
        runtime: the runtime whose storage holds the run.
        run_id: the run.
        timeout: seconds to wait; ``None`` = ``settings.async_wait_timeout``.
        monotonic: the clock of the deadline; ``None``: the runtime clock's
            (:attr:`reactor.config.Runtime.clock`, docs/testing.md, "The clock").
        sleep: the wait between two re-checks; ``None``: the runtime clock's, which on the
            system clock is a signal wait on the run's completion channel when the storage has
            signals (:func:`reactor.engine.env.wait_for_signal`).

    Returns:
        See :func:`stored_result`.

    Raises:
        AsyncWaitTimeoutError: the run is still unfinished at the deadline.
        RunNotFoundError: no run is stored under ``run_id``.
        DeserializationError: the stored context is malformed.
        StorageError: the backend failed.
    """
    bound = runtime.settings.async_wait_timeout if timeout is None else float(timeout)
    poll = min(max(bound / 10.0, MIN_POLL), MAX_POLL)
    clock = runtime.clock
    if monotonic is None:
        monotonic = clock.monotonic
    deadline = monotonic() + bound
    env = make_env(runtime)
    router = runtime.router
    receives_before = router.receive_count if isinstance(router, KnowsConsumers) else None
    subscription: Subscription | None = None
    subscribed = sleep is not None  # a given sleep waits without signals
    try:
        while True:
            ctx = load_context(env, run_id, open_secrets=False)  # reads the outcome only
            if ctx is None:
                raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
            result = stored_result(ctx)
            if result is not None:
                return result  # a finished run: one read, no subscription
            if not subscribed:
                # subscribe, then check again before the first wait: a completion published
                # between the check above and the subscription is never waited for in vain
                subscribed, subscription = True, _subscribe(runtime.storage, run_id)
                if subscription is not None:
                    continue
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise AsyncWaitTimeoutError(
                    f"run {run_id!r} is still {ctx.status.value} after {bound:g}s"
                    f"{_no_consumer_note(runtime, receives_before)}",
                    run_id=run_id,
                    timeout=bound,
                )
            pause = min(poll, remaining)
            if sleep is not None:
                sleep(pause)
            else:
                wait_for_signal(clock, subscription, pause)
    finally:
        if subscription is not None:
            subscription.close()


def _no_consumer_note(runtime: Runtime, receives_before: int | None) -> str:
    """A hint for the timeout message when nothing consumed an in-process router meanwhile.

    Only routers that declare :class:`~reactor.ports.capabilities.KnowsConsumers` (e.g.
    ``local://``) are judged; for any other router the note is empty.
    """
    router = runtime.router
    if (
        not isinstance(router, KnowsConsumers)
        or router.has_consumers
        or router.receive_count != receives_before
    ):
        return ""
    return (
        "; no worker consumes this process's in-process router (use 'local://' with "
        "workers > 0, run 'reactor worker' against a shared router, or drive "
        "Worker(runtime).run_pending() by hand)"
    )


@dataclass(frozen=True)
class DispatchHandle:
    """A run handed to a background worker (``background = Background(...)``).

    Attributes:
        run_id: the run's id (``Reactor.find(run_id)`` reads it).
        job_id: the id of the enqueued ``run`` job.
        reactor: the registered reactor name.
        results: step name -> value of the steps that completed in the caller (read-only).
        runtime: the runtime the run was stored with.
    """

    run_id: str
    job_id: str
    reactor: str
    results: Mapping[str, Any] = field(default_factory=dict)
    runtime: Runtime | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", MappingProxyType(dict(self.results)))

    @property
    def execution_id(self) -> str:
        """Alias of :attr:`run_id` (ruby_reactor's ``execution_id``)."""
        return self.run_id

    @property
    def intermediate_results(self) -> Mapping[str, Any]:
        """Alias of :attr:`results` (ruby_reactor's ``intermediate_results``)."""
        return self.results

    def _runtime(self) -> Runtime:
        if self.runtime is not None:
            return self.runtime
        return config.current()

    def status(self) -> RunStatus:
        """The run's stored status now.

        Raises:
            RunNotFoundError: the run is not stored (any more).
        """
        ctx = load_context(make_env(self._runtime()), self.run_id, open_secrets=False)
        if ctx is None:
            raise RunNotFoundError(f"no stored run {self.run_id!r}", run_id=self.run_id)
        return ctx.status

    def wait(self, timeout: float | None = None) -> Success | Failure | Paused:
        """Wait for the run to finish and return its result (``Success``, ``Halt`` or
        ``Failure``; ``Paused`` when it stopped at an interrupt and waits for
        ``Reactor.resume``: docs/run-control.md, "Interrupts"), re-checking the stored record
        on every signal and poll.

        Args:
            timeout: seconds; ``None`` = ``settings.async_wait_timeout`` (default 30 s).

        Raises:
            AsyncWaitTimeoutError: the run had not finished at the deadline (it keeps running).
            RunNotFoundError: the run is not stored.
        """
        return wait_for_run(self._runtime(), self.run_id, timeout)

    async def wait_async(self, timeout: float | None = None) -> Success | Failure | Paused:
        """:meth:`wait`, awaitable: the wait blocks a thread of reactor's pool, not the
        calling event loop (docs/concepts.md, "Async steps").

        Args:
            timeout: seconds; ``None`` = ``settings.async_wait_timeout`` (default 30 s).

        Raises:
            AsyncWaitTimeoutError: the run had not finished at the deadline (it keeps running).
            RunNotFoundError: the run is not stored.
        """
        return await off_loop(self.wait, timeout)
