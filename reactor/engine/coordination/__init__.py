"""Taking and releasing the ``with_*`` holds of a run, a step or a direct ``Step.call``.

Semantics: ``docs/coordination.md`` ("Order", "Contention", "Rollback", "Renewal and loss",
"Holds"), through the :mod:`reactor.coordination` clients.

**Acquisition order.** Reactor level (:func:`run_coordinated`, around the executor): ordered-lock
gate, period fast check, (inputs are already validated by ``launch``), rate limit (first
execution only: ``EngineState.rate_limit_charged``), lock, semaphore, period re-check under
the lock, then the steps (``EngineState.admitted`` is set first); a plain ``Success`` marks
the period; then the semaphore and the lock are released, and the ordered cursor advances when
the run ended terminal (completed, failed, halted or cancelled). Step level
(:class:`StepCoordination`, around every attempt of the body): ordered gate, period fast check,
lock, semaphore, period re-check, rate limit **last** (a park never spends a slot); released
in reverse.

**Owners.** A lock's owner is the root context id, so a run re-enters its own locks across its
compose tree (counted by the store). A semaphore slot is one lease per holder token (a fresh
UUID per hold; not re-entrant).

**Contention.** A synchronous caller waits up to the declaration's ``wait``, polling on the
runtime's clock (:attr:`reactor.config.Runtime.clock`, docs/testing.md, "The clock"), then the
unit fails with the typed error
(:class:`~reactor.errors.LockAcquisitionError`,
:class:`~reactor.errors.SemaphoreAcquisitionError`,
:class:`~reactor.errors.RateLimitExceeded`,
:class:`~reactor.errors.OrderedLockWaitError`), ``retryable=False``; a step that failed so
is not compensated (its body never started) and earlier steps roll back. Inside a worker
(``Env.in_worker``) contention raises :class:`~reactor.engine.parks.Park` after detaching the
holds already taken (:meth:`Lock.detach`, :meth:`Semaphore.detach`) and recording them in
the run's ``EngineState.parked_holds[scope]`` (scope ``"@reactor"`` or the step name; see
:mod:`reactor.model.engine_state`); the redelivery
re-adopts them (``reattach``) without a second acquire. The run context is saved before the
``Park`` leaves :func:`run_coordinated`. A key function that raises
(:class:`~reactor.errors.CoordinationKeyError`) and an unknown named rate limit
(:class:`~reactor.errors.UnknownRateLimitError`) are permanent failures, never parked.

**Outcomes without running.** A reactor-level period already marked gives
``Halt(reason="period")``; a step-level one gives ``Skipped(None)``. An ordered lock in strict
mode whose chain failed gives ``Halt(reason="ordered_lock_chain_failed")``; a ticket fenced by a
newer epoch gives ``Halt(reason="ordered_lock_stale_batch")``.

**Rollback** (:func:`rollback_holds`) re-takes a step's lock and semaphore around its
undo/compensate. Inside a worker a held lock or a full semaphore **parks** the rollback (the
context is saved with the rollback in progress, the job re-enqueued; the redelivery resumes the
rollback at the same entry), for as long as it takes: an undo is never skipped for contention.
A synchronous caller waits up to ``rollback_wait`` (default: the lock TTL, or 60 s for a
semaphore); when it cannot take them, or a key cannot be computed, the undo/compensate is
skipped and a :class:`~reactor.model.results.RollbackFailure` with reason
``"coordination_unavailable"`` is recorded. Rate limits, periods and ordered locks are not
re-taken.

**Direct calls** (:func:`call_direct`, behind ``Step.call``) coordinate as their own unit of
work: never park, keep no state on any context, wait then fail.
"""

from reactor.engine.coordination.admission import is_admitted, mark_admitted
from reactor.engine.coordination.holds import release_parked, release_quietly
from reactor.engine.coordination.keys import REACTOR_SCOPE, step_default_key
from reactor.engine.coordination.reactor_level import assign_ordered_ticket, run_coordinated
from reactor.engine.coordination.rollback import rollback_holds
from reactor.engine.coordination.step_level import StepCoordination, call_direct, hold_lost

__all__ = [
    "REACTOR_SCOPE",
    "StepCoordination",
    "assign_ordered_ticket",
    "call_direct",
    "hold_lost",
    "is_admitted",
    "mark_admitted",
    "release_parked",
    "release_quietly",
    "rollback_holds",
    "run_coordinated",
    "step_default_key",
]
