"""The ordered-lock client: runs go strictly in the order they were enqueued.

Semantics: storage-protocol.md §2.12. A ticket ``(nonce, epoch)`` is assigned at enqueue time;
the gate lets a ticket go when it is next after the cursor, drains blockers whose liveness timer
lapsed (the poison pill), fences stragglers of a drained batch by epoch, and in strict mode makes
every ticket after a failed one skip (``skip_chain_failed``).
"""

from __future__ import annotations

from typing import Literal

from reactor.coordination._heartbeat import Heartbeat
from reactor.model.errors import OrderedLockWaitError
from reactor.ports.records import OrderedLockState, OrderedTicket
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
    """

    def __init__(
        self,
        store: OrderedLockStore,
        key: str,
        *,
        poison_pill_timeout: float = DEFAULT_POISON_PILL_TIMEOUT,
        ttl: float = DEFAULT_TTL,
        strict: bool = True,
    ) -> None:
        if poison_pill_timeout <= 0 or ttl <= 0:
            raise ValueError("poison_pill_timeout and ttl must be > 0 seconds")
        self.store = store
        self.key = key
        self.poison_pill_timeout = poison_pill_timeout
        self.ttl = ttl
        self.strict = strict
        self._heartbeat: Heartbeat | None = None

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

    def start_heartbeat(self, ticket: OrderedTicket) -> None:
        """Restamp ``ticket``'s timer every ``max(poison_pill_timeout/3, 1)`` s from a thread."""
        self.stop_heartbeat()
        self._heartbeat = Heartbeat(
            f"ordered-heartbeat:{self.key}",
            max(self.poison_pill_timeout / 3.0, 1.0),
            lambda: self.store.heartbeat(self.key, ticket),
        ).start()

    def stop_heartbeat(self) -> None:
        """Stop the heartbeat thread, if any."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()

    def peek(self) -> OrderedLockState:
        """Operators: the current state."""
        return self.store.peek(self.key)

    def skip(self, nonce: int) -> int:
        """Operators: force the cursor to ``nonce``; returns the cursor."""
        return self.store.skip(self.key, nonce)

    def reset(self) -> None:
        """Operators: delete everything, epoch included."""
        self.store.reset(self.key)
