"""Unit tests of the ordered-lock model (docs/protocol.md#ordered-locks).

Epochs: docs/coordination.md#fencing-tokens.
"""

from __future__ import annotations

import pytest

from reactor.model.coordination import ordered_locks as ol
from reactor.model.coordination.fencing import FENCE_RETENTION
from reactor.model.coordination.ordered_locks import OrderedLockRecord, Timed
from reactor.model.records import OrderedGate, OrderedLockState, OrderedTicket

PP = 600.0
TTL = 86_400.0
US = 1_000_000  # one second in microseconds: the clock term of an epoch


def _assign(
    state: OrderedLockRecord | None, now: float, n: int = 1
) -> tuple[OrderedLockRecord | None, list[OrderedTicket]]:
    tickets = []
    for _ in range(n):
        state, ticket = ol.assign(state, now, TTL)
        tickets.append(ticket)
    return state, tickets


def _peek(state: OrderedLockRecord | None, now: float = 0.0) -> OrderedLockState:
    return ol.peek(state, now)


# --- 36 assign -------------------------------------------------------------------------------


def test_36_assign_nonces_epochs_cursor_and_in_flight() -> None:
    s, (t1, t2, t3) = _assign(None, 10.0, 3)
    e = 10 * US  # the first epoch is the clock in microseconds
    assert (t1, t2, t3) == (OrderedTicket(1, e), OrderedTicket(2, e), OrderedTicket(3, e))
    view = _peek(s, 10.0)
    assert view.last_completed == 0
    assert view.next_nonce == 3
    assert view.epoch == e
    assert dict(view.in_flight) == {1: 10.0, 2: 10.0, 3: 10.0}
    assert s is not None and s.cursor == Timed(0, 10.0 + TTL)


def test_36_in_flight_tracks_assigned_nonces() -> None:
    s, _ = _assign(None, 0.0, 2)
    assert sorted(_peek(s).in_flight) == [1, 2]


def test_36_assign_restamps_every_ttl() -> None:
    s, _ = _assign(None, 0.0, 1)
    s, _ = ol.assign(s, 100.0, 50.0)
    assert s is not None
    for item in (s.next_nonce, s.cursor, s.timers, s.epoch):
        assert item is not None and item.expires_at == 150.0


# --- 37 can_proceed --------------------------------------------------------------------------


def test_37_go_at_cursor_plus_one_and_behind_the_cursor() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    s, gate = ol.can_proceed(s, 1.0, t1, PP)
    assert gate == OrderedGate("go", 0.0, 0, 0)
    s, _ = ol.advance(s, 2.0, t1, False, TTL)
    s, gate = ol.can_proceed(s, 3.0, t1, PP)  # a retry of a completed nonce
    assert gate.state == "go"
    assert gate.last_completed == 1


def test_37_wait_ahead_with_retry_after_in_range() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    s, gate = ol.can_proceed(s, 100.0, t2, PP)
    assert gate.state == "wait"
    assert gate.retry_after == pytest.approx(PP - 100.0)
    assert 1 <= gate.retry_after <= PP
    assert gate.last_completed == 0


def test_37_wait_retry_after_floored_at_one() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    _, gate = ol.can_proceed(s, PP - 0.25, t2, PP)
    assert gate.state == "wait"
    assert gate.retry_after == 1.0


def test_37_poison_advance_past_an_expired_blocker() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    s, gate = ol.can_proceed(s, PP + 1, t2, PP)
    assert gate == OrderedGate("poison_advance", 0.0, 1, 0)
    view = _peek(s, PP + 1)
    assert view.last_completed == 1
    assert sorted(view.in_flight) == [2]


def test_37_blocker_exactly_at_the_timeout_is_still_alive() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    _, gate = ol.can_proceed(s, PP, t2, PP)
    assert gate.state == "wait"


def test_37_drains_a_chain_of_expired_blockers_in_one_call() -> None:
    s, tickets = _assign(None, 0.0, 4)
    s, gate = ol.can_proceed(s, PP + 5, tickets[3], PP)
    assert gate.state == "poison_advance"
    assert gate.last_completed == 3


def test_37_stops_draining_at_the_first_fresh_blocker() -> None:
    s, _ = _assign(None, 0.0, 3)  # 1..3 are old
    s, later = _assign(s, 1000.0, 2)  # 4 and 5 are fresh
    s, gate = ol.can_proceed(s, 1000.0 + 1, later[1], PP)
    assert gate.state == "wait"
    assert gate.last_completed == 3
    assert gate.retry_after == pytest.approx(PP - 1)


# --- 38 heartbeat ----------------------------------------------------------------------------


def test_38_gate_check_restamps_own_timer() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    s, gate = ol.can_proceed(s, 500.0, t2, PP)  # t2 is queued behind a live t1
    assert gate.state == "wait"
    assert dict(_peek(s, 500.0).in_flight)[2] == 500.0
    s, (t3,) = _assign(s, 500.0, 1)
    # t1 dies; at 1100 t1 is dead but t2 was restamped at 500, so t3 waits on t2
    s, gate = ol.can_proceed(s, 1100.0, t3, PP)
    assert gate.state == "wait"
    assert gate.last_completed == 1


def test_38_heartbeat_restamps_and_reports() -> None:
    s, (t1,) = _assign(None, 0.0, 1)
    s, ok = ol.heartbeat(s, 42.0, t1)
    assert ok is True
    assert dict(_peek(s, 42.0).in_flight) == {1: 42.0}


def test_38_neither_gate_nor_heartbeat_recreates_a_deleted_timer() -> None:
    s, (t1, _t2, t3) = _assign(None, 0.0, 3)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    s, _ = ol.advance(s, 1.0, t3, False, TTL)  # out of order: deletes t3's timer only
    assert sorted(_peek(s, 1.0).in_flight) == [2]
    s2, ok = ol.heartbeat(s, 2.0, t3)
    assert ok is False
    assert s2 is s
    s3, gate = ol.can_proceed(s, 2.0, t3, PP)
    assert gate.state == "wait"  # t2 is alive
    assert dict(_peek(s3, 2.0).in_flight) == {2: 0.0}


def test_38_heartbeat_with_a_stale_epoch_is_fenced() -> None:
    s, (t1,) = _assign(None, 0.0, 1)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)  # drains the batch
    s, (n1,) = _assign(s, 2.0, 1)
    assert n1 == OrderedTicket(1, 2 * US)
    s2, ok = ol.heartbeat(s, 3.0, t1)
    assert ok is False
    assert s2 is s


# --- 39 advance ------------------------------------------------------------------------------


def test_39_in_order_advance_moves_the_cursor() -> None:
    s, (t1, t2, _t3) = _assign(None, 0.0, 3)
    s, cursor = ol.advance(s, 1.0, t1, False, TTL)
    assert cursor == 1
    s, cursor = ol.advance(s, 1.0, t2, False, TTL)
    assert cursor == 2
    assert sorted(_peek(s, 1.0).in_flight) == [3]


def test_39_out_of_order_advance_is_a_no_op_for_the_cursor() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    s, cursor = ol.advance(s, 1.0, t2, False, TTL)
    assert cursor == 0
    assert _peek(s, 1.0).last_completed == 0


def test_39_full_drain_garbage_collects_and_restarts_with_a_new_epoch() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    s, cursor = ol.advance(s, 1.0, t2, False, TTL)
    assert cursor == 2
    assert _peek(s, 1.0) == OrderedLockState(0, 0, 0, 1, {})
    assert s == OrderedLockRecord(epoch=Timed(1, TTL))  # only the epoch survives
    s, (n1,) = _assign(s, 2.0, 1)
    assert n1 == OrderedTicket(1, 2 * US)
    s, (n2,) = _assign(s, 2.0, 1)  # same batch
    s, _ = ol.skip(s, 2.0, 2)  # drained again within the same microsecond
    s, (m1,) = _assign(s, 2.0, 1)
    assert m1 == OrderedTicket(1, 2 * US + 1)  # previous + 1 beats a clock that stood still
    del n2


# --- 40 failures -----------------------------------------------------------------------------


def test_40_first_failed_is_recorded_and_not_overwritten() -> None:
    s, (t1, t2, t3, _t4) = _assign(None, 0.0, 4)
    s, _ = ol.advance(s, 1.0, t1, True, TTL)
    assert _peek(s, 1.0).first_failed == 1
    s, _ = ol.advance(s, 1.0, t2, True, TTL)
    assert _peek(s, 1.0).first_failed == 1
    s, gate = ol.can_proceed(s, 1.0, t3, PP)
    assert gate.first_failed == 1  # surfaced at the gate


def test_40_first_failed_takes_the_minimum_and_restamps_with_ex_ttl() -> None:
    s, (_t1, t2, t3) = _assign(None, 0.0, 3)
    s, _ = ol.advance(s, 5.0, t3, True, 100.0)  # ahead of the cursor: recorded
    assert _peek(s, 5.0).first_failed == 3
    s, _ = ol.advance(s, 6.0, t2, True, 100.0)
    assert s is not None and s.first_failed == Timed(2, 106.0)


def test_40_success_leaves_the_marker_at_zero() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    assert _peek(s, 1.0).first_failed == 0


def test_40_marker_clears_on_full_drain() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, True, TTL)
    s, _ = ol.advance(s, 1.0, t2, False, TTL)
    assert _peek(s, 1.0).first_failed == 0


def test_40_behind_cursor_duplicate_failure_is_ignored() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    s, cursor = ol.advance(s, 2.0, t1, True, TTL)  # redelivery of a completed nonce
    assert cursor == 1
    assert _peek(s, 2.0).first_failed == 0


# --- 41 robustness ---------------------------------------------------------------------------


def test_41_missing_blocker_timer_is_dead() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    assert s is not None
    s = OrderedLockRecord(s.next_nonce, s.cursor, Timed({2: 0.0}, TTL), None, s.epoch)
    s, gate = ol.can_proceed(s, 1.0, t2, PP)
    assert gate.state == "poison_advance"
    assert gate.last_completed == 1
    del t1


def test_41_timer_at_epoch_zero_is_a_real_timer() -> None:
    s, (_t1, t2) = _assign(None, 0.0, 2)
    _, gate = ol.can_proceed(s, 1.0, t2, PP)
    assert gate.state == "wait"


def test_41_advance_with_next_missing_does_not_gc_live_counters() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    assert s is not None
    s = OrderedLockRecord(None, s.cursor, s.timers, s.first_failed, s.epoch)
    s, cursor = ol.advance(s, 2.0, t2, False, TTL)
    assert cursor == 2
    view = _peek(s, 2.0)
    assert view.last_completed == 2
    assert view.epoch == 1


def test_41_cursor_written_while_absent_inherits_next_expiry() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    assert s is not None
    s = OrderedLockRecord(s.next_nonce, None, s.timers, None, s.epoch)
    s, cursor = ol.advance(s, 1.0, t1, False, TTL)
    assert cursor == 1
    assert s is not None and s.cursor == Timed(1, TTL)


# --- 42 fences -------------------------------------------------------------------------------


def _drained_by_poison() -> tuple[OrderedLockRecord | None, OrderedTicket]:
    s, (t1, t2) = _assign(None, 0.0, 2)  # t1's worker dies
    s, gate = ol.can_proceed(s, PP + 1, t2, PP)
    assert gate.state == "poison_advance"
    s, cursor = ol.advance(s, PP + 2, t2, False, TTL)
    assert cursor == 2
    return s, t1


def test_42_straggler_gate_after_poison_drain_is_drained_go_and_recreates_nothing() -> None:
    s, straggler = _drained_by_poison()
    s2, gate = ol.can_proceed(s, PP + 3, straggler, PP)
    assert gate == OrderedGate("drained_go", 0.0, 0, 0)
    assert s2 is s
    assert s == OrderedLockRecord(epoch=Timed(1, TTL))


def test_42_straggler_advance_including_in_order_nonce_one_is_a_no_op() -> None:
    s, straggler = _drained_by_poison()
    assert straggler.nonce == 1  # in order with respect to a reset cursor of 0
    s2, cursor = ol.advance(s, PP + 3, straggler, False, TTL)
    assert cursor == 0
    assert s2 is s


def test_42_failed_straggler_does_not_poison_the_next_batch() -> None:
    s, straggler = _drained_by_poison()
    s, _ = ol.advance(s, PP + 3, straggler, True, TTL)
    s, (n1, n2) = _assign(s, PP + 4, 2)
    e = int((PP + 4) * US)
    assert (n1, n2) == (OrderedTicket(1, e), OrderedTicket(2, e))
    assert n1.epoch > straggler.epoch
    s, gate = ol.can_proceed(s, PP + 5, n1, PP)
    assert gate == OrderedGate("go", 0.0, 0, 0)
    s, gate = ol.can_proceed(s, PP + 5, n2, PP)
    assert gate.state == "wait"  # the next batch is fully ordered


def test_42_old_epoch_gate_is_stale_and_advance_does_not_touch_the_new_batch() -> None:
    s, straggler = _drained_by_poison()
    s, (n1, _n2) = _assign(s, PP + 4, 2)
    s2, gate = ol.can_proceed(s, PP + 5, straggler, PP)
    assert gate.state == "stale"
    assert s2 is s
    s3, cursor = ol.advance(s, PP + 5, straggler, True, TTL)
    assert cursor == 0
    assert s3 is s
    assert _peek(s3, PP + 5).first_failed == 0
    del n1


def test_42_epoch_zero_is_never_fenced() -> None:
    s, _ = _drained_by_poison()
    s, _ = _assign(s, PP + 4, 2)
    legacy = OrderedTicket(1, 0)
    _, gate = ol.can_proceed(s, PP + 5, legacy, PP)
    assert gate.state == "go"
    s, cursor = ol.advance(s, PP + 5, legacy, False, TTL)
    assert cursor == 1


def test_42_absent_lock_fences_a_ticket_with_an_epoch() -> None:
    _, gate = ol.can_proceed(None, 0.0, OrderedTicket(1, 1), PP)
    assert gate.state == "stale"
    _, gate = ol.can_proceed(None, 0.0, OrderedTicket(1, 0), PP)
    assert gate.state == "drained_go"


# --- 43 skip and TTL preservation ------------------------------------------------------------


def test_43_skip_on_a_drained_batch_is_a_no_op_returning_zero() -> None:
    s, _ = _drained_by_poison()
    assert ol.skip(s, PP + 3, 5) == (s, 0)
    assert ol.skip(None, 0.0, 5) == (None, 0)


def test_43_skip_forces_the_cursor_and_preserves_its_ttl() -> None:
    s, _ = _assign(None, 0.0, 3)
    s, cursor = ol.skip(s, 50.0, 2)
    assert cursor == 2
    assert s is not None and s.cursor == Timed(2, TTL)
    assert sorted(_peek(s, 50.0).in_flight) == [3]


def test_43_skip_behind_the_cursor_keeps_it() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    _, cursor = ol.skip(s, 2.0, 1)
    assert cursor == 1


def test_43_skip_to_next_drains_and_gcs() -> None:
    s, _ = _assign(None, 0.0, 3)
    s, cursor = ol.skip(s, 1.0, 3)
    assert cursor == 3
    assert _peek(s, 1.0) == OrderedLockState(0, 0, 0, 1, {})


def test_43_advance_preserves_the_cursor_ttl() -> None:
    s, (t1, _t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 500.0, t1, False, 5.0)
    assert s is not None and s.cursor == Timed(1, TTL)


# --- reset, peek, expiry ---------------------------------------------------------------------


def test_reset_deletes_everything_but_keeps_the_epoch_as_a_lapsed_fence() -> None:
    s, (old, _) = _assign(None, 5.0, 2)
    s, _ = ol.reset(s, 5.0)
    assert s == OrderedLockRecord(epoch=Timed(old.epoch, 5.0))  # lapsed at the reset
    assert ol.peek(s, 5.0) == OrderedLockState(0, 0, 0, 0, {})
    assert ol.expiry(s) == 5.0 + FENCE_RETENTION
    assert ol.can_proceed(s, 5.0, old, PP)[1].state == "stale"
    _, (t,) = _assign(s, 5.0, 1)  # the clock stood still: previous + 1
    assert t == OrderedTicket(1, old.epoch + 1)
    assert ol.reset(None, 5.0) == (None, None)


def test_peek_of_absent_is_all_zero() -> None:
    assert ol.peek(None, 0.0) == OrderedLockState(0, 0, 0, 0, {})


def test_idle_expiry_restarts_at_nonce_one_with_a_greater_epoch() -> None:
    s, first = ol.assign(None, 0.0, 10.0)
    assert ol.peek(s, 10.0) == OrderedLockState(0, 0, 0, 0, {})
    _, t = ol.assign(s, 10.0, 10.0)
    assert t == OrderedTicket(1, 10 * US)
    assert t.epoch > first.epoch
    s = OrderedLockRecord(epoch=Timed(50 * US, 1.0))  # an epoch issued by a clock running ahead
    _, t = ol.assign(s, 12.0, 10.0)
    assert t == OrderedTicket(1, 50 * US + 1)


def test_a_lapsed_epoch_beside_live_fields_is_kept_and_superseded() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    assert s is not None and s.epoch is not None
    s = OrderedLockRecord(s.next_nonce, s.cursor, s.timers, None, Timed(s.epoch.value, 1.0))
    s2, gate = ol.can_proceed(s, 2.0, OrderedTicket(1, 0), PP)  # restamps t1's timer
    assert gate.state == "go"
    assert s2 is not None and s2.epoch == Timed(t1.epoch, 1.0)  # the fence survives the write
    s3, t3 = ol.assign(s2, 2.0, TTL)  # nonce 3 with no live epoch starts a new one
    assert t3 == OrderedTicket(3, 2 * US)
    assert s3 is not None and s3.epoch == Timed(2 * US, 2.0 + TTL)
    del t2


def test_fresh_batch_drops_a_leftover_first_failed() -> None:
    # first_failed (EX ttl at advance time) outlives the idle batch it poisoned
    s = OrderedLockRecord(
        next_nonce=Timed(2, 60.0),
        cursor=Timed(0, 60.0),
        timers=Timed({1: 0.0}, 60.0),
        first_failed=Timed(2, 150.0),
        epoch=Timed(1, 60.0),
    )
    assert _peek(s, 70.0).first_failed == 2
    s2, ticket = ol.assign(s, 70.0, TTL)
    assert ticket == OrderedTicket(1, 70 * US)
    assert _peek(s2, 70.0).first_failed == 0


def test_expiry_is_the_longest_lived_field_plus_the_fence_retention() -> None:
    record = OrderedLockRecord(epoch=Timed(3, 500.0), first_failed=Timed(1, 100.0))
    assert ol.expiry(record) == 500.0 + FENCE_RETENTION
    assert ol.expiry(OrderedLockRecord(epoch=Timed(3, None))) is None
    assert ol.expiry(OrderedLockRecord()) is None


def test_no_op_calls_return_an_equal_state() -> None:
    s, (t1, t2) = _assign(None, 0.0, 2)
    s, _ = ol.advance(s, 1.0, t1, False, TTL)
    assert ol.can_proceed(s, 2.0, t1, PP)[0] == s  # behind the cursor: nothing to restamp
    assert ol.advance(s, 2.0, t1, False, TTL)[0] == s  # a duplicate advance
    assert ol.heartbeat(s, 2.0, t1)[0] == s
    del t2


def test_invalid_ttl_raises() -> None:
    with pytest.raises(ValueError):
        ol.assign(None, 0.0, 0)
