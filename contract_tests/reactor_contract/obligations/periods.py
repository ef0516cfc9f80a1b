"""Obligations of the periods concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_PERIODS = 'docs/protocol.md, "Periods"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-periods-1",
        "mark(key, ttl=, context_id=) creates the marker when no live marker exists and "
        "returns True.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-2",
        "mark of a key with a live marker returns False and leaves the marker untouched: its "
        "context_id, marked_at and TTL stay the first writer's.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-3",
        "marker(key) returns a PeriodMarker with the winning mark's context_id and marked_at "
        "(the storage clock at the mark), and None for a key never marked.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-4",
        "A mark without a context_id stores a marker whose context_id is None.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-5",
        "A marker lives ttl seconds from its mark.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-6",
        "A marker marked with ttl None never expires.",
        _PERIODS,
    ),
    Obligation(
        "O-periods-7",
        "A marker whose ttl lapsed reads as None, and the next mark of its key (by another "
        "context) creates a new marker and returns True.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-periods-8",
        "A ttl that is neither None nor a positive finite number of seconds (0, negative, "
        "infinite, NaN) makes mark raise ValueError and store nothing.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-periods-9",
        "mark is first-writer-wins on every backend: of several marks racing for one key "
        "exactly one returns True, and the stored marker is that one's.",
        _PERIODS,
        checked="probabilistic",
        how="test_concurrency races 8 marks on a fresh key per round, released together by a "
        "barrier and a spin until all are awake, with the thread switch interval cut to 1 us: "
        "at least 20 rounds, up to 300 within 1 s. A read-then-write mark lets two win when "
        "two interleave between the read and the write: about one race in ten in-process, "
        "nearly every race over a network, so it fails with overwhelming odds.",
    ),
    Obligation(
        "O-periods-10",
        "On any sequence of mark and marker calls and expiries, the store answers what the "
        "pure model reactor.model.coordination.periods answers.",
        'docs/writing-an-adapter.md, "Native fast paths"',
        checked="probabilistic",
        how="test_model draws 30 random sequences of up to 20 operations on 2 keys per run "
        "(hypothesis) and compares every answer with the model's; a divergence that only a "
        "rare sequence reaches may escape one run.",
    ),
)
