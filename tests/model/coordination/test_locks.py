"""Unit tests of the pure lock model (docs/protocol.md#locks;
docs/coordination.md#fencing-tokens)."""

from __future__ import annotations

import pytest

from reactor.model.coordination import locks
from reactor.model.coordination.fencing import FENCE_RETENTION
from reactor.model.coordination.locks import LockState
from reactor.model.records import LockInfo

US = 1_000_000  # one second in microseconds: the clock term of a token


def test_acquire_absent_creates_count_one_with_ttl() -> None:
    state, token = locks.acquire(None, 100.0, "a", 30)
    assert token == 100 * US
    assert state == LockState("a", 1, 130.0, 100 * US)


def test_reentrant_acquire_counts_and_resets_ttl() -> None:
    state, first = locks.acquire(None, 100.0, "a", 30)
    state, token = locks.acquire(state, 110.0, "a", 5)
    assert token == first  # re-entry keeps the token
    assert state == LockState("a", 2, 115.0, first)


def test_other_owner_is_refused_and_state_untouched() -> None:
    state, _ = locks.acquire(None, 0.0, "a", 60)
    new, token = locks.acquire(state, 1.0, "b", 60)
    assert token == 0
    assert new is state


def test_item_26_reentrancy_sequence() -> None:
    s, token = locks.acquire(None, 0.0, "a", 60)
    assert token == 1  # the clock reads 0 µs: previous (0) + 1 wins
    s, _ = locks.acquire(s, 0.0, "a", 60)
    assert locks.acquire(s, 0.0, "b", 60)[1] == 0
    assert locks.info(s, 0.0) == LockInfo("a", 2, 60.0, 1)
    s, ok = locks.release(s, 1.0, "b")
    assert ok is False
    s, ok = locks.release(s, 1.0, "a")
    assert ok is True
    assert locks.held(s, 1.0) is True
    assert locks.info(s, 1.0) == LockInfo("a", 1, 60.0, 1)  # release never touches the TTL
    s, ok = locks.release(s, 2.0, "a")
    assert ok is True
    assert s == LockState(None, 0, 2.0, 1)  # a tombstone keeps the token
    assert locks.info(s, 2.0) is None
    assert locks.held(s, 2.0) is False
    assert locks.release(s, 2.0, "a") == (s, False)
    assert locks.extend(s, 2.0, "a", 10) == (s, False)


def test_release_absent_is_false() -> None:
    assert locks.release(None, 0.0, "a") == (None, False)


def test_item_27_expiry_frees_the_lock_for_another_owner() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 1)
    assert locks.held(s, 0.999) is True
    assert locks.held(s, 1.0) is False  # expires_at <= now is absent
    assert locks.info(s, 1.2) is None
    s, token = locks.acquire(s, 1.2, "b", 10)
    assert token == 1_200_000
    assert s == LockState("b", 1, 11.2, 1_200_000)


def test_expired_lock_restarts_count_for_same_owner() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 1)
    s, _ = locks.acquire(s, 0.5, "a", 1)
    s, token = locks.acquire(s, 2.0, "a", 1)
    assert token == 2 * US  # a lapsed lock is a fresh acquisition, even by its last owner
    assert s is not None and s.count == 1


def test_release_and_extend_of_expired_lock_are_false() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 1)
    assert locks.release(s, 1.0, "a") == (s, False)
    assert locks.extend(s, 5.0, "a", 10) == (s, False)


def test_extend_sets_remaining_ttl_never_adds() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 60)
    s, _ = locks.acquire(s, 0.0, "a", 60)
    s, ok = locks.extend(s, 50.0, "a", 120)
    assert ok is True
    assert s == LockState("a", 2, 170.0, 1)  # 50 + 120, not 60 + 120; count and token kept
    s, ok = locks.extend(s, 60.0, "a", 5)
    assert s is not None and s.expires_at == 65.0  # shortening works too


def test_extend_by_stranger_is_refused() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 60)
    assert locks.extend(s, 1.0, "b", 120) == (s, False)


def test_ttl_none_never_expires_and_extend_none_persists() -> None:
    s, _ = locks.acquire(None, 0.0, "a", None)
    assert s is not None and s.expires_at is None
    assert locks.held(s, 1e12) is True
    s, _ = locks.acquire(None, 0.0, "b", 5)
    s, _ = locks.extend(s, 1.0, "b", None)
    assert locks.held(s, 1e12) is True


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan")])
def test_invalid_ttl_is_rejected(ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        locks.acquire(None, 0.0, "a", ttl)
    with pytest.raises(ValueError, match="ttl"):
        locks.extend(LockState("a", 1, None), 0.0, "a", ttl)


def test_expiry_is_the_lock_expiry_plus_the_fence_retention() -> None:
    assert locks.expiry(LockState("a", 1, 5.0)) == 5.0 + FENCE_RETENTION
    assert locks.expiry(LockState(None, 0, 7.0, 3)) == 7.0 + FENCE_RETENTION
    assert locks.expiry(LockState("a", 1, None)) is None


def test_tokens_grow_across_owners_release_and_lapse() -> None:
    s, t1 = locks.acquire(None, 10.0, "a", 5)
    s, ok = locks.release(s, 10.0, "a")
    assert ok is True
    s, t2 = locks.acquire(s, 10.0, "b", 5)  # same microsecond: previous + 1
    assert t2 == t1 + 1
    s, t3 = locks.acquire(s, 16.0, "c", 5)  # b lapsed at 15: the clock term wins
    assert t3 == 16 * US > t2
    s, t4 = locks.acquire(s, 16.0, "c", 5)
    assert t4 == t3
    assert locks.info(s, 16.0) == LockInfo("c", 2, 21.0, t3)


def test_a_token_ahead_of_the_clock_still_grows() -> None:
    ahead = LockState(None, 0, 1.0, 50 * US)  # issued by a clock that ran ahead
    s, token = locks.acquire(ahead, 2.0, "a", 5)
    assert token == 50 * US + 1
    assert s == LockState("a", 1, 7.0, 50 * US + 1)


def test_a_legacy_record_without_token_counts_as_token_zero() -> None:
    s, token = locks.acquire(LockState("a", 1, 1.0), 2.0, "b", 5)
    assert token == 2 * US
    s, token = locks.acquire(LockState("a", 1, 9.0), 2.0, "a", 5)  # a legacy holder re-enters
    assert token == 2 * US
    assert s == LockState("a", 2, 7.0, 2 * US)


def test_a_token_past_2_to_the_53_is_refused() -> None:
    with pytest.raises(ValueError, match="2\\*\\*53"):
        locks.acquire(LockState(None, 0, 1.0, 2**53 - 1), 2.0, "a", 5)
