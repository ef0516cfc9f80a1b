"""Unit tests of the pure lock model (storage-protocol.md §2.8, §4.2 items 26-27)."""

from __future__ import annotations

import pytest

from reactor.model.coordination import locks
from reactor.model.coordination.locks import LockState
from reactor.ports.records import LockInfo


def test_acquire_absent_creates_count_one_with_ttl() -> None:
    state, ok = locks.acquire(None, 100.0, "a", 30)
    assert ok is True
    assert state == LockState("a", 1, 130.0)


def test_reentrant_acquire_counts_and_resets_ttl() -> None:
    state, _ = locks.acquire(None, 100.0, "a", 30)
    state, ok = locks.acquire(state, 110.0, "a", 5)
    assert ok is True
    assert state == LockState("a", 2, 115.0)


def test_other_owner_is_refused_and_state_untouched() -> None:
    state, _ = locks.acquire(None, 0.0, "a", 60)
    new, ok = locks.acquire(state, 1.0, "b", 60)
    assert ok is False
    assert new is state


def test_item_26_reentrancy_sequence() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 60)
    s, _ = locks.acquire(s, 0.0, "a", 60)
    assert locks.acquire(s, 0.0, "b", 60)[1] is False
    assert locks.info(s, 0.0) == LockInfo("a", 2, 60.0)
    s, ok = locks.release(s, 1.0, "b")
    assert ok is False
    s, ok = locks.release(s, 1.0, "a")
    assert ok is True
    assert locks.held(s, 1.0) is True
    assert locks.info(s, 1.0) == LockInfo("a", 1, 60.0)  # release never touches the TTL
    s, ok = locks.release(s, 2.0, "a")
    assert ok is True
    assert s is None
    assert locks.info(s, 2.0) is None
    assert locks.held(s, 2.0) is False


def test_release_absent_is_false() -> None:
    assert locks.release(None, 0.0, "a") == (None, False)


def test_item_27_expiry_frees_the_lock_for_another_owner() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 1)
    assert locks.held(s, 0.999) is True
    assert locks.held(s, 1.0) is False  # expires_at <= now is absent
    assert locks.info(s, 1.2) is None
    s, ok = locks.acquire(s, 1.2, "b", 10)
    assert ok is True
    assert s == LockState("b", 1, 11.2)


def test_expired_lock_restarts_count_for_same_owner() -> None:
    s, _ = locks.acquire(None, 0.0, "a", 1)
    s, _ = locks.acquire(s, 0.5, "a", 1)
    s, ok = locks.acquire(s, 2.0, "a", 1)
    assert ok is True
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
    assert s == LockState("a", 2, 170.0)  # 50 + 120, not 60 + 120; count kept
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


def test_expiry_is_the_lock_expiry() -> None:
    assert locks.expiry(LockState("a", 1, 5.0)) == 5.0
    assert locks.expiry(LockState("a", 1, None)) is None
