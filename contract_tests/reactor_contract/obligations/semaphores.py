"""Obligations of the semaphores concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SEMAPHORES = 'docs/protocol.md, "Semaphores"'
_RACES = (
    "barrier and a spin until all are awake, with the thread switch interval cut to 1 us"
)

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-semaphores-1",
        "acquire(key, holder, limit, lease) leases a slot (True) while fewer than limit live "
        "leases exist and refuses (False) otherwise: at most limit live leases at a time.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-2",
        "A holder with a live lease that acquires again renews its lease to now + lease and "
        "gets True, keeping its one slot.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-3",
        "release(key, holder) removes only the caller's own lease and returns True; it returns "
        "False when the caller holds no lease (never acquired, already released, a stranger, "
        "an unknown key).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-4",
        "A holder whose lease lapsed gets False from release and extend and frees nothing: no "
        "other holder's slot is given back, before or after its own slot was taken over.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-5",
        "extend(key, holder, lease) sets the caller's live lease to now + lease (never adds) "
        "and returns True; it returns False for a holder without a live lease (an expired "
        "lease is never revived).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-6",
        "state(key) returns a SemaphoreState with the limit, the live holders each with its "
        "lease expiry (the storage clock at the acquire plus lease), and available = limit "
        "minus the live holders.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-7",
        "state(key) is None when the semaphore was never used, was reset, or is empty (every "
        "lease released or lapsed).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-8",
        "Expired leases are dropped: once a holder's lease lapsed, state() omits it and its "
        "slot goes to the next acquire (capacity is never lost).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-9",
        "The acquire that creates a semaphore fixes its limit: a later acquire naming another "
        "limit neither changes it nor is judged by it while any lease is live, and an empty "
        "semaphore (every lease released or lapsed) takes the next caller's limit.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-10",
        "With limit 0, acquire returns False and stores nothing (state() stays None).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-11",
        "reset(key) drops every lease: state() is None and a former holder's release returns "
        "False; resetting a key never used is harmless.",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-12",
        "The stored semaphore lives at least as long as its longest live lease (a shorter "
        "lease taken first never shortens the record's TTL).",
        _SEMAPHORES,
    ),
    Obligation(
        "O-semaphores-13",
        "A lease that is not a positive finite number of seconds (0, negative, infinite, NaN) "
        "makes acquire and extend raise ValueError and store nothing.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-semaphores-14",
        "acquire is atomic: of holders racing for a free semaphore of limit n exactly n get "
        "True, and the stored holders are exactly those n.",
        _SEMAPHORES,
        checked="probabilistic",
        how="test_concurrency races 16 holders for a semaphore of 3 on a fresh key per round, "
        f"released together by a {_RACES}: at least 20 rounds, up to 300 within 1 s. A "
        "read-then-write acquire admits a fourth holder when two interleave between the read "
        "and the write: about one race in ten in-process, nearly every race over a network, "
        "so it fails with overwhelming odds.",
    ),
    Obligation(
        "O-semaphores-15",
        "Under churn the live leases never exceed the limit, and a holder's release of its "
        "live lease returns True.",
        _SEMAPHORES,
        checked="probabilistic",
        how="test_concurrency runs one race of 16 holders, released together by a "
        f"{_RACES}, each acquiring and releasing a semaphore of 3 five times (80 acquires) "
        "and reading state() while it holds; an over-admission needs two acquires to "
        "interleave, which 80 overlapping acquires make likely but not certain in one run "
        "(O-semaphores-14 is the check with rounds).",
    ),
    Obligation(
        "O-semaphores-16",
        "On any sequence of acquire, release, extend, state and reset calls and expiries (of "
        "the whole semaphore or of one lease), the store answers what the pure model "
        "reactor.model.coordination.semaphores answers.",
        'docs/writing-an-adapter.md, "Native fast paths"',
        checked="probabilistic",
        how="test_model draws 30 random sequences of up to 30 operations on 2 keys, 3 holders "
        "and limits 0..3 per run (hypothesis) and compares every answer with the model's; a "
        "divergence that only a rare sequence reaches may escape one run.",
    ),
)
