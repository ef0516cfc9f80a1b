"""Obligations of the documents concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_TABLE = 'docs/protocol.md, "Document stores"'
_SHORTCUT = 'docs/writing-an-adapter.md, "2. The shortcut"'
_VERSIONS = 'docs/writing-an-adapter.md, "Versions"'
_SCANS = 'docs/writing-an-adapter.md, "Scans, expiry and the clock"'
_ASSUMES = 'docs/writing-an-adapter.md, "What the suite assumes"'

#: How the racing compare-and-set checks make their odds overwhelming (test_concurrency's
#: race_rounds).
_RACES = (
    "a series of races on fresh keys (at least 20, up to 300 within a second), each of 8 "
    "threads released together once all are awake, with the interpreter's thread switch "
    "interval cut to 1 µs: a read-then-write loses about one race in ten in process and "
    "nearly every race over a network, so it fails the series with overwhelming probability"
)

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-documents-1",
        "DocumentStore.now() returns a float of epoch seconds (time.time() units: never "
        "milliseconds, a monotonic clock or local time read as UTC), and it is the same clock "
        "as Storage.now().",
        _SCANS,
    ),
    Obligation(
        "O-documents-2",
        "Every expiry decision of read, write and scan is judged against now(): a document "
        "whose expires_at is now() + 60 is live and one whose expires_at is now() - 60 is "
        "expired, whether or not the backend has physically deleted it.",
        _TABLE,
    ),
    Obligation(
        "O-documents-3",
        "read(c, k) of a key with nothing physically stored returns Versioned(None, None): no "
        "value and no version.",
        _SHORTCUT,
    ),
    Obligation(
        "O-documents-4",
        "read(c, k) of a live document returns the value exactly as written (JSON-native: "
        "non-ASCII strings, integers up to 2**53 - 1, floats, booleans, null, nested lists and "
        "objects), its version as a non-empty str and the expires_at it was written with.",
        _SHORTCUT,
    ),
    Obligation(
        "O-documents-5",
        "A document written with expires_at=None reads back expires_at None and never expires; "
        "one written with a future expires_at is live in read and in scan.",
        _SCANS,
    ),
    Obligation(
        "O-documents-6",
        "Collections are separate namespaces: a key written in one collection is absent from "
        "read and scan of another, and writing the same key there changes nothing in the "
        "first.",
        _TABLE,
    ),
    Obligation(
        "O-documents-7",
        "write(c, k, v, expected_version=V, expires_at=E, index=I) with V the stored version "
        "stores v with E and I and returns True.",
        _TABLE,
    ),
    Obligation(
        "O-documents-8",
        "write(..., expected_version=None) succeeds only when nothing is physically stored for "
        "the key: over a stored document, live or expired, it returns False and changes "
        "nothing.",
        _VERSIONS,
    ),
    Obligation(
        "O-documents-9",
        "A write with a stale or made-up expected_version, or with any version on an absent "
        "key, returns False, changes nothing and raises nothing (a driver's conditional-check "
        "error is False, never an exception).",
        _VERSIONS,
    ),
    Obligation(
        "O-documents-10",
        "Every successful write (create or update) stores a version never issued before for "
        "the key.",
        _VERSIONS,
    ),
    Obligation(
        "O-documents-11",
        "A version is never reused after a delete and re-create (an opaque token such as a "
        "UUID, never a counter): a compare-and-set with a version read before the delete loses "
        "against the re-created document (no ABA).",
        _VERSIONS,
    ),
    Obligation(
        "O-documents-12",
        "A delete (value=None) is a compare-and-set: with a stale version it returns False and "
        "keeps the document; with the stored version it returns True, and read then gives "
        "Versioned(None, None).",
        _VERSIONS,
    ),
    Obligation(
        "O-documents-13",
        "write(c, k, None, expected_version=None) returns True and changes nothing when nothing "
        "is stored, and returns False and keeps the document when one is stored, expired or "
        "not; a delete with a version on an absent key returns False; none of them raises.",
        _ASSUMES,
    ),
    Obligation(
        "O-documents-14",
        "Of several concurrent compare-and-sets on one stored version exactly one returns True "
        "and its value is the one stored: the version check and the write are one atomic "
        "request.",
        _VERSIONS,
        "probabilistic",
        _RACES,
    ),
    Obligation(
        "O-documents-15",
        "Of several concurrent creates (expected_version=None) of one absent key exactly one "
        "returns True.",
        _VERSIONS,
        "probabilistic",
        _RACES,
    ),
    Obligation(
        "O-documents-16",
        "One DocumentStore is safe to call from many threads at once: concurrent calls each "
        "complete with their own correct result, never an exception nor a crossed reply.",
        _ASSUMES,
        "probabilistic",
        _RACES,
    ),
    Obligation(
        "O-documents-17",
        "read of a document whose expires_at <= now() returns value None but still reports its "
        "stored version.",
        _SCANS,
    ),
    Obligation(
        "O-documents-18",
        "An expired document is taken over by a write whose expected_version is its reported "
        "version (the write returns True and the new value reads back).",
        _TABLE,
    ),
    Obligation(
        "O-documents-19",
        "The expiry boundary is inclusive: at now() == expires_at a document is expired for read "
        "(value None, version kept) and for scan; while now() < expires_at it is live.",
        _SCANS,
    ),
    Obligation(
        "O-documents-20",
        "scan lists only unexpired documents (expires_at > now()), with or without an index "
        "filter.",
        _SCANS,
    ),
    Obligation(
        "O-documents-21",
        "scan(c) returns (key, value) pairs of the collection's documents in ascending "
        "code-point order of their keys (never insertion order nor a case-folding collation).",
        _SCANS,
    ),
    Obligation(
        "O-documents-22",
        "scan(c, after=k) returns only keys strictly greater than k (>, never >=); after the "
        "last key it returns nothing.",
        _SCANS,
    ),
    Obligation(
        "O-documents-23",
        "scan(c, after=k, limit=n) starts at the first stored key strictly greater than k also "
        "when k is not stored (a deleted key, or a key with \"\\x00\" appended).",
        _SCANS,
    ),
    Obligation(
        "O-documents-24",
        "An after of a key with \"\\x00\" appended reaches the comparison intact (bound as a "
        "parameter, or with trailing NULs stripped where text cannot carry NUL): "
        "scan(after=key + \"\\x00\") returns exactly the keys strictly greater than key.",
        _ASSUMES,
    ),
    Obligation(
        "O-documents-25",
        "scan(c, limit=n) returns at most n documents, the first n in key order; limit=0 returns "
        "none.",
        _SCANS,
    ),
    Obligation(
        "O-documents-26",
        "Keyset paging, each page scan(c, after=<last key of the previous page>, limit=n), lists "
        "every document exactly once, in key order, for any n >= 1.",
        _SCANS,
    ),
    Obligation(
        "O-documents-27",
        "scan(c, index=X) lists only the documents whose last write gave index X, with the "
        "index filter applied in the query before the limit.",
        _SCANS,
    ),
    Obligation(
        "O-documents-28",
        "The expiry filter applies before the limit: expired documents ahead of live ones never "
        "use up a page, with or without an index filter.",
        _SCANS,
    ),
    Obligation(
        "O-documents-29",
        "A rewrite with another index (or None) leaves the old index: scan(index=old) no longer "
        "lists the document, and its former entry hides no other document of that index at any "
        "page size.",
        _SCANS,
    ),
    Obligation(
        "O-documents-30",
        "Keys and collection names are any non-empty str (ASCII and non-ASCII letters, digits, "
        "':', '/', '-', '_', spaces, '#', dots), stored and compared as text: each reads back "
        "under its own key and scan orders them by code point (UTF-8 byte order), never by a "
        "locale collation, case-insensitively or in UTF-16 order.",
        _ASSUMES,
    ),
    Obligation(
        "O-documents-31",
        "A backend that bounds a document's size refuses a larger document in write with "
        "ContextTooLargeError or StorageError and writes nothing of it.",
        _SCANS,
    ),
    Obligation(
        "O-documents-32",
        "DocumentStore.close() releases its resources and is idempotent: a second call raises "
        "nothing.",
        _TABLE,
    ),
)
