"""Stored schedules, an optional storage capability (docs/protocol.md, "Schedules").

A storage that declares :class:`~reactor.ports.capabilities.KeepsSchedules` (an attribute
``schedules``, a :class:`~reactor.ports.ScheduleStore`) is held to what exactly one run per
tick rests on: every scheduler moves a schedule's stored state by compare-and-set on its
version, so a put or delete with a stale version must lose (``None``/``False``, nothing
written), a version is never issued twice (no ABA after a delete and re-create, none for a
document written again), and of several schedulers racing from one version exactly one wins.
The listing the schedulers page through (``scan``, 100 at a time until a short page) must list
every record once, in code point order. Names and documents are kept exactly as given, and
records never expire.

A storage that does not declare it skips the concern as not applicable (verdict ``n/a``):
``reactor schedules add`` is refused on it and each scheduler keeps its state in process
memory (docs/contract-suite.md, "Verdicts").
"""

from __future__ import annotations

import math
import threading
import unicodedata
import uuid
from typing import cast

import pytest

from reactor.memory.clock import ManualClock
from reactor.model.records import ScheduleRecord
from reactor.ports.capabilities import KeepsSchedules, declares
from reactor.ports.storage import ScheduleStore, Storage
from reactor_contract._support import HOUR, context, teach, uid
from reactor_contract.plugin import NOT_APPLICABLE, open_storage
from reactor_contract.probe import ClockProbe, Probe
from reactor_contract.test_concurrency import race_rounds
from reactor_contract.test_declarations import UNBOUNDED_PROBE_BYTES, document_of
from reactor_contract.test_keys import LOOKALIKES, SEPARATORS

__all__ = ["NO_SCHEDULES", "SchedulesContract"]

#: The skip reason of a storage without the capability (an ``n/a`` row, not a gap).
NO_SCHEDULES = (
    f"{NOT_APPLICABLE} the storage does not keep schedules (it does not declare KeepsSchedules: "
    "storage.schedules is absent or None, so `reactor schedules add` is refused and each "
    "scheduler keeps its state in process memory)"
)

_DOC = 'docs/protocol.md, "Schedules"'
_SIZE = {True: "1 MiB, no limit declared", False: "the declared max_document_bytes"}
#: Threads racing one compare-and-set in the contention tests.
RACERS = 8
#: The longest schedule name reactor makes (reactor.schedules.spec.NAME_PATTERN): 100 characters.
LONGEST_NAME = 100


def _doc(n: object) -> str:
    return f'{{"n":{n!r}}}'.replace("'", '"')


def _new_name(name: str) -> str:
    return teach(
        "schedules",
        f"a new name is created even when it differs from a stored one only by case, Unicode "
        f"normalisation, a separator or its last character ({name!r})",
        "names folded, normalised or truncated into one key", _DOC,
    )


def _recreated(name: str) -> str:
    return teach(
        "schedules",
        f"after a delete with the stored version, put with expected_version=None creates "
        f"{name!r} again (the delete removed the record)",
        "a delete that answers True without deleting, or a tombstone that still counts as "
        "stored", _DOC,
    )


def _stale(store: ScheduleStore, name: str) -> list[str]:
    """Versions no record of ``name`` has: made-up ones, and a fresh one of another name."""
    other = uid("other")
    issued = store.put(other, "{}", expected_version=None)
    assert issued is not None
    return ["", "0", "1", "v1", uuid.uuid4().hex, str(uuid.uuid4()), issued]


class SchedulesContract:
    """:class:`reactor.ports.ScheduleStore` behaviour of storages that declare
    :class:`~reactor.ports.capabilities.KeepsSchedules`."""

    reactor_concern = "schedules"

    @pytest.fixture
    def schedules(self, storage: Storage) -> ScheduleStore:
        """``storage.schedules``; skips (n/a) without the capability."""
        store = getattr(storage, "schedules", None)
        if store is None or not declares(storage, KeepsSchedules):
            pytest.skip(NO_SCHEDULES)
        assert isinstance(store, ScheduleStore), teach(
            "schedules",
            "storage.schedules, when present, is a ScheduleStore (get, put, delete, scan)",
            "an attribute of that name that is something else, or a store missing an operation",
            _DOC,
        )
        return store

    # -- create, read, compare-and-set -----------------------------------------------------

    @pytest.mark.obligations("O-schedules-1", "O-schedules-2")
    def test_create_then_read_back_verbatim(self, schedules: ScheduleStore) -> None:
        name = uid("sched")
        assert schedules.get(name) is None, teach(
            "schedules", "get of a name never stored returns None",
            "a default record instead of None", _DOC,
        )
        document = '{"every": 60.0, "paused": false, "note": "caf\\u00e9 \u00e9 \u2603 \U0001f680"}'
        version = schedules.put(name, document, expected_version=None)
        assert isinstance(version, str) and version, teach(
            "schedules",
            f"put(name, document, expected_version=None) of a new name returns the new version, "
            f"a non-empty str (got {version!r})",
            "returning True/the row count instead of the version token", _DOC,
        )
        got = schedules.get(name)
        assert got == ScheduleRecord(name=name, document=document, version=version), teach(
            "schedules",
            f"get returns the record as written: its name, the document verbatim and the "
            f"version put returned (got {got!r})",
            "a document re-encoded (parsed and dumped again, escapes resolved) or a version "
            "other than the one returned", _DOC,
        )

    @pytest.mark.obligations("O-schedules-3")
    def test_create_of_a_stored_name_loses_and_writes_nothing(
        self, schedules: ScheduleStore
    ) -> None:
        name = uid("sched")
        version = schedules.put(name, _doc(1), expected_version=None)
        assert version is not None
        again = schedules.put(name, _doc(2), expected_version=None)
        assert again is None, teach(
            "schedules",
            "put with expected_version=None when the name is stored returns None (the record "
            "must be absent)",
            "an upsert for expected_version=None instead of an insert-if-absent", _DOC,
        )
        assert schedules.get(name) == ScheduleRecord(name, _doc(1), version)

    @pytest.mark.obligations("O-schedules-4", "O-schedules-5")
    def test_put_with_the_stored_version_replaces_and_the_old_version_goes_stale(
        self, schedules: ScheduleStore
    ) -> None:
        name = uid("sched")
        first = schedules.put(name, _doc(1), expected_version=None)
        assert first is not None
        second = schedules.put(name, _doc(2), expected_version=first)
        assert second is not None and second != first, teach(
            "schedules",
            f"put with the stored version writes and returns a new version (got {second!r} "
            f"after {first!r})",
            "a version that does not change on a write", _DOC,
        )
        assert schedules.get(name) == ScheduleRecord(name, _doc(2), second)
        assert schedules.put(name, _doc(3), expected_version=first) is None, teach(
            "schedules",
            "put with a version that was replaced returns None: a stale version must lose",
            "a put that ignores expected_version (last writer wins): two schedulers would "
            "both settle one tick", _DOC,
        )
        assert schedules.get(name) == ScheduleRecord(name, _doc(2), second)

    @pytest.mark.obligations("O-schedules-5")
    def test_a_stale_or_made_up_version_loses_and_writes_nothing(
        self, schedules: ScheduleStore
    ) -> None:
        name = uid("sched")
        version = schedules.put(name, _doc(1), expected_version=None)
        assert version is not None
        for stale in _stale(schedules, name):
            assert schedules.put(name, _doc("stale"), expected_version=stale) is None, teach(
                "schedules",
                f"put with a version the record does not have ({stale!r}) returns None, never "
                "raises, and writes nothing",
                "a put that ignores expected_version, or one comparing only a prefix of it",
                _DOC,
            )
        assert schedules.get(name) == ScheduleRecord(name, _doc(1), version)
        absent = uid("sched")
        for stale in ("", "0", uuid.uuid4().hex, version):
            assert schedules.put(absent, _doc(1), expected_version=stale) is None, teach(
                "schedules",
                "put with a version when no record of that name is stored returns None and "
                "creates nothing",
                "an update that inserts the record when no row matched", _DOC,
            )
        assert schedules.get(absent) is None

    @pytest.mark.obligations("O-schedules-6")
    def test_versions_are_never_issued_twice(self, schedules: ScheduleStore) -> None:
        """Writing the same document again, deleting and re-creating: every write a new
        version (a version reused would let a scheduler holding the old one win: ABA)."""
        name = uid("sched")
        issued: list[str] = []
        version = schedules.put(name, _doc("a"), expected_version=None)
        assert version is not None
        issued.append(version)
        for document in (_doc("b"), _doc("a"), _doc("a")):
            version = schedules.put(name, document, expected_version=version)
            assert version is not None
            issued.append(version)
        assert schedules.delete(name, expected_version=version)
        for _ in range(2):
            version = schedules.put(name, _doc("a"), expected_version=None)
            assert version is not None, _recreated(name)
            issued.append(version)
            version = schedules.put(name, _doc("a"), expected_version=version)
            assert version is not None
            issued.append(version)
            assert schedules.delete(name, expected_version=version)
        assert len(set(issued)) == len(issued), teach(
            "schedules",
            f"every write returns a version never issued before (issued: {issued})",
            "versions that count per name and restart after a delete, or a version derived "
            "from the document (a hash): a scheduler holding an old version then wins", _DOC,
        )
        stale = issued[0]
        schedules.put(name, _doc("z"), expected_version=None)
        assert schedules.put(name, _doc("late"), expected_version=stale) is None

    # -- delete ----------------------------------------------------------------------------

    @pytest.mark.obligations("O-schedules-7")
    def test_delete_with_the_stored_version_removes_the_record(
        self, schedules: ScheduleStore
    ) -> None:
        name, kept = uid("sched"), uid("sched")
        version = schedules.put(name, _doc(1), expected_version=None)
        kept_version = schedules.put(kept, _doc(2), expected_version=None)
        assert version is not None and kept_version is not None
        assert schedules.delete(name, expected_version=version) is True
        assert schedules.get(name) is None, teach(
            "schedules",
            "delete with the stored version removes the record: get then returns None",
            "a delete that answers True without deleting (a no-op, or a soft delete get "
            "still reads)", _DOC,
        )
        assert [r.name for r in schedules.scan()] == [kept], teach(
            "schedules", "a deleted schedule is no longer listed",
            "a name index the delete leaves behind", _DOC,
        )
        assert schedules.get(kept) == ScheduleRecord(kept, _doc(2), kept_version)
        assert schedules.delete(name, expected_version=version) is False, teach(
            "schedules", "a second delete of the same record returns False",
            "a delete that answers True whatever it removed", _DOC,
        )
        recreated = schedules.put(name, _doc(3), expected_version=None)
        assert recreated is not None, _recreated(name)
        assert schedules.get(name) == ScheduleRecord(name, _doc(3), recreated)

    @pytest.mark.obligations("O-schedules-8")
    def test_delete_with_a_stale_version_or_of_an_absent_name_changes_nothing(
        self, schedules: ScheduleStore
    ) -> None:
        name = uid("sched")
        first = schedules.put(name, _doc(1), expected_version=None)
        assert first is not None
        second = schedules.put(name, _doc(2), expected_version=first)
        assert second is not None
        for stale in [first, *_stale(schedules, name)]:
            assert schedules.delete(name, expected_version=stale) is False, teach(
                "schedules",
                f"delete with a version the record does not have ({stale!r}) returns False, "
                "never raises, and deletes nothing",
                "a delete that ignores expected_version (DELETE ... WHERE name = ? only)",
                _DOC,
            )
        assert schedules.get(name) == ScheduleRecord(name, _doc(2), second)
        assert schedules.delete(uid("absent"), expected_version=second) is False

    # -- scan ------------------------------------------------------------------------------

    @pytest.mark.obligations("O-schedules-9")
    def test_scan_lists_in_code_point_order_strictly_after_and_at_most_limit(
        self, schedules: ScheduleStore
    ) -> None:
        names = ["B", "a", "a-1", "a.1", "a_1", "a1", "b", "Z9", "\u00e9t\u00e9", "\u65e5\u672c",
                 "\U0001f680rocket", "\uff41", "zz"]
        versions = {}
        for name in names:
            version = schedules.put(name, _doc(name), expected_version=None)
            assert version is not None, _new_name(name)
            versions[name] = version
        ordered = sorted(names)  # Python orders str by code point
        listed = schedules.scan()
        assert [r.name for r in listed] == ordered, teach(
            "schedules",
            f"scan lists every record in ascending code point order (got "
            f"{[r.name for r in listed]}, expected {ordered})",
            "a scan without ORDER BY, or ordered by a locale collation instead of code points "
            "(COLLATE \"C\", binary)", _DOC,
        )
        assert all(r == ScheduleRecord(r.name, _doc(r.name), versions[r.name])
                   for r in listed), "scan rows carry the name, the document and the version"
        for after in ("a", "a.1", "a0", "\u00e9", "\u00e9t\u00e9", "\U0001f680rocket", "zz", "~"):
            expected = [n for n in ordered if n > after]
            got = [r.name for r in schedules.scan(after=after)]
            assert got == expected, teach(
                "schedules",
                f"scan(after={after!r}) lists the names strictly after it, stored or not "
                f"(got {got}, expected {expected})",
                "'>=' instead of '>', or a cursor that must be a stored name", _DOC,
            )
        for limit in (1, 2, 5):
            got = [r.name for r in schedules.scan(after="a", limit=limit)]
            assert got == [n for n in ordered if n > "a"][:limit], teach(
                "schedules",
                f"scan(limit={limit}) returns the first {limit} names after 'after' (got {got})",
                "a limit ignored or applied before the order", _DOC,
            )

    @pytest.mark.obligations("O-schedules-10")
    def test_paging_until_a_short_page_lists_every_record_once(
        self, schedules: ScheduleStore
    ) -> None:
        """The schedulers page 100 at a time and stop at a short page
        (reactor.schedules.scheduler.stored_schedules): a page must be short only at the end,
        and records deleted before the scan never use up a page."""
        names = sorted(f"s{n:03d}" for n in range(23))
        versions = {n: schedules.put(n, _doc(n), expected_version=None) for n in names}
        for doomed in names[:5] + names[9:12]:  # deleted: ahead of and inside the pages
            version = versions[doomed]
            assert version is not None and schedules.delete(doomed, expected_version=version)
        live = [n for n in names if n not in names[:5] + names[9:12]]
        for limit in (1, 2, 3, 4, 15, 100):
            seen: list[str] = []
            after: str | None = None
            for _ in range(len(names) + 2):
                page = schedules.scan(after=after, limit=limit)
                assert len(page) <= limit, f"a page of {len(page)} records for limit={limit}"
                seen += [r.name for r in page]
                if len(page) < limit:
                    break
                after = page[-1].name
            assert seen == live, teach(
                "schedules",
                f"paging scan(after=<last name>, limit={limit}) until a page holds fewer than "
                f"limit records lists every stored schedule once (got {seen}, expected {live})",
                "a page cut short by deleted names that still take up the limit, or a last "
                "(partial) page dropped: the schedulers stop at the first short page", _DOC,
            )

    @pytest.mark.obligations("O-schedules-11")
    def test_a_limit_below_one_is_refused(self, schedules: ScheduleStore) -> None:
        schedules.put(uid("sched"), "{}", expected_version=None)
        for limit in (0, -1):
            with pytest.raises(ValueError):
                schedules.scan(limit=limit)
        assert len(schedules.scan(limit=1)) == 1
        assert schedules.scan(after=None, limit=100) == schedules.scan()

    # -- contention --------------------------------------------------------------------------

    @pytest.mark.obligations("O-schedules-12")
    def test_racing_puts_from_one_version_have_exactly_one_winner(
        self, schedules: ScheduleStore
    ) -> None:
        """Schedulers settling one tick each put from the version they read: exactly one of
        them may win, for a create (``None``) and for an update."""
        base: dict[str, str | None] = {}

        def prepare(name: str) -> None:
            base[name] = schedules.put(name, _doc("base"), expected_version=None)

        def call(name: str, i: int) -> str | None:
            return schedules.put(name, _doc(i), expected_version=base[name])

        def check(name: str, results: list[str | None]) -> None:
            winners = [i for i, version in enumerate(results) if version is not None]
            assert len(winners) == 1, teach(
                "schedules",
                f"of {RACERS} puts racing from one version exactly one wins (winners: "
                f"{winners}), in every race",
                "a put that reads the version and then writes without a compare-and-set (not "
                "atomic): two schedulers both settle one tick and start its run twice", _DOC,
            )
            (winner,) = winners
            stored = schedules.get(name)
            assert stored == ScheduleRecord(name, _doc(winner), cast(str, results[winner])), (
                f"the stored record is the winner's: {stored!r}"
            )

        race_rounds(RACERS, call, check, prefix="sched", prepare=prepare)

        def create(name: str, i: int) -> str | None:
            return schedules.put(name, _doc(i), expected_version=None)

        race_rounds(RACERS, create, check, prefix="sched")

    @pytest.mark.obligations("O-schedules-12")
    def test_racing_deletes_and_puts_from_one_version_have_exactly_one_winner(
        self, schedules: ScheduleStore
    ) -> None:
        base: dict[str, str] = {}

        def prepare(name: str) -> None:
            version = schedules.put(name, _doc("base"), expected_version=None)
            assert version is not None
            base[name] = version

        def call(name: str, i: int) -> bool:
            if i % 2:
                return schedules.delete(name, expected_version=base[name])
            return schedules.put(name, _doc(i), expected_version=base[name]) is not None

        def check(name: str, results: list[bool]) -> None:
            winners = [i for i, won in enumerate(results) if won]
            assert len(winners) == 1, teach(
                "schedules",
                f"of {RACERS} deletes and puts racing from one version exactly one wins "
                f"(winners: {winners}), in every race",
                "a delete or put that reads the version and then writes without a "
                "compare-and-set", _DOC,
            )
            stored = schedules.get(name)
            if winners[0] % 2:
                assert stored is None, f"the winning delete removed the record: {stored!r}"
            else:
                assert stored is not None and stored.document == _doc(winners[0])

        race_rounds(RACERS, call, check, prefix="sched", prepare=prepare)

    # -- hostile names and documents ---------------------------------------------------------

    @pytest.mark.obligations("O-schedules-13")
    def test_distinct_names_are_distinct_records(self, schedules: ScheduleStore) -> None:
        longest = "a" * LONGEST_NAME
        names = [
            "n", "N", longest, longest[:-1] + "b", "a" * (LONGEST_NAME - 1),
            "\U0001f680" * LONGEST_NAME,  # 100 characters of 4 UTF-8 bytes each
            "\u65e5" * LONGEST_NAME, "\U0001f680" * (LONGEST_NAME - 1) + "\U0001f681",
        ]
        names += [f"x{text}y" for group in LOOKALIKES for text in group]
        names += [f"x{sep}y" for sep in SEPARATORS] + ["xy", "x y", " xy", "xy "]
        names = list(dict.fromkeys(names))
        assert len({unicodedata.normalize("NFKC", n).casefold() for n in names}) < len(names)
        versions: dict[str, str] = {}
        for name in names:
            version = schedules.put(name, _doc(len(versions)), expected_version=None)
            assert version is not None, _new_name(name)
            versions[name] = version
        for n, name in enumerate(names):
            got = schedules.get(name)
            assert got == ScheduleRecord(name, _doc(n), versions[name]), teach(
                "schedules",
                f"each distinct name reads back its own record, its name exactly as given "
                f"({name!r} read {got!r})",
                "names folded, normalised or truncated (a short column), or a name returned "
                "re-encoded", _DOC,
            )
        listed = [r.name for r in schedules.scan(limit=len(names) + 10)]
        assert listed == sorted(names), teach(
            "schedules",
            "scan lists each distinct name once, exactly as stored, in code point order",
            "names normalised or re-encoded in the listing", _DOC,
        )

    @pytest.mark.obligations("O-schedules-14")
    def test_names_like_other_stores_keys_touch_no_other_store(
        self, storage: Storage, schedules: ScheduleStore
    ) -> None:
        lock, period, run = uid("lock"), uid("period"), context(status="running")
        names = [lock, period, run.context_id, "runs", "steps", "maps", "map_rollbacks",
                 "schedules", "{schedules}", "{schedules}:docs", "docs", "versions", "names",
                 "contexts", "locks", f"lock:{lock}", f"schedule:{lock}:1700000000"]
        for name in names:
            assert schedules.put(name, _doc(name), expected_version=None) is not None
        assert storage.locks.acquire(lock, "owner", HOUR), teach(
            "schedules", "a schedule named like a lock key leaves the lock free",
            "schedules kept in another store's collection or key space", _DOC,
        )
        assert storage.periods.mark(period, ttl=HOUR) is True
        assert storage.contexts.load(run.context_id) is None
        cursors = getattr(storage, "sweep_cursors", None)
        if cursors is not None:
            assert cursors.load("runs") is None, "a schedule named 'runs' is no sweep cursor"
            cursors.save("runs", "cursor-1")
        storage.contexts.save(run)
        listed = schedules.scan(limit=len(names) + 10)
        assert [r.name for r in listed] == sorted(names), teach(
            "schedules",
            "the schedule listing holds the schedules only: locks, periods, runs, claims and "
            f"sweep cursors of the same names are not listed (got {[r.name for r in listed]})",
            "schedules kept in a collection shared with another store", _DOC,
        )
        assert all(r.document == _doc(r.name) for r in listed)
        assert storage.locks.release(lock, "owner")

    @pytest.mark.obligations("O-schedules-15")
    def test_documents_are_kept_verbatim_up_to_the_declared_size_limit(
        self, storage: Storage, schedules: ScheduleStore
    ) -> None:
        odd = [
            "{}", '{"a": 1,   "b" : [1,2 ,3]}', '{"b":1,"a":2}', '{"s":"\\u00e9\\n\\"\\\\"}',
            '{"s":"\u00e9\u2603\U0001f680 \u65e5\u672c"}', '{"n": 9007199254740993}',
            '{"f": 1.0e-7}', '[null, true, false]', '"text"', " { } ",
        ]
        for document in odd:
            name = uid("sched")
            version = schedules.put(name, document, expected_version=None)
            got = schedules.get(name)
            assert got == ScheduleRecord(name, document, cast(str, version)), teach(
                "schedules",
                f"a document is stored verbatim, never parsed nor re-encoded ({document!r} "
                f"read back {None if got is None else got.document!r})",
                "the document stored as a parsed value (keys re-ordered, spaces and escapes "
                "lost, big integers rounded)", _DOC,
            )
        limit = storage.capabilities.max_document_bytes
        size = UNBOUNDED_PROBE_BYTES if limit is None else limit
        big, name = document_of(size), uid("sched")
        version = schedules.put(name, big, expected_version=None)
        assert version is not None
        got = schedules.get(name)
        assert got is not None and got.document == big and got.version == version, teach(
            "schedules",
            f"a document of {size} bytes ({_SIZE[limit is None]}) is stored and read back "
            "intact",
            "a document truncated to a column or value size nobody declared", _DOC,
        )
        changed = big[:-2] + "2]"
        newer = schedules.put(name, changed, expected_version=version)
        assert newer is not None
        listed = [r for r in schedules.scan(limit=len(odd) + 10) if r.name == name]
        assert [(r.document, r.version) for r in listed] == [(changed, newer)], teach(
            "schedules", f"scan lists a document of {size} bytes intact",
            "a listing that projects or truncates the document", _DOC,
        )

    # -- lifetime and namespaces -------------------------------------------------------------

    @pytest.mark.obligations("O-schedules-16")
    def test_records_never_expire(
        self, storage: Storage, schedules: ScheduleStore, probe: Probe
    ) -> None:
        """A schedule is configuration: read at a clock years ahead (through the probe, on an
        application clock), it is still there and its version still wins."""
        name = uid("sched")
        version = schedules.put(name, _doc(1), expected_version=None)
        assert version is not None
        if not isinstance(probe, ClockProbe) or storage.capabilities.clock != "application":
            assert schedules.get(name) is not None  # a server clock no client can move
            return
        clock = ManualClock(storage.now() + 10 * 365 * 86400.0)
        later = probe.with_clock(clock)
        if later is None:
            return
        try:
            if not math.isclose(later.now(), clock(), abs_tol=1.0):
                return  # the probe cannot inject a clock into this adapter
            store = getattr(later, "schedules", None)
            assert store is not None
            got = store.get(name)
            assert got == ScheduleRecord(name, _doc(1), version), teach(
                "schedules",
                "a stored schedule never expires: ten years later it still reads (got None)"
                if got is None else f"a stored schedule reads the same later (got {got!r})",
                "schedules written with the retention of run state (context_ttl) or another "
                "expiry", _DOC,
            )
            assert [r.name for r in store.scan()] == [name]
            assert store.put(name, _doc(2), expected_version=version) is not None
        finally:
            later.close()

    @pytest.mark.obligations("O-schedules-17")
    def test_storages_with_other_prefixes_share_no_schedule(
        self, schedules: ScheduleStore, reactor_storage_url: str
    ) -> None:
        name = uid("sched")
        version = schedules.put(name, _doc(1), expected_version=None)
        assert version is not None
        other = open_storage(reactor_storage_url)
        try:
            theirs = getattr(other, "schedules", None)
            assert theirs is not None
            leaked = {
                "get": theirs.get(name) is not None,
                "scan": bool(theirs.scan()),
                "put(None)": theirs.put(name, _doc(2), expected_version=None) is None,
                "delete": theirs.delete(name, expected_version=version),
            }
        finally:
            other.close()
        assert not any(leaked.values()), teach(
            "schedules",
            "a storage built from the same URL with another ?prefix= sees none of this one's "
            f"schedules (leaked through: {[k for k, v in leaked.items() if v]})",
            "schedule keys or rows not namespaced with the prefix", _DOC,
        )
        assert schedules.get(name) == ScheduleRecord(name, _doc(1), version)

    @pytest.mark.obligations("O-schedules-12")
    def test_two_handles_of_one_storage_race_one_tick(
        self, schedules: ScheduleStore
    ) -> None:
        """Schedulers in one process share the store object: a version read by one thread
        and replaced by another is stale for the first."""
        name = uid("sched")
        version = schedules.put(name, _doc(0), expected_version=None)
        assert version is not None
        box: dict[str, str | None] = {}
        worker = threading.Thread(
            target=lambda: box.setdefault("v", schedules.put(name, _doc(1),
                                                              expected_version=version))
        )
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert box["v"] is not None
        assert schedules.put(name, _doc(2), expected_version=version) is None


class TestSchedules(SchedulesContract):
    """The schedules contract against ``--reactor-storage``."""
