"""Surface: the storage object implements every sub-protocol (docs/protocol.md#storage)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest

from reactor.errors import StorageError
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

__all__ = ["SurfaceContract"]

_ISOLATION = f'{SUITE_DOC}, "Isolation: one namespace per test"'
_ERRORS = f'{SUITE_DOC}, "Rules: driver errors"'
_DECLARED = f'{SUITE_DOC}, "Declarations are checked"'


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

    def test_storage_satisfies_the_protocol(self, storage: Storage) -> None:
        assert isinstance(storage, Storage)

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

    def test_clock_is_epoch_seconds_and_never_runs_backwards(self, storage: Storage) -> None:
        before = time.time()
        first = storage.now()
        second = storage.now()
        assert isinstance(first, float)
        assert math.isfinite(first) and first > 1_600_000_000.0
        assert abs(first - before) <= CLOCK_TOLERANCE, teach(
            "surface",
            f"now() is epoch seconds (UTC) within {CLOCK_TOLERANCE:g}s of time.time(); got "
            f"{first!r} at {before:.3f} ({clock_offset_diagnosis(first, before, CLOCK_TOLERANCE)})",
            "a clock in milliseconds, a monotonic clock, or local time instead of UTC",
            f'{ADAPTER_DOC}, "Scans, expiry and the clock"',
        )
        assert second >= first

    def test_close_is_idempotent(self, storage: Storage) -> None:
        storage.close()
        storage.close()

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


class TestSurface(SurfaceContract):
    """The surface contract against ``--reactor-storage``."""
