"""Obligations of stored schedules, an optional storage capability (docs/obligations.md;
docs/contract-suite.md, "The obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SCHEDULES = 'docs/protocol.md, "Schedules"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-schedules-1",
        "schedules.get(name) returns None for a name never stored (or deleted).",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-2",
        "put(name, document, expected_version=None) of a name not stored creates the record "
        "and returns its version, a non-empty str; get(name) then returns ScheduleRecord(name, "
        "document, that version), the document verbatim.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-3",
        "put(name, ..., expected_version=None) when a record of that name is stored returns "
        "None and writes nothing (insert-if-absent, never an upsert).",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-4",
        "put(name, document, expected_version=<the stored version>) replaces the document and "
        "returns a new version, which get then reports.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-5",
        "put with a version the stored record does not have (a replaced one, a made-up one, "
        "another name's), or with any version when nothing is stored, returns None, never "
        "raises, and writes nothing.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-6",
        "Every write returns a version never issued before for that name: not after writing "
        "the same document again, nor after a delete and re-create (no ABA), so an old "
        "version never wins again.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-7",
        "delete(name, expected_version=<the stored version>) removes the record and returns "
        "True: get returns None, scan no longer lists it, a second delete returns False, and "
        "put with expected_version=None creates the name again.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-8",
        "delete with a version the stored record does not have, or of a name not stored, "
        "returns False, never raises, and deletes nothing.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-9",
        "scan(after=, limit=) returns the stored records (name, document, version) in "
        "ascending code point order of their names, only names strictly greater than after "
        "(stored or not), at most limit of them: the first limit such names.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-10",
        "Without concurrent writes a scan page holds fewer than limit records only when no "
        "more names follow, and deleted records never use up a page: paging with after=<the "
        "page's last name> until a short page lists every stored schedule exactly once.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-11",
        "scan with a limit below 1 raises ValueError.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-12",
        "put and delete are atomic compare-and-sets: of several calls racing from one "
        "version (or from None for a create) exactly one wins, and the stored record is the "
        "winner's.",
        _SCHEDULES,
        checked="probabilistic",
        how="test_schedules races 8 threads from one version on a fresh name per round "
        "(puts; creates; deletes and puts mixed), released together by a barrier and a spin "
        "until all are awake, with the thread switch interval cut to 1 us: at least 20 "
        "rounds, up to 300 within 1 s. A read-then-write lets two win when two interleave "
        "between the read and the write: about one race in ten in-process, nearly every race "
        "over a network.",
    ),
    Obligation(
        "O-schedules-13",
        "Names are kept exactly: names that differ in any character (case, Unicode "
        "normalisation, a separator, the last of 100 characters, 4-byte characters) are "
        "distinct records, and get and scan return each name as written.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-14",
        "Schedules share nothing with the other stores: a schedule named like a lock, period, "
        "run, claim or sweep cursor key leaves that record alone, and those records are never "
        "listed as schedules.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-15",
        "Documents are opaque text kept verbatim (never parsed nor re-encoded), up to the "
        "declared Capabilities.max_document_bytes (1 MiB when none is declared).",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-16",
        "Stored schedules never expire: at any later time of the storage clock they still "
        "read, list and accept their version.",
        _SCHEDULES,
    ),
    Obligation(
        "O-schedules-17",
        "A storage built from the same URL with another ?prefix= sees none of this one's "
        "schedules and cannot write or delete them.",
        _SCHEDULES,
    ),
)
