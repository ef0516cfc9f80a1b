"""Obligations of listings after random operation sequences (docs/obligations.md;
docs/contract-suite.md, "The obligation catalogue" and "Properties over whole families")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-listings-1",
        "A whole run scan (any status filter, with or without dispatched children, any page "
        "size) lists every live matching top-level run, never a deleted or expired one, a "
        "map element, or a row whose status is not the run's current status.",
        'docs/protocol.md, "Contexts"',
    ),
    Obligation(
        "O-listings-2",
        "A sweeper pass walked page by page while runs are written, deleted and expired lists "
        "every run that was live, matching and untouched for the whole pass, and no run that "
        "is gone when its page is read.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-listings-3",
        "Dashboard pages (any status, reactor and creation-time filters, any page size) list "
        "every live matching top-level run exactly once, newest first, ties in created_at "
        "included; a run that expired or was deleted is not listed.",
        'docs/protocol.md, "Filtered pages"',
    ),
    Obligation(
        "O-listings-4",
        "A step-result scan (any status filter, any page size) lists every live matching "
        "record with its current status and no expired one.",
        'docs/protocol.md, "Step results"',
    ),
)
