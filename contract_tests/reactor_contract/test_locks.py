"""Locks: re-entrant owner-tokened TTL locks, lapsed owners, fencing tokens (docs/coordination.md).

Fencing tokens (docs/coordination.md#fencing-tokens): ``acquire`` returns 0 when refused and
otherwise the holder's token, which grows strictly with every fresh acquisition of a key, across
owners, release, idle expiry and the record's garbage collection (``probe.expire(..., FENCE)``).
"""

from __future__ import annotations

import math

import pytest

from reactor.model.coordination.fencing import FENCE_RETENTION, MAX_FENCE
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, teach, uid
from reactor_contract.probe import FENCE, Probe


def _token(value: object) -> int:
    """Assert ``value`` is a fencing token (an ``int``, not a ``bool``, in ``1 .. 2**53 - 1``)."""
    assert type(value) is int, f"acquire must return an int token, got {value!r}"
    assert 1 <= value <= MAX_FENCE, f"a token is in 1 .. 2**53 - 1, got {value!r}"
    return value

__all__ = ["BAD_TTLS", "LocksContract"]

#: TTLs that are neither ``None`` nor a positive finite number of seconds (docs/protocol.md,
#: "Conventions": ``ValueError``; a TTL of 0 is never sent to a backend).
BAD_TTLS = (0, 0.0, -1.0, math.inf, math.nan)


class LocksContract:
    """:class:`reactor.ports.LockStore` behaviour every adapter must show."""

    reactor_concern = "locks"

    @pytest.mark.obligations("O-locks-1", "O-locks-2", "O-locks-3", "O-locks-9", "O-locks-10")
    def test_reentrant_by_owner_exclusive_to_others(self, storage: Storage) -> None:
        key = uid("lock")
        assert storage.locks.acquire(key, "alice", HOUR)
        assert storage.locks.acquire(key, "alice", HOUR)
        assert storage.locks.acquire(key, "bob", HOUR) == 0
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("alice", 2)
        assert storage.locks.held(key) is True

    @pytest.mark.obligations("O-locks-4", "O-locks-5", "O-locks-6", "O-locks-9", "O-locks-10")
    def test_release_counts_down_and_frees_at_zero(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", HOUR)
        assert storage.locks.release(key, "bob") is False
        assert storage.locks.release(key, "alice") is True
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("alice", 1)
        assert storage.locks.release(key, "alice") is True
        assert storage.locks.info(key) is None
        assert storage.locks.held(key) is False
        assert probe.ttl("lock", key) is None
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.acquire(key, "bob", HOUR)

    @pytest.mark.obligations("O-locks-6", "O-locks-8", "O-locks-9", "O-locks-10")
    def test_unknown_lock_is_not_held(self, storage: Storage) -> None:
        key = uid("lock")
        assert storage.locks.held(key) is False
        assert storage.locks.info(key) is None
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False

    @pytest.mark.obligations("O-locks-1", "O-locks-10")
    def test_info_reports_the_expiry(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        before = storage.now()
        storage.locks.acquire(key, "alice", HOUR)
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is not None
        assert before + HOUR - 1 <= info.expires_at <= storage.now() + HOUR + 1
        assert_ttl(probe.ttl("lock", key), HOUR)

    @pytest.mark.obligations("O-locks-3")
    def test_reentry_resets_the_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", 120)
        assert_ttl(probe.ttl("lock", key), 120)

    @pytest.mark.obligations("O-locks-4")
    def test_release_does_not_touch_the_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key, after=50)
        assert storage.locks.release(key, "alice") is True
        assert_ttl(probe.ttl("lock", key), 50)

    @pytest.mark.obligations("O-locks-7")
    def test_extend_sets_the_remaining_ttl_never_adds(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        assert storage.locks.extend(key, "alice", 120) is True
        assert_ttl(probe.ttl("lock", key), 120)
        assert storage.locks.extend(key, "alice", 2 * HOUR) is True
        assert_ttl(probe.ttl("lock", key), 2 * HOUR)
        info = storage.locks.info(key)
        assert info is not None and info.count == 1

    @pytest.mark.obligations("O-locks-8")
    def test_extend_by_a_stranger_is_refused(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", 120)
        assert storage.locks.extend(key, "bob", HOUR) is False
        assert_ttl(probe.ttl("lock", key), 120)

    @pytest.mark.obligations("O-locks-11", "O-locks-7", "O-locks-10")
    def test_ttl_none_never_expires(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        assert storage.locks.acquire(key, "alice", None)
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is None
        assert probe.ttl("lock", key) == math.inf
        assert storage.locks.extend(key, "alice", 60) is True
        assert_ttl(probe.ttl("lock", key), 60)
        assert storage.locks.extend(key, "alice", None) is True
        assert probe.ttl("lock", key) == math.inf

    @pytest.mark.obligations("O-locks-12", "O-locks-9", "O-locks-10")
    def test_a_lapsed_lock_is_free(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.held(key) is False
        assert storage.locks.info(key) is None
        assert probe.ttl("lock", key) is None
        assert storage.locks.acquire(key, "bob", HOUR)
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("bob", 1)

    @pytest.mark.obligations("O-locks-12", "O-locks-6", "O-locks-8")
    def test_a_lapsed_owner_cannot_release_or_extend(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False
        assert storage.locks.held(key) is False

    @pytest.mark.obligations("O-locks-12")
    def test_a_lapsed_reentrant_lock_restarts_at_count_one(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.acquire(key, "alice", HOUR)
        info = storage.locks.info(key)
        assert info is not None and info.count == 1

    @pytest.mark.obligations("O-locks-13", "O-locks-2")
    def test_the_old_owner_never_touches_the_new_owners_lock(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        storage.locks.acquire(key, "bob", 120)
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False
        assert storage.locks.acquire(key, "alice", HOUR) == 0
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("bob", 1)
        assert_ttl(probe.ttl("lock", key), 120)

    @pytest.mark.obligations("O-locks-14")
    def test_locks_are_independent(self, storage: Storage) -> None:
        a, b = uid("lock"), uid("lock")
        assert storage.locks.acquire(a, "alice", HOUR)
        assert storage.locks.acquire(b, "bob", HOUR)
        assert storage.locks.release(a, "alice") is True
        assert storage.locks.held(b) is True

    # -- fencing tokens (docs/coordination.md#fencing-tokens) ---------------------------------

    @pytest.mark.obligations("O-locks-1", "O-locks-10")
    def test_acquire_returns_the_holders_token_and_info_reports_it(self, storage: Storage) -> None:
        """A successful acquire returns an int token in 1 .. 2**53 - 1; info() reports it."""
        key = uid("lock")
        token = _token(storage.locks.acquire(key, "alice", HOUR))
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.token) == ("alice", token)

    @pytest.mark.obligations("O-locks-2")
    def test_a_refused_acquire_returns_zero(self, storage: Storage) -> None:
        """Another owner's acquire of a held lock returns the int 0 and changes nothing."""
        key = uid("lock")
        token = _token(storage.locks.acquire(key, "alice", HOUR))
        refused = storage.locks.acquire(key, "bob", HOUR)
        assert type(refused) is int and refused == 0
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count, info.token) == ("alice", 1, token)

    @pytest.mark.obligations("O-locks-3", "O-locks-4", "O-locks-7")
    def test_reentry_keeps_the_token(self, storage: Storage) -> None:
        """Re-entry, extend and a partial release leave the holder's token unchanged."""
        key = uid("lock")
        token = _token(storage.locks.acquire(key, "alice", HOUR))
        assert storage.locks.acquire(key, "alice", 120) == token
        assert storage.locks.extend(key, "alice", HOUR) is True
        assert storage.locks.release(key, "alice") is True
        info = storage.locks.info(key)
        assert info is not None and (info.count, info.token) == (1, token)
        assert storage.locks.acquire(key, "alice", HOUR) == token

    @pytest.mark.obligations("O-locks-15")
    def test_tokens_increase_across_owners_and_release(self, storage: Storage) -> None:
        """Every fresh acquisition after a release, by any owner, gets a greater token."""
        key = uid("lock")
        tokens = [_token(storage.locks.acquire(key, "alice", HOUR))]
        for owner in ("bob", "bob", "alice"):
            previous = storage.locks.info(key)
            assert previous is not None
            assert storage.locks.release(key, previous.owner) is True
            tokens.append(_token(storage.locks.acquire(key, owner, HOUR)))
        assert tokens == sorted(set(tokens)), f"tokens must strictly increase: {tokens}"
        info = storage.locks.info(key)
        assert info is not None and info.token == tokens[-1]

    @pytest.mark.obligations("O-locks-15", "O-locks-12")
    def test_tokens_increase_across_idle_expiry(self, storage: Storage, probe: Probe) -> None:
        """A lapsed lock's next holder (its old owner too) gets a greater token."""
        key = uid("lock")
        first = _token(storage.locks.acquire(key, "alice", HOUR))
        probe.expire("lock", key)
        second = _token(storage.locks.acquire(key, "bob", HOUR))
        probe.expire("lock", key)
        third = _token(storage.locks.acquire(key, "bob", None))
        assert first < second < third
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count, info.token) == ("bob", 1, third)

    @pytest.mark.obligations("O-locks-16")
    def test_tokens_increase_after_the_record_is_collected(
        self, storage: Storage, probe: Probe
    ) -> None:
        """Once garbage collection removed the record and its token, the clock term of the next
        token still exceeds every earlier token (the storage clock moved on)."""
        key = uid("lock")
        first = _token(storage.locks.acquire(key, "alice", HOUR))
        probe.expire("lock", key, FENCE)
        second = _token(storage.locks.acquire(key, "bob", HOUR))
        assert storage.locks.release(key, "bob") is True
        probe.expire("lock", key, FENCE)
        third = _token(storage.locks.acquire(key, "alice", HOUR))
        assert first < second < third

    @pytest.mark.obligations("O-locks-17")
    def test_a_released_lock_is_collected_after_the_fence_retention(
        self, storage: Storage, probe: Probe
    ) -> None:
        """No permanent state per key: the record of a released lock (even one taken with TTL
        ``None``) lives at most ``FENCE_RETENTION`` seconds, a held one its TTL plus that."""
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        assert_ttl(probe.ttl("lock", key, FENCE), HOUR + FENCE_RETENTION)
        other = uid("lock")
        storage.locks.acquire(other, "alice", None)
        assert probe.ttl("lock", other, FENCE) == math.inf
        assert storage.locks.release(other, "alice") is True
        assert_ttl(probe.ttl("lock", other, FENCE), FENCE_RETENTION, slack=2.0)
        assert probe.ttl("lock", other) is None

    @pytest.mark.obligations("O-locks-18")
    def test_a_ttl_that_is_not_positive_and_finite_is_refused(
        self, storage: Storage, probe: Probe
    ) -> None:
        """acquire and extend refuse a TTL of 0, a negative, infinite or NaN one with
        ``ValueError`` and change nothing (docs/protocol.md, "Conventions")."""
        key = uid("lock")
        for ttl in BAD_TTLS:
            with pytest.raises(ValueError):
                storage.locks.acquire(key, "alice", ttl)
        assert storage.locks.info(key) is None, teach(
            "locks",
            "an acquire with a TTL that is not a positive finite number raises ValueError and "
            "takes nothing",
            "a TTL of 0 or a negative one sent to the backend (an immediate expiry, or Redis "
            "refusing it as a driver error) instead of checked first",
            'docs/protocol.md, "Conventions"',
        )
        token = _token(storage.locks.acquire(key, "alice", 120))
        for ttl in BAD_TTLS:
            with pytest.raises(ValueError):
                storage.locks.extend(key, "alice", ttl)
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count, info.token) == ("alice", 1, token)
        assert_ttl(probe.ttl("lock", key), 120)


class TestLocks(LocksContract):
    """The locks contract against ``--reactor-storage``."""
