"""Fan-out map forward state (docs/protocol.md#maps), plus retention."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import pytest

from reactor.engine import fast_paths
from reactor.model.coordination.fencing import FENCE_RETENTION
from reactor.model.records import ElementStart, Fence, MapMetadata
from reactor.ports.capabilities import BeginsAndSettlesElements, SettlesAndReleases
from reactor.ports.storage import MapStore, Storage
from reactor_contract._support import (
    CONTEXT_TTL,
    assert_ttl,
    context,
    map_metadata,
    rollback_metadata,
    teach,
    uid,
    walk_scan,
)
from reactor_contract.optional_operations import element_ids_of, map_inspector, read_counter
from reactor_contract.probe import FENCE, Probe
from reactor_contract.test_concurrency import race_rounds

__all__ = ["MapsContract"]

#: Where the atomicity of the map counters and claims is stated.
_MAPS_DOC = 'docs/protocol.md, "Maps"'


def _pages_after(storage: Storage, cursor: str | None) -> list[list[MapMetadata]]:
    """The map scan's pages (2 rows each) from ``cursor`` to the end of the index."""
    pages: list[list[MapMetadata]] = []
    for _ in range(20):
        page = storage.maps.scan(limit=2, cursor=cursor)
        pages.append(list(page))
        cursor = page.next_cursor
        if cursor is None:
            return pages
    raise AssertionError("the map scan did not end within 20 pages")


#: The MapStore calls the element fast paths stand for (reactor.engine.fast_paths).
_COMPOSED_CALLS = frozenset({
    "metadata", "result_slots", "failed_context", "append_element", "set_failed_context",
    "put_result", "add_to_counter",
})  # fmt: skip


class _Composed:
    """``maps`` seen without its fast paths: only the calls they stand for, so
    :mod:`reactor.engine.fast_paths` makes those calls one by one."""

    def __init__(self, maps: MapStore) -> None:
        self._maps = maps

    def __getattr__(self, name: str) -> Any:
        if name not in _COMPOSED_CALLS:
            raise AttributeError(name)
        return getattr(self._maps, name)


def _forward_state(maps: MapStore, map_id: str, count: int) -> tuple[Any, ...]:
    """What a map's forward state reads as through the protocol."""
    return (
        maps.metadata(map_id),
        read_counter(maps, map_id),
        maps.failed_context(map_id),
        maps.result_slots(map_id, list(range(count))),
        element_ids_of(maps, map_id),
    )


class MapsContract:
    """:class:`reactor.ports.MapStore` behaviour every adapter must show."""

    reactor_concern = "maps"

    @pytest.mark.obligations("O-maps-1", "O-maps-4")
    def test_metadata_round_trips(self, storage: Storage) -> None:
        meta = map_metadata(
            count=7,
            batch_size=3,
            atomic=False,
            parent_is_map_element=True,
            outer_map_id="outer-map",
            outer_index=4,
            extra={"strict_ordering": True, "labels": ["x"], "n": 1.5},
        )
        assert storage.maps.init(meta) is True
        assert storage.maps.metadata(meta.map_id) == meta
        assert storage.maps.metadata(uid("map")) is None

    @pytest.mark.obligations("O-maps-1", "O-maps-2", "O-maps-3")
    def test_init_sets_the_counter_once(self, storage: Storage) -> None:
        meta = map_metadata(count=5)
        assert storage.maps.init(meta) is True
        assert read_counter(storage.maps, meta.map_id) == 5
        storage.maps.add_to_counter(meta.map_id, -2)
        assert storage.maps.init(map_metadata(meta.map_id, count=9)) is False
        assert read_counter(storage.maps, meta.map_id) == 3
        assert storage.maps.metadata(meta.map_id) == meta

    @pytest.mark.obligations("O-maps-14")
    def test_scan_lists_maps_but_never_rollback_records(self, storage: Storage) -> None:
        first, second = map_metadata(), map_metadata()
        storage.maps.init(first)
        storage.maps.init(second)
        storage.map_rollbacks.start(rollback_metadata(first.map_id))
        storage.map_rollbacks.start(rollback_metadata(uid("map")))
        listed = storage.maps.scan()
        assert sorted(m.map_id for m in listed) == sorted([first.map_id, second.map_id])
        assert len(storage.maps.scan(limit=1)) == 1

    @pytest.mark.obligations("O-maps-11")
    def test_owner_signal_is_claimed_exactly_once(self, storage: Storage) -> None:
        meta = map_metadata()
        storage.maps.init(meta)
        assert storage.maps.claim_owner_signal(meta.map_id) is True
        assert storage.maps.claim_owner_signal(meta.map_id) is False

    @pytest.mark.obligations("O-maps-4", "O-maps-5")
    def test_counter_returns_the_exact_new_value(self, storage: Storage) -> None:
        meta = map_metadata(count=5)
        storage.maps.init(meta)
        assert storage.maps.add_to_counter(meta.map_id, -2) == 3
        assert storage.maps.add_to_counter(meta.map_id, -1) == 2
        assert storage.maps.add_to_counter(meta.map_id, 1) == 3
        assert read_counter(storage.maps, meta.map_id) == 3
        assert read_counter(storage.maps, uid("map")) is None

    @pytest.mark.obligations("O-maps-7", "O-maps-8")
    def test_offset_is_set_once_then_advanced(self, storage: Storage) -> None:
        map_id = map_metadata().map_id
        assert storage.maps.offset(map_id) is None
        assert storage.maps.init_offset(map_id, 5) is True
        assert storage.maps.init_offset(map_id, 9) is False
        assert storage.maps.offset(map_id) == 5
        assert storage.maps.advance_offset(map_id, 3) == 8
        offset = storage.maps.offset(map_id)
        assert offset == 8 and isinstance(offset, int)

    @pytest.mark.obligations("O-maps-8")
    def test_offset_may_grow_past_the_count(self, storage: Storage) -> None:
        meta = map_metadata(count=3)
        storage.maps.init(meta)
        storage.maps.init_offset(meta.map_id, 0)
        assert [storage.maps.advance_offset(meta.map_id, 2) for _ in range(3)] == [2, 4, 6]

    @pytest.mark.obligations("O-maps-10")
    def test_first_failed_context_wins(self, storage: Storage) -> None:
        map_id = uid("map")
        assert storage.maps.failed_context(map_id) is None
        assert storage.maps.set_failed_context(map_id, "ctx-a") is True
        assert storage.maps.set_failed_context(map_id, "ctx-b") is False
        assert storage.maps.failed_context(map_id) == "ctx-a"

    @pytest.mark.obligations("O-maps-17", "O-maps-18", "O-maps-19", "O-maps-20")
    def test_result_slots_are_index_keyed(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.maps.put_result(map_id, 0, '"v0"')
        storage.maps.put_result(map_id, 2, '"v2"')
        storage.maps.put_result(map_id, 2, '"v2new"')
        assert storage.maps.results_page(map_id, offset=0, limit=10) == [
            (0, '"v0"'),
            (2, '"v2new"'),
        ]
        assert storage.maps.results_page(map_id, offset=1, limit=2) == [(2, '"v2new"')]
        assert storage.maps.results_page(map_id, offset=3, limit=2) == []
        assert storage.maps.result_slots(map_id, [2, 1, 0]) == ['"v2new"', None, '"v0"']
        assert storage.maps.result_slots(map_id, []) == []
        assert storage.maps.count_results(map_id) == 2
        assert storage.maps.missing_indices(map_id, 4) == [1, 3]
        assert storage.maps.missing_indices(map_id, 0) == []

    @pytest.mark.obligations("O-maps-18", "O-maps-20")
    def test_results_page_orders_by_numeric_index(self, storage: Storage) -> None:
        map_id = uid("map")
        for index in (11, 2, 100, 0):
            storage.maps.put_result(map_id, index, str(index))
        assert storage.maps.results_page(map_id, offset=0, limit=200) == [
            (0, "0"),
            (2, "2"),
            (11, "11"),
            (100, "100"),
        ]
        assert storage.maps.missing_indices(map_id, 3) == [1]

    @pytest.mark.obligations("O-maps-21")
    def test_maps_do_not_share_slots(self, storage: Storage) -> None:
        a, b = uid("map"), uid("map")
        storage.maps.put_result(a, 0, '"a"')
        assert storage.maps.count_results(b) == 0
        assert storage.maps.result_slots(b, [0]) == [None]

    @pytest.mark.obligations("O-maps-22", "O-maps-24", "O-maps-25")
    def test_element_index_is_append_only(self, storage: Storage) -> None:
        map_id = uid("map")
        assert [storage.maps.append_element(map_id, c) for c in ("a", "b", "c")] == [0, 1, 2]
        assert element_ids_of(storage.maps, map_id) == ["a", "b", "c"]
        assert storage.maps.count_elements(map_id) == 3
        assert storage.maps.count_elements(uid("map")) == 0
        inspector = map_inspector(storage)  # the rest is optional (InspectsMaps)
        assert inspector.element_ids(map_id, start=1) == ["b", "c"]
        assert inspector.element_ids(map_id, start=1, limit=1) == ["b"]
        assert inspector.element_id(map_id, -1) == "c"
        assert inspector.element_id(map_id, 0) == "a"
        assert inspector.element_id(map_id, -3) == "a"
        assert inspector.element_id(map_id, 3) is None
        assert inspector.element_id(map_id, -4) is None

    @pytest.mark.obligations("O-maps-22")
    def test_duplicates_are_appended_not_merged(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.maps.append_element(map_id, "a")
        assert storage.maps.append_element(map_id, "a") == 1
        assert element_ids_of(storage.maps, map_id) == ["a", "a"]

    @pytest.mark.obligations("O-maps-26")
    def test_tail_windows_are_anchored_at_total(self, storage: Storage) -> None:
        map_id = uid("map")
        for cid in ("a", "b", "c", "d", "e"):
            storage.maps.append_element(map_id, cid)
        tail = storage.maps.element_ids_from_tail
        assert tail(map_id, position=0, count=2, total=5) == ["e", "d"]
        assert tail(map_id, position=3, count=5, total=5) == ["b", "a"]
        storage.maps.append_element(map_id, "late")
        assert tail(map_id, position=0, count=1, total=5) == ["e"]
        assert tail(map_id, position=5, count=2, total=5) == []
        assert tail(map_id, position=0, count=10, total=6) == ["late", "e", "d", "c", "b", "a"]

    @pytest.mark.obligations("O-maps-27")
    def test_every_write_stamps_retention(self, storage: Storage, probe: Probe) -> None:
        meta = map_metadata(count=3)
        storage.maps.init(meta)
        storage.maps.init_offset(meta.map_id, 0)
        storage.maps.put_result(meta.map_id, 0, '"r"')
        storage.maps.append_element(meta.map_id, "ctx-0")
        storage.maps.set_failed_context(meta.map_id, "ctx-0")
        storage.maps.claim_owner_signal(meta.map_id)
        assert_ttl(probe.ttl("map", meta.map_id), CONTEXT_TTL)

    @pytest.mark.obligations("O-maps-27", "O-maps-28")
    def test_every_write_restamps_what_it_writes(self, storage: Storage, probe: Probe) -> None:
        meta = map_metadata(count=3)
        map_id = meta.map_id
        storage.maps.init(meta)
        storage.maps.init_offset(map_id, 0)
        storage.maps.put_result(map_id, 0, '"r"')
        storage.maps.append_element(map_id, "ctx-0")
        probe.expire("map", map_id, after=30)
        assert_ttl(probe.ttl("map", map_id), 30)
        writes: list[tuple[str, Callable[[], object]]] = [
            ("counter", lambda: storage.maps.add_to_counter(map_id, -1)),
            ("metadata", lambda: storage.maps.add_to_counter(map_id, 0)),
            ("offset", lambda: storage.maps.advance_offset(map_id, 1)),
            ("slot:0", lambda: storage.maps.put_result(map_id, 0, '"r2"')),
            ("elements", lambda: storage.maps.append_element(map_id, "ctx-1")),
            ("element:1", lambda: None),
        ]
        for member, write in writes:
            write()
            assert_ttl(probe.ttl("map", map_id, member), CONTEXT_TTL)
        # The index (aggregate) never expires before one of its members.
        element_ttl = probe.ttl("map", map_id, "element:0")
        index_ttl = probe.ttl("map", map_id, "elements")
        assert element_ttl is not None and index_ttl is not None
        # Two reads of a ticking server clock: allow the second one to be a moment later.
        assert index_ttl >= element_ttl - 1.0

    @pytest.mark.obligations("O-maps-27", "O-maps-28")
    def test_aggregates_never_expire_before_their_context(
        self, storage: Storage, probe: Probe
    ) -> None:
        parent = context()
        storage.contexts.save(parent)
        meta = map_metadata(count=2, parent_context_id=parent.context_id)
        storage.maps.init(meta)
        storage.maps.init_offset(meta.map_id, 0)
        storage.maps.advance_offset(meta.map_id, 2)
        storage.maps.put_result(meta.map_id, 1, '"r"')
        storage.maps.append_element(meta.map_id, "ctx-1")
        storage.maps.add_to_counter(meta.map_id, -1)
        context_ttl = probe.ttl("context", parent.context_id)
        map_ttl = probe.ttl("map", meta.map_id)
        assert context_ttl is not None and map_ttl is not None
        assert map_ttl >= context_ttl - 1.0
        assert_ttl(map_ttl, CONTEXT_TTL)

    @pytest.mark.obligations("O-maps-29")
    def test_an_expired_map_reads_as_absent(self, storage: Storage, probe: Probe) -> None:
        meta = map_metadata(count=2)
        storage.maps.init(meta)
        storage.maps.init_offset(meta.map_id, 0)
        storage.maps.put_result(meta.map_id, 0, '"r"')
        storage.maps.append_element(meta.map_id, "ctx-0")
        probe.expire("map", meta.map_id)
        assert storage.maps.metadata(meta.map_id) is None
        assert read_counter(storage.maps, meta.map_id) is None
        assert storage.maps.offset(meta.map_id) is None
        assert storage.maps.count_results(meta.map_id) == 0
        assert storage.maps.result_slots(meta.map_id, [0]) == [None]
        assert storage.maps.scan() == []
        assert probe.ttl("map", meta.map_id) is None
        assert storage.maps.init(meta) is True

    @pytest.mark.obligations("O-maps-15")
    def test_scan_pages_with_a_cursor_list_every_map_once(self, storage: Storage) -> None:
        metas = [map_metadata() for _ in range(7)]
        for meta in metas:
            storage.maps.init(meta)
        pages = walk_scan(storage.maps.scan, limit=3)
        listed = [meta.map_id for page in pages for meta in page]
        assert sorted(listed) == sorted(m.map_id for m in metas)

    @pytest.mark.obligations("O-maps-11", "O-maps-13")
    def test_claiming_the_owner_signal_settles_the_map_out_of_the_scan(
        self, storage: Storage
    ) -> None:
        settled, active = map_metadata(count=1), map_metadata(count=1)
        storage.maps.init(settled)
        storage.maps.init(active)
        storage.maps.put_result(settled.map_id, 0, '"done"')
        assert storage.maps.claim_owner_signal(settled.map_id) is True
        assert storage.maps.scan() == [active]
        storage.maps.add_to_counter(settled.map_id, -1)  # later writes keep it settled
        assert storage.maps.claim_owner_signal(settled.map_id) is False
        assert storage.maps.scan() == [active]
        assert storage.maps.metadata(settled.map_id) == settled  # still readable

    @pytest.mark.obligations("O-maps-13", "O-maps-15")
    def test_a_scan_cursor_survives_its_last_map_settling(self, storage: Storage) -> None:
        metas = {m.map_id: m for m in (map_metadata() for _ in range(6))}
        for meta in metas.values():
            storage.maps.init(meta)
        first = storage.maps.scan(limit=2)
        assert len(first) == 2 and first.next_cursor is not None
        storage.maps.claim_owner_signal(first[-1].map_id)  # the cursor's own row leaves
        rest = [m.map_id for page in _pages_after(storage, first.next_cursor) for m in page]
        assert sorted(rest) == sorted(set(metas) - {m.map_id for m in first})

    @pytest.mark.obligations("O-maps-16")
    def test_a_malformed_scan_cursor_raises_value_error(self, storage: Storage) -> None:
        storage.maps.init(map_metadata())
        with pytest.raises(ValueError):
            storage.maps.scan(cursor="%%% not a cursor %%%")

    # -- the element fast paths (docs/protocol.md, "Optional fast paths"): through
    # reactor.engine.fast_paths, which calls the store's own method when it declares
    # BeginsAndSettlesElements and the composition otherwise; both must read the same.

    @pytest.mark.obligations("O-maps-30")
    def test_begin_element_appends_only_a_fresh_element_of_a_live_map(
        self, storage: Storage
    ) -> None:
        maps, meta = storage.maps, map_metadata(count=3)
        map_id = meta.map_id
        begin = fast_paths.begin_element
        assert begin(maps, map_id, 0, "ctx-0") == ElementStart(None, False, None, None)
        assert maps.count_elements(map_id) == 0, "an unknown map gets no element"
        maps.init(meta)
        assert begin(maps, map_id, 0, None) == ElementStart(meta, False, None, None)
        assert maps.count_elements(map_id) == 0, "no context id: a read only"
        assert begin(maps, map_id, 0, "ctx-0") == ElementStart(meta, False, None, 0)
        assert begin(maps, map_id, 1, "ctx-1") == ElementStart(meta, False, None, 1)
        maps.put_result(map_id, 2, '"r"')
        assert begin(maps, map_id, 2, "ctx-2") == ElementStart(meta, True, None, None)
        maps.set_failed_context(map_id, "ctx-1")
        assert begin(maps, map_id, 0, "ctx-x") == ElementStart(meta, False, "ctx-1", None)
        assert element_ids_of(maps, map_id) == ["ctx-0", "ctx-1"]
        assert read_counter(maps, map_id) == 3, "beginning an element never counts it"

    @pytest.mark.obligations("O-maps-31", "O-maps-17", "O-maps-20")
    def test_settle_element_stores_the_failure_the_slot_and_counts_down(
        self, storage: Storage
    ) -> None:
        maps, meta = storage.maps, map_metadata(count=3)
        map_id = meta.map_id
        maps.init(meta)
        settle = fast_paths.settle_element
        assert settle(maps, map_id, 1, '"b"') == 2
        assert maps.failed_context(map_id) is None
        assert settle(maps, map_id, 0, '"a"', failed_context="ctx-0") == 1
        assert settle(maps, map_id, 2, '"c"', failed_context="ctx-2") == 0
        assert maps.failed_context(map_id) == "ctx-0", "the first failed element wins"
        assert maps.results_page(map_id, offset=0, limit=5) == [
            (0, '"a"'), (1, '"b"'), (2, '"c"'),
        ]  # fmt: skip
        assert maps.missing_indices(map_id, 3) == []
        # a duplicate settle (a redelivered element) overwrites its slot and counts again:
        # the slots, not the counter, decide completion
        assert settle(maps, map_id, 2, '"c2"') == -1
        assert maps.result_slots(map_id, [2]) == ['"c2"']
        assert read_counter(maps, map_id) == -1

    @pytest.mark.obligations("O-maps-30", "O-maps-31")
    def test_element_fast_paths_refuse_negative_indexes(self, storage: Storage) -> None:
        with pytest.raises(ValueError):
            fast_paths.begin_element(storage.maps, uid("map"), -1, "ctx")
        with pytest.raises(ValueError):
            fast_paths.settle_element(storage.maps, uid("map"), -1, '"v"')

    @pytest.mark.obligations("O-maps-27")
    def test_element_fast_paths_restamp_what_they_write(
        self, storage: Storage, probe: Probe
    ) -> None:
        meta = map_metadata(count=2)
        map_id = meta.map_id
        storage.maps.init(meta)
        storage.maps.put_result(map_id, 0, '"r"')
        storage.maps.append_element(map_id, "ctx-0")
        probe.expire("map", map_id, after=30)
        fast_paths.begin_element(storage.maps, map_id, 1, "ctx-1")
        assert_ttl(probe.ttl("map", map_id, "elements"), CONTEXT_TTL)
        assert_ttl(probe.ttl("map", map_id, "element:1"), CONTEXT_TTL)
        fast_paths.settle_element(storage.maps, map_id, 1, '"s"', failed_context="ctx-1")
        for member in ("counter", "slot:1"):
            assert_ttl(probe.ttl("map", map_id, member), CONTEXT_TTL)

    @pytest.mark.parametrize("view", ["native", "composed"])
    @pytest.mark.obligations("O-maps-33")
    def test_settle_releasing_settles_then_releases_only_the_owners_lock(
        self, storage: Storage, view: str
    ) -> None:
        store: Storage = storage
        if view == "composed":  # the storage's maps seen without settle_releasing
            store = cast(Storage, _WithMaps(storage, _Composed(storage.maps)))
            assert not isinstance(store.maps, SettlesAndReleases)
        meta = map_metadata(count=2)
        map_id = meta.map_id
        storage.maps.init(meta)
        mine, theirs = f"map_element:{map_id}:0", f"map_element:{map_id}:1"
        token = storage.locks.acquire(mine, "me", 30.0)
        assert fast_paths.settle_releasing(
            store, map_id, 0, '"a"', failed_context="ctx-0", fence=Fence(mine, "me", token)
        ) == 1
        assert storage.maps.failed_context(map_id) == "ctx-0"
        assert storage.maps.result_slots(map_id, [0]) == ['"a"']
        assert storage.locks.info(mine) is None, "settled: the element's lock is released"
        assert storage.locks.acquire(theirs, "other", 30.0)
        stranger = Fence(theirs, "me", 1)
        assert fast_paths.settle_releasing(store, map_id, 1, '"b"', fence=stranger) == 0
        info = storage.locks.info(theirs)
        assert info is not None and info.owner == "other", "another owner's lock stays"
        assert info.expires_at is not None and info.expires_at <= storage.now() + 31.0, (
            "the map's re-stamp never extends the lock"
        )

    @pytest.mark.parametrize("view", ["native", "composed"])
    @pytest.mark.obligations("O-maps-34")
    def test_settle_releasing_leaves_every_lock_record_its_own_ttl(
        self, storage: Storage, probe: Probe, view: str
    ) -> None:
        # The settle re-stamps the map's records with the retention; the element's lock is not
        # the map's: the owner's released lock keeps only its fence retention, and another
        # owner's lock (held without a TTL here) keeps its own lifetime, record and all.
        store: Storage = storage
        if view == "composed":
            store = cast(Storage, _WithMaps(storage, _Composed(storage.maps)))
        meta = map_metadata(count=2)
        map_id = meta.map_id
        storage.maps.init(meta)
        mine, theirs = f"map_element:{map_id}:0", f"map_element:{map_id}:1"
        token = storage.locks.acquire(mine, "me", 30.0)
        fast_paths.settle_releasing(store, map_id, 0, '"a"', fence=Fence(mine, "me", token))
        assert storage.locks.acquire(theirs, "other", None)
        # Aged: this settle re-stamps every record of the map (a store may re-stamp only what
        # a write touched while the map's stamp still covers the retention).
        probe.expire("map", map_id, after=30)
        fast_paths.settle_releasing(store, map_id, 1, '"b"', fence=Fence(theirs, "me", 1))
        released = probe.ttl("lock", mine, FENCE)
        kept = (probe.ttl("lock", theirs), probe.ttl("lock", theirs, FENCE))
        assert (released is None or released <= FENCE_RETENTION + 1.0) and kept == (
            math.inf, math.inf
        ), teach(
            "maps",
            "settle_releasing re-stamps the map's records, never a lock: the released lock's "
            f"record lives at most FENCE_RETENTION ({FENCE_RETENTION:g} s), got {released}, "
            f"and another owner's lock without a TTL never lapses, got {kept} (hold, record)",
            "the settle's retention re-stamp applied to every key it touched, the element's "
            "lock included (a PEXPIRE on all KEYS)",
            'docs/protocol.md, "Optional fast paths", and docs/coordination.md, '
            '"Fencing tokens"',
        )

    @pytest.mark.obligations("O-maps-30", "O-maps-31", "O-maps-32")
    def test_element_fast_paths_equal_their_composition(self, storage: Storage) -> None:
        # A store that declares BeginsAndSettlesElements runs its own methods on one map and
        # the composition on another; on a store without them both maps take the composition.
        native, composed = storage.maps, _Composed(storage.maps)
        assert not isinstance(composed, BeginsAndSettlesElements)
        meta_a, meta_b = map_metadata(count=4), map_metadata(count=4)
        pairs = ((native, meta_a.map_id), (composed, meta_b.map_id))
        for meta in (meta_a, meta_b):
            native.init(meta)
        steps: list[tuple[str, int, str | None]] = [
            ("begin", 0, None), ("begin", 0, "ctx-0"), ("begin", 1, "ctx-1"),
            ("settle", 0, None), ("begin", 0, "ctx-0b"), ("settle", 1, "ctx-1"),
            ("begin", 2, "ctx-2"), ("settle", 2, "ctx-2"), ("begin", 3, None),
        ]  # fmt: skip
        for op, index, arg in steps:
            results: list[object] = []
            for maps, map_id in pairs:
                if op == "begin":
                    start = fast_paths.begin_element(maps, map_id, index, arg)
                    results.append((start.settled, start.failed_context, start.position,
                                    start.metadata is not None))
                else:
                    results.append(fast_paths.settle_element(
                        maps, map_id, index, f'"{index}"', failed_context=arg))
            assert results[0] == results[1], f"{op} {index} {arg}"
            state_a = _forward_state(native, meta_a.map_id, 4)
            state_b = _forward_state(native, meta_b.map_id, 4)
            assert state_a[0] is not None and state_b[0] is not None
            assert state_a[1:] == state_b[1:], f"{op} {index} {arg}"

    # -- races (docs/protocol.md, "Maps": atomic adds, first-writer-wins claims): 8 racers on a
    # fresh map each round (reactor_contract.test_concurrency.race_rounds).

    @pytest.mark.obligations("O-maps-6")
    def test_racing_counter_updates_lose_none(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.maps.init(map_metadata(map_id, count=40))

        def check(map_id: str, values: list[list[int]]) -> None:
            seen = sorted(v for batch in values for v in batch)
            counter = read_counter(storage.maps, map_id)
            assert seen == list(range(40)) and counter == 0, teach(
                "maps",
                "8 racers decrementing a counter of 40 five times each see every value 39..0 "
                f"once and leave it at 0: they saw {seen}, it reads {counter}",
                "add_to_counter reads the counter and writes it back (not an atomic add)",
                _MAPS_DOC,
            )

        race_rounds(
            8, lambda map_id, _i: [storage.maps.add_to_counter(map_id, -1) for _ in range(5)],
            check, prefix="map", prepare=prepare,
        )

    @pytest.mark.obligations("O-maps-9")
    def test_racing_offset_advances_own_disjoint_batches(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.maps.init_offset(map_id, 0)

        def check(map_id: str, news: list[int]) -> None:
            assert sorted(news) == list(range(2, 17, 2)), teach(
                "maps",
                "8 racers advancing one dispatch offset by 2 get the new values 2, 4, ... 16 "
                f"once each (each owns the batch [new - 2, new)): they got {sorted(news)}",
                "advance_offset reads the offset and writes it back (not an atomic add)",
                _MAPS_DOC,
            )
            assert storage.maps.offset(map_id) == 16

        race_rounds(8, lambda map_id, _i: storage.maps.advance_offset(map_id, 2), check,
                    prefix="map", prepare=prepare)

    @pytest.mark.obligations("O-maps-12", "O-maps-13")
    def test_racing_owner_signal_claims_have_one_winner(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.maps.init(map_metadata(map_id))

        def check(_map_id: str, wins: list[bool]) -> None:
            assert wins.count(True) == 1, teach(
                "maps",
                f"of 8 racers claiming one map's owner signal exactly one wins: {wins}",
                "claim_owner_signal reads the flag and then sets it (no conditional write)",
                _MAPS_DOC,
            )

        race_rounds(8, lambda map_id, _i: storage.maps.claim_owner_signal(map_id), check,
                    prefix="map", prepare=prepare)
        assert storage.maps.scan() == [], "every claimed map left the scan"

    @pytest.mark.obligations("O-maps-23")
    def test_racing_appends_never_share_a_position(self, storage: Storage) -> None:
        def check(map_id: str, positions: list[list[int]]) -> None:
            flat = sorted(p for batch in positions for p in batch)
            assert flat == list(range(40)), teach(
                "maps",
                "8 racers appending 5 element ids each get the positions 0..39 once each: "
                f"they got {flat}",
                "append_element counts the index and then writes at that position",
                _MAPS_DOC,
            )
            assert storage.maps.count_elements(map_id) == 40
            assert sorted(element_ids_of(storage.maps, map_id)) == sorted(
                f"ctx-{i}-{j}" for i in range(8) for j in range(5)
            )

        race_rounds(
            8,
            lambda map_id, i: [storage.maps.append_element(map_id, f"ctx-{i}-{j}")
                               for j in range(5)],
            check, prefix="map",
        )


class TestMaps(MapsContract):
    """The maps contract against ``--reactor-storage``."""


class _WithMaps:
    """``storage`` with another map store (the composition view of a test)."""

    def __init__(self, storage: Storage, maps: object) -> None:
        self._storage = storage
        self.maps = maps

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)
