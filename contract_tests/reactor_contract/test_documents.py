"""Documents: the versioned-document primitive itself (``reactor/ports/documents.py``).

Every sub-store of :class:`reactor.generic.storage.GenericStorage` is correct only if its
:class:`reactor.ports.DocumentStore` is, so an adapter built on one (memory, MongoDB, DynamoDB,
the SQLite example, yours) is certified on the primitive directly: compare-and-set, opaque
versions (no ABA after a delete and re-create), keyset scans, index filters, logical expiry and
its boundary, the clock's units and the declared document size limit. A failure names the rule
and the adapter mistake that usually breaks it (docs/writing-an-adapter.md, "Versions" and
"Scans, expiry and the clock").

A storage that is not built on a ``DocumentStore`` (Redis: native sub-stores) has nothing to
certify here: every test skips as "not applicable", and the conformance table shows the row as
``n/a``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor.errors import ContextTooLargeError, StorageError
from reactor.ports.documents import DocumentStore
from reactor.ports.storage import Storage
from reactor_contract._support import CLOCK_TOLERANCE, HOUR, clock_offset_diagnosis, uid
from reactor_contract.plugin import NO_SIZE_LIMIT, NOT_APPLICABLE, open_storage
from reactor_contract.probe import ClockProbe, DocumentsClockProbe, Probe
from reactor_contract.test_concurrency import race_rounds

__all__ = ["DocumentsContract"]

#: The collection every test writes to (the storage's per-test namespace isolates it).
COLLECTION = "contract_documents"
#: A second collection, to check collections are separate namespaces.
OTHER = "contract_documents_other"

_VERSIONS = 'see docs/writing-an-adapter.md, "Versions"'
_SCANS = 'see docs/writing-an-adapter.md, "Scans, expiry and the clock"'
_ASSUMES = 'see docs/writing-an-adapter.md, "What the suite assumes"'


def rule(text: str, mistake: str, where: str = _VERSIONS) -> str:
    """A failure message: the rule broken, the likely adapter mistake, where it is documented."""
    return f"documents: {text} (likely mistake: {mistake}; {where})"


@pytest.fixture
def documents(storage: Storage) -> DocumentStore:
    """The storage's :class:`DocumentStore`; skips as not applicable when it has none."""
    found = getattr(storage, "documents", None)
    if not isinstance(found, DocumentStore):
        pytest.skip(
            f"{NOT_APPLICABLE} {type(storage).__name__} is not built on a DocumentStore "
            "(its native sub-stores are certified by the other concerns)"
        )
    return found


class _Clock:
    """A settable clock for a probe's clocked view of the same documents."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clocked(
    documents: DocumentStore, probe: Probe
) -> Iterator[Callable[[float], tuple[DocumentStore, _Clock]]]:
    """``view(start)``: the same documents judged by a settable clock (``ClockProbe``)."""
    opened: list[Storage | DocumentStore] = []

    def view(start: float) -> tuple[DocumentStore, _Clock]:
        clock = _Clock(start)
        if isinstance(probe, DocumentsClockProbe):  # a server-clock storage's documents
            twin = probe.documents_with_clock(clock)
            if twin is not None:
                opened.append(twin)
                return twin, clock
        if not isinstance(probe, ClockProbe):
            pytest.skip("capability: the probe cannot inject a clock (no ClockProbe.with_clock)")
        other = probe.with_clock(clock)
        if other is None:
            pytest.skip("capability: the probe cannot inject a clock (with_clock gave None)")
        opened.append(other)
        docs = getattr(other, "documents", None)
        if not isinstance(docs, DocumentStore):
            pytest.skip("capability: the clocked storage exposes no DocumentStore")
        return docs, clock

    yield view
    for other in opened:
        other.close()


def _put(docs: DocumentStore, key: str, value: dict[str, Any], **kw: Any) -> str:
    """Create ``key`` (must be absent) and return its version."""
    kw.setdefault("expires_at", None)
    assert docs.write(COLLECTION, key, value, expected_version=None, **kw), rule(
        f"creating absent key {key!r} with expected_version=None must succeed",
        "treating None as 'any version' or refusing inserts",
    )
    version = docs.read(COLLECTION, key).version
    expires_at = kw["expires_at"]
    if version is None and expires_at is not None and expires_at <= docs.now():
        pytest.fail(
            rule(
                "an expired document still reports its stored version (value None, version "
                "kept), so a caller can take it over with a compare-and-set",
                "returning version None for an expired row",
                _SCANS,
            )
        )
    assert isinstance(version, str) and version, rule(
        f"a stored document must report a non-empty str version, got {version!r}",
        "returning the driver's raw version field (int, ObjectId, bytes) instead of a str",
    )
    return version


def _keys(found: list[tuple[str, Any]]) -> list[str]:
    return [key for key, _ in found]


class DocumentsContract:
    """:class:`reactor.ports.DocumentStore` behaviour every document-backed adapter must show."""

    reactor_concern = "documents"

    @pytest.mark.obligations("O-documents-1")
    def test_now_is_epoch_seconds(self, documents: DocumentStore, storage: Storage) -> None:
        before = time.time()
        now = documents.now()
        after = time.time()
        assert isinstance(now, float), rule(
            f"now() must be a float of epoch seconds, got {type(now).__name__}",
            "returning an int or a datetime",
            _SCANS,
        )
        assert before - CLOCK_TOLERANCE <= now <= after + CLOCK_TOLERANCE, rule(
            f"now() must be epoch seconds within {CLOCK_TOLERANCE:g}s of time.time() "
            f"({before:.3f}), got {now!r} ({clock_offset_diagnosis(now, before, CLOCK_TOLERANCE)})",
            "a clock in milliseconds (x1000), a monotonic clock, or local time instead of UTC",
            _SCANS,
        )
        assert abs(storage.now() - now) <= 5.0, rule(
            "storage.now() and its DocumentStore's now() must be one clock",
            "two clocks (the engine and the expiry checks would disagree)",
            _SCANS,
        )

    @pytest.mark.obligations("O-documents-2")
    def test_expiry_is_judged_by_now(self, documents: DocumentStore) -> None:
        live, dead = uid("doc"), uid("doc")
        now = documents.now()
        assert documents.write(COLLECTION, live, {"v": 1}, expected_version=None,
                               expires_at=now + 60.0)
        assert documents.write(COLLECTION, dead, {"v": 0}, expected_version=None,
                               expires_at=now - 60.0)
        assert (
            documents.read(COLLECTION, live).value,
            documents.read(COLLECTION, dead).value,
        ) == ({"v": 1}, None), rule(
            "expires_at is judged against now(): now() + 60 is live, now() - 60 is expired",
            "reads judging expiry by another clock or unit than now() (milliseconds, UTC "
            "datetimes, the database's TTL job)",
            _SCANS,
        )

    # -- read and write ----------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-4")
    def test_a_written_document_round_trips(self, documents: DocumentStore) -> None:
        key = uid("doc")
        value = {"s": "é✓", "i": 2**53 - 1, "f": 0.25, "b": True, "n": None, "l": [1, {"x": []}]}
        expires = math.floor(documents.now()) + HOUR
        _put(documents, key, value, expires_at=expires)
        found = documents.read(COLLECTION, key)
        assert found.value == value, rule(
            "read must return the JSON-native value as written", "lossy encoding of the value"
        )
        assert found.expires_at == pytest.approx(expires, abs=1e-3), rule(
            "read must report the stored expires_at of a live document",
            "dropping or rounding expires_at (it is epoch seconds, a float)",
            _SCANS,
        )

    @pytest.mark.obligations("O-documents-3")
    def test_an_absent_document_has_no_value_and_no_version(
        self, documents: DocumentStore
    ) -> None:
        found = documents.read(COLLECTION, uid("absent"))
        assert (found.value, found.version) == (None, None)

    @pytest.mark.obligations("O-documents-5")
    def test_a_document_without_expiry_reports_none(self, documents: DocumentStore) -> None:
        key = uid("doc")
        _put(documents, key, {"v": 1})
        found = documents.read(COLLECTION, key)
        assert found.value == {"v": 1} and found.expires_at is None

    @pytest.mark.obligations("O-documents-6")
    def test_collections_are_separate_namespaces(self, documents: DocumentStore) -> None:
        key = uid("doc")
        _put(documents, key, {"in": "first"})
        assert documents.read(OTHER, key).version is None, rule(
            "a key written in one collection must be absent from another",
            "ignoring the collection name in the storage key",
        )
        assert documents.write(OTHER, key, {"in": "other"}, expected_version=None, expires_at=None)
        assert documents.read(COLLECTION, key).value == {"in": "first"}
        assert _keys(documents.scan(OTHER)) == [key]

    # -- compare-and-set ---------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-8")
    def test_expected_version_none_refuses_an_existing_document(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        _put(documents, key, {"v": 1})
        won = documents.write(COLLECTION, key, {"v": 2}, expected_version=None, expires_at=None)
        assert won is False, rule(
            "expected_version=None means 'must be absent': writing over a stored document "
            "must return False",
            "an upsert where an insert-if-absent is required",
        )
        assert documents.read(COLLECTION, key).value == {"v": 1}

    @pytest.mark.obligations("O-documents-7", "O-documents-9", "O-documents-10")
    def test_a_stale_version_loses_returns_false_and_changes_nothing(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        first = _put(documents, key, {"v": 1})
        assert documents.write(COLLECTION, key, {"v": 2}, expected_version=first, expires_at=None)
        second = documents.read(COLLECTION, key).version
        assert second != first, rule(
            "every write must store a new version", "keeping the version on update"
        )
        try:
            won = documents.write(
                COLLECTION, key, {"v": 3}, expected_version=first, expires_at=None
            )
        except Exception as exc:  # the rule is "returns False", so any raise is the bug
            pytest.fail(
                rule(
                    f"a compare-and-set with a stale version must return False, it raised {exc!r}",
                    "letting the driver's conditional-check error escape",
                )
            )
        assert won is False, rule(
            "a compare-and-set with a stale version must lose (return False)",
            "a write that ignores expected_version (last writer wins)",
        )
        after = documents.read(COLLECTION, key)
        assert (after.value, after.version) == ({"v": 2}, second), rule(
            "a losing compare-and-set must change nothing", "writing before checking the version"
        )

    @pytest.mark.obligations("O-documents-9")
    def test_a_made_up_version_never_matches(self, documents: DocumentStore) -> None:
        key = uid("doc")
        _put(documents, key, {"v": 1})
        assert not documents.write(
            COLLECTION, key, {"v": 2}, expected_version="not-a-version", expires_at=None
        ), rule("only the stored version may win a compare-and-set", "ignoring expected_version")
        absent = uid("absent")
        assert not documents.write(
            COLLECTION, absent, {"v": 1}, expected_version="not-a-version", expires_at=None
        ), rule(
            "a compare-and-set against a version on an absent key must lose",
            "treating a missing row as a match (an upsert)",
        )
        assert documents.read(COLLECTION, absent).version is None

    @pytest.mark.obligations("O-documents-12")
    def test_delete_is_a_compare_and_set_too(self, documents: DocumentStore) -> None:
        key = uid("doc")
        first = _put(documents, key, {"v": 1})
        assert documents.write(COLLECTION, key, {"v": 2}, expected_version=first, expires_at=None)
        stale = documents.write(COLLECTION, key, None, expected_version=first, expires_at=None)
        assert stale is False, rule(
            "a delete with a stale version must lose", "an unconditional delete"
        )
        assert documents.read(COLLECTION, key).value == {"v": 2}
        current = documents.read(COLLECTION, key).version
        assert documents.write(COLLECTION, key, None, expected_version=current, expires_at=None)
        gone = documents.read(COLLECTION, key)
        assert (gone.value, gone.version) == (None, None), rule(
            "a deleted document is physically absent (no version)",
            "a soft delete that keeps reporting a version",
        )

    @pytest.mark.obligations("O-documents-13")
    def test_deleting_an_absent_document_is_a_compare_and_set_too(
        self, documents: DocumentStore
    ) -> None:
        absent = uid("absent")
        try:
            nothing = documents.write(
                COLLECTION, absent, None, expected_version=None, expires_at=None
            )
            versioned = documents.write(
                COLLECTION, absent, None, expected_version="not-a-version", expires_at=None
            )
        except Exception as exc:  # the rule is a bool, so any raise is the bug
            pytest.fail(
                rule(
                    f"deleting an absent document is a compare-and-set that returns a bool, it "
                    f"raised {exc!r}",
                    "letting the driver's 'no such row' or conditional-check error escape",
                    _ASSUMES,
                )
            )
        assert nothing is True, rule(
            "write(c, k, None, expected_version=None) on an absent key returns True: its "
            f"condition, nothing physically stored, holds (got {nothing!r})",
            "answering whether a row was removed instead of whether the condition held",
            _ASSUMES,
        )
        assert versioned is False, rule(
            f"a delete with a version on an absent key returns False (got {versioned!r})",
            "an unconditional delete that reports success",
            _ASSUMES,
        )
        gone = documents.read(COLLECTION, absent)
        assert (gone.value, gone.version) == (None, None), rule(
            "deleting an absent document changes nothing", "a delete that stores a tombstone",
            _ASSUMES,
        )
        live, expired = uid("doc"), uid("doc")
        _put(documents, live, {"v": 1})
        _put(documents, expired, {"v": 2}, expires_at=documents.now() - 1.0)
        for key in (live, expired):
            before = documents.read(COLLECTION, key).version
            assert documents.write(
                COLLECTION, key, None, expected_version=None, expires_at=None
            ) is False, rule(
                "write(c, k, None, expected_version=None) returns False when a document is "
                "stored, expired or not",
                "a delete that ignores expected_version=None, or treats an expired row as absent",
                _ASSUMES,
            )
            assert documents.read(COLLECTION, key).version == before
        assert documents.read(COLLECTION, live).value == {"v": 1}

    @pytest.mark.obligations("O-documents-7", "O-documents-10")
    def test_every_write_stores_a_version_never_seen_before(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        seen = [_put(documents, key, {"n": 0})]
        for n in range(1, 6):
            assert documents.write(
                COLLECTION, key, {"n": n}, expected_version=seen[-1], expires_at=None
            )
            seen.append(str(documents.read(COLLECTION, key).version))
        assert len(set(seen)) == len(seen), rule(
            f"every write must store a version never seen before, got {seen}",
            "versions derived from the value or a clock with coarse resolution",
        )

    @pytest.mark.obligations("O-documents-11")
    def test_versions_are_never_reused_after_delete_and_recreate(
        self, documents: DocumentStore
    ) -> None:
        """ABA: a version read before a delete must not match the re-created document."""
        key = uid("doc")
        old = _put(documents, key, {"owner": "a"})
        seen = {old}
        for cycle in range(3):
            current = documents.read(COLLECTION, key).version
            assert documents.write(COLLECTION, key, None, expected_version=current, expires_at=None)
            new = _put(documents, key, {"owner": f"b{cycle}"})
            assert new not in seen, rule(
                f"the re-created document got version {new!r}, already used before the delete: "
                "versions must be opaque tokens, never counters",
                "a per-key counter that restarts at 1 after a delete (ABA)",
            )
            seen.add(new)
        assert not documents.write(
            COLLECTION, key, {"owner": "stale"}, expected_version=old, expires_at=None
        ), rule(
            "a compare-and-set with a version read before a delete and re-create must lose "
            "(ABA): versions must be opaque tokens, never counters",
            "counter versions: the re-created document's counter caught up with the old one",
        )
        assert documents.read(COLLECTION, key).value == {"owner": "b2"}

    @pytest.mark.obligations("O-documents-14", "O-documents-16")
    def test_one_of_many_racing_compare_and_sets_wins(self, documents: DocumentStore) -> None:
        versions: dict[str, str] = {}

        def prepare(key: str) -> None:
            versions[key] = _put(documents, key, {"winner": None})

        def check(key: str, results: list[bool]) -> None:
            assert results.count(True) == 1, rule(
                f"exactly one of 8 racing compare-and-sets on one version must win, {results}",
                "a read-then-write that is not atomic (check and write in separate requests)",
            )
            assert documents.read(COLLECTION, key).value == {"winner": results.index(True)}

        race_rounds(
            8,
            lambda key, i: documents.write(
                COLLECTION, key, {"winner": i}, expected_version=versions[key], expires_at=None
            ),
            check,
            prefix="doc",
            prepare=prepare,
        )

    @pytest.mark.obligations("O-documents-15", "O-documents-16")
    def test_racing_creates_have_exactly_one_winner(self, documents: DocumentStore) -> None:
        def check(key: str, results: list[bool]) -> None:
            assert results.count(True) == 1, rule(
                f"exactly one of 8 racing inserts (expected_version=None) must win, got {results}",
                "an existence check and an insert in separate requests",
            )
            assert documents.read(COLLECTION, key).value == {"winner": results.index(True)}

        race_rounds(
            8,
            lambda key, i: documents.write(
                COLLECTION, key, {"winner": i}, expected_version=None, expires_at=None
            ),
            check,
            prefix="doc",
        )

    # -- expiry ------------------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-17")
    def test_an_expired_document_reads_absent_but_keeps_its_version(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        version = _put(documents, key, {"v": 1}, expires_at=documents.now() - 1.0)
        found = documents.read(COLLECTION, key)
        assert found.value is None, rule(
            "a document whose expires_at has passed reads as absent (value None)",
            "leaving expiry to the database's TTL deletion, which runs late",
            _SCANS,
        )
        assert found.version == version, rule(
            "an expired document still reports its stored version, so a caller can take it "
            "over with a compare-and-set",
            "returning version None for an expired row",
            _SCANS,
        )

    @pytest.mark.obligations("O-documents-8", "O-documents-18")
    def test_an_expired_document_is_taken_over_with_its_version_only(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        version = _put(documents, key, {"v": 1}, expires_at=documents.now() - 1.0)
        assert not documents.write(
            COLLECTION, key, {"v": 2}, expected_version=None, expires_at=None
        ), rule(
            "expected_version=None means physically absent: an expired but stored document "
            "is not absent",
            "treating a logically expired row as missing in the compare",
            _SCANS,
        )
        assert documents.write(COLLECTION, key, {"v": 2}, expected_version=version, expires_at=None)
        assert documents.read(COLLECTION, key).value == {"v": 2}

    @pytest.mark.obligations("O-documents-5")
    def test_a_future_expiry_is_live_and_none_never_expires(
        self, documents: DocumentStore
    ) -> None:
        live, forever = uid("doc"), uid("doc")
        _put(documents, live, {"v": 1}, expires_at=documents.now() + HOUR)
        _put(documents, forever, {"v": 2}, expires_at=None)
        assert documents.read(COLLECTION, live).value == {"v": 1}
        assert documents.read(COLLECTION, forever).value == {"v": 2}
        assert sorted(_keys(documents.scan(COLLECTION))) == sorted([live, forever])

    @pytest.mark.obligations("O-documents-20")
    def test_scan_skips_expired_documents(self, documents: DocumentStore) -> None:
        dead, live = uid("a"), uid("b")
        _put(documents, dead, {"v": 0}, expires_at=documents.now() - 1.0, index="i")
        _put(documents, live, {"v": 1}, expires_at=None, index="i")
        assert _keys(documents.scan(COLLECTION)) == [live], rule(
            "scan lists unexpired documents only", "no expiry filter in scan", _SCANS
        )
        assert _keys(documents.scan(COLLECTION, index="i")) == [live]

    @pytest.mark.obligations("O-documents-19", "O-documents-20")
    def test_expiry_boundary_is_inclusive(
        self,
        documents: DocumentStore,
        clocked: Callable[[float], tuple[DocumentStore, _Clock]],
    ) -> None:
        """``expires_at <= now()`` is absent; a moment before it the document is live."""
        start = float(math.floor(documents.now()))
        view, clock = clocked(start)
        key = uid("doc")
        deadline = start + 10.0
        assert view.write(
            COLLECTION, key, {"v": 1}, expected_version=None, expires_at=deadline, index="i"
        )
        clock.now = deadline - 0.25
        assert view.read(COLLECTION, key).value == {"v": 1}, rule(
            "a document is live while now() < expires_at", "comparing with <= the wrong way", _SCANS
        )
        assert _keys(view.scan(COLLECTION, index="i")) == [key]
        clock.now = deadline
        at = view.read(COLLECTION, key)
        assert at.value is None and at.version is not None, rule(
            "a document with expires_at == now() is expired (expires_at <= now reads absent)",
            "`expires_at < now` instead of `expires_at <= now`",
            _SCANS,
        )
        assert view.scan(COLLECTION) == [] and view.scan(COLLECTION, index="i") == [], rule(
            "scan must apply the same expiry rule as read (expires_at <= now is absent)",
            "filtering expiry in read only, or with a different comparison in scan",
            _SCANS,
        )

    # -- scans -------------------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-21")
    def test_scan_lists_keys_in_ascending_order(self, documents: DocumentStore) -> None:
        base = uid("s")
        keys = [f"{base}-{suffix}" for suffix in ("m1", "b7", "z0", "a5", "k3", "B9", "02")]
        for key in keys:
            _put(documents, key, {"k": key})
        found = documents.scan(COLLECTION)
        assert _keys(found) == sorted(keys), rule(
            "scan returns keys in ascending (code point) order",
            "insertion order, or a collation that folds case",
            _SCANS,
        )
        assert dict(found) == {key: {"k": key} for key in keys}

    @pytest.mark.obligations("O-documents-30")
    def test_keys_of_every_documented_character_round_trip_in_code_point_order(
        self, documents: DocumentStore
    ) -> None:
        base = uid("k")
        # Code-point order: " " < "#" < "-" < "." < "/" < digits < ":" < upper < "_" < lower <
        # U+00E9 < U+FF5A < U+1D400. A locale collation ignores the punctuation, a
        # case-insensitive one folds "A" and "a", and UTF-16 order puts U+1D400 (a surrogate
        # pair) before U+FF5A.
        suffixes = [" ", "#", "-", ".", "/", "0", "9", ":", "A", "Z", "_", "a", "z", "é",
                    "\uff5a", "\U0001d400", "run 1/step#2.x:y_z-w", "ß:ü"]
        keys = [base + suffix for suffix in suffixes]
        for key in keys:
            _put(documents, key, {"k": key})
        misread = [key for key in keys if documents.read(COLLECTION, key).value != {"k": key}]
        assert misread == [], rule(
            f"every key reads back its own document; these did not: {misread}",
            "escaping, trimming or normalizing keys (spaces, ':', '/', '#', non-ASCII)",
            _ASSUMES,
        )
        found = _keys(documents.scan(COLLECTION))
        assert found == sorted(keys), rule(
            f"scan orders keys by code point (UTF-8 byte order): expected {sorted(keys)}, got "
            f"{found}",
            "a locale collation, a case-insensitive column, or UTF-16 order",
            _ASSUMES,
        )
        collection = f"{COLLECTION}:é/x-y_z.1 #2"
        assert documents.write(collection, keys[0], {"in": "named"}, expected_version=None,
                               expires_at=None)
        assert documents.read(collection, keys[0]).value == {"in": "named"}, rule(
            f"a collection name is any non-empty str: {collection!r} holds its document",
            "a collection name escaped or cut at ':', '/', '#' or a space",
            _ASSUMES,
        )
        assert _keys(documents.scan(collection)) == [keys[0]]

    @pytest.mark.obligations("O-documents-22")
    def test_scan_after_is_strictly_greater(self, documents: DocumentStore) -> None:
        keys = sorted(uid("s") for _ in range(5))
        for key in keys:
            _put(documents, key, {"k": key})
        got = _keys(documents.scan(COLLECTION, after=keys[1]))
        assert got == keys[2:], rule(
            f"scan(after={keys[1]!r}) must return only keys strictly greater, got {got}",
            "`>=` instead of `>`: keyset paging would return the cursor's row forever",
            _SCANS,
        )
        assert documents.scan(COLLECTION, after=keys[-1]) == []

    @pytest.mark.obligations("O-documents-23", "O-documents-24")
    def test_scan_after_a_key_that_is_not_stored(self, documents: DocumentStore) -> None:
        # A pager's cursor is often no stored key: the suite's `key + "\x00"`, or the last row
        # of a page deleted before the next page is read (a run that finished meanwhile).
        keys = sorted(uid("s") for _ in range(5))
        for key in keys:
            _put(documents, key, {"k": key})
        version = documents.read(COLLECTION, keys[2]).version
        assert documents.write(COLLECTION, keys[2], None, expected_version=version,
                               expires_at=None)
        stored = [keys[0], keys[1], keys[3], keys[4]]
        for after, expected in ((keys[0] + "\x00", stored[1:]), (keys[2], stored[2:])):
            for limit in (1, 1000):
                got = _keys(documents.scan(COLLECTION, after=after, limit=limit))
                assert got == expected[:limit], rule(
                    f"scan(after={after!r}, limit={limit}) must start at the first stored key "
                    f"strictly greater than `after`, even when `after` itself is not stored: "
                    f"expected {expected[:limit]}, got {got}",
                    "a pager of `key >= after` that then skips one row (an offset) instead of "
                    "`key > after`: when `after` is not stored it skips a live row, and every "
                    "keyset pager above it (sweepers, context pieces) loses that row",
                    _SCANS,
                )

    @pytest.mark.obligations("O-documents-25")
    def test_scan_honours_the_limit(self, documents: DocumentStore) -> None:
        keys = sorted(uid("s") for _ in range(5))
        for key in keys:
            _put(documents, key, {"k": key})
        assert _keys(documents.scan(COLLECTION, limit=2)) == keys[:2]
        assert _keys(documents.scan(COLLECTION, limit=1)) == keys[:1]
        assert _keys(documents.scan(COLLECTION, limit=50)) == keys
        assert documents.scan(COLLECTION, limit=0) == []

    @pytest.mark.parametrize("page", [1, 2, 3])
    @pytest.mark.obligations("O-documents-22", "O-documents-26")
    def test_keyset_paging_lists_every_document_once(
        self, documents: DocumentStore, page: int
    ) -> None:
        keys = sorted(uid("p") for _ in range(7))
        for key in keys:
            _put(documents, key, {"k": key}, index="even" if len(key) % 2 else "odd")
        listed: list[str] = []
        after: str | None = None
        for _ in range(len(keys) + 2):  # bounded: a pager that does not advance fails here
            found = _keys(documents.scan(COLLECTION, after=after, limit=page))
            assert after is None or all(key > after for key in found), rule(
                f"scan(after={after!r}, limit={page}) returned {found}: every key must be "
                "strictly greater than `after`, or keyset paging never advances",
                "`>=` instead of `>` in the key condition",
                _SCANS,
            )
            listed += found
            if len(found) < page:
                break
            after = found[-1]
        assert listed == keys, rule(
            f"paging with limit={page} must list every key once, in order: {listed}",
            "a limit applied before the key condition or the sort",
            _SCANS,
        )

    @pytest.mark.obligations("O-documents-27")
    def test_scan_filters_by_index(self, documents: DocumentStore) -> None:
        base = uid("i")
        red = [f"{base}-1", f"{base}-3", f"{base}-5"]
        blue = [f"{base}-2", f"{base}-4"]
        plain = f"{base}-6"
        for key in red:
            _put(documents, key, {"c": "red"}, index="red")
        for key in blue:
            _put(documents, key, {"c": "blue"}, index="blue")
        _put(documents, plain, {"c": None})
        assert _keys(documents.scan(COLLECTION, index="red")) == red, rule(
            "scan(index=X) lists only documents written with index X",
            "ignoring the index argument (scanning the whole collection)",
            _SCANS,
        )
        assert _keys(documents.scan(COLLECTION, index="blue", limit=1)) == blue[:1], rule(
            "the index filter applies before the limit",
            "filtering the index in the client after a limited read",
            _SCANS,
        )
        assert _keys(documents.scan(COLLECTION, index="red", after=red[0])) == red[1:]
        assert _keys(documents.scan(COLLECTION)) == sorted([*red, *blue, plain])
        assert documents.scan(COLLECTION, index="green") == []

    @pytest.mark.obligations("O-documents-7", "O-documents-29")
    def test_rewriting_a_document_moves_it_between_indexes(
        self, documents: DocumentStore
    ) -> None:
        key = uid("doc")
        version = _put(documents, key, {"s": "dispatched"}, index="dispatched")
        assert documents.write(
            COLLECTION, key, {"s": "done"}, expected_version=version, expires_at=None, index="done"
        )
        assert documents.scan(COLLECTION, index="dispatched") == [], rule(
            "a rewrite with another index leaves the old index",
            "adding index entries on write but never removing the old one",
            _SCANS,
        )
        assert documents.scan(COLLECTION, index="done") == [(key, {"s": "done"})]
        version = str(documents.read(COLLECTION, key).version)
        assert documents.write(
            COLLECTION, key, {"s": "x"}, expected_version=version, expires_at=None
        )
        assert documents.scan(COLLECTION, index="done") == [], rule(
            "a rewrite with index=None leaves every index", "keeping the old index on update",
            _SCANS,
        )

    @pytest.mark.parametrize("page", [1, 2, 3])
    @pytest.mark.obligations("O-documents-28")
    def test_expired_documents_never_use_up_a_page(
        self, documents: DocumentStore, page: int
    ) -> None:
        base = uid("x")
        dead = [f"{base}-0{i}" for i in range(4)]
        live = [f"{base}-1{i}" for i in range(4)]
        for key in dead:
            _put(documents, key, {"k": key}, expires_at=documents.now() - 1.0, index="i")
        for key in live:
            _put(documents, key, {"k": key}, expires_at=None, index="i")
        for index in (None, "i"):
            first = _keys(documents.scan(COLLECTION, index=index, limit=page))
            assert first == live[:page], rule(
                f"scan(index={index!r}, limit={page}) after {len(dead)} expired documents must "
                f"return the live documents {live[:page]}, got {first}: expiry is filtered before "
                "the limit, and a page is short only at the end of the collection",
                "filtering expiry in the client after a limited read: the page comes back "
                "short, and the generic pagers (every sweeper) stop there, never reaching the "
                "live documents behind the expired ones",
                _SCANS,
            )

    @pytest.mark.obligations("O-documents-29")
    def test_a_stale_index_entry_hides_no_other_document(
        self, documents: DocumentStore
    ) -> None:
        base = uid("r")
        keys = [f"{base}-{i}" for i in range(6)]
        for key in keys:
            _put(documents, key, {"k": key}, index="red")
        for key, other in ((keys[1], "blue"), (keys[3], None)):
            version = documents.read(COLLECTION, key).version
            assert documents.write(COLLECTION, key, {"k": key}, expected_version=version,
                                   expires_at=None, index=other)
        red = [keys[0], keys[2], keys[4], keys[5]]
        for limit in (1, 2, 3, 1000):
            listed: list[str] = []
            after: str | None = None
            for _ in range(len(keys) + 2):
                found = _keys(documents.scan(COLLECTION, index="red", after=after, limit=limit))
                listed += found
                if len(found) < limit:
                    break
                after = found[-1]
            assert listed == red, rule(
                f"scan(index='red', limit={limit}) paged to the end must list {red} after two "
                f"of them moved to other indexes, got {listed}",
                "an index kept beside the documents whose scan drops an entry left by a "
                "rewrite (stale) and, off by one, the entry after it too",
                _SCANS,
            )

    # -- size --------------------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-31")
    def test_a_document_over_the_declared_size_limit_is_refused(
        self, documents: DocumentStore, storage: Storage
    ) -> None:
        limit = storage.capabilities.max_document_bytes
        if limit is None:
            pytest.skip(NO_SIZE_LIMIT)
        key = uid("big")
        # The declared limit is the largest context; the pieces a context is stored as take a
        # little more room (reactor.generic.contexts.PIECE_RESERVE_BYTES), so a document of
        # twice the limit is one no document store under it can hold.
        with pytest.raises((ContextTooLargeError, StorageError)):
            documents.write(
                COLLECTION, key, {"blob": "x" * (2 * limit + 1)}, expected_version=None,
                expires_at=None,
            )
        assert documents.read(COLLECTION, key).version is None, rule(
            "a refused oversized document writes nothing",
            "writing a truncated document before the size check",
        )

    # -- close -------------------------------------------------------------------------------

    @pytest.mark.obligations("O-documents-32")
    def test_closing_a_document_store_twice_is_harmless(
        self, documents: DocumentStore, reactor_storage_url: str
    ) -> None:
        other = open_storage(reactor_storage_url)
        try:
            docs = getattr(other, "documents", None)
            assert isinstance(docs, DocumentStore)
            try:
                docs.close()
                docs.close()  # idempotent: raises nothing
            except Exception as exc:
                pytest.fail(
                    rule(
                        f"DocumentStore.close() is idempotent: a second call raises nothing, "
                        f"it raised {exc!r}",
                        "closing a driver client that refuses a second close",
                        'see docs/protocol.md, "Document stores"',
                    )
                )
        finally:
            other.close()


class TestDocuments(DocumentsContract):
    """The documents contract against ``--reactor-storage``."""
