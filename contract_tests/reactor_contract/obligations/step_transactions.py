"""Obligations of transactional steps, an optional storage capability (docs/obligations.md;
docs/contract-suite.md, "The obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_TRANSACTIONS = 'docs/protocol.md, "Transactional steps"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-step_transactions-1",
        "What the calling thread writes to the storage inside binding() of a step transaction "
        "is invisible to every other reader until commit() and visible once it returned.",
        _TRANSACTIONS,
    ),
    Obligation(
        "O-step_transactions-2",
        "rollback() discards everything written inside binding(); it never raises, and a "
        "second rollback() or a rollback() after commit() changes nothing.",
        _TRANSACTIONS,
    ),
    Obligation(
        "O-step_transactions-3",
        "Inside binding(), the calling thread reads what it wrote in the transaction.",
        _TRANSACTIONS,
    ),
    Obligation(
        "O-step_transactions-4",
        "Operations of other threads while one thread is inside binding() run outside the "
        "transaction: they are visible at once and survive its rollback.",
        _TRANSACTIONS,
    ),
    Obligation(
        "O-step_transactions-5",
        "A fenced save inside binding() whose fence is stale raises StaleWriterError (the "
        "engine then rolls back), exactly as outside a transaction.",
        _TRANSACTIONS,
    ),
    Obligation(
        "O-step_transactions-6",
        "Two step transactions are independent: each commits or rolls back only its own "
        "writes, and each gives its connection back (many in a row never exhaust a pool).",
        _TRANSACTIONS,
    ),
)
