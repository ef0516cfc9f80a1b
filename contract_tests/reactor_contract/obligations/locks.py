"""Obligations of the locks concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_LOCKS = 'docs/protocol.md, "Locks"'
_FENCING = 'docs/coordination.md, "Fencing tokens"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-locks-1",
        "acquire(key, owner, ttl) of a lock that is absent, released or lapsed gives it to "
        "owner with count 1 and the TTL ttl, and returns the holder's fencing token: an int "
        "(not a bool) in 1 .. 2**53 - 1, which info() reports as its token.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-2",
        "acquire by another owner while the lock is held returns the int 0 and changes nothing: "
        "the holder's owner, count, token and TTL stay.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-3",
        "acquire by the current holder re-enters: the count goes up by one, the TTL is reset to "
        "the new ttl (shorter or longer), and the current token is returned unchanged.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-4",
        "release(key, owner) by the holder decrements the count and returns True; a partial "
        "release (the count stays >= 1) keeps the TTL and the token.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-5",
        "A release that brings the count to 0 frees the lock: held() is False, info() is None "
        "and another owner's acquire succeeds.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-6",
        "release returns False and changes nothing for an owner that does not hold the lock: a "
        "stranger, or any owner of a lock never taken, already released or lapsed.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-7",
        "extend(key, owner, ttl) by the holder sets the remaining TTL to ttl (never adds to the "
        "old one) and returns True, leaving the count and the token unchanged; ttl None makes "
        "the lock permanent.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-8",
        "extend returns False and changes nothing (the TTL included) for anyone but the live "
        "holder: a stranger, or any owner of a lock never taken or lapsed.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-9",
        "held(key) is True exactly while someone holds the lock: False for a key never taken, "
        "released to count 0, or lapsed.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-10",
        "info(key) returns a LockInfo with the holder's owner, count, token and expires_at "
        "(the storage clock's now() at the acquire or extend plus its ttl; None for ttl None), "
        "and None when the lock is not held.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-11",
        "A lock taken with ttl None never expires: info().expires_at is None and its record "
        "has no TTL until an extend gives it one.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-locks-12",
        "A lock whose expires_at <= now is not held for every read and conditional write: "
        "held() is False, info() is None, its old owner's release and extend return False, and "
        "the next acquire (by anyone, its old owner too) takes it fresh with count 1.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-locks-13",
        "Once another owner took a lapsed lock, the old owner never touches it: its release "
        "and extend return False, its acquire returns 0, and the new owner's count and TTL stay.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-14",
        "Locks of different keys are independent: taking or releasing one never changes "
        "another.",
        _LOCKS,
    ),
    Obligation(
        "O-locks-15",
        "Every fresh acquisition of a key returns a token strictly greater than every token the "
        "key returned before, across owners, releases to count 0 and idle expiry "
        "(max(previous token + 1, now in integer microseconds)).",
        _FENCING,
    ),
    Obligation(
        "O-locks-16",
        "Tokens keep increasing after garbage collection removed the lock's record and the "
        "token it kept: the clock term of the next token exceeds every earlier token.",
        _FENCING,
    ),
    Obligation(
        "O-locks-17",
        "No permanent state per key, yet the previous token is kept: a held lock's record lives "
        "its ttl plus FENCE_RETENTION (5 s), and a release to count 0 leaves a tombstone that "
        "is not held and lives FENCE_RETENTION, even for a lock taken with ttl None.",
        _FENCING,
    ),
    Obligation(
        "O-locks-18",
        "A ttl that is neither None nor a positive finite number of seconds (0, negative, "
        "infinite, NaN) makes acquire and extend raise ValueError and change nothing.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-locks-19",
        "acquire is atomic: of several owners racing for a free lock exactly one gets a token "
        "and every other gets 0, and info() shows the winner, its token and count 1.",
        _LOCKS,
        checked="probabilistic",
        how="test_concurrency races 8 owners on a fresh key per round, released together by "
        "a barrier and a spin until all are awake, with the thread switch interval cut to "
        "1 us: at least 20 rounds, up to 300 within 1 s. A read-then-write acquire lets two "
        "owners win when two interleave between the read and the write: about one race in ten "
        "in-process, nearly every race over a network, so it fails with overwhelming odds.",
    ),
    Obligation(
        "O-locks-20",
        "On any sequence of acquire, release, extend, held and info calls, expiries and "
        "garbage collections, the store answers what the pure model "
        "reactor.model.coordination.locks answers (tokens compared by their order).",
        _LOCKS,
        checked="probabilistic",
        how="test_model draws 30 random sequences of up to 30 operations on 2 keys and 3 "
        "owners per run (hypothesis) and compares every answer with the model's; a divergence "
        "that only a rare sequence reaches may escape one run, and hypothesis shrinks any it "
        "finds to a short history in the failure.",
    ),
)
