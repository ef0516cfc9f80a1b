"""Time values never round in the unsafe direction (docs/protocol.md, "Conventions": units;
docs/contract-suite.md, "Properties over whole families").

A backend that keeps whole seconds or milliseconds must round a lease, a TTL or a delay so
that it is never shorter than asked: a lease that ends before its holder was told lets a
second owner in while the first still works; a delay that shortens runs a job early. Each test
asks for a fractional duration (1.9 s, 2.5 s, 1.6 s: a whole-second floor loses most of a
second) and checks the adapter's own answer against the storage clock read just before the
call.
"""

from __future__ import annotations

import time

import pytest

from reactor.ports.router import Job, Router
from reactor.ports.storage import Storage
from reactor_contract._support import teach, uid
from reactor_contract.probe import Probe

__all__ = ["RoundingContract", "RouterRoundingContract"]

#: Fractional durations, seconds: a floor to whole seconds (or to tenths) shows in each.
TTLS = (1.9, 2.55)
#: Float noise allowed on a stored epoch (µs storage, float sums), seconds.
EPSILON = 0.001
#: A fractional job delay, seconds, and how early a delivery may seem by the test's clock
#: reads (the receive that finds it starts before the job is due), seconds.
DELAY, EARLY = 1.6, 0.05

_SOURCE = 'docs/protocol.md, "Conventions"'
_MISTAKE = (
    "a duration rounded down (int(), floor, whole seconds or milliseconds truncated) on its "
    "way to the backend: round up, or keep microseconds"
)


def _short(concern: str, what: str, asked: float, got: float) -> str:
    return teach(
        concern,
        f"{what} asked for {asked:g} s and got {got:.4f} s: a lease, TTL or delay is never "
        "shorter than asked",
        _MISTAKE,
        _SOURCE,
    )


class RoundingContract:
    """Leases, TTLs and delays are never rounded down."""

    reactor_concern = "rounding"

    @pytest.mark.obligations("O-rounding-1")
    @pytest.mark.parametrize("ttl", TTLS)
    def test_a_lock_lease_is_never_shorter_than_asked(
        self, storage: Storage, ttl: float
    ) -> None:
        key = uid("lock")
        before = storage.now()
        assert storage.locks.acquire(key, "me", ttl)
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is not None
        assert info.expires_at >= before + ttl - EPSILON, _short(
            "locks", "acquire", ttl, info.expires_at - before
        )
        before = storage.now()
        assert storage.locks.extend(key, "me", ttl + 1)
        info = storage.locks.info(key)
        assert info is not None and info.expires_at is not None
        assert info.expires_at >= before + ttl + 1 - EPSILON, _short(
            "locks", "extend", ttl + 1, info.expires_at - before
        )

    @pytest.mark.obligations("O-rounding-2")
    @pytest.mark.parametrize("lease", TTLS)
    def test_a_semaphore_lease_is_never_shorter_than_asked(
        self, storage: Storage, lease: float
    ) -> None:
        key = uid("sem")
        before = storage.now()
        assert storage.semaphores.acquire(key, "h", 2, lease)
        state = storage.semaphores.state(key)
        assert state is not None and "h" in state.holders
        assert state.holders["h"] >= before + lease - EPSILON, _short(
            "semaphores", "acquire", lease, state.holders["h"] - before
        )
        before = storage.now()
        assert storage.semaphores.extend(key, "h", lease + 1)
        state = storage.semaphores.state(key)
        assert state is not None and "h" in state.holders
        assert state.holders["h"] >= before + lease + 1 - EPSILON, _short(
            "semaphores", "extend", lease + 1, state.holders["h"] - before
        )

    @pytest.mark.obligations("O-rounding-3")
    @pytest.mark.parametrize("ttl", TTLS)
    def test_a_period_mark_lives_at_least_its_ttl(
        self, storage: Storage, probe: Probe, ttl: float
    ) -> None:
        key = uid("period")
        started = time.monotonic()
        assert storage.periods.mark(key, ttl=ttl)
        left = probe.ttl("period", key)
        elapsed = time.monotonic() - started
        assert left is not None and left >= ttl - elapsed - EPSILON, _short(
            "periods", "mark", ttl, (left or 0.0) + elapsed
        )

class RouterRoundingContract:
    """A job's delay is never rounded down (reported with the router's rows)."""

    reactor_concern = "routers"

    @pytest.mark.obligations("O-rounding-4")
    def test_a_fractional_delay_is_never_shortened(self, router: Router) -> None:
        job = Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders"})
        started = time.monotonic()
        router.enqueue(job, delay_seconds=DELAY)
        deadline = started + 60
        while time.monotonic() < deadline:
            found = router.receive(max_jobs=1, wait_seconds=0.2)
            if found:
                came = time.monotonic() - started
                assert found[0].job.id == job.id
                router.ack(found[0])
                assert came >= DELAY - EARLY, _short("routers", "enqueue", DELAY, came)
                return
        pytest.fail(f"routers: a job of a {DELAY:g} s delay never came within 60 s")


class TestRounding(RoundingContract):
    """Rounding against ``--reactor-storage``."""


class TestRouterRounding(RouterRoundingContract):
    """Delay rounding against ``--reactor-router``."""
