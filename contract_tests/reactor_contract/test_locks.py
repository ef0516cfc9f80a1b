"""Locks: storage-protocol.md §4.2 items 26-27, plus the lapsed-owner rules of ARCHITECTURE §2."""

from __future__ import annotations

import math

from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, uid
from reactor_contract.probe import Probe

__all__ = ["LocksContract"]


class LocksContract:
    """:class:`reactor.ports.LockStore` behaviour every adapter must show."""

    reactor_concern = "locks"

    def test_reentrant_by_owner_exclusive_to_others(self, storage: Storage) -> None:
        key = uid("lock")
        assert storage.locks.acquire(key, "alice", HOUR) is True
        assert storage.locks.acquire(key, "alice", HOUR) is True
        assert storage.locks.acquire(key, "bob", HOUR) is False
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("alice", 2)
        assert storage.locks.held(key) is True

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
        assert storage.locks.acquire(key, "bob", HOUR) is True

    def test_unknown_lock_is_not_held(self, storage: Storage) -> None:
        key = uid("lock")
        assert storage.locks.held(key) is False
        assert storage.locks.info(key) is None
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False

    def test_info_reports_the_expiry(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        before = storage.now()
        storage.locks.acquire(key, "alice", HOUR)
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is not None
        assert before + HOUR - 1 <= info.expires_at <= storage.now() + HOUR + 1
        assert_ttl(probe.ttl("lock", key), HOUR)

    def test_reentry_resets_the_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", 120)
        assert_ttl(probe.ttl("lock", key), 120)

    def test_release_does_not_touch_the_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key, after=50)
        assert storage.locks.release(key, "alice") is True
        assert_ttl(probe.ttl("lock", key), 50)

    def test_extend_sets_the_remaining_ttl_never_adds(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        assert storage.locks.extend(key, "alice", 120) is True
        assert_ttl(probe.ttl("lock", key), 120)
        assert storage.locks.extend(key, "alice", 2 * HOUR) is True
        assert_ttl(probe.ttl("lock", key), 2 * HOUR)
        info = storage.locks.info(key)
        assert info is not None and info.count == 1

    def test_extend_by_a_stranger_is_refused(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", 120)
        assert storage.locks.extend(key, "bob", HOUR) is False
        assert_ttl(probe.ttl("lock", key), 120)

    def test_ttl_none_never_expires(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        assert storage.locks.acquire(key, "alice", None) is True
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is None
        assert probe.ttl("lock", key) == math.inf
        assert storage.locks.extend(key, "alice", 60) is True
        assert_ttl(probe.ttl("lock", key), 60)
        assert storage.locks.extend(key, "alice", None) is True
        assert probe.ttl("lock", key) == math.inf

    def test_a_lapsed_lock_is_free(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.held(key) is False
        assert storage.locks.info(key) is None
        assert probe.ttl("lock", key) is None
        assert storage.locks.acquire(key, "bob", HOUR) is True
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("bob", 1)

    def test_a_lapsed_owner_cannot_release_or_extend(self, storage: Storage, probe: Probe) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False
        assert storage.locks.held(key) is False

    def test_a_lapsed_reentrant_lock_restarts_at_count_one(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        assert storage.locks.acquire(key, "alice", HOUR) is True
        info = storage.locks.info(key)
        assert info is not None and info.count == 1

    def test_the_old_owner_never_touches_the_new_owners_lock(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("lock")
        storage.locks.acquire(key, "alice", HOUR)
        probe.expire("lock", key)
        storage.locks.acquire(key, "bob", 120)
        assert storage.locks.release(key, "alice") is False
        assert storage.locks.extend(key, "alice", HOUR) is False
        assert storage.locks.acquire(key, "alice", HOUR) is False
        info = storage.locks.info(key)
        assert info is not None and (info.owner, info.count) == ("bob", 1)
        assert_ttl(probe.ttl("lock", key), 120)

    def test_locks_are_independent(self, storage: Storage) -> None:
        a, b = uid("lock"), uid("lock")
        assert storage.locks.acquire(a, "alice", HOUR) is True
        assert storage.locks.acquire(b, "bob", HOUR) is True
        assert storage.locks.release(a, "alice") is True
        assert storage.locks.held(b) is True


class TestLocks(LocksContract):
    """The locks contract against ``--reactor-storage``."""
