"""The coordination of one unit of work — a run, one step attempt or a direct call — in
the order of docs/coordination.md ("Order", "Contention"): :class:`Unit` takes its holds,
parks or fails on contention, marks its period and releases.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

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
from reactor.engine.coordination.holds import (
    Held,
    HoldScope,
    build_client,
    skew_budget,
)
from reactor.engine.coordination.keys import REACTOR_SCOPE
from reactor.engine.parks import Park, park_delay
from reactor.engine.run_control.deadline import cut_failure
from reactor.engine.run_control.deadline import wait_left as deadline_wait_left
from reactor.errors import (
    ConfigurationError,
    CoordinationError,
    CoordinationKeyError,
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
    Result,
    Skipped,
    Success,
)
from reactor.model.step_context import Hold

if TYPE_CHECKING:
    from reactor.config import Settings
    from reactor.ports.clock import Clock
    from reactor.ports.storage import Storage

log = logging.getLogger("reactor.coordination")


Mode = Literal["sync", "worker", "direct"]

#: The ordered-lock keys this thread is inside now (ambient run state; an immutable set,
#: replaced on every change, so a new thread starts with none, as with a thread-local).
_active: ContextVar[frozenset[str]] = ContextVar("reactor_active_ordered_keys",
                                                 default=frozenset())


class HasState(Protocol):
    """Where a unit keeps its bookkeeping: a run's :class:`Context`, or a :class:`Scratch`."""

    engine_state: EngineState


@dataclass
class Scratch:
    """The throwaway bookkeeping of a direct call (no state is kept on any context).

    Attributes:
        engine_state: the call's engine state, dropped with it.
    """

    engine_state: EngineState = field(default_factory=EngineState)


def active_ordered_keys() -> frozenset[str]:
    """The ordered-lock keys this thread is inside now (a nested unit of the same key is not
    sequenced: it would wait for itself forever; docs/coordination.md)."""
    return _active.get()


def _enter_ordered_key(key: str) -> None:
    _active.set(_active.get() | {key})


def _leave_ordered_key(key: str) -> None:
    keys = _active.get()
    if key in keys:
        _active.set(keys - {key})


class Unit:
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
            :class:`Scratch` for a direct call).
        context_id: the id recorded on a period marker.
        on_ticket: called with ``(scope, ticket)`` when a step-level ordered ticket is newly
            assigned (see ``RunState.on_ordered_ticket``).
        step: the step name for a ``Park`` (``None`` at reactor level).
        hooks: the runtime's middleware, told how long a synchronous execution waited for a
            lock or semaphore (docs/observability.md, "Metrics").
        deadline: ``"sync"`` only: the run's deadline (epoch seconds on the storage clock,
            docs/concepts.md, "Run deadlines"): a lock's or a semaphore's wait ends at it, and
            contention once it is reached fails the unit with
            :class:`~reactor.errors.RunDeadlineExceeded` instead of the contention error.
            ``None``: no deadline (a worker parks: its park delay is cut instead).
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
        target: HasState,
        context_id: str | None,
        step: str | None,
        on_ticket: Callable[[str, KeyedTicket], None] | None = None,
        hooks: Hooks = NO_HOOKS,
        deadline: float | None = None,
    ) -> None:
        self.storage = storage
        self.deadline = deadline if mode == "sync" else None
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
        self.held: list[Held] = []
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
        lock = build_client(lambda: Lock(
            self.storage.locks, key,
            owner=entry.holder if entry is not None and entry.holder else self.owner,
            ttl=decl.ttl,
            wait=self._wait(decl.wait),
            auto_extend=decl.auto_extend,
            clock=self.clock, skew=skew_budget(self.storage),
        ))
        if entry is None or not lock.reattach():
            self._acquire("lock", lock.acquire)
        self.held.append(Held(key, lock))

    def _take_semaphore(self, decl: SemaphoreDecl) -> None:
        key = self._key(decl)
        entry = self._parked_entry("semaphore", key)
        semaphore = build_client(lambda: Semaphore(
            self.storage.semaphores, key,
            limit=decl.limit,
            holder=entry.holder if entry is not None and entry.holder else None,
            lease=decl.lease,
            wait=self._wait(decl.wait),
            clock=self.clock, skew=skew_budget(self.storage),
        ))
        if entry is None or not semaphore.reattach():
            self._acquire("semaphore", semaphore.acquire)
        self.held.append(Held(key, semaphore))

    def _wait(self, declared: float) -> float:
        """Seconds a lock or semaphore of this unit may wait: 0 in a worker (it parks), the
        ``declared`` wait cut to end at the run's deadline in a synchronous caller."""
        if self.mode == "worker":
            return 0.0
        return deadline_wait_left(self.deadline, self.storage.now(), declared)

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
        if key in active_ordered_keys():
            # A nested unit on a key this thread already holds in line
            # would wait for itself forever.
            log.warning("event=ordered_lock_nested key=%s scope=%s: not sequenced", key,
                        self.scope)
            return None
        client = build_client(lambda: OrderedLock(
            self.storage.ordered_locks, key, poison_pill_timeout=decl.poison_pill_timeout,
            ttl=decl.ttl, strict=decl.strict, skew=skew_budget(self.storage),
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
        _enter_ordered_key(key)
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
            _leave_ordered_key(self.keys.get("ordered_lock", ""))
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
        deadline = self.deadline
        if deadline is not None and self.storage.now() >= deadline:
            # its wait ended at the run's deadline: the deadline stops the run
            return cut_failure(
                self.context_id or self.owner, deadline,
                f"the wait of {self._where()} for {reason.replace('_', ' ')} {exc.key!r}",
            )
        return Failure(exc, retryable=False)

    def _where(self) -> str:
        """The unit, for messages: ``"the run"`` or ``"step 'name'"``."""
        return "the run" if self.scope == REACTOR_SCOPE else f"step {self.scope!r}"

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
