"""Unit tests of the lease semaphore model (docs/protocol.md#semaphores)."""

from __future__ import annotations

import pytest

from reactor.model.coordination import semaphores
from reactor.model.coordination.semaphores import SemaphoreLeases
from reactor.model.records import SemaphoreState


def test_acquire_up_to_limit_then_refuse() -> None:
    s, ok1 = semaphores.acquire(None, 0.0, "t1", 2, 30)
    s, ok2 = semaphores.acquire(s, 0.0, "t2", 2, 30)
    s3, ok3 = semaphores.acquire(s, 0.0, "t3", 2, 30)
    assert (ok1, ok2, ok3) == (True, True, False)
    assert s3 is s
    assert semaphores.view(s, 0.0) == SemaphoreState(2, {"t1": 30.0, "t2": 30.0})
    view = semaphores.view(s, 0.0)
    assert view is not None and view.available == 0


def test_reacquire_by_same_holder_renews_and_does_not_take_a_second_slot() -> None:
    s, _ = semaphores.acquire(None, 0.0, "t1", 2, 30)
    s, ok = semaphores.acquire(s, 10.0, "t1", 2, 30)
    assert ok is True
    assert s == SemaphoreLeases(2, {"t1": 40.0})
    s, ok = semaphores.acquire(s, 10.0, "t2", 2, 30)
    assert ok is True


def test_reacquire_by_holder_succeeds_even_when_full() -> None:
    s, _ = semaphores.acquire(None, 0.0, "t1", 1, 30)
    s, ok = semaphores.acquire(s, 1.0, "t1", 1, 30)
    assert ok is True


def test_release_double_release_and_forged_token() -> None:
    s, _ = semaphores.acquire(None, 0.0, "t1", 2, 30)
    s, _ = semaphores.acquire(s, 0.0, "t2", 2, 30)
    s, ok = semaphores.release(s, 1.0, "t1")
    assert ok is True
    s, ok = semaphores.release(s, 1.0, "t1")
    assert ok is False
    s, ok = semaphores.release(s, 1.0, "forged")
    assert ok is False
    assert semaphores.view(s, 1.0) == SemaphoreState(2, {"t2": 30.0})
    s, ok = semaphores.release(s, 1.0, "t2")
    assert ok is True
    assert s is None  # an empty semaphore is absent
    assert semaphores.view(s, 1.0) is None


def test_release_only_removes_the_callers_token() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 3, 30)
    s, _ = semaphores.acquire(s, 0.0, "b", 3, 30)
    s, _ = semaphores.release(s, 0.0, "a")
    assert s is not None and set(s.holders) == {"b"}


def test_dead_holder_lease_expires_and_frees_its_slot() -> None:
    s, _ = semaphores.acquire(None, 0.0, "dead", 1, 10)
    assert semaphores.acquire(s, 9.9, "live", 1, 10)[1] is False
    s, ok = semaphores.acquire(s, 10.0, "live", 1, 10)
    assert ok is True
    assert s == SemaphoreLeases(1, {"live": 20.0})  # the expired lease was dropped
    assert semaphores.release(s, 11.0, "dead")[1] is False
    assert semaphores.extend(s, 11.0, "dead", 10)[1] is False


def test_extend_renews_own_lease_only() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 2, 10)
    s, ok = semaphores.extend(s, 8.0, "a", 10)
    assert ok is True
    assert s == SemaphoreLeases(2, {"a": 18.0})
    assert semaphores.extend(s, 8.0, "b", 10) == (s, False)
    assert semaphores.extend(None, 8.0, "a", 10) == (None, False)


def test_expired_lease_is_never_revived_by_extend() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 1, 10)
    assert semaphores.extend(s, 10.0, "a", 10)[1] is False


def test_limit_is_fixed_while_leases_live_and_readopted_when_empty() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 1, 10)
    s, ok = semaphores.acquire(s, 0.0, "b", 5, 10)
    assert ok is False  # the semaphore was created with limit 1
    s, _ = semaphores.release(s, 0.0, "a")
    s, _ = semaphores.acquire(s, 0.0, "b", 5, 10)
    assert s is not None and s.limit == 5


def test_state_is_none_when_every_lease_expired() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 1, 10)
    assert semaphores.view(s, 10.0) is None
    assert semaphores.live(s, 10.0) is None


def test_reset_drops_everything() -> None:
    s, _ = semaphores.acquire(None, 0.0, "a", 1, 10)
    assert semaphores.reset(s, 0.0) == (None, None)


def test_limit_zero_never_admits() -> None:
    assert semaphores.acquire(None, 0.0, "a", 0, 10) == (None, False)


@pytest.mark.parametrize(("limit", "lease"), [(-1, 10.0), (1, 0.0), (1, float("inf"))])
def test_invalid_arguments_raise(limit: int, lease: float) -> None:
    with pytest.raises(ValueError):
        semaphores.acquire(None, 0.0, "a", limit, lease)


def test_expiry_is_the_longest_lease() -> None:
    assert semaphores.expiry(SemaphoreLeases(3, {"a": 5.0, "b": 9.0})) == 9.0
    assert semaphores.expiry(SemaphoreLeases(3, {})) is None
