"""DocumentMapStore on the memory document store (docs/protocol.md#maps)."""

from __future__ import annotations

import json
import threading

import pytest

from reactor.generic.maps import MAP_ELEMENTS, MAP_SLOTS, MAP_STATE, MAPS
from reactor.memory import ManualClock, MemoryProbe, MemoryStorage
from reactor.ports import MapMetadata, MapRollbackMetadata

TTL = 100.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def storage(clock: ManualClock) -> MemoryStorage:
    return MemoryStorage(clock=clock, context_ttl=TTL)


def meta(map_id: str = "m1", count: int = 5, **extra: object) -> MapMetadata:
    fields: dict[str, object] = {
        "map_id": map_id,
        "count": count,
        "parent_context_id": "parent",
        "parent_reactor": "Orders",
        "step_name": "charge_all",
        "element_reactor": "Charge",
        "owner_context_id": "owner",
        "owner_reactor": "Checkout",
        "batch_size": 2,
        "atomic": True,
        "created_at": 123.5,
    }
    fields.update(extra)
    return MapMetadata(**fields)  # type: ignore[arg-type]


# -- metadata, scan, counter (items 10-12) ---------------------------------------------------


def test_metadata_round_trips(storage: MemoryStorage) -> None:
    full = meta(parent_is_map_element=True, outer_map_id="outer", outer_index=4,
                extra={"fail_fast": False})
    assert storage.maps.init(full) is True
    assert storage.maps.metadata("m1") == full
    assert storage.maps.metadata("unknown") is None


def test_init_is_once(storage: MemoryStorage) -> None:
    assert storage.maps.init(meta(count=5)) is True
    assert storage.maps.add_to_counter("m1", -1) == 4
    assert storage.maps.init(meta(count=9)) is False
    assert storage.maps.counter("m1") == 4
    got = storage.maps.metadata("m1")
    assert got is not None and got.count == 5


def test_scan_lists_maps_but_not_rollbacks(storage: MemoryStorage) -> None:
    storage.maps.init(meta("m1"))
    storage.maps.init(meta("m2"))
    storage.map_rollbacks.start(
        MapRollbackMetadata("m1", 2, 2, "s", "owner", "Checkout", "Charge", 1.0)
    )
    storage.maps.add_to_counter("orphan", 3)  # a counter without metadata is not a map
    assert [m.map_id for m in storage.maps.scan()] == ["m1", "m2"]
    assert [m.map_id for m in storage.maps.scan(limit=1)] == ["m1"]


def test_counter_arithmetic(storage: MemoryStorage) -> None:
    assert storage.maps.counter("m1") is None
    storage.maps.init(meta(count=5))
    assert storage.maps.counter("m1") == 5
    assert storage.maps.add_to_counter("m1", -2) == 3
    assert storage.maps.add_to_counter("m1", -1) == 2
    assert storage.maps.add_to_counter("m1", 1) == 3


def test_counter_of_an_unknown_map_starts_at_zero_and_init_still_creates(
    storage: MemoryStorage,
) -> None:
    assert storage.maps.add_to_counter("m1", -1) == -1
    assert storage.maps.metadata("m1") is None
    assert storage.maps.init(meta(count=5)) is True
    assert storage.maps.counter("m1") == 5


def test_concurrent_counter_updates_serialize(storage: MemoryStorage) -> None:
    storage.maps.init(meta(count=0))
    seen: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(100):
            value = storage.maps.add_to_counter("m1", 1)
            with lock:
                seen.append(value)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert storage.maps.counter("m1") == 200
    assert sorted(seen) == list(range(1, 201))  # every caller saw its own post-change value


# -- offsets, failed element, owner signal (items 11, 13, 14) ----------------------------------


def test_offsets(storage: MemoryStorage) -> None:
    assert storage.maps.offset("m1") is None
    assert storage.maps.init_offset("m1", 5) is True
    assert storage.maps.init_offset("m1", 9) is False
    assert storage.maps.advance_offset("m1", 3) == 8
    assert storage.maps.offset("m1") == 8


def test_advance_offset_without_init_starts_at_zero_and_may_pass_count(
    storage: MemoryStorage,
) -> None:
    storage.maps.init(meta(count=3))
    assert [storage.maps.advance_offset("m1", 2) for _ in range(3)] == [2, 4, 6]


def test_failed_context_first_wins(storage: MemoryStorage) -> None:
    assert storage.maps.failed_context("m1") is None
    assert storage.maps.set_failed_context("m1", "e1") is True
    assert storage.maps.set_failed_context("m1", "e2") is False
    assert storage.maps.failed_context("m1") == "e1"


def test_owner_signal_is_claimed_once(storage: MemoryStorage) -> None:
    assert storage.maps.claim_owner_signal("m1") is True
    assert storage.maps.claim_owner_signal("m1") is False
    assert storage.maps.claim_owner_signal("m2") is True


def test_expired_nx_claims_are_taken_over(storage: MemoryStorage, clock: ManualClock) -> None:
    storage.maps.claim_owner_signal("m1")
    storage.maps.set_failed_context("m1", "e1")
    storage.maps.init_offset("m1", 5)
    clock.advance(TTL)
    for key in ("m1:owner_signal", "m1:failed", "m1:offset"):
        found = storage.documents.read(MAP_STATE, key)
        assert found.value is None and found.version is not None
    assert storage.maps.claim_owner_signal("m1") is True
    assert storage.maps.set_failed_context("m1", "e2") is True
    assert storage.maps.failed_context("m1") == "e2"
    assert storage.maps.init_offset("m1", 7) is True
    assert storage.maps.offset("m1") == 7


def test_probe_forced_expiry_frees_a_claim(storage: MemoryStorage) -> None:
    probe = MemoryProbe(storage)
    storage.maps.claim_owner_signal("m1")
    assert probe.expire(MAP_STATE, "m1:owner_signal") is True
    assert storage.maps.claim_owner_signal("m1") is True
    assert probe.expire(MAP_STATE, "never") is False


# -- result slots (item 15) --------------------------------------------------------------------


def test_result_slots(storage: MemoryStorage) -> None:
    storage.maps.put_result("m1", 0, "v0")
    storage.maps.put_result("m1", 2, "v2")
    storage.maps.put_result("m1", 2, "v2new")
    storage.maps.put_result("other", 1, "x")
    assert storage.maps.results_page("m1", offset=0, limit=10) == [(0, "v0"), (2, "v2new")]
    assert storage.maps.results_page("m1", offset=1, limit=2) == [(2, "v2new")]
    assert storage.maps.results_page("m1", offset=0, limit=2) == [(0, "v0")]
    assert storage.maps.results_page("m1", offset=3, limit=5) == []
    assert storage.maps.result_slots("m1", [2, 1, 0]) == ["v2new", None, "v0"]
    assert storage.maps.result_slots("m1", []) == []
    assert storage.maps.count_results("m1") == 2
    assert storage.maps.missing_indices("m1", 4) == [1, 3]
    assert storage.maps.missing_indices("m1", 0) == []


def test_negative_slot_index_is_refused(storage: MemoryStorage) -> None:
    with pytest.raises(ValueError):
        storage.maps.put_result("m1", -1, "x")
    assert storage.maps.result_slots("m1", [-1]) == [None]


def test_large_map_uses_one_document_per_slot_and_position(storage: MemoryStorage) -> None:
    n = 2500
    storage.maps.init(meta(count=n))
    for i in range(n):
        storage.maps.put_result("m1", i, json.dumps(i))
        storage.maps.append_element("m1", f"ctx-{i}")
    docs = storage.documents
    assert len(docs.keys(MAP_SLOTS)) == n
    assert len(docs.keys(MAP_ELEMENTS)) == n
    assert docs.keys(MAP_SLOTS)[0] == "m1:000000000000"
    head = docs.raw(MAPS, "m1")
    assert head is not None and len(json.dumps(head.value)) < 1000
    assert storage.maps.count_results("m1") == n
    assert storage.maps.missing_indices("m1", n + 2) == [n, n + 1]
    assert storage.maps.results_page("m1", offset=1998, limit=3) == [
        (1998, "1998"), (1999, "1999"), (2000, "2000"),
    ]
    ids = storage.maps.element_ids("m1")
    assert len(ids) == n and ids[1234] == "ctx-1234"
    assert storage.maps.element_ids("m1", start=2400, limit=2) == ["ctx-2400", "ctx-2401"]


# -- element-context index (item 16) -------------------------------------------------------------


def test_element_ids(storage: MemoryStorage) -> None:
    assert [storage.maps.append_element("m1", x) for x in "abc"] == [0, 1, 2]
    assert storage.maps.element_ids("m1") == ["a", "b", "c"]
    assert storage.maps.element_ids("m1", start=1) == ["b", "c"]
    assert storage.maps.element_ids("m1", limit=2) == ["a", "b"]
    assert storage.maps.element_ids("m1", limit=0) == []
    assert storage.maps.element_id("m1", -1) == "c"
    assert storage.maps.element_id("m1", 0) == "a"
    assert storage.maps.element_id("m1", -3) == "a"
    assert storage.maps.element_id("m1", -4) is None
    assert storage.maps.element_id("m1", 3) is None
    assert storage.maps.count_elements("m1") == 3
    assert storage.maps.count_elements("unknown") == 0


def test_duplicates_are_allowed(storage: MemoryStorage) -> None:
    storage.maps.append_element("m1", "a")
    storage.maps.append_element("m1", "a")
    assert storage.maps.element_ids("m1") == ["a", "a"]


def test_tail_windows_are_anchored_at_total(storage: MemoryStorage) -> None:
    for x in "abcde":
        storage.maps.append_element("m1", x)
    tail = storage.maps.element_ids_from_tail
    assert tail("m1", position=0, count=2, total=5) == ["e", "d"]
    assert tail("m1", position=2, count=2, total=5) == ["c", "b"]
    assert tail("m1", position=3, count=5, total=5) == ["b", "a"]
    storage.maps.append_element("m1", "late")
    assert tail("m1", position=0, count=1, total=5) == ["e"]
    assert tail("m1", position=5, count=2, total=5) == []
    assert tail("m1", position=0, count=0, total=5) == []
    assert tail("m1", position=0, count=2, total=0) == []
    with pytest.raises(ValueError):
        tail("m1", position=-1, count=1, total=5)


def test_concurrent_appends_get_distinct_positions(storage: MemoryStorage) -> None:
    positions: list[int] = []
    lock = threading.Lock()

    def work(tag: str) -> None:
        for i in range(50):
            p = storage.maps.append_element("m1", f"{tag}{i}")
            with lock:
                positions.append(p)

    threads = [threading.Thread(target=work, args=(t,)) for t in "xy"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(positions) == list(range(100))
    assert len(storage.maps.element_ids("m1")) == 100


def test_a_reserved_position_without_its_document_is_a_hole(storage: MemoryStorage) -> None:
    storage.maps.append_element("m1", "a")
    storage.maps.append_element("m1", "b")
    storage.maps.append_element("m1", "c")
    docs = storage.documents
    found = docs.read(MAP_ELEMENTS, "m1:000000000001")
    assert docs.write(MAP_ELEMENTS, "m1:000000000001", None,
                      expected_version=found.version, expires_at=None)
    assert storage.maps.count_elements("m1") == 3  # positions never shift
    assert storage.maps.element_id("m1", 1) is None
    assert storage.maps.element_id("m1", 2) == "c"
    assert storage.maps.element_ids("m1") == ["a", "c"]
    assert storage.maps.element_ids_from_tail("m1", position=0, count=3, total=3) == ["c", "a"]


# -- retention ------------------------------------------------------------------------------------


def test_counter_writes_restamp_the_metadata(storage: MemoryStorage, clock: ManualClock) -> None:
    probe = MemoryProbe(storage)
    storage.maps.init(meta())
    assert probe.ttl(MAPS, "m1") == pytest.approx(TTL)
    clock.advance(TTL - 1)
    storage.maps.add_to_counter("m1", -1)
    clock.advance(2)
    assert storage.maps.metadata("m1") is not None
    assert [m.map_id for m in storage.maps.scan()] == ["m1"]
    clock.advance(TTL)
    assert storage.maps.metadata("m1") is None
    assert storage.maps.counter("m1") is None
    assert storage.maps.scan() == []


def test_every_map_write_restamps_what_it_writes(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    probe = MemoryProbe(storage)
    storage.maps.put_result("m1", 0, "a")
    storage.maps.append_element("m1", "x")
    storage.maps.advance_offset("m1", 2)
    clock.advance(TTL - 1)
    storage.maps.put_result("m1", 0, "b")
    storage.maps.append_element("m1", "y")
    storage.maps.advance_offset("m1", 2)
    for collection, key in [
        (MAP_SLOTS, "m1:000000000000"),
        (MAP_STATE, "m1:elements"),
        (MAP_STATE, "m1:offset"),
    ]:
        assert probe.ttl(collection, key) == pytest.approx(TTL)
    clock.advance(2)
    assert storage.maps.result_slots("m1", [0]) == ["b"]
    assert storage.maps.count_elements("m1") == 2
    assert storage.maps.offset("m1") == 4
    # the first position document was written long ago and lapsed on its own
    assert storage.maps.element_id("m1", 0) is None
    assert storage.maps.element_id("m1", 1) == "y"
    clock.advance(TTL)
    assert storage.maps.result_slots("m1", [0]) == [None]
    assert storage.maps.missing_indices("m1", 1) == [0]
    assert storage.maps.count_elements("m1") == 0


def test_a_page_of_element_ids_reads_from_its_start_not_from_the_first_element(
    storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """element_ids is a keyset page: its cost follows the page, not the start position."""
    for i in range(300):
        storage.maps.append_element("m1", f"ctx-{i}")
    real_scan = storage.documents.scan
    read: list[str] = []

    def scan(collection: str, **kwargs: object) -> list[tuple[str, object]]:
        found = real_scan(collection, **kwargs)  # type: ignore[arg-type]
        if collection == MAP_ELEMENTS:
            read.extend(key for key, _ in found)
        return found  # type: ignore[return-value]

    monkeypatch.setattr(storage.documents, "scan", scan)
    wanted = [f"ctx-{i}" for i in range(290, 295)]
    assert storage.maps.element_ids("m1", start=290, limit=5) == wanted
    assert read and min(read) >= "m1:000000000290"


def _record_slot_scans(storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record the ``limit`` of every scan of the slot collection from now on."""
    real_scan = storage.documents.scan
    limits: list[object] = []

    def scan(collection: str, **kwargs: object) -> list[tuple[str, object]]:
        if collection == MAP_SLOTS:
            limits.append(kwargs.get("limit"))
        return real_scan(collection, **kwargs)  # type: ignore[arg-type,return-value]

    monkeypatch.setattr(storage.documents, "scan", scan)
    return limits


@pytest.mark.parametrize(
    ("offset", "limit", "width"), [(0, 3, 3), (5, 3, 3), (-1, 3, 2), (-10, 12, 2)]
)
def test_a_results_page_reads_no_more_slots_than_its_window_holds(
    storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch, offset: int, limit: int, width: int
) -> None:
    """results_page is one scan of at most the indexes of offset..offset+limit-1 that are
    >= 0: its cost follows the page, not the offset, and an index below 0 costs nothing."""
    for i in range(12):
        storage.maps.put_result("m1", i, f"v{i}")
    limits = _record_slot_scans(storage, monkeypatch)
    wanted = [(i, f"v{i}") for i in range(max(offset, 0), offset + limit)]
    assert storage.maps.results_page("m1", offset=offset, limit=limit) == wanted
    assert limits == [width]


@pytest.mark.parametrize(("offset", "limit"), [(-10, 3), (-3, 3), (4, 0), (4, -2)])
def test_an_empty_results_window_reads_no_slot(
    storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch, offset: int, limit: int
) -> None:
    """A window with no index >= 0 (wholly below 0, or a limit <= 0) returns [] without a
    scan: never a scan with a negative limit, which the DocumentStore port leaves undefined."""
    for i in range(6):
        storage.maps.put_result("m1", i, f"v{i}")
    limits = _record_slot_scans(storage, monkeypatch)
    assert storage.maps.results_page("m1", offset=offset, limit=limit) == []
    assert limits == []


def test_element_ids_with_a_negative_limit_are_none(storage: MemoryStorage) -> None:
    """element_ids returns at most ``limit`` ids: none for a limit below 0, as for 0."""
    for x in "abc":
        storage.maps.append_element("m1", x)
    assert storage.maps.element_ids("m1", limit=-1) == []
    assert storage.maps.element_ids("m1", start=1, limit=-5) == []


def test_a_finished_append_past_position_256_may_be_duplicated(storage: MemoryStorage) -> None:
    """An append clears its pending reservation however large its position (ints past 256
    are equal without being one object): the same context id appended again gets a new
    position instead of the finished one."""
    for i in range(257):
        storage.maps.append_element("m1", f"ctx-{i}")
    assert storage.maps.append_element("m1", "dup") == 257
    assert storage.maps.append_element("m1", "dup") == 258
    assert storage.maps.count_elements("m1") == 259
    assert storage.maps.element_ids("m1", start=256) == ["ctx-256", "dup", "dup"]


def test_scan_lists_at_most_1000_maps_by_default(storage: MemoryStorage) -> None:
    """MapStore.scan's default limit is the port's, 1000 maps, then a cursor to the rest."""
    for i in range(1001):
        storage.maps.init(meta(f"m{i:04d}"))
    page = storage.maps.scan()
    assert len(page) == 1000 and page[-1].map_id == "m0999"
    assert page.next_cursor is not None
    rest = storage.maps.scan(cursor=page.next_cursor)
    assert [m.map_id for m in rest] == ["m1000"]
