"""Semaphores as per-holder leases (docs/protocol.md#semaphores)."""

from __future__ import annotations

import math

import pytest

from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, teach, uid
from reactor_contract.optional_operations import semaphore_resetter
from reactor_contract.probe import Probe

__all__ = ["SemaphoresContract"]


class SemaphoresContract:
    """:class:`reactor.ports.SemaphoreStore` behaviour every adapter must show."""

    reactor_concern = "semaphores"

    @pytest.mark.obligations("O-semaphores-1", "O-semaphores-6")
    def test_limit_caps_concurrent_holders(self, storage: Storage) -> None:
        key = uid("sem")
        assert storage.semaphores.acquire(key, "h1", 2, HOUR) is True
        assert storage.semaphores.acquire(key, "h2", 2, HOUR) is True
        assert storage.semaphores.acquire(key, "h3", 2, HOUR) is False
        state = storage.semaphores.state(key)
        assert state is not None
        assert state.limit == 2 and set(state.holders) == {"h1", "h2"}
        assert state.available == 0

    @pytest.mark.obligations("O-semaphores-6")
    def test_state_reports_lease_expiries(self, storage: Storage) -> None:
        key = uid("sem")
        before = storage.now()
        storage.semaphores.acquire(key, "h1", 2, HOUR)
        state = storage.semaphores.state(key)
        assert state is not None
        assert before + HOUR - 1 <= state.holders["h1"] <= storage.now() + HOUR + 1

    @pytest.mark.obligations("O-semaphores-2", "O-semaphores-6")
    def test_a_holder_reacquiring_keeps_its_one_slot(self, storage: Storage, probe: Probe) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, 120)
        assert storage.semaphores.acquire(key, "h1", 2, HOUR) is True
        state = storage.semaphores.state(key)
        assert state is not None and list(state.holders) == ["h1"] and state.available == 1
        assert_ttl(probe.ttl("semaphore", key, "h1"), HOUR)

    @pytest.mark.obligations("O-semaphores-3", "O-semaphores-6")
    def test_release_only_the_callers_lease(self, storage: Storage) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, HOUR)
        storage.semaphores.acquire(key, "h2", 2, HOUR)
        assert storage.semaphores.release(key, "h1") is True
        assert storage.semaphores.release(key, "h1") is False
        assert storage.semaphores.release(key, "forged") is False
        state = storage.semaphores.state(key)
        assert state is not None and list(state.holders) == ["h2"] and state.available == 1
        assert storage.semaphores.acquire(key, "h3", 2, HOUR) is True

    @pytest.mark.obligations("O-semaphores-7", "O-semaphores-3", "O-semaphores-5")
    def test_a_never_used_semaphore_has_no_state(self, storage: Storage) -> None:
        key = uid("sem")
        assert storage.semaphores.state(key) is None
        assert storage.semaphores.release(key, "h1") is False
        assert storage.semaphores.extend(key, "h1", HOUR) is False

    @pytest.mark.obligations("O-semaphores-7")
    def test_releasing_every_lease_empties_it(self, storage: Storage) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 1, HOUR)
        storage.semaphores.release(key, "h1")
        assert storage.semaphores.state(key) is None

    @pytest.mark.obligations("O-semaphores-9")
    def test_the_creating_acquire_fixes_the_limit(self, storage: Storage) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 1, HOUR)
        assert storage.semaphores.acquire(key, "h2", 5, HOUR) is False
        state = storage.semaphores.state(key)
        assert state is not None and state.limit == 1

    @pytest.mark.obligations("O-semaphores-10")
    def test_limit_zero_admits_nobody(self, storage: Storage) -> None:
        key = uid("sem")
        assert storage.semaphores.acquire(key, "h1", 0, HOUR) is False
        assert storage.semaphores.state(key) is None

    @pytest.mark.obligations("O-semaphores-11", "O-semaphores-7")
    def test_reset_drops_every_lease(self, storage: Storage) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, HOUR)
        storage.semaphores.acquire(key, "h2", 2, HOUR)
        semaphore_resetter(storage).reset(key)
        assert storage.semaphores.state(key) is None
        assert storage.semaphores.release(key, "h1") is False
        semaphore_resetter(storage).reset(uid("sem"))

    @pytest.mark.obligations("O-semaphores-5")
    def test_extend_sets_the_lease_never_adds(self, storage: Storage, probe: Probe) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, HOUR)
        assert storage.semaphores.extend(key, "h1", 120) is True
        assert_ttl(probe.ttl("semaphore", key, "h1"), 120)
        assert storage.semaphores.extend(key, "h1", 2 * HOUR) is True
        assert_ttl(probe.ttl("semaphore", key, "h1"), 2 * HOUR)
        assert storage.semaphores.extend(key, "h2", HOUR) is False

    @pytest.mark.obligations("O-semaphores-8", "O-semaphores-4", "O-semaphores-1")
    def test_a_dead_holder_loses_its_slot_after_its_lease(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, HOUR)
        storage.semaphores.acquire(key, "h2", 2, HOUR)
        assert storage.semaphores.acquire(key, "h3", 2, HOUR) is False
        probe.expire("semaphore", key, "h1")
        assert probe.ttl("semaphore", key, "h1") is None
        state = storage.semaphores.state(key)
        assert state is not None and set(state.holders) == {"h2"}
        assert storage.semaphores.acquire(key, "h3", 2, HOUR) is True
        assert storage.semaphores.release(key, "h1") is False
        assert storage.semaphores.extend(key, "h1", HOUR) is False
        state = storage.semaphores.state(key)
        assert state is not None and set(state.holders) == {"h2", "h3"}

    @pytest.mark.obligations("O-semaphores-4")
    def test_a_lapsed_holders_late_release_frees_no_other_slot(
        self, storage: Storage, probe: Probe
    ) -> None:
        # A worker whose lease lapsed (a long GC pause) wakes up and releases: its slot was
        # already taken over, so the release must be False and give back nothing, before and
        # after the take-over; otherwise the next acquire takes a live holder's slot.
        for taken_over_first in (True, False):
            key = uid("sem")
            assert storage.semaphores.acquire(key, "h1", 2, HOUR) is True
            assert storage.semaphores.acquire(key, "h2", 2, HOUR) is True
            probe.expire("semaphore", key, "h1")
            if taken_over_first:
                assert storage.semaphores.acquire(key, "h3", 2, HOUR) is True
            assert storage.semaphores.release(key, "h1") is False
            if not taken_over_first:
                assert storage.semaphores.acquire(key, "h3", 2, HOUR) is True
            extra = storage.semaphores.acquire(key, "h4", 2, HOUR)
            state = storage.semaphores.state(key)
            holders = set() if state is None else set(state.holders)
            assert extra is False and holders == {"h2", "h3"}, teach(
                "semaphores",
                "a holder whose lease lapsed releases late with False and frees nothing: the "
                f"semaphore of 2 still admits only 2 holders (h4 was told {extra}, holders "
                f"now {sorted(holders)})",
                "release gives a slot back (a slot counter decremented, a pooled token "
                "returned) whether or not the caller still holds a live lease",
                'docs/protocol.md, "Semaphores"',
            )

    @pytest.mark.obligations("O-semaphores-7", "O-semaphores-8", "O-semaphores-9")
    def test_every_lease_lapsing_empties_the_semaphore(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 1, HOUR)
        probe.expire("semaphore", key)
        assert storage.semaphores.state(key) is None
        assert probe.ttl("semaphore", key) is None
        assert storage.semaphores.acquire(key, "h2", 3, HOUR) is True
        state = storage.semaphores.state(key)
        assert state is not None and state.limit == 3

    @pytest.mark.obligations("O-semaphores-12")
    def test_the_semaphore_lives_as_long_as_its_longest_lease(
        self, storage: Storage, probe: Probe
    ) -> None:
        key = uid("sem")
        storage.semaphores.acquire(key, "h1", 2, 120)
        storage.semaphores.acquire(key, "h2", 2, HOUR)
        ttl = probe.ttl("semaphore", key)
        assert ttl is not None and not math.isinf(ttl)
        assert ttl >= HOUR - 5

    @pytest.mark.obligations("O-semaphores-13")
    def test_a_lease_that_is_not_positive_and_finite_is_refused(
        self, storage: Storage, probe: Probe
    ) -> None:
        """acquire and extend refuse a lease of 0, a negative, infinite or NaN one with
        ``ValueError`` and store nothing (docs/protocol.md, "Conventions")."""
        key = uid("sem")
        for lease in (0, 0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                storage.semaphores.acquire(key, "h1", 2, lease)
        assert storage.semaphores.state(key) is None, teach(
            "semaphores",
            "an acquire with a lease that is not a positive finite number raises ValueError "
            "and leases nothing",
            "a lease of 0 or a negative one sent to the backend instead of checked first",
            'docs/protocol.md, "Conventions"',
        )
        assert storage.semaphores.acquire(key, "h1", 2, 120) is True
        for lease in (0, 0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                storage.semaphores.extend(key, "h1", lease)
        state = storage.semaphores.state(key)
        assert state is not None and list(state.holders) == ["h1"]
        assert_ttl(probe.ttl("semaphore", key, "h1"), 120)


class TestSemaphores(SemaphoresContract):
    """The semaphores contract against ``--reactor-storage``."""
