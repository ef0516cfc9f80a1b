"""Ordered locks (docs/protocol.md#ordered-locks): nonces, poison pill, epochs, GC.

A blocker is made "dead" with ``probe.expire("ordered_lock", key, member=str(nonce))``, which
ages its liveness timer past any poison-pill timeout, so no test waits for a timeout.

Epochs increase forever (docs/coordination.md#fencing-tokens): a new batch's epoch is greater
than every earlier epoch of the key, across a full drain, idle expiry, ``reset`` and the
record's garbage collection (``probe.expire(..., FENCE)``), and a ticket's ``fencing_key``
``(epoch, nonce)`` orders every ticket ever issued for a key.
"""

from __future__ import annotations

import math

import pytest

from reactor.model.coordination.fencing import FENCE_RETENTION, MAX_FENCE
from reactor.model.records import OrderedTicket
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, teach, uid
from reactor_contract.probe import FENCE, Probe

__all__ = ["OrderedLocksContract"]

PP = 600.0  # the poison-pill timeout used throughout (the Ruby client's default)
TTL = 24 * HOUR


class OrderedLocksContract:
    """:class:`reactor.ports.OrderedLockStore` behaviour every adapter must show."""

    reactor_concern = "ordered_locks"

    def _tickets(self, storage: Storage, key: str, n: int) -> list[OrderedTicket]:
        return [storage.ordered_locks.assign(key, ttl=TTL) for _ in range(n)]

    # -- assign (36) ----------------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-1")
    def test_assign_hands_out_consecutive_nonces_in_one_epoch(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2, t3 = self._tickets(storage, key, 3)
        assert [t.nonce for t in (t1, t2, t3)] == [1, 2, 3]
        assert t1.epoch >= 1 and t1.epoch == t2.epoch == t3.epoch
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.first_failed) == (3, 0, 0)
        assert state.epoch == t1.epoch
        assert sorted(state.in_flight) == [1, 2, 3]

    @pytest.mark.obligations("O-ordered_locks-21")
    def test_keys_are_independent(self, storage: Storage) -> None:
        a, b = uid("ol"), uid("ol")
        self._tickets(storage, a, 2)
        assert storage.ordered_locks.assign(b, ttl=TTL).nonce == 1

    @pytest.mark.obligations("O-ordered_locks-20")
    def test_peek_of_an_unused_key_is_all_zeros(self, storage: Storage) -> None:
        state = storage.ordered_locks.peek(uid("ol"))
        assert (state.next_nonce, state.last_completed, state.first_failed, state.epoch) == (
            0,
            0,
            0,
            0,
        )
        assert dict(state.in_flight) == {}

    # -- can_proceed (37) ---------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-8", "O-ordered_locks-10", "O-ordered_locks-13")
    def test_go_in_order_wait_ahead(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2, _t3 = self._tickets(storage, key, 3)
        gate = storage.ordered_locks.can_proceed(key, t1, poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed, gate.first_failed) == ("go", 0, 0)
        waiting = storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP)
        assert waiting.state == "wait" and waiting.last_completed == 0
        assert 1 <= waiting.retry_after <= PP
        assert storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL) == 1
        assert storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP).state == "go"
        assert storage.ordered_locks.can_proceed(key, t1, poison_pill_timeout=PP).state == "go"

    @pytest.mark.obligations("O-ordered_locks-9")
    def test_a_dead_blocker_is_poison_advanced(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        _t1, t2, _t3 = self._tickets(storage, key, 3)
        probe.expire("ordered_lock", key, "1")
        gate = storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed) == ("poison_advance", 1)
        assert storage.ordered_locks.peek(key).last_completed == 1
        assert 1 not in storage.ordered_locks.peek(key).in_flight

    @pytest.mark.obligations("O-ordered_locks-9")
    def test_a_chain_of_dead_blockers_drains_in_one_call(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("ol")
        tickets = self._tickets(storage, key, 3)
        probe.expire("ordered_lock", key, "1")
        probe.expire("ordered_lock", key, "2")
        gate = storage.ordered_locks.can_proceed(key, tickets[2], poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed) == ("poison_advance", 2)

    @pytest.mark.obligations("O-ordered_locks-9", "O-ordered_locks-10")
    def test_draining_stops_at_the_first_fresh_blocker(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("ol")
        tickets = self._tickets(storage, key, 5)
        for nonce in ("1", "2", "3"):
            probe.expire("ordered_lock", key, nonce)
        gate = storage.ordered_locks.can_proceed(key, tickets[4], poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed) == ("wait", 3)
        assert 1 <= gate.retry_after <= PP

    @pytest.mark.obligations("O-ordered_locks-9", "O-ordered_locks-13", "O-ordered_locks-14")
    def test_a_missing_timer_counts_as_dead(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2, t3 = self._tickets(storage, key, 3)
        assert storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL) == 0
        assert storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL) == 1
        gate = storage.ordered_locks.can_proceed(key, t3, poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed) == ("poison_advance", 2)

    # -- heartbeat (38) -------------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-11", "O-ordered_locks-9")
    def test_the_gate_restamps_the_callers_own_timer(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        _t1, t2, t3 = self._tickets(storage, key, 3)
        probe.expire("ordered_lock", key, "1")
        probe.expire("ordered_lock", key, "2")
        gate = storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP)
        assert gate.state == "poison_advance"
        # t2's own (aged) timer was restamped by its gate: t3 must wait for it.
        assert storage.ordered_locks.can_proceed(key, t3, poison_pill_timeout=PP).state == "wait"

    @pytest.mark.obligations("O-ordered_locks-12")
    def test_heartbeat_restamps_a_live_timer(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        _t1, t2, t3 = self._tickets(storage, key, 3)
        probe.expire("ordered_lock", key, "1")
        probe.expire("ordered_lock", key, "2")
        assert storage.ordered_locks.heartbeat(key, t2) is True
        gate = storage.ordered_locks.can_proceed(key, t3, poison_pill_timeout=PP)
        assert (gate.state, gate.last_completed) == ("wait", 1)

    @pytest.mark.obligations("O-ordered_locks-12", "O-ordered_locks-14")
    def test_nothing_recreates_a_deleted_timer(self, storage: Storage) -> None:
        key = uid("ol")
        _t1, t2, _t3 = self._tickets(storage, key, 3)
        storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL)
        assert storage.ordered_locks.heartbeat(key, t2) is False
        assert storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP).state == "wait"
        assert 2 not in storage.ordered_locks.peek(key).in_flight

    @pytest.mark.obligations("O-ordered_locks-12")
    def test_a_stale_heartbeat_is_refused(self, storage: Storage) -> None:
        key = uid("ol")
        t1 = storage.ordered_locks.assign(key, ttl=TTL)
        stale = OrderedTicket(nonce=t1.nonce, epoch=t1.epoch + 1)
        assert storage.ordered_locks.heartbeat(key, stale) is False

    # -- advance (39) ---------------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-14")
    def test_out_of_order_advance_is_a_no_op(self, storage: Storage) -> None:
        key = uid("ol")
        _t1, t2, _t3 = self._tickets(storage, key, 3)
        assert storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL) == 0
        assert storage.ordered_locks.peek(key).last_completed == 0

    @pytest.mark.obligations("O-ordered_locks-2")
    def test_a_nonce_is_never_handed_out_twice(self, storage: Storage) -> None:
        # Out-of-order completions drop their timers but not their nonces: the next waiters
        # get nonces after every one handed out, never one a waiter already holds or ran.
        key = uid("ol")
        tickets = [storage.ordered_locks.assign(key, ttl=HOUR) for _ in range(4)]
        for done in (tickets[3], tickets[2]):
            storage.ordered_locks.advance(key, done, failed=False, ttl=HOUR)
        tickets += [storage.ordered_locks.assign(key, ttl=HOUR) for _ in range(2)]
        handed = [(t.epoch, t.nonce) for t in tickets]
        assert [t.nonce for t in tickets] == [1, 2, 3, 4, 5, 6] and len(set(handed)) == 6, teach(
            "ordered_locks",
            "assign hands every waiter a nonce after every nonce already handed out in the "
            f"batch, even after out-of-order completions dropped their timers: got {handed} "
            "(epoch, nonce); two waiters with one ticket both run as its turn",
            "a nonce derived from what is live (the cursor plus the live timers) instead of "
            "a counter of the nonces handed out (next)",
            'docs/protocol.md, "Ordered locks"',
        )

    @pytest.mark.obligations("O-ordered_locks-16", "O-ordered_locks-13", "O-ordered_locks-20")
    def test_a_full_drain_collects_the_batch_and_bumps_the_epoch(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2 = self._tickets(storage, key, 2)
        assert storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL) == 1
        assert storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL) == 2
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.first_failed) == (0, 0, 0)
        assert dict(state.in_flight) == {}
        fresh = storage.ordered_locks.assign(key, ttl=TTL)
        assert fresh.nonce == 1 and fresh.epoch > t1.epoch

    # -- failures (40) --------------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-15")
    def test_the_first_failed_nonce_is_recorded_and_kept(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2, t3, t4 = self._tickets(storage, key, 4)
        storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL)
        assert storage.ordered_locks.peek(key).first_failed == 0
        storage.ordered_locks.advance(key, t3, failed=True, ttl=TTL)
        assert storage.ordered_locks.peek(key).first_failed == 3
        storage.ordered_locks.advance(key, t4, failed=True, ttl=TTL)
        assert storage.ordered_locks.peek(key).first_failed == 3
        storage.ordered_locks.advance(key, t2, failed=True, ttl=TTL)
        assert storage.ordered_locks.peek(key).first_failed == 2
        gate = storage.ordered_locks.can_proceed(key, t3, poison_pill_timeout=PP)
        assert gate.first_failed == 2

    @pytest.mark.obligations("O-ordered_locks-15")
    def test_a_behind_cursor_failure_is_ignored(self, storage: Storage) -> None:
        key = uid("ol")
        t1, _t2 = self._tickets(storage, key, 2)
        storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL)
        assert storage.ordered_locks.advance(key, t1, failed=True, ttl=TTL) == 1
        assert storage.ordered_locks.peek(key).first_failed == 0

    @pytest.mark.obligations("O-ordered_locks-16")
    def test_the_failure_marker_clears_on_a_full_drain(self, storage: Storage) -> None:
        key = uid("ol")
        t1, t2 = self._tickets(storage, key, 2)
        storage.ordered_locks.advance(key, t1, failed=True, ttl=TTL)
        storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL)
        assert storage.ordered_locks.peek(key).first_failed == 0
        t1b = storage.ordered_locks.assign(key, ttl=TTL)
        assert storage.ordered_locks.can_proceed(key, t1b, poison_pill_timeout=PP).first_failed == 0

    # -- fences (42) ----------------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-6", "O-ordered_locks-17", "O-ordered_locks-4")
    def test_old_epochs_are_fenced(self, storage: Storage) -> None:
        key = uid("ol")
        old = storage.ordered_locks.assign(key, ttl=TTL)
        storage.ordered_locks.advance(key, old, failed=False, ttl=TTL)
        new1, new2 = self._tickets(storage, key, 2)
        assert new1.epoch > old.epoch
        assert storage.ordered_locks.can_proceed(key, old, poison_pill_timeout=PP).state == "stale"
        assert storage.ordered_locks.advance(key, old, failed=True, ttl=TTL) == 0
        assert storage.ordered_locks.peek(key).first_failed == 0
        assert storage.ordered_locks.can_proceed(key, new1, poison_pill_timeout=PP).state == "go"
        assert storage.ordered_locks.can_proceed(key, new2, poison_pill_timeout=PP).state == "wait"

    @pytest.mark.obligations("O-ordered_locks-6")
    def test_epoch_zero_is_never_fenced(self, storage: Storage) -> None:
        key = uid("ol")
        storage.ordered_locks.assign(key, ttl=TTL)
        legacy = OrderedTicket(nonce=1, epoch=0)
        assert storage.ordered_locks.can_proceed(key, legacy, poison_pill_timeout=PP).state == "go"

    @pytest.mark.obligations("O-ordered_locks-7", "O-ordered_locks-17", "O-ordered_locks-16")
    def test_a_straggler_of_a_drained_batch_recreates_nothing(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("ol")
        t1, t2 = self._tickets(storage, key, 2)
        probe.expire("ordered_lock", key, "1")
        assert storage.ordered_locks.can_proceed(key, t2, poison_pill_timeout=PP).state == (
            "poison_advance"
        )
        assert storage.ordered_locks.advance(key, t2, failed=False, ttl=TTL) == 2
        gate = storage.ordered_locks.can_proceed(key, t1, poison_pill_timeout=PP)
        assert gate.state == "drained_go"
        assert storage.ordered_locks.advance(key, t1, failed=True, ttl=TTL) == 0
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.first_failed) == (0, 0, 0)
        n1, n2 = self._tickets(storage, key, 2)
        assert n1.nonce == 1 and n1.epoch > t1.epoch
        assert storage.ordered_locks.can_proceed(key, n1, poison_pill_timeout=PP).state == "go"
        gate = storage.ordered_locks.can_proceed(key, n2, poison_pill_timeout=PP)
        assert (gate.state, gate.first_failed) == ("wait", 0)

    # -- skip and reset (43) --------------------------------------------------------------------

    @pytest.mark.obligations("O-ordered_locks-18")
    def test_skip_on_a_drained_lock_is_a_no_op(self, storage: Storage) -> None:
        key = uid("ol")
        assert storage.ordered_locks.skip(key, 5) == 0
        t1 = storage.ordered_locks.assign(key, ttl=TTL)
        storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL)
        assert storage.ordered_locks.skip(key, 5) == 0
        assert storage.ordered_locks.peek(key).next_nonce == 0

    @pytest.mark.obligations("O-ordered_locks-18")
    def test_skip_forces_the_cursor_and_keeps_its_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        tickets = self._tickets(storage, key, 4)
        probe.expire("ordered_lock", key, "cursor", after=500)
        assert storage.ordered_locks.skip(key, 2) == 2
        assert_ttl(probe.ttl("ordered_lock", key, "cursor"), 500)
        assert storage.ordered_locks.can_proceed(key, tickets[2], poison_pill_timeout=PP).state == (
            "go"
        )
        assert storage.ordered_locks.skip(key, 1) == 2

    @pytest.mark.obligations("O-ordered_locks-13")
    def test_advance_keeps_the_cursor_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        t1, _t2 = self._tickets(storage, key, 2)
        probe.expire("ordered_lock", key, "cursor", after=500)
        storage.ordered_locks.advance(key, t1, failed=False, ttl=TTL)
        assert_ttl(probe.ttl("ordered_lock", key, "cursor"), 500)

    @pytest.mark.obligations("O-ordered_locks-18", "O-ordered_locks-16")
    def test_skip_to_the_end_drains(self, storage: Storage) -> None:
        key = uid("ol")
        t1, _t2, _t3 = self._tickets(storage, key, 3)
        assert storage.ordered_locks.skip(key, 3) == 3
        assert storage.ordered_locks.peek(key).next_nonce == 0
        assert storage.ordered_locks.assign(key, ttl=TTL).epoch > t1.epoch

    @pytest.mark.obligations("O-ordered_locks-19", "O-ordered_locks-6", "O-ordered_locks-20")
    def test_reset_deletes_everything_including_the_epoch(self, storage: Storage) -> None:
        key = uid("ol")
        old, _ = self._tickets(storage, key, 2)
        storage.ordered_locks.reset(key)
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.epoch) == (0, 0, 0)
        assert storage.ordered_locks.can_proceed(key, old, poison_pill_timeout=PP).state == (
            "stale"
        )
        fresh = storage.ordered_locks.assign(key, ttl=TTL)
        assert fresh.nonce == 1 and fresh.epoch > old.epoch

    @pytest.mark.obligations("O-ordered_locks-3")
    def test_assign_stamps_the_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        storage.ordered_locks.assign(key, ttl=HOUR)
        assert_ttl(probe.ttl("ordered_lock", key, "cursor"), HOUR)
        assert_ttl(probe.ttl("ordered_lock", key, "epoch"), HOUR)

    @pytest.mark.obligations("O-ordered_locks-22", "O-ordered_locks-20")
    def test_an_idle_lock_expires_whole(self, storage: Storage, probe: Probe) -> None:
        key = uid("ol")
        self._tickets(storage, key, 2)
        probe.expire("ordered_lock", key)
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.epoch) == (0, 0, 0)
        assert dict(state.in_flight) == {}
        assert storage.ordered_locks.assign(key, ttl=TTL).nonce == 1

    # -- epochs increase forever (docs/coordination.md#fencing-tokens) --------------------------

    @pytest.mark.obligations("O-ordered_locks-4", "O-ordered_locks-6", "O-ordered_locks-22")
    def test_epochs_increase_across_idle_expiry(self, storage: Storage, probe: Probe) -> None:
        """After every ordered-lock field lapsed, the next batch's epoch is greater and the old
        batch's tickets are fenced."""
        key = uid("ol")
        old, _ = self._tickets(storage, key, 2)
        probe.expire("ordered_lock", key)
        assert storage.ordered_locks.peek(key).epoch == 0
        fresh = storage.ordered_locks.assign(key, ttl=TTL)
        assert fresh.nonce == 1 and fresh.epoch > old.epoch
        assert storage.ordered_locks.can_proceed(key, old, poison_pill_timeout=PP).state == (
            "stale"
        )
        assert storage.ordered_locks.can_proceed(key, fresh, poison_pill_timeout=PP).state == "go"
        for member in ("next", "cursor", "timers", "first_failed", "epoch"):
            probe.expire("ordered_lock", key, member)
        again = storage.ordered_locks.assign(key, ttl=TTL)
        assert again.nonce == 1 and again.epoch > fresh.epoch

    @pytest.mark.obligations("O-ordered_locks-4", "O-ordered_locks-19")
    def test_epochs_increase_across_reset(self, storage: Storage) -> None:
        """``reset`` deletes the line, yet the next batch's epoch is greater than every earlier
        one, also when reset is called repeatedly; epochs are ints below 2**53."""
        key = uid("ol")
        epochs = [storage.ordered_locks.assign(key, ttl=TTL).epoch]
        for _ in range(3):
            storage.ordered_locks.reset(key)
            assert storage.ordered_locks.peek(key).epoch == 0
            epochs.append(storage.ordered_locks.assign(key, ttl=TTL).epoch)
        storage.ordered_locks.reset(key)
        storage.ordered_locks.reset(key)
        epochs.append(storage.ordered_locks.assign(key, ttl=TTL).epoch)
        assert epochs == sorted(set(epochs)), f"epochs must strictly increase: {epochs}"
        assert all(type(e) is int and 1 <= e <= MAX_FENCE for e in epochs)

    @pytest.mark.obligations("O-ordered_locks-4")
    def test_epochs_increase_after_the_record_is_collected(
        self, storage: Storage, probe: Probe
    ) -> None:
        """Once garbage collection removed the whole record (the retained epoch included), the
        clock term of the next epoch still exceeds every earlier one (the clock moved on)."""
        key = uid("ol")
        first = storage.ordered_locks.assign(key, ttl=TTL)
        probe.expire("ordered_lock", key, FENCE)
        second = storage.ordered_locks.assign(key, ttl=TTL)
        storage.ordered_locks.reset(key)
        probe.expire("ordered_lock", key, FENCE)
        third = storage.ordered_locks.assign(key, ttl=TTL)
        assert (second.nonce, third.nonce) == (1, 1)
        assert first.epoch < second.epoch < third.epoch

    @pytest.mark.obligations("O-ordered_locks-5")
    def test_fencing_keys_order_every_ticket_of_a_key(self, storage: Storage, probe: Probe) -> None:
        """``OrderedTicket.fencing_key`` is ``(epoch, nonce)`` and grows with every ticket issued
        for a key: within a batch, across a drain, idle expiry and reset."""
        key = uid("ol")
        issued = self._tickets(storage, key, 3)
        for ticket in issued:
            assert storage.ordered_locks.advance(key, ticket, failed=False, ttl=TTL) >= 1
        issued += self._tickets(storage, key, 2)
        probe.expire("ordered_lock", key)
        issued += self._tickets(storage, key, 2)
        storage.ordered_locks.reset(key)
        issued += self._tickets(storage, key, 1)
        keys = [ticket.fencing_key for ticket in issued]
        assert keys == [(t.epoch, t.nonce) for t in issued]
        assert keys == sorted(set(keys)), f"fencing keys must strictly increase: {keys}"

    @pytest.mark.obligations("O-ordered_locks-23")
    def test_a_reset_or_idle_line_is_collected_after_the_fence_retention(
        self, storage: Storage, probe: Probe
    ) -> None:
        """No permanent state per key: after ``reset`` the stored record lives at most
        ``FENCE_RETENTION`` seconds; after idle expiry likewise."""
        key = uid("ol")
        self._tickets(storage, key, 2)
        storage.ordered_locks.reset(key)
        assert_ttl(probe.ttl("ordered_lock", key, FENCE), FENCE_RETENTION, slack=2.0)
        other = uid("ol")
        self._tickets(storage, other, 2)
        probe.expire("ordered_lock", other)
        assert_ttl(probe.ttl("ordered_lock", other, FENCE), FENCE_RETENTION, slack=2.0)

    @pytest.mark.obligations("O-ordered_locks-24")
    def test_a_ttl_that_is_not_positive_and_finite_is_refused(self, storage: Storage) -> None:
        """assign and advance refuse a TTL of 0, a negative, infinite or NaN one with
        ``ValueError`` and change nothing (docs/protocol.md, "Conventions")."""
        key = uid("ol")
        for ttl in (0, 0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                storage.ordered_locks.assign(key, ttl=ttl)
        assert storage.ordered_locks.peek(key).next_nonce == 0, teach(
            "ordered_locks",
            "an assign with a TTL that is not a positive finite number raises ValueError and "
            "hands out no ticket",
            "a TTL of 0 or a negative one sent to the backend instead of checked first",
            'docs/protocol.md, "Conventions"',
        )
        t1, _t2 = self._tickets(storage, key, 2)
        for ttl in (0, 0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                storage.ordered_locks.advance(key, t1, failed=True, ttl=ttl)
        state = storage.ordered_locks.peek(key)
        assert (state.next_nonce, state.last_completed, state.first_failed) == (2, 0, 0)


class TestOrderedLocks(OrderedLocksContract):
    """The ordered-locks contract against ``--reactor-storage``."""
