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

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, TypeVar

from reactor import config
from reactor.coordination.lock import Lock
from reactor.coordination.ordered_lock import OrderedLock
from reactor.coordination.period import Period
from reactor.coordination.rate_limit import RateLimit
from reactor.coordination.semaphore import Semaphore
from reactor.dsl.coordination import (
    Coordination,
    LockDecl,
    OrderedLockDecl,
    PeriodDecl,
    RateLimitDecl,
    SemaphoreDecl,
)
from reactor.dsl.inputs import Inputs
from reactor.engine import invoke
from reactor.engine.parks import Park, park_delay
from reactor.errors import (
    ConfigurationError,
    CoordinationError,
    CoordinationKeyError,
    InputValidationError,
    LockAcquisitionError,
    LockLost,
    OrderedLockWaitError,
    RateLimitExceeded,
    SemaphoreAcquisitionError,
    UnknownRateLimitError,
)
from reactor.middleware import NO_HOOKS, Hooks, LockWaitEvent
from reactor.model.engine_state import EngineState, KeyedTicket, ParkedHold, Waiting
from reactor.model.records import OrderedTicket
from reactor.model.results import (
    Failure,
    Halt,
    Paused,
    Result,
    RollbackFailure,
    Skipped,
    Success,
)
from reactor.model.status import RunStatus
from reactor.model.step_context import Hold

if TYPE_CHECKING:
    from reactor.config import Settings
    from reactor.dsl.declarations import StepSpec
    from reactor.dsl.definition import ReactorDefinition
    from reactor.dsl.step import BaseStep
    from reactor.engine.env import Env
    from reactor.engine.state import RunState
    from reactor.model.context import Context
    from reactor.model.step_context import StepContext
    from reactor.ports.clock import Clock
    from reactor.ports.storage import Storage

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

log = logging.getLogger("reactor.coordination")

#: The ``EngineState.parked_holds`` (and ``Waiting.scope``) scope of reactor-level holds.
REACTOR_SCOPE = "@reactor"

#: Run statuses after which the reactor-level ordered cursor advances (``cancelled``: a cancel
#: noticed at a step boundary, docs/run-control.md, "Cancel"; it never poisons a strict chain).
_TERMINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.HALTED, RunStatus.CANCELLED)


def is_admitted(ctx: Context) -> bool:
    """Whether the run passed its reactor-level gates once (``EngineState.admitted``).

    A run with recorded progress (a result or an undo entry) counts as admitted
    (docs/workers.md, "Decisions", "Snooze counting").

    Args:
        ctx: the run's context.

    Returns:
        ``True`` when the run was admitted or has progress.
    """
    return ctx.engine_state.admitted or bool(ctx.intermediate_results or ctx.undo_stack)


def mark_admitted(ctx: Context) -> None:
    """Record that the run passed its reactor-level gates (called once they are taken; kept
    forever, so parks, retries and redeliveries never re-charge them; docs/workers.md,
    "Decisions", "Snooze counting").

    Args:
        ctx: the run's context (``EngineState.admitted`` is set).
    """
    ctx.engine_state = replace(ctx.engine_state, admitted=True)


Mode = Literal["sync", "worker", "direct"]
HoldScope = Literal["reactor", "step"]

_active = threading.local()


class _HasState(Protocol):
    """Where a unit keeps its bookkeeping: a run's :class:`Context`, or a :class:`_Scratch`."""

    engine_state: EngineState


@dataclass
class _Scratch:
    """The throwaway bookkeeping of a direct call (no state is kept on any context).

    Attributes:
        engine_state: the call's engine state, dropped with it.
    """

    engine_state: EngineState = field(default_factory=EngineState)


def _active_ordered_keys() -> set[str]:
    keys: set[str] | None = getattr(_active, "keys", None)
    if keys is None:
        keys = set()
        _active.keys = keys
    return keys


_C = TypeVar("_C")


def _client(build: Callable[[], _C]) -> _C:
    """Build a coordination client; a lease the backend cannot honour is a configuration error
    (a permanent failure of the unit, never retried)."""
    try:
        return build()
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def _skew(storage: Storage) -> float:
    """The storage's clock-skew budget in seconds (``docs/coordination.md``, "Clock skew")."""
    return float(getattr(storage.capabilities, "clock_skew", 0.0))


def _root_id(ctx: Context) -> str:
    return ctx.root_context_id or ctx.context_id


def step_default_key(definition_name: str, spec: StepSpec) -> str:
    """The key of a step-level declaration without ``key``.

    A class step uses its Step class's ``module.QualName`` (shared with a direct ``Step.call``
    of that class); a function step uses ``"<reactor name>.<step name>"``.
    """
    if spec.step_class is not None:
        return _class_key(spec.step_class)
    return f"{definition_name}.{spec.name}"


def _class_key(cls: type[BaseStep]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ------------------------------------------------------------------------------ holds


@dataclass
class _Hold:
    """One lock or semaphore slot held by a unit.

    Attributes:
        key: the primitive's key.
        client: the client holding it.
        refused: its release answered ``False`` (it had lapsed or changed hands).
    """

    key: str
    client: Lock | Semaphore
    refused: bool = False

    def record(self) -> ParkedHold:
        """What a park keeps of this hold for the redelivery to re-adopt."""
        if isinstance(self.client, Lock):
            return ParkedHold("lock", self.key, self.client.owner)
        return ParkedHold("semaphore", self.key, self.client.holder)

    def lost(self) -> LockLost | None:
        """The loss the client knows of (refused extend, passed deadline, refused release)."""
        return self.client.lost

    def view(self, scope: HoldScope) -> Hold:
        """The read-only :class:`Hold` a step body sees."""
        if isinstance(self.client, Lock):
            return Hold("lock", self.key, scope, fencing_token=self.client.token or None,
                        probe=self.lost)
        return Hold("semaphore", self.key, scope, probe=self.lost)

    def release(self) -> None:
        """Release the hold (:func:`release_quietly`); a refused release marks it lost."""
        self.refused = release_quietly(self.client.release, self.key) is False


def release_quietly(release: Callable[[], bool], key: str, *, event: str = "release") -> (
    bool | None
):
    """Release a lock or semaphore lease; never raises (a lost release only lets the lease
    lapse with its TTL, docs/coordination.md, "Renewal and loss").

    A release the store failed (a dead pooled connection, a timeout) is tried once more at
    once: the lease is then free for the next holder instead of held for its whole lifetime.
    That retry's "not held" means the first attempt was applied and its reply lost.

    Args:
        release: the release call (``True``: released, ``False``: not held by this holder).
        key: the primitive's key (for the log).
        event: the log event's prefix (``<event>_retried``, ``<event>_failed``).

    Returns:
        ``True`` released, ``False`` refused (not held: lapsed or taken over), ``None`` both
        attempts failed.
    """
    try:
        return release()
    except Exception as exc:
        log.warning("event=%s_retried key=%s error=%s", event, key, exc)
    try:
        release()
        return True
    except Exception as exc:
        log.warning("event=%s_failed key=%s error=%s", event, key, exc)
        return None


def release_parked(storage: Storage, hold: ParkedHold, *, event: str = "release") -> None:
    """Release a hold a park kept (a lock by its owner, a semaphore lease by its holder)
    with :func:`release_quietly`; never raises."""
    primitive = storage.locks if hold.primitive == "lock" else storage.semaphores
    release_quietly(lambda: primitive.release(hold.key, hold.holder), hold.key, event=event)


class _Unit:
    """The coordination of one unit of work: a run, one step attempt, or a direct call.

    Args:
        decls: the declarations.
        storage: the storage whose coordination stores are used.
        settings: the engine settings (park delays).
        clock: the runtime's clock, which lock and semaphore waits poll on.
        owner: the lock owner (root context id, or a fresh id for a stand-alone call).
        mode: ``"sync"`` (wait then fail), ``"worker"`` (park) or ``"direct"`` (wait then
            fail, no state kept on any context).
        scope: ``"@reactor"`` or the step name (``parked_holds`` and ticket bookkeeping).
        default_key: the key of declarations without ``key``.
        inputs: the validated inputs the keys are computed from.
        target: whose ``engine_state`` the unit reads and replaces: the run's context (a
            :class:`_Scratch` for a direct call).
        context_id: the id recorded on a period marker.
        on_ticket: called with ``(scope, ticket)`` when a step-level ordered ticket is newly
            assigned (see ``RunState.on_ordered_ticket``).
        step: the step name for a ``Park`` (``None`` at reactor level).
        hooks: the runtime's middleware, told how long a synchronous execution waited for a
            lock or semaphore (docs/observability.md, "Metrics").
    """

    def __init__(
        self,
        decls: tuple[Coordination, ...],
        *,
        storage: Storage,
        settings: Settings,
        clock: Clock,
        owner: str,
        mode: Mode,
        scope: str,
        default_key: str,
        inputs: Mapping[str, Any],
        target: _HasState,
        context_id: str | None,
        step: str | None,
        on_ticket: Callable[[str, KeyedTicket], None] | None = None,
        hooks: Hooks = NO_HOOKS,
    ) -> None:
        self.storage = storage
        self.hooks = hooks
        self.clock = clock
        self.on_ticket = on_ticket
        self.settings = settings
        self.owner = owner
        self.mode = mode
        self.scope = scope
        self.default_key = default_key
        self.inputs = inputs
        self.target = target
        self.context_id = context_id
        self.step = step
        self.lock: LockDecl | None = None
        self.semaphore: SemaphoreDecl | None = None
        self.rate_limit: RateLimitDecl | None = None
        self.period: PeriodDecl | None = None
        self.ordered: OrderedLockDecl | None = None
        for decl in decls:
            if isinstance(decl, LockDecl):
                self.lock = decl
            elif isinstance(decl, SemaphoreDecl):
                self.semaphore = decl
            elif isinstance(decl, RateLimitDecl):
                self.rate_limit = decl
            elif isinstance(decl, PeriodDecl):
                self.period = decl
            elif isinstance(decl, OrderedLockDecl):
                self.ordered = decl
        self.keys: dict[str, str] = {}
        self.held: list[_Hold] = []
        self.ordered_client: OrderedLock | None = None
        self.ticket: OrderedTicket | None = None
        self._owns_active_key = False
        self._parked: list[ParkedHold] = []

    # -------------------------------------------------------------- bookkeeping

    def _key(self, decl: Coordination) -> str:
        key = self.keys.get(decl.primitive)
        if key is None:
            key = decl.resolve_key(self.inputs, self.default_key)
            self.keys[decl.primitive] = key
        return key

    def _resolve_keys(self) -> None:
        for decl in (self.ordered, self.period, self.rate_limit, self.lock, self.semaphore):
            if decl is not None:
                self._key(decl)

    @property
    def state(self) -> EngineState:
        """The target's engine state, as it is now."""
        return self.target.engine_state

    @state.setter
    def state(self, value: EngineState) -> None:
        self.target.engine_state = value

    def _take_parked(self) -> None:
        if self.mode == "direct":
            return
        entries = self.state.parked_holds.get(self.scope)
        if entries is not None:
            self.state = self.state.with_parked_holds(self.scope, ())
            self._parked = list(entries)

    def _parked_entry(self, primitive: str, key: str) -> ParkedHold | None:
        for entry in self._parked:
            if entry.primitive == primitive and entry.key == key:
                self._parked.remove(entry)
                return entry
        return None

    def _drop_unclaimed_parked(self) -> None:
        """Release parked holds no declaration re-adopted (e.g. the key changed)."""
        for entry in self._parked:
            if entry.primitive == "lock":
                self.storage.locks.release(entry.key, entry.holder)
            else:
                self.storage.semaphores.release(entry.key, entry.holder)
        self._parked = []

    # -------------------------------------------------------------- primitives

    def _take_lock(self, decl: LockDecl) -> None:
        key = self._key(decl)
        entry = self._parked_entry("lock", key)
        lock = _client(lambda: Lock(
            self.storage.locks, key,
            owner=entry.holder if entry is not None and entry.holder else self.owner,
            ttl=decl.ttl,
            wait=0.0 if self.mode == "worker" else decl.wait,
            auto_extend=decl.auto_extend,
            clock=self.clock, skew=_skew(self.storage),
        ))
        if entry is None or not lock.reattach():
            self._acquire("lock", lock.acquire)
        self.held.append(_Hold(key, lock))

    def _take_semaphore(self, decl: SemaphoreDecl) -> None:
        key = self._key(decl)
        entry = self._parked_entry("semaphore", key)
        semaphore = _client(lambda: Semaphore(
            self.storage.semaphores, key,
            limit=decl.limit,
            holder=entry.holder if entry is not None and entry.holder else None,
            lease=decl.lease,
            wait=0.0 if self.mode == "worker" else decl.wait,
            clock=self.clock, skew=_skew(self.storage),
        ))
        if entry is None or not semaphore.reattach():
            self._acquire("semaphore", semaphore.acquire)
        self.held.append(_Hold(key, semaphore))

    def _acquire(self, primitive: str, acquire: Callable[[], object]) -> None:
        """``acquire()``, telling the middleware how long a synchronous wait took."""
        if not self.hooks.middleware or self.mode == "worker":  # a worker parks, never waits
            acquire()
            return
        started = self.clock.monotonic()
        acquired = False
        try:
            acquire()
            acquired = True
        finally:
            self.hooks.lock_wait(LockWaitEvent(
                primitive=primitive, scope=self.scope,
                seconds=max(self.clock.monotonic() - started, 0.0), acquired=acquired,
                run_id=self.context_id,
            ))

    def _hit_rate_limit(self, decl: RateLimitDecl) -> None:
        RateLimit(self.storage.rate_limits, self._key(decl), decl.resolve_windows()).hit()

    def _period(self) -> Period:
        assert self.period is not None
        return Period(
            self.storage.periods, self._key(self.period), self.period.every, now=self.storage.now
        )

    def period_seen(self) -> bool:
        """Whether the declared period's current bucket is already marked."""
        return self.period is not None and self._period().seen()

    def mark_period(self, result: Result) -> None:
        """Mark the period after a **plain** ``Success`` (never ``Skipped``/``Halt``)."""
        if self.period is not None and type(result) is Success:
            self._period().mark(self.context_id)

    # -------------------------------------------------------------- ordered lock

    def _saved_ticket(self) -> KeyedTicket | None:
        state = self.state
        if self.scope == REACTOR_SCOPE:
            return state.ordered_ticket
        return state.step_ordered_tickets.get(self.scope)

    def _save_ticket(self, ticket: KeyedTicket | None) -> None:
        if self.scope == REACTOR_SCOPE:
            self.state = replace(self.state, ordered_ticket=ticket)
        else:
            self.state = self.state.with_step_ticket(self.scope, ticket)

    def _load_or_assign_ticket(self, client: OrderedLock) -> OrderedTicket:
        saved = self._saved_ticket()
        if saved is not None and saved.key == client.key:
            return saved.ticket
        ticket = client.assign()
        saved = KeyedTicket.of(client.key, ticket)
        self._save_ticket(saved)
        if self.on_ticket is not None and self.scope != REACTOR_SCOPE:
            self.on_ticket(self.scope, saved)  # durable before the turn can start
        return ticket

    def _drop_ticket(self) -> None:
        self._save_ticket(None)

    def _ordered_gate(self, decl: OrderedLockDecl) -> Result | None:
        key = self._key(decl)
        active = _active_ordered_keys()
        if key in active:
            # A nested unit on a key this thread already holds in line
            # would wait for itself forever.
            log.warning("event=ordered_lock_nested key=%s scope=%s: not sequenced", key,
                        self.scope)
            return None
        client = _client(lambda: OrderedLock(
            self.storage.ordered_locks, key, poison_pill_timeout=decl.poison_pill_timeout,
            ttl=decl.ttl, strict=decl.strict, skew=_skew(self.storage),
        ))
        ticket = self._load_or_assign_ticket(client)
        try:
            decision = client.check(ticket)
        except OrderedLockWaitError:
            if self.mode != "worker":
                # Give the place up (an out-of-order advance only drops its timer), so the
                # tickets behind it are not held up until the poison pill.
                client.advance(ticket)
                self._drop_ticket()
            raise
        self.ordered_client, self.ticket = client, ticket
        if decision == "stale_batch":
            self.ordered_client = None
            self._drop_ticket()
            return Halt("ordered_lock_stale_batch")
        if decision == "skip_chain_failed":
            return Halt("ordered_lock_chain_failed")
        active.add(key)
        self._owns_active_key = True
        client.start_heartbeat(ticket)
        return None

    def finish_ordered(self, *, failed: bool) -> None:
        """Advance the ordered cursor past this unit's ticket (terminal results only)."""
        self.leave_ordered()
        client, ticket = self.ordered_client, self.ticket
        self.ordered_client = self.ticket = None
        if client is None or ticket is None:
            return
        client.advance(ticket, failed=failed)
        self._drop_ticket()

    def leave_ordered(self) -> None:
        """Stop the ordered-lock heartbeat and leave the thread's active set (no advance)."""
        if self.ordered_client is not None:
            self.ordered_client.stop_heartbeat()
        if self._owns_active_key:
            _active_ordered_keys().discard(self.keys.get("ordered_lock", ""))
            self._owns_active_key = False

    # -------------------------------------------------------------- enter / leave

    def enter(self, order: tuple[str, ...], *, first_run: bool = True) -> Result | None:
        """Take every declared primitive in ``order``.

        Args:
            order: the sequence of ``"ordered"``, ``"period"``, ``"rate"``, ``"lock"``,
                ``"semaphore"``, ``"period_recheck"``.
            first_run: reactor level: ``False`` for an admitted run (no period checks, no
                second rate-limit charge).

        Returns:
            ``None`` when the body may run; otherwise the result to return instead (a
            ``Halt``/``Skipped`` marker result or a ``Failure``), every hold released.

        Raises:
            Park: in a worker, on contention (holds detached and recorded).
        """
        self._take_parked()
        try:
            self._resolve_keys()
            for phase in order:
                early = self._phase(phase, first_run)
                if early is not None:
                    self.release()
                    self._drop_unclaimed_parked()
                    return early
        except (CoordinationKeyError, UnknownRateLimitError, ConfigurationError) as exc:
            self.release()
            self._drop_unclaimed_parked()
            self.finish_ordered(failed=False)
            return Failure(exc, retryable=False)
        except (LockAcquisitionError, SemaphoreAcquisitionError, RateLimitExceeded,
                OrderedLockWaitError) as exc:
            return self._contended(exc)
        except BaseException:
            self.release()
            self._drop_unclaimed_parked()
            self.leave_ordered()
            raise
        self._drop_unclaimed_parked()
        if self.mode != "direct":
            self.state = replace(self.state, waiting=None)
        return None

    def _phase(self, phase: str, first_run: bool) -> Result | None:
        if phase == "ordered" and self.ordered is not None:
            return self._ordered_gate(self.ordered)
        if phase in ("period", "period_recheck") and first_run and self.period_seen():
            return Halt("period") if self.scope == REACTOR_SCOPE else Skipped(None)
        if phase == "rate" and self.rate_limit is not None:
            if self.scope == REACTOR_SCOPE and self.state.rate_limit_charged:
                return None
            self._hit_rate_limit(self.rate_limit)
            if self.scope == REACTOR_SCOPE:
                self.state = replace(self.state, rate_limit_charged=True)
        if phase == "lock" and self.lock is not None:
            self._take_lock(self.lock)
        if phase == "semaphore" and self.semaphore is not None:
            self._take_semaphore(self.semaphore)
        return None

    def _contended(self, exc: CoordinationError) -> Result:
        reason: Literal["lock", "semaphore", "rate_limit", "ordered_lock"]
        if isinstance(exc, LockAcquisitionError):
            reason = "lock"
        elif isinstance(exc, SemaphoreAcquisitionError):
            reason = "semaphore"
        elif isinstance(exc, RateLimitExceeded):
            reason = "rate_limit"
        else:
            reason = "ordered_lock"
        if self.mode == "worker":
            self.park()
            self.state = replace(
                self.state, waiting=Waiting(scope=self.scope, primitive=reason, key=exc.key)
            )
            delay = park_delay(
                self.settings, exc.retry_after if reason == "rate_limit" else None
            )
            raise Park(delay=delay, reason=reason, key=exc.key, step=self.step)
        self.release()
        self._drop_unclaimed_parked()
        self.finish_ordered(failed=False)
        return Failure(exc, retryable=False)

    def views(self, scope: HoldScope) -> tuple[Hold, ...]:
        """The holds taken so far as read-only :class:`Hold` views (for ``StepContext``)."""
        views = [hold.view(scope) for hold in self.held]
        client, ticket = self.ordered_client, self.ticket
        if client is not None and ticket is not None:
            views.insert(0, Hold("ordered_lock", client.key, scope,
                                 ordered_ticket=(ticket.epoch, ticket.nonce),
                                 probe=lambda: client.lost))
        return tuple(views)

    def lost_hold(self) -> LockLost | None:
        """The first hold of this unit that is lost (checked before a result is recorded)."""
        if self.ordered_client is not None and self.ordered_client.lost is not None:
            return self.ordered_client.lost
        for hold in self.held:
            lost = hold.lost()
            if lost is not None:
                return lost
        return None

    def park(self) -> None:
        """Detach every hold (keeping it) and record it for the redelivery to re-adopt."""
        self.leave_ordered()
        for hold in self.held:
            hold.client.detach()
        # Holds parked earlier and not reached yet this time are kept for the next delivery.
        records = [hold.record() for hold in self.held] + self._parked
        self.held, self._parked = [], []
        if records:
            self.state = self.state.with_parked_holds(self.scope, records)

    def release(self) -> None:
        """Release every hold, newest first (semaphore before lock)."""
        held, self.held = self.held, []
        for hold in reversed(held):
            hold.release()


_REACTOR_ORDER = ("ordered", "period", "rate", "lock", "semaphore", "period_recheck")
_STEP_ORDER = ("ordered", "period", "lock", "semaphore", "period_recheck", "rate")


# ------------------------------------------------------------------------------ reactor level


def run_coordinated(
    state: RunState,
    body: Callable[[RunState], Success | Failure | Paused],
    *,
    roll_back: Callable[[RunState], list[RollbackFailure]],
) -> Success | Failure | Paused:
    """Run ``body(state)`` (the executor) inside the reactor's coordination.

    See the module docstring for the order. A ``Park`` raised by the coordination itself or by
    a step detaches the reactor-level holds, records them and **saves** the context before it
    propagates (also when the reactor declares no coordination).

    Args:
        state: the run being executed (inputs already validated).
        body: runs the steps and returns the run's result.
        roll_back: rolls back the steps the run already completed and returns the rollback
            failures, when the coordination fails a run that has an undo stack (a re-entry
            after a hand-off; docs/concepts.md, "Rollback"). The executor passes it: rolling
            back runs step code, which runs under this module's holds.

    Returns:
        The body's result, or the ``Halt``/``Failure`` the coordination produced instead (the
        context is then stored ``halted``/``failed``; a run with completed steps, e.g. a
        re-entry after a hand-off, is rolled back first). A ``Paused`` body (an interrupt:
        docs/run-control.md, "Interrupts") releases the holds like a hand-off: a resume
        takes them again.

    Raises:
        Park: in a worker, on contention.
    """
    decls = state.definition.coordination
    if not decls:
        try:
            return body(state)
        except Park:
            state.checkpoint.save()
            raise
    ctx = state.ctx
    env = state.env
    unit = _Unit(
        decls, storage=env.storage, settings=env.settings, clock=env.clock,
        owner=_root_id(ctx),
        mode="worker" if env.in_worker else "sync", scope=REACTOR_SCOPE,
        default_key=state.definition.name, inputs=ctx.inputs, target=ctx,
        context_id=ctx.context_id, step=None, hooks=env.runtime.hooks,
    )
    first_run = not ctx.engine_state.admitted
    try:
        early = unit.enter(_REACTOR_ORDER, first_run=first_run)
    except Park as park:
        state.trace("contention_park", None, detail=f"{park.reason} {park.key or ''}".strip())
        state.checkpoint.save()
        raise
    if early is not None:
        return _stop_before_steps(state, unit, early, roll_back)
    mark_admitted(ctx)
    parked = False
    outer = state.holds
    state.holds = outer + unit.views("reactor")
    try:
        result = body(state)
        unit.mark_period(result)
        return result
    except Park:
        parked = True
        unit.park()
        state.checkpoint.save()
        raise
    finally:
        state.holds = outer
        if not parked:
            held = list(unit.held)
            unit.release()
            refused = _refused(held)
            if refused is not None:  # after the final save: reported, the steps were checked
                log.warning("event=hold_lost run_id=%s scope=reactor %s", ctx.context_id,
                            refused)
            if ctx.status in _TERMINAL:
                unit.finish_ordered(failed=ctx.status is RunStatus.FAILED)
            else:
                unit.leave_ordered()


def _stop_before_steps(
    state: RunState,
    unit: _Unit,
    early: Result,
    roll_back: Callable[[RunState], list[RollbackFailure]],
) -> Success | Failure:
    """Store and return the ``Halt``/``Failure`` the coordination produced before any step
    (a run with completed steps is rolled back first, with ``roll_back``)."""
    ctx = state.ctx
    ctx.current_step = None
    if isinstance(early, Halt):
        state.trace("halt", None, detail=str(early.reason))
        ctx.status = RunStatus.HALTED
        unit.finish_ordered(failed=False)
        state.checkpoint.save()
        return early
    assert isinstance(early, Failure)
    failure = replace(
        early, reactor_name=state.definition.name, inputs=ctx.redacted_inputs(), run_id=None
    )
    state.trace("failed", None, detail=failure.message)
    ctx.failure = failure
    if ctx.undo_stack:
        failure = replace(failure, rollback_failures=roll_back(state))
        ctx.failure = failure
        ctx.rollback = None
    ctx.status = RunStatus.FAILED
    # Nothing ran under the ticket: advance without poisoning a strict chain.
    unit.finish_ordered(failed=False)
    state.checkpoint.save()
    return failure


def assign_ordered_ticket(definition: ReactorDefinition, ctx: Context, env: Env) -> None:
    """Take the run's place in its reactor-level ordered lock now (at enqueue time).

    A background run is given its ticket by the caller (``docs/coordination.md``, "Ordered
    locks in workers"), before the context is saved and enqueued, so runs go in enqueue
    order. Without this call the ticket is
    assigned when the run first executes (a synchronous run). A no-op when the reactor declares
    no ordered lock, the ticket exists, or the key cannot be computed yet (the execution then
    fails on it).

    Args:
        definition: the reactor's definition.
        ctx: the run's context (``inputs`` set; the ticket is stored in
            ``EngineState.ordered_ticket``).
        env: the execution environment.
    """
    decl = next((d for d in definition.coordination if isinstance(d, OrderedLockDecl)), None)
    if decl is None or ctx.engine_state.ordered_ticket is not None:
        return
    try:
        key = decl.resolve_key(ctx.inputs, definition.name)
    except CoordinationKeyError:
        return
    ticket = OrderedLock(env.storage.ordered_locks, key, ttl=decl.ttl).assign()
    ctx.engine_state = replace(ctx.engine_state, ordered_ticket=KeyedTicket.of(key, ticket))


# ------------------------------------------------------------------------------ step level


class StepCoordination:
    """The step-level coordination of one leaf step execution (all its attempts).

    Build it with :meth:`for_step`; call :meth:`attempt` around every attempt of the body and
    :meth:`finish` with the step's final result (advances a step-level ordered lock).
    """

    def __init__(self, state: RunState, spec: StepSpec) -> None:
        self.state = state
        self.spec = spec
        self._unit: _Unit | None = None

    @classmethod
    def for_step(cls, state: RunState, spec: StepSpec) -> StepCoordination | None:
        """The coordination of leaf step ``spec``, or ``None`` when it declares none."""
        return cls(state, spec) if spec.coordination else None

    def attempt(self, arguments: Mapping[str, Any], body: Callable[[], Result]) -> Result:
        """Run ``body`` under the step's holds (order: see the module docstring).

        Args:
            arguments: the step's validated inputs (the keys are computed from them).
            body: runs the step body once; called only when every hold was taken.

        Returns:
            The body's result; ``Skipped(None)`` when the step's period is already marked;
            a ``Halt`` from the ordered lock; a non-retryable ``Failure`` on synchronous
            contention, a key error or an unknown named rate limit.

        Raises:
            Park: in a worker, on contention (this step's holds detached and recorded; the
                reactor-level wrapper saves the context).
        """
        state = self.state
        ctx = state.ctx
        env = state.env
        unit = _Unit(
            self.spec.coordination, storage=env.storage, settings=env.settings,
            clock=env.clock, owner=state.coordination_owner or _root_id(ctx),
            mode="worker" if env.in_worker else "sync", scope=self.spec.name,
            default_key=step_default_key(state.definition.name, self.spec),
            inputs=arguments, target=ctx, context_id=ctx.context_id,
            step=self.spec.name, on_ticket=state.on_ordered_ticket, hooks=env.runtime.hooks,
        )
        # A retry attempt finds the first attempt's ticket in the engine state (same place
        # in line).
        self._unit = unit
        try:
            early = unit.enter(_STEP_ORDER)
        except Park as park:
            state.trace(
                "contention_park", self.spec.name,
                detail=f"{park.reason} {park.key or ''}".strip(),
            )
            raise
        if early is not None:
            unit.leave_ordered()
            return early
        state.step_holds = unit.views("step")
        lost: LockLost | None = None
        try:
            result = body()
            lost = unit.lost_hold()
            if lost is None:
                unit.mark_period(result)
        finally:
            state.step_holds = ()
            held = list(unit.held)
            unit.release()
            unit.leave_ordered()
        lost = lost or _refused(held)
        if lost is not None:
            return hold_lost(state, self.spec.name, result, lost)
        return result

    def finish(self, result: Result) -> None:
        """Advance a step-level ordered lock after the step's final result."""
        if self._unit is not None:
            self._unit.finish_ordered(failed=isinstance(result, Failure))


def _refused(held: list[_Hold]) -> LockLost | None:
    for hold in held:
        if hold.refused:
            primitive = "lock" if isinstance(hold.client, Lock) else "semaphore"
            return LockLost(
                f"{primitive} {hold.key!r} was no longer held at release: it lapsed or changed "
                "hands while the step ran", key=hold.key, primitive=primitive,
            )
    return None


def hold_lost(state: RunState, step: str, result: Result, lost: LockLost) -> Result:
    """Fail a step whose hold was lost while its body ran, before its result is recorded.

    Traces ``hold_lost`` (which primitive and key, and when) and returns a non-retryable
    ``Failure(LockLost)`` in place of a ``Success``; a ``Failure`` stays as it was. The body
    started, so the step is compensated (``docs/coordination.md``, "Renewal and loss").

    Args:
        state: the run.
        step: the step name.
        result: what the body returned.
        lost: the loss.

    Returns:
        The result to record.
    """
    state.trace(
        "hold_lost", step, primitive=lost.primitive, key=lost.key, lost_at=lost.lost_at,
        detail=f"{lost} (detected at {lost.lost_at:.3f})",
    )
    log.warning("event=hold_lost step=%s primitive=%s key=%s", step, lost.primitive, lost.key)
    if isinstance(result, Failure):
        return result
    return Failure(lost, retryable=False)


# ------------------------------------------------------------------------------ rollback


@contextmanager
def rollback_holds(
    state: RunState, spec: StepSpec, arguments: Mapping[str, Any], kind: Literal["undo",
                                                                              "compensate"]
) -> Iterator[RollbackFailure | None]:
    """Re-take a step's lock and semaphore around its undo/compensate (docs/coordination.md,
    "Rollback").

    Yields ``None`` when the holds were taken (or the step declares neither): run the hook,
    the holds are released afterwards. Yields a ``RollbackFailure`` with reason
    ``"coordination_unavailable"`` when a synchronous caller could not take a hold within
    ``rollback_wait``, or a key could not be computed: skip the hook and record the failure.

    Args:
        state: the context being rolled back.
        spec: the leaf step.
        arguments: the stored step arguments (not validated; the Step class's defaults are
            applied).
        kind: ``"undo"`` or ``"compensate"``.

    Raises:
        Park: inside a worker (``Env.in_worker``), a hold is contended: the holds taken so far
            are released, ``waiting`` is noted and the context saved with its rollback in
            progress; the redelivery resumes the rollback at this hook.
    """
    decls = [d for d in spec.coordination if isinstance(d, LockDecl | SemaphoreDecl)]
    if not decls:
        yield None
        return
    args = dict(arguments)
    if spec.step_class is not None:
        args = spec.step_class.contract.with_defaults(args)
    default_key = step_default_key(state.definition.name, spec)
    owner = _root_id(state.ctx)
    storage = state.env.storage
    clock = state.env.clock
    worker = state.env.in_worker
    held: list[_Hold] = []
    failure: RollbackFailure | None = None
    try:
        for decl in sorted(decls, key=lambda d: 0 if isinstance(d, LockDecl) else 1):
            key = decl.resolve_key(args, default_key)
            wait = 0.0 if worker else decl.effective_rollback_wait
            client: Lock | Semaphore
            if isinstance(decl, LockDecl):
                client = Lock(
                    storage.locks, key, owner=owner, ttl=decl.ttl, wait=wait,
                    auto_extend=decl.auto_extend, clock=clock, skew=_skew(storage),
                )
            else:
                client = Semaphore(
                    storage.semaphores, key, limit=decl.limit, lease=decl.lease, wait=wait,
                    clock=clock, skew=_skew(storage),
                )
            client.acquire()
            held.append(_Hold(key, client))
    except (CoordinationError, CoordinationKeyError, ValueError) as exc:
        # ValueError: a lease the backend cannot honour (not above its clock-skew budget).
        for hold in reversed(held):
            hold.release()
        held = []
        if worker and isinstance(exc, LockAcquisitionError | SemaphoreAcquisitionError):
            _park_rollback(state, spec.name, exc)
        failure = RollbackFailure(
            step=spec.name, kind=kind, reason="coordination_unavailable",
            message=f"{kind} skipped: {exc}",
        )
    if failure is None and worker and state.ctx.engine_state.waiting is not None:
        state.ctx.engine_state = replace(state.ctx.engine_state, waiting=None)
    try:
        yield failure
    finally:
        for hold in reversed(held):
            hold.release()


def _park_rollback(state: RunState, step: str,
                   exc: LockAcquisitionError | SemaphoreAcquisitionError) -> NoReturn:
    """Note what the rollback waits on, save the context (its rollback in progress) and park."""
    reason: Literal["lock", "semaphore"] = (
        "lock" if isinstance(exc, LockAcquisitionError) else "semaphore"
    )
    state.ctx.engine_state = replace(
        state.ctx.engine_state, waiting=Waiting(scope=step, primitive=reason, key=exc.key)
    )
    state.trace("contention_park", step, detail=f"rollback {reason} {exc.key}")
    state.checkpoint.save()
    raise Park(delay=park_delay(state.env.settings), reason=reason, key=exc.key, step=step)


# ------------------------------------------------------------------------------ direct calls


def call_direct(
    cls: type[BaseStep], args: Mapping[str, Any], context: StepContext | None
) -> Result:
    """``Step.call``: validate, coordinate as its own unit of work, run once.

    The lock owner is the calling run's root id when a step context is given (a step body
    calling another step re-enters its run's locks), else a fresh id. Contention waits up to
    each declaration's ``wait`` and then fails; it never parks, and no state is kept on any
    context. Runs against :func:`reactor.config.current`.

    Returns:
        The body's result, ``Skipped(None)`` when the period is marked, or a ``Failure``
        (invalid inputs, contention, key error, unknown named rate limit).
    """
    if not cls.coordination:
        return invoke.call_class_run(cls, args, context)
    try:
        validated = cls.contract.validate(args, step_name=cls.__qualname__)
    except InputValidationError as exc:
        return Failure(exc, retryable=False, validation_errors=exc.field_errors)
    runtime = config.current()
    unit = _Unit(
        cls.coordination, storage=runtime.storage, settings=runtime.settings,
        clock=runtime.clock,
        owner=(context.root_run_id or context.run_id) if context is not None
        else f"direct:{uuid.uuid4()}",
        mode="direct", scope=cls.__qualname__, default_key=_class_key(cls),
        inputs=validated, target=_Scratch(), context_id=None, step=None,
    )
    early = unit.enter(_STEP_ORDER)
    if early is not None:
        unit.finish_ordered(failed=False)
        return early
    result: Result | None = None
    try:
        instance = cls(Inputs(validated, declared=cls.contract.names), context)
        result = invoke.capture(instance.run).result
        unit.mark_period(result)
        return result
    finally:
        unit.release()
        if result is not None:
            unit.finish_ordered(failed=isinstance(result, Failure))
        else:
            unit.leave_ordered()
