"""Obligations of keys built from user text (docs/obligations.md; docs/contract-suite.md,
"The obligation catalogue" and "Properties over whole families")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SOURCE = 'docs/protocol.md, "Conventions"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-keys-1",
        "Lock keys that differ in any character (separators, Unicode that normalises alike, "
        "case) are different locks: each is acquired by its own owner and reports it.",
        _SOURCE,
    ),
    Obligation(
        "O-keys-2",
        "Semaphore, rate-limit and period keys that differ in any character are different "
        "records: a limit of 1 admits one holder or hit per key, and each key's first mark wins.",
        _SOURCE,
    ),
    Obligation(
        "O-keys-3",
        "Ordered-lock keys that differ in any character are different lines: each key's first "
        "ticket has nonce 1.",
        _SOURCE,
    ),
    Obligation(
        "O-keys-4",
        "Correlation ids that differ in any character are claimed and resolved independently.",
        _SOURCE,
    ),
    Obligation(
        "O-keys-5",
        "An idempotency key is scoped by its reactor: two (reactor, key) pairs that differ are "
        "claimed independently, including pairs a naive join would make equal "
        "((r, ':k') and (r + ':', 'k')).",
        _SOURCE,
    ),
    Obligation(
        "O-keys-6",
        "Step results and interrupt-resume claims are keyed by the (run, step) pair: step names "
        "and step paths that differ in any character keep separate records under one run, "
        "and the same step name under two runs too (run ids are reactor's UUID strings).",
        _SOURCE,
    ),
)
