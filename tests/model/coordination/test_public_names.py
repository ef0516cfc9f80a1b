"""Pins the public names of reactor.model.coordination (httpx style)."""

from __future__ import annotations

import reactor.model.coordination as coordination
from reactor.model.coordination import locks, ordered_locks, periods, rate_limits, semaphores


def test_package_exports() -> None:
    assert sorted(coordination.__all__) == [
        "Every",
        "LockState",
        "OrderedLockRecord",
        "PeriodMarkState",
        "RateCounters",
        "ReferenceCoordination",
        "SemaphoreLeases",
        "SettableClock",
        "Timed",
        "WindowCounter",
        "bucket",
        "bucket_key",
        "deadline",
        "fencing",
        "is_live",
        "locks",
        "ordered_locks",
        "period_seconds",
        "periods",
        "rate_limits",
        "reference",
        "semaphores",
        "ttl_seconds",
    ]
    for name in coordination.__all__:
        assert hasattr(coordination, name)


def test_module_exports() -> None:
    assert set(locks.__all__) >= {"LockState", "acquire", "release", "extend", "held", "info"}
    assert set(semaphores.__all__) >= {"SemaphoreLeases", "acquire", "release", "extend", "view"}
    assert set(rate_limits.__all__) >= {"RateCounters", "hit", "count", "window_id"}
    assert set(periods.__all__) >= {"mark", "marker", "bucket", "period_seconds", "ttl_seconds"}
    assert set(ordered_locks.__all__) >= {
        "OrderedLockRecord",
        "assign",
        "can_proceed",
        "advance",
        "heartbeat",
        "skip",
        "reset",
        "peek",
    }
    for module in (locks, semaphores, rate_limits, periods, ordered_locks):
        for name in module.__all__:
            assert getattr(module, name).__doc__ or name.isupper() or name == "Every", name
        assert module.__doc__ and "docs/protocol.md#" in module.__doc__  # it names its spec
