"""Surface: the storage object implements every sub-protocol (docs/protocol.md#storage)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest

from reactor.errors import StorageError
from reactor.memory.clock import ManualClock
from reactor.ports.storage import (
    Capabilities,
    ClaimStore,
    ContextStore,
    LockStore,
    MapRollbackStore,
    MapStore,
    OrderedLockStore,
    PeriodStore,
    RateLimitStore,
    SemaphoreStore,
    SignalStore,
    StepResultStore,
    Storage,
)
from reactor_contract._support import (
    ADAPTER_DOC,
    CLOCK_TOLERANCE,
    HOUR,
    SUITE_DOC,
    clock_offset_diagnosis,
    context,
    map_metadata,
    step_result,
    teach,
    uid,
)
from reactor_contract.plugin import open_storage
from reactor_contract.probe import ClockProbe, Probe

__all__ = ["SurfaceContract"]

_ISOLATION = f'{SUITE_DOC}, "Isolation: one namespace per test"'
_ERRORS = f'{SUITE_DOC}, "Rules: driver errors"'
_DECLARED = f'{SUITE_DOC}, "Declarations are checked"'
_CONVENTIONS = 'docs/protocol.md, "Conventions"'
_ASSUMES = f'{ADAPTER_DOC}, "What the suite assumes"'
#: How many consecutive ``now()`` readings the never-backwards check takes.
_CLOCK_READINGS = 1000
#: TTLs every TTL-taking operation refuses with ``ValueError`` (docs/protocol.md,
#: "Conventions": positive and finite, or ``None``).
_BAD_TTLS = (0, 0.0, -1.0, math.nan, math.inf)


def _calls(storage: Storage) -> dict[str, Callable[[], Any]]:
    """One read and one write of several sub-stores, for the closed-storage rule."""
    return {
        "now()": storage.now,
        "contexts.load": lambda: storage.contexts.load(uid("ctx")),
        "contexts.save": lambda: storage.contexts.save(context()),
        "step_results.scan": lambda: storage.step_results.scan(status="dispatched"),
        "maps.init": lambda: storage.maps.init(map_metadata()),
        "locks.acquire": lambda: storage.locks.acquire(uid("lock"), "owner", HOUR),
        "periods.mark": lambda: storage.periods.mark(uid("period"), ttl=HOUR),
    }


class SurfaceContract:
    """Every declared sub-store is present and structurally complete."""

    reactor_concern = "surface"

    @pytest.mark.obligations("O-surface-1")
    def test_storage_satisfies_the_protocol(self, storage: Storage) -> None:
        assert isinstance(storage, Storage)

    @pytest.mark.obligations("O-surface-2")
    def test_every_sub_store_satisfies_its_protocol(self, storage: Storage) -> None:
        expected = {
            "contexts": ContextStore,
            "step_results": StepResultStore,
            "maps": MapStore,
            "map_rollbacks": MapRollbackStore,
            "claims": ClaimStore,
            "locks": LockStore,
            "semaphores": SemaphoreStore,
            "rate_limits": RateLimitStore,
            "periods": PeriodStore,
            "ordered_locks": OrderedLockStore,
        }
        missing = [
            name
            for name, proto in expected.items()
            if not isinstance(getattr(storage, name), proto)
        ]
        assert missing == []

    @pytest.mark.obligations("O-surface-3", "O-declarations-1")
    def test_capabilities_are_declared_and_consistent(self, storage: Storage) -> None:
        caps = storage.capabilities
        assert isinstance(caps, Capabilities)
        assert caps.clock in ("server", "application")
        assert caps.max_document_bytes is None or caps.max_document_bytes > 0
        if caps.signals:
            assert isinstance(storage.signals, SignalStore), teach(
                "surface",
                "a storage that declares Capabilities.signals=True has a SignalStore in "
                f"storage.signals (got {type(storage.signals).__name__})",
                "signals declared for a backend without pub/sub: declare signals=False",
                _DECLARED,
            )
        else:
            assert storage.signals is None, teach(
                "surface",
                "a storage that declares Capabilities.signals=False has storage.signals None; "
                f"this one has a {type(storage.signals).__name__}, which the engine never "
                "uses (it polls) and the suite never tests",
                "working signals left undeclared: declare signals=True (the signals tests "
                "then run), or set storage.signals to None",
                _DECLARED,
            )

    @pytest.mark.obligations("O-surface-4", "O-surface-5")
    def test_clock_is_epoch_seconds_and_never_runs_backwards(self, storage: Storage) -> None:
        before = time.time()
        first = storage.now()
        assert isinstance(first, float)
        assert math.isfinite(first) and first > 1_600_000_000.0
        assert abs(first - before) <= CLOCK_TOLERANCE, teach(
            "surface",
            f"now() is epoch seconds (UTC) within {CLOCK_TOLERANCE:g}s of time.time(); got "
            f"{first!r} at {before:.3f} ({clock_offset_diagnosis(first, before, CLOCK_TOLERANCE)})",
            "a clock in milliseconds, a monotonic clock, or local time instead of UTC",
            f'{ADAPTER_DOC}, "Scans, expiry and the clock"',
        )
        readings = [storage.now() for _ in range(_CLOCK_READINGS)]
        back = next(
            ((a, b) for a, b in zip([first, *readings], readings, strict=False) if b < a), None
        )
        assert back is None, teach(
            "surface",
            f"now() never runs backwards; of {_CLOCK_READINGS} readings in a row one went from "
            f"{back[0]!r} back to {back[1]!r}" if back else "",
            "a clock read from several servers, or a calibrated clock that applies a new "
            "offset without holding its last reading (reactor.ports.clock.CalibratedClock)",
            f'{ADAPTER_DOC}, "Clocks"',
        )

    @pytest.mark.obligations("O-surface-6")
    def test_close_is_idempotent(self, storage: Storage) -> None:
        storage.close()
        storage.close()

    @pytest.mark.obligations("O-surface-8")
    def test_storages_with_other_prefixes_share_nothing(
        self, storage: Storage, reactor_storage_url: str
    ) -> None:
        ctx = context(status="running")
        storage.contexts.save(ctx)
        storage.step_results.put(step_result(ctx.context_id, "charge", status="dispatched"))
        lock = uid("lock")
        assert storage.locks.acquire(lock, "owner-a", HOUR)
        other = open_storage(reactor_storage_url)
        try:
            leaked = {
                "contexts.load": other.contexts.load(ctx.context_id) is not None,
                "contexts.scan": bool(other.contexts.scan(statuses=("running",))),
                "step_results.scan": bool(other.step_results.scan()),
                "locks.held": other.locks.held(lock),
            }
        finally:
            other.close()
        assert not any(leaked.values()), teach(
            "surface",
            "a storage built from the same URL with another ?prefix= sees none of this one's "
            f"records (leaked through: {[k for k, v in leaked.items() if v]})",
            "ignoring the prefix URL parameter: every key, collection or table must be "
            "namespaced with it",
            _ISOLATION,
        )

    @pytest.mark.obligations("O-surface-7")
    def test_a_closed_storage_raises_storage_error_never_a_driver_error(
        self, reactor_storage_url: str
    ) -> None:
        closed = open_storage(reactor_storage_url)
        closed.close()
        leaked: list[str] = []
        for name, call in _calls(closed).items():
            try:
                call()
            except StorageError:
                pass  # the rule: failures are typed
            except Exception as exc:
                leaked.append(f"{name} raised {type(exc).__module__}.{type(exc).__qualname__}: "
                              f"{str(exc)[:120]}")
        if leaked:
            pytest.fail(
                teach(
                    "surface",
                    "every backend failure surfaces as reactor.StorageError (a closed storage "
                    "may still work, or must fail typed): " + "; ".join(leaked),
                    "a driver call outside the adapter's try/except that wraps driver errors "
                    "in StorageError",
                    _ERRORS,
                )
            )

    @pytest.mark.obligations("O-surface-9")
    def test_a_ttl_that_is_not_positive_and_finite_is_refused(self, storage: Storage) -> None:
        lock, held, semaphore, period, line = (uid(p) for p in ("lock", "held", "sem", "per",
                                                               "ol"))
        assert storage.locks.acquire(held, "owner", HOUR)
        calls: dict[str, Callable[[float], Any]] = {
            "locks.acquire": lambda ttl: storage.locks.acquire(lock, "owner", ttl),
            "locks.extend": lambda ttl: storage.locks.extend(held, "owner", ttl),
            "semaphores.acquire": lambda ttl: storage.semaphores.acquire(
                semaphore, "holder", 2, ttl),
            "periods.mark": lambda ttl: storage.periods.mark(period, ttl=ttl),
            "ordered_locks.assign": lambda ttl: storage.ordered_locks.assign(line, ttl=ttl),
        }
        accepted: list[str] = []
        for ttl in _BAD_TTLS:
            for name, call in calls.items():
                try:
                    result = call(ttl)
                except ValueError:
                    continue
                accepted.append(f"{name}(ttl={ttl!r}) returned {result!r}")
        assert accepted == [], teach(
            "surface",
            "a TTL other than None is a positive, finite number of seconds; 0, negative, NaN "
            "and infinite TTLs raise ValueError: " + "; ".join(accepted),
            "sending the TTL to the backend unchecked (a TTL of 0 or below deletes or never "
            "expires the record, depending on the backend)",
            _CONVENTIONS,
        )
        changed = {
            "locks.held": storage.locks.held(lock),
            "semaphores.state": storage.semaphores.state(semaphore) is not None,
            "periods.marker": storage.periods.marker(period) is not None,
        }
        assert not any(changed.values()) and storage.locks.held(held), teach(
            "surface",
            "a refused TTL changes nothing (changed: "
            f"{[k for k, v in changed.items() if v]})",
            "checking the TTL after writing the record",
            _CONVENTIONS,
        )

    @pytest.mark.obligations("O-surface-10")
    def test_closing_a_clocked_storage_leaves_the_probed_one_usable(
        self, storage: Storage, probe: Probe
    ) -> None:
        if not isinstance(probe, ClockProbe):
            return  # no extra storage to check
        saved = context(status="running")
        storage.contexts.save(saved)
        clock = ManualClock(storage.now())
        clocked = probe.with_clock(clock)
        if clocked is None:
            return
        try:
            follows = (storage.capabilities.clock != "application"
                       or math.isclose(clocked.now(), clock(), abs_tol=1e-3))
            clocked.contexts.load(saved.context_id)  # a request through its client
        finally:
            clocked.close()
        assert follows, teach(
            "surface",
            "under an application clock, the storage with_clock(clock) returns reads clock() "
            "in now()",
            "a clocked storage that keeps reading time.time()",
            f'{SUITE_DOC}, "Capabilities"',
        )
        try:
            usable = storage.contexts.load(saved.context_id) == saved and bool(
                storage.locks.acquire(uid("lock"), "owner", HOUR))
        except Exception as exc:
            pytest.fail(teach(
                "surface",
                f"closing the storage with_clock returned leaves the probed storage usable; it "
                f"then raised {type(exc).__qualname__}: {str(exc)[:120]}",
                "a clocked storage that owns (and closes) the probed storage's client: build "
                "it with owns_client=False, or give it a connection of its own",
                _ASSUMES,
            ))
        assert usable, teach(
            "surface",
            "closing the storage with_clock returned leaves the probed storage usable",
            "a clocked storage that closes the probed storage's client",
            _ASSUMES,
        )


class TestSurface(SurfaceContract):
    """The surface contract against ``--reactor-storage``."""
