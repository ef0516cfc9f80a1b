"""Surface: the storage object implements every sub-protocol (storage-protocol.md §4.2 item 1)."""

from __future__ import annotations

import math

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

__all__ = ["SurfaceContract"]


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
            assert isinstance(storage.signals, SignalStore)
        else:
            assert storage.signals is None

    def test_clock_is_epoch_seconds_and_never_runs_backwards(self, storage: Storage) -> None:
        first = storage.now()
        second = storage.now()
        assert isinstance(first, float)
        assert math.isfinite(first) and first > 1_600_000_000.0
        assert second >= first

    def test_close_is_idempotent(self, storage: Storage) -> None:
        storage.close()
        storage.close()


class TestSurface(SurfaceContract):
    """The surface contract against ``--reactor-storage``."""
