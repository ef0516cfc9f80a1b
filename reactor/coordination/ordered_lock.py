"""The ordered-lock client: runs go strictly in the order they were enqueued.

Semantics: ``docs/coordination.md`` (table, "Fencing tokens", "Ordered locks in workers"). A
ticket (``OrderedTicket``; its fencing key is ``(epoch, nonce)``) is assigned at
enqueue time; the gate lets a ticket go when it is next after the cursor, drains blockers whose
liveness timer lapsed (the poison pill), fences stragglers of a drained batch by epoch, and in
strict mode makes every ticket after a failed one skip (``skip_chain_failed``). While its turn
runs, the holder re-stamps its timer every ``poison_pill_timeout/3`` under the shared renewal
policy; when the timer is gone or the deadline passes, :attr:`OrderedLock.lost` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from reactor.coordination.heartbeat import Heartbeat
from reactor.errors import LockLost, OrderedLockWaitError
from reactor.model.coordination.renewal import holder_lease, renew_interval
from reactor.model.records import OrderedLockState, OrderedTicket
from reactor.ports.storage import OrderedLockStore

__all__ = ["DEFAULT_POISON_PILL_TIMEOUT", "DEFAULT_TTL", "GateDecision", "OrderedLock"]

#: Seconds after which a silent blocker is considered dead (ruby_reactor: 600).
DEFAULT_POISON_PILL_TIMEOUT = 600.0
#: Seconds an idle ordered lock keeps its state (ruby_reactor: 86400).
DEFAULT_TTL = 86400.0

GateDecision = Literal["go", "skip_chain_failed", "stale_batch", "drained_go"]


class OrderedLock:
    """A handle on one ordered-lock key.

    Args:
        store: the ordered-lock sub-store.
        key: the sequenced key (e.g. ``"account:42"``).
        poison_pill_timeout: seconds before a blocker whose timer stopped is skipped.
        ttl: seconds an idle lock keeps its state.
        strict: after a failure, later tickets skip instead of running.
        skew: the storage's clock-skew budget in seconds; the holder's deadline for its turn
            is ``holder_lease(poison_pill_timeout, skew)`` after its last successful heartbeat.
    """

    def __init__(
        self,
        store: OrderedLockStore,
        key: str,
        *,
        poison_pill_timeout: float = DEFAULT_POISON_PILL_TIMEOUT,
        ttl: float = DEFAULT_TTL,
        strict: bool = True,
        skew: float = 0.0,
    ) -> None:
        if poison_pill_timeout <= 0 or ttl <= 0:
            raise ValueError("poison_pill_timeout and ttl must be > 0 seconds")
        if holder_lease(poison_pill_timeout, skew) <= 0:
            raise ValueError(
                f"poison_pill_timeout ({poison_pill_timeout:g}s) must exceed the storage's "
                f"clock-skew budget ({skew:g}s)"
            )
        self.skew = skew
        self.store = store
        self.key = key
        self.poison_pill_timeout = poison_pill_timeout
        self.ttl = ttl
        self.strict = strict
        self._heartbeat: Heartbeat | None = None
        self._lost: LockLost | None = None

    @property
    def lost(self) -> LockLost | None:
        """The :class:`LockLost` of a turn whose timer is gone (``None`` while it is kept).

        Set when a heartbeat answered ``False`` (the timer was drained as a poison pill, or the
        epoch was fenced) or its deadline passed without a successful re-stamp. No I/O.
        """
        heartbeat = self._heartbeat
        if self._lost is None and heartbeat is not None and heartbeat.expired():
            self._lost = self._loss()
        return self._lost

    def _loss(self) -> LockLost:
        return LockLost(
            f"ordered lock {self.key!r}: the turn's liveness timer was lost; a later ticket "
            "may be running", key=self.key, primitive="ordered_lock",
        )

    def assign(self) -> OrderedTicket:
        """Take the next place in line (call at enqueue time)."""
        return self.store.assign(self.key, ttl=self.ttl)

    def check(self, ticket: OrderedTicket) -> GateDecision:
        """Ask the gate whether ``ticket`` may run now.

        Returns:
            ``go``, ``skip_chain_failed`` (strict mode, an earlier ticket failed),
            ``stale_batch`` (fenced by epoch) or ``drained_go`` (the batch drained; run only a
            genuine straggler).

        Raises:
            OrderedLockWaitError: not yet its turn; ``retry_after`` seconds until re-check.
        """
        gate = self.store.can_proceed(
            self.key, ticket, poison_pill_timeout=self.poison_pill_timeout
        )
        if gate.state == "stale":
            return "stale_batch"
        if gate.state == "drained_go":
            return "drained_go"
        if gate.state == "wait":
            raise OrderedLockWaitError(
                f"ordered lock {self.key!r}: nonce {ticket.nonce} waits for "
                f"{gate.last_completed + 1}",
                key=self.key,
                retry_after=gate.retry_after,
            )
        if self.strict and 0 < gate.first_failed < ticket.nonce:
            return "skip_chain_failed"
        return "go"

    def advance(self, ticket: OrderedTicket, *, failed: bool = False) -> int:
        """Complete ``ticket`` (terminal results only); returns the cursor.

        The advance is retried once on a storage error, as ruby_reactor does.
        """
        try:
            return self.store.advance(self.key, ticket, failed=failed, ttl=self.ttl)
        except Exception:
            return self.store.advance(self.key, ticket, failed=failed, ttl=self.ttl)

    def start_heartbeat(
        self, ticket: OrderedTicket, *, on_lost: Callable[[LockLost], None] | None = None,
        acquired_at: float | None = None,
    ) -> None:
        """Re-stamp ``ticket``'s timer every ``poison_pill_timeout/3`` s (shared scheduler).

        Args:
            ticket: the ticket whose turn it is.
            on_lost: called with a :class:`LockLost` when the timer is lost while held.
            acquired_at: ``time.monotonic()`` before the gate call that gave the turn.
        """
        self.stop_heartbeat()
        self._lost = None

        def report() -> None:
            lost = self._lost = self._lost or self._loss()
            if on_lost is not None:
                on_lost(lost)

        lease = holder_lease(self.poison_pill_timeout, self.skew)
        self._heartbeat = Heartbeat(
            f"ordered-heartbeat:{self.key}",
            renew_interval(lease),
            lambda: self.store.heartbeat(self.key, ticket),
            report,
            lease=lease,
        ).start(time.monotonic() if acquired_at is None else acquired_at)

    def stop_heartbeat(self) -> None:
        """Stop re-stamping, if it runs (a loss detected so far stays in :attr:`lost`)."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
            if heartbeat.lost and self._lost is None:
                self._lost = self._loss()

    def peek(self) -> OrderedLockState:
        """Operators: the current state."""
        return self.store.peek(self.key)

    def skip(self, nonce: int) -> int:
        """Operators: force the cursor to ``nonce``; returns the cursor."""
        return self.store.skip(self.key, nonce)

    def reset(self) -> None:
        """Operators: delete everything, epoch included."""
        self.store.reset(self.key)
