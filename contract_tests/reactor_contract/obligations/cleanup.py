"""Obligations of the cleanup concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_CLEANUP = 'docs/contract-suite.md, "Cleanup: nothing left behind"'
_PROBE = 'docs/writing-an-adapter.md, "4. The probe"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-cleanup-1",
        "A storage probe's leftovers() (CleanupProbe) lists what the probed storage's namespace "
        "holds: after records were written to it the list is not empty.",
        _CLEANUP,
    ),
    Obligation(
        "O-cleanup-2",
        "A storage probe's purge_namespace() deletes everything under the probed storage's "
        "prefix (records of every sub-store, expired records and fence tombstones included): "
        "leftovers() is [] afterwards.",
        _PROBE,
    ),
    Obligation(
        "O-cleanup-3",
        "purge_namespace() returns how many records it deleted: at least 1 for a namespace "
        "that held records, and 0 for a second purge of the same namespace.",
        _PROBE,
    ),
    Obligation(
        "O-cleanup-4",
        "purge_namespace() deletes only its own namespace: a storage on another prefix of the "
        "same URL keeps its records.",
        _CLEANUP,
    ),
    Obligation(
        "O-cleanup-5",
        "A router probe's purge_namespace() removes everything of the router's namespace (its "
        "queue, due, delayed and in-flight messages, dead letters) and returns a count: "
        "leftovers() is [] afterwards.",
        _CLEANUP,
    ),
)
