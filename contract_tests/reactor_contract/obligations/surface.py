"""Obligations of the surface concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_STORAGE = 'docs/protocol.md, "Storage"'
_CONVENTIONS = 'docs/protocol.md, "Conventions"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-surface-1",
        "The storage is an instance of the runtime-checkable protocol reactor.ports.Storage.",
        _STORAGE,
    ),
    Obligation(
        "O-surface-2",
        "Each of storage.contexts, step_results, maps, map_rollbacks, claims, locks, "
        "semaphores, rate_limits, periods and ordered_locks satisfies its runtime-checkable "
        "protocol (ContextStore, StepResultStore, MapStore, MapRollbackStore, ClaimStore, "
        "LockStore, SemaphoreStore, RateLimitStore, PeriodStore, OrderedLockStore).",
        _STORAGE,
    ),
    Obligation(
        "O-surface-3",
        "storage.capabilities is a reactor.ports.Capabilities whose clock is \"server\" or "
        "\"application\" and whose max_document_bytes is None or a positive number of bytes.",
        'docs/protocol.md, "Capabilities"',
    ),
    Obligation(
        "O-surface-4",
        "Storage.now() returns a float of epoch seconds (UTC, time.time() units): finite, "
        "within the suite's tolerance of time.time(), never milliseconds, a monotonic clock or "
        "local time.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-surface-5",
        "Storage.now() never runs backwards: successive readings never decrease.",
        'docs/writing-an-adapter.md, "Clocks"',
        "probabilistic",
        "1,000 readings in a row: a clock that steps back at random (a jittered offset, "
        "readings from several servers) fails with overwhelming probability; one that steps "
        "back only at a recalibration (every refresh_seconds) is caught only when one falls "
        "inside the readings",
    ),
    Obligation(
        "O-surface-6",
        "Storage.close() releases connections and threads, and calling it twice is harmless "
        "(the second call raises nothing).",
        _STORAGE,
    ),
    Obligation(
        "O-surface-7",
        "A backend failure raises reactor.StorageError, never a driver exception: on a closed "
        "storage every operation (now, context load and save, step-result scan, map init, lock "
        "acquire, period mark) either works or raises StorageError.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-surface-8",
        "The storage factory accepts a prefix query parameter that namespaces everything the "
        "adapter stores: a storage built from the same URL with another prefix sees none of "
        "this one's contexts (load and scan), step results (scan) or locks.",
        'docs/contract-suite.md, "Isolation: one namespace per test"',
    ),
    Obligation(
        "O-surface-9",
        "A TTL other than None is a positive, finite number of seconds: locks.acquire, "
        "locks.extend, semaphores.acquire (its lease), periods.mark and ordered_locks.assign "
        "raise ValueError for 0, a negative, NaN or an infinite TTL, and change nothing.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-surface-10",
        "The extra storage a probe's with_clock(clock) returns reads clock() in now() under an "
        "application clock, and closing it leaves the probed storage usable (its records "
        "still read back, a lock can still be taken).",
        'docs/writing-an-adapter.md, "What the suite assumes"',
    ),
)
