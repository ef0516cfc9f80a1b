"""Contexts (docs/protocol.md#contexts), plus retention and logical expiry."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, cast

import pytest

from reactor.engine import fast_paths
from reactor.errors import ContextTooLargeError, DeserializationError, LockLost, StaleWriterError
from reactor.memory.clock import ManualClock
from reactor.model.records import ContextDelta, ContextRecord, Fence, LockClaim
from reactor.ports.capabilities import LocksWithContexts
from reactor.ports.storage import Storage
from reactor_contract._support import (
    CONTEXT_TTL,
    TTL_SLACK,
    assert_ttl,
    context,
    map_metadata,
    step_result,
    teach,
    uid,
    walk_scan,
)
from reactor_contract.optional_operations import appender
from reactor_contract.plugin import NO_SIZE_LIMIT
from reactor_contract.probe import ClockProbe, Probe
from reactor_contract.test_concurrency import race_rounds

__all__ = ["ContextsContract"]


class ContextsContract:
    """:class:`reactor.ports.ContextStore` behaviour every adapter must show."""

    reactor_concern = "contexts"

    @pytest.mark.obligations("O-contexts-1")
    def test_save_then_load_round_trips_every_field(self, storage: Storage) -> None:
        record = context(
            status="paused",
            document='{"inputs":{"order":"o-1"},"unicode":"\\u00e9\\u2603"}',
            created_at=1_700_000_000.125,
            updated_at=1_700_000_042.5,
            parent="p-1",
            root="r-1",
            dispatched_child=True,
        )
        storage.contexts.save(record)
        assert storage.contexts.load(record.context_id) == record

    @pytest.mark.obligations("O-contexts-2")
    def test_unknown_id_loads_none(self, storage: Storage) -> None:
        assert storage.contexts.load(uid("ctx")) is None

    @pytest.mark.obligations("O-contexts-3")
    def test_last_writer_wins(self, storage: Storage) -> None:
        first = context(status="running", document='{"v":1}')
        second = dataclasses.replace(first, status="completed", document='{"v":2}')
        storage.contexts.save(first)
        storage.contexts.save(second)
        assert storage.contexts.load(first.context_id) == second

    @pytest.mark.obligations("O-contexts-4")
    def test_delete_makes_the_context_absent(self, storage: Storage) -> None:
        record = context()
        storage.contexts.save(record)
        assert storage.contexts.delete(record.context_id) is True
        assert storage.contexts.load(record.context_id) is None
        assert storage.contexts.delete(record.context_id) is False
        assert storage.contexts.scan() == []

    @pytest.mark.obligations("O-contexts-14")
    def test_scan_lists_top_level_runs_only(self, storage: Storage) -> None:
        root = context(status="running")
        element = context(status="running", parent=root.context_id, root=root.context_id)
        child = context(
            status="running", parent=root.context_id, root=root.context_id, dispatched_child=True
        )
        for record in (root, element, child):
            storage.contexts.save(record)
        assert [r.context_id for r in storage.contexts.scan()] == [root.context_id]
        listed = {r.context_id for r in storage.contexts.scan(include_dispatched_children=True)}
        assert listed == {root.context_id, child.context_id}

    @pytest.mark.obligations("O-contexts-15")
    def test_scan_rows_are_summaries_of_the_stored_runs(self, storage: Storage) -> None:
        record = context(status="failed", created_at=1_700_000_000.5, updated_at=1_700_000_001.5)
        storage.contexts.save(record)
        (row,) = storage.contexts.scan()
        assert (row.context_id, row.reactor, row.status) == (record.context_id, "orders", "failed")
        assert (row.created_at, row.updated_at) == (1_700_000_000.5, 1_700_000_001.5)
        assert row.parent_context_id is None and row.dispatched_child is False

    @pytest.mark.obligations("O-contexts-14")
    def test_scan_never_lists_other_records(self, storage: Storage) -> None:
        record = context()
        storage.contexts.save(record)
        storage.step_results.put(step_result(record.context_id))
        storage.claims.claim_interrupt_resume(record.context_id, "approve", '{"ok":true}')
        storage.maps.init(map_metadata(parent_context_id=record.context_id))
        assert [r.context_id for r in storage.contexts.scan()] == [record.context_id]

    @pytest.mark.obligations("O-contexts-16", "O-contexts-17")
    def test_status_filter_applies_before_the_limit(self, storage: Storage) -> None:
        for _ in range(5):
            storage.contexts.save(context(status="completed"))
        wanted = context(status="running")
        storage.contexts.save(wanted)
        rows = storage.contexts.scan(statuses=["running"], limit=1)
        assert [r.context_id for r in rows] == [wanted.context_id]
        assert len(storage.contexts.scan(statuses=["completed", "running"], limit=3)) == 3
        assert storage.contexts.scan(statuses=["halted"]) == []

    @pytest.mark.obligations("O-contexts-17")
    def test_scan_respects_the_limit(self, storage: Storage) -> None:
        for _ in range(4):
            storage.contexts.save(context())
        assert len(storage.contexts.scan(limit=3)) == 3
        assert len(storage.contexts.scan()) == 4

    @pytest.mark.obligations("O-contexts-18")
    def test_scan_follows_status_changes(self, storage: Storage) -> None:
        record = context(status="running")
        storage.contexts.save(record)
        storage.contexts.save(dataclasses.replace(record, status="completed"))
        assert storage.contexts.scan(statuses=["running"]) == []
        assert [r.status for r in storage.contexts.scan(statuses=["completed"])] == ["completed"]

    @pytest.mark.obligations("O-contexts-22")
    def test_pages_list_every_run_once_newest_first(self, storage: Storage) -> None:
        runs = [context(created_at=1_700_000_000.0 + i) for i in range(3)]
        for record in runs:
            storage.contexts.save(record)
        storage.contexts.save(context(parent=runs[0].context_id))
        first = storage.contexts.page(limit=2)
        assert len(first.runs) == 2 and first.next_cursor is not None
        second = storage.contexts.page(cursor=first.next_cursor, limit=2)
        assert len(second.runs) == 1 and second.next_cursor is None
        listed = [r.context_id for r in first.runs + second.runs]
        assert listed == [r.context_id for r in reversed(runs)]

    @pytest.mark.obligations("O-contexts-22")
    def test_a_single_page_has_no_cursor(self, storage: Storage) -> None:
        storage.contexts.save(context())
        page = storage.contexts.page(limit=5)
        assert len(page.runs) == 1 and page.next_cursor is None
        assert storage.contexts.page().runs[0].context_id == page.runs[0].context_id

    @pytest.mark.obligations("O-contexts-23")
    def test_a_malformed_cursor_raises_value_error(self, storage: Storage) -> None:
        storage.contexts.save(context())
        with pytest.raises(ValueError):
            storage.contexts.page(cursor="%%% not a cursor %%%")

    # ---- filtered pages (docs/protocol.md, "Filtered pages") --------------------------------

    def _walk_pages(self, storage: Storage, limit: int, **filters: Any) -> list[str]:
        """Every run id a filtered page walk lists, following the cursors to the end."""
        listed: list[str] = []
        cursor: str | None = None
        for _ in range(200):
            page = storage.contexts.page(cursor=cursor, limit=limit, **filters)
            assert len(page.runs) <= limit
            listed.extend(r.context_id for r in page.runs)
            cursor = page.next_cursor
            if cursor is None:
                return listed
        raise AssertionError("the filtered page walk did not end")

    @pytest.mark.obligations("O-contexts-25", "O-contexts-29")
    def test_a_status_filter_lists_only_those_runs_newest_first(
        self, storage: Storage
    ) -> None:
        base = 1_700_100_000.0
        runs = [context(created_at=base + i, status="failed" if i % 3 == 0 else "completed")
                for i in range(10)]
        for record in runs:
            storage.contexts.save(record)
        failed = [r.context_id for r in reversed(runs) if r.status == "failed"]
        assert self._walk_pages(storage, 2, statuses=["failed"]) == failed
        first = storage.contexts.page(limit=10, statuses=["failed", "completed"])
        assert [r.context_id for r in first.runs] == [r.context_id for r in reversed(runs)]
        assert storage.contexts.page(statuses=["halted"]).runs == ()

    @pytest.mark.obligations("O-contexts-25")
    def test_a_status_filter_follows_status_changes(self, storage: Storage) -> None:
        record = context(status="running")
        storage.contexts.save(record)
        storage.contexts.save(dataclasses.replace(record, status="failed"))
        assert storage.contexts.page(statuses=["running"]).runs == ()
        (row,) = storage.contexts.page(statuses=["failed"]).runs
        assert (row.context_id, row.status) == (record.context_id, "failed")

    @pytest.mark.obligations("O-contexts-26", "O-contexts-28", "O-contexts-29")
    def test_a_reactor_filter_lists_only_that_reactors_runs(self, storage: Storage) -> None:
        base = 1_700_200_000.0
        runs = [context(created_at=base + i, reactor="billing" if i % 2 else "orders")
                for i in range(6)]
        for record in runs:
            storage.contexts.save(record)
        billing = [r.context_id for r in reversed(runs) if r.reactor == "billing"]
        assert self._walk_pages(storage, 2, reactor="billing") == billing
        rows = storage.contexts.page(reactor="orders", statuses=["running"]).runs
        assert {r.reactor for r in rows} == {"orders"} and len(rows) == 3

    @pytest.mark.obligations("O-contexts-27")
    def test_a_time_range_lists_runs_created_in_it(self, storage: Storage) -> None:
        base = 1_700_300_000.0
        runs = [context(created_at=base + i) for i in range(8)]
        for record in runs:
            storage.contexts.save(record)
        inside = [r.context_id for r in reversed(runs[2:6])]  # created_from inclusive, to not
        assert self._walk_pages(
            storage, 3, created_from=base + 2, created_to=base + 6
        ) == inside
        page = storage.contexts.page(limit=10, created_from=base + 2, created_to=base + 6)
        assert [r.context_id for r in page.runs] == inside and page.next_cursor is None
        newest = storage.contexts.page(limit=1, created_to=base + 6)
        assert [r.context_id for r in newest.runs] == [runs[5].context_id]
        assert storage.contexts.page(created_from=base + 100).runs == ()

    @pytest.mark.obligations("O-contexts-28")
    def test_filters_combine_and_skip_map_elements(self, storage: Storage) -> None:
        base = 1_700_400_000.0
        keep = context(created_at=base + 1, reactor="orders", status="failed")
        storage.contexts.save(keep)
        storage.contexts.save(context(created_at=base + 2, reactor="billing", status="failed"))
        storage.contexts.save(context(created_at=base + 3, reactor="orders", status="completed"))
        storage.contexts.save(context(created_at=base + 1.5, reactor="orders", status="failed",
                                      parent=keep.context_id))
        rows = storage.contexts.page(
            statuses=["failed"], reactor="orders", created_from=base, created_to=base + 10
        ).runs
        assert [r.context_id for r in rows] == [keep.context_id]

    @pytest.mark.obligations("O-contexts-29")
    def test_a_filtered_walk_lists_every_match_once_across_a_long_index(
        self, storage: Storage
    ) -> None:
        base = 1_700_500_000.0
        runs = [context(created_at=base + i * 0.001,
                        status="failed" if i in (3, 300, 599) else "completed")
                for i in range(600)]  # more than a filtered page examines (500)
        for record in runs:
            storage.contexts.save(record)
        wanted = [r.context_id for r in reversed(runs) if r.status == "failed"]
        # a page examines a bounded number of entries: early pages may be short, even empty,
        # and still carry a cursor; the walk still lists each match once, in order
        assert self._walk_pages(storage, 50, statuses=["failed"]) == wanted

    @pytest.mark.obligations("O-contexts-23", "O-contexts-31")
    def test_a_malformed_filter_raises_value_error(self, storage: Storage) -> None:
        with pytest.raises(ValueError):
            storage.contexts.page(statuses="failed")
        with pytest.raises(ValueError):
            storage.contexts.page(created_from=float("nan"))
        with pytest.raises(ValueError):
            storage.contexts.page(created_to=float("inf"))
        with pytest.raises(ValueError):
            storage.contexts.page(reactor=cast(str, 42))
        with pytest.raises(ValueError):
            storage.contexts.page(cursor="%%% not a cursor %%%", statuses=["failed"])

    @pytest.mark.obligations("O-contexts-24")
    def test_a_page_limit_below_one_raises_value_error(self, storage: Storage) -> None:
        storage.contexts.save(context())
        for limit in (0, -1):
            with pytest.raises(ValueError):
                storage.contexts.page(limit=limit)

    @pytest.mark.obligations("O-contexts-30")
    def test_a_page_cursor_is_a_position_whatever_the_filters(self, storage: Storage) -> None:
        base = 1_700_450_000.0
        runs = [context(created_at=base + i, status="failed" if i % 2 == 0 else "completed",
                        reactor="billing" if i in (1, 2) else "orders")
                for i in range(6)]
        for record in runs:
            storage.contexts.save(record)
        first = storage.contexts.page(limit=3)  # unfiltered: runs 5, 4, 3
        assert [r.context_id for r in first.runs] == [r.context_id for r in runs[:2:-1]]
        cursor = first.next_cursor
        assert cursor is not None
        older = list(reversed(runs[:3]))  # what lies after the cursor: runs 2, 1, 0
        cases: dict[str, tuple[dict[str, Any], list[ContextRecord]]] = {
            "statuses": ({"statuses": ["failed"]}, [r for r in older if r.status == "failed"]),
            "reactor": ({"reactor": "billing"}, [r for r in older if r.reactor == "billing"]),
            "created_to above the cursor": ({"created_to": base + 100}, older),
        }
        for name, (filters, expected) in cases.items():
            got = [r.context_id for r in
                   storage.contexts.page(cursor=cursor, limit=10, **filters).runs]
            assert got == [r.context_id for r in expected], teach(
                "contexts",
                f"a page cursor continues strictly after its entry whatever the filters of the "
                f"next call ({name}): expected the matching runs older than the cursor, newest "
                f"first, got {got}",
                "a cursor that encodes the filters of the call that made it, or a time range "
                "that restarts the walk above the cursor",
                'docs/protocol.md, "Filtered pages"',
            )

    @pytest.mark.obligations("O-contexts-32", "O-contexts-4", "O-contexts-7")
    def test_the_listing_never_shows_a_deleted_or_expired_run(
        self, storage: Storage, probe: Probe
    ) -> None:
        base = 1_700_600_000.0
        kept = context(created_at=base, status="running")
        deleted = [context(created_at=base + 1, status="running"),
                   context(created_at=base + 2, status="completed")]
        expired = [context(created_at=base + 3, status="running"),
                   context(created_at=base + 4, status="failed")]
        for record in (kept, *deleted, *expired):
            storage.contexts.save(record)
        for record in deleted:
            assert storage.contexts.delete(record.context_id) is True
        for record in expired:
            probe.expire("context", record.context_id)
        every: list[dict[str, Any]] = [{}, {"statuses": ["running", "completed", "failed"]}]
        for filters in every:
            listed = [r.context_id for r in storage.contexts.page(**filters).runs]
            assert listed == [kept.context_id], teach(
                "contexts",
                f"the listing (page, filters {filters}) never shows a run that load no longer "
                "returns: deleted and expired runs, finished or not, are not listed "
                f"(listed {listed}, kept {kept.context_id})",
                "a page summary left behind by delete, or a finished run's summary that "
                "outlives its run and is shown as stored without being checked",
                'docs/workers.md, "Run listings after a crash"',
            )
        # A finished run's summary expires with the run: seen once the retention has passed.
        finished = context(created_at=base + 5, status="completed")
        storage.contexts.save(finished)
        if storage.capabilities.clock != "application" or not isinstance(probe, ClockProbe):
            return  # no client can move this storage's clock
        clock = ManualClock(storage.now() + CONTEXT_TTL + 60)
        later = probe.with_clock(clock)
        if later is None:
            return
        try:
            if not math.isclose(later.now(), clock(), abs_tol=1.0):
                return  # the probe cannot inject a clock into this adapter
            assert later.contexts.load(finished.context_id) is None
            listed = [r.context_id for r in later.contexts.page().runs]
            assert listed == [], teach(
                "contexts",
                "once context_ttl has passed since their last save, no run is listed: a "
                f"finished run's summary expires with its run (listed {listed})",
                "a terminal page summary written without the run's expiry (it is shown as "
                "stored, so it would list a run that load no longer returns)",
                'docs/workers.md, "Run listings after a crash"',
            )
        finally:
            later.close()

    @pytest.mark.obligations("O-contexts-6")
    def test_save_stamps_retention_to_context_ttl(self, storage: Storage, probe: Probe) -> None:
        record = context()
        storage.contexts.save(record)
        assert_ttl(probe.ttl("context", record.context_id), CONTEXT_TTL)

    @pytest.mark.obligations("O-contexts-6")
    def test_every_save_restamps_retention(self, storage: Storage, probe: Probe) -> None:
        record = context()
        storage.contexts.save(record)
        probe.expire("context", record.context_id, after=60)
        assert_ttl(probe.ttl("context", record.context_id), 60)
        storage.contexts.save(dataclasses.replace(record, status="completed"))
        assert_ttl(probe.ttl("context", record.context_id), CONTEXT_TTL)

    @pytest.mark.obligations("O-contexts-7")
    def test_an_expired_context_reads_as_absent(self, storage: Storage, probe: Probe) -> None:
        record = context()
        storage.contexts.save(record)
        probe.expire("context", record.context_id)
        assert storage.contexts.load(record.context_id) is None
        assert probe.ttl("context", record.context_id) is None
        assert storage.contexts.scan() == []
        storage.contexts.save(record)
        assert storage.contexts.load(record.context_id) == record

    # Fenced saves (docs/workers.md, "Stale writers and fenced saves"): the record keeps the
    # largest fencing token of any fenced save; a lower one is refused and writes nothing.

    @pytest.mark.obligations("O-contexts-8", "O-contexts-9")
    def test_a_fenced_save_below_the_stored_token_is_refused_as_stale(
        self, storage: Storage
    ) -> None:
        first = context(status="running", document='{"v":1}')
        done = dataclasses.replace(first, status="completed", document='{"v":2}')
        stale = dataclasses.replace(first, status="running", document='{"v":"stale"}')
        storage.contexts.save(first, fence=_fence(first, 100))
        storage.contexts.save(done, fence=_fence(first, 200))
        with pytest.raises(StaleWriterError) as refused:
            storage.contexts.save(stale, fence=_fence(first, 100))
        assert isinstance(refused.value, LockLost)
        assert refused.value.run_id == first.context_id
        assert (refused.value.token, refused.value.stored_token) == (100, 200)
        assert storage.contexts.load(first.context_id) == done
        assert [r.context_id for r in storage.contexts.scan(statuses=["completed"])] == [
            first.context_id
        ]
        assert storage.contexts.scan(statuses=["running"]) == []
        page = storage.contexts.page()
        assert [(r.context_id, r.status) for r in page.runs] == [(first.context_id, "completed")]

    @pytest.mark.obligations("O-contexts-8", "O-contexts-9")
    def test_fenced_saves_with_an_equal_or_higher_token_are_written(
        self, storage: Storage
    ) -> None:
        record = context(status="running", document='{"v":1}')
        storage.contexts.save(record, fence=_fence(record, 5))
        again = dataclasses.replace(record, document='{"v":2}')
        storage.contexts.save(again, fence=_fence(record, 5))
        assert storage.contexts.load(record.context_id) == again
        newer = dataclasses.replace(record, status="completed", document='{"v":3}')
        storage.contexts.save(newer, fence=_fence(record, 1_700_000_000_000_001))
        assert storage.contexts.load(record.context_id) == newer
        with pytest.raises(StaleWriterError):
            storage.contexts.save(again, fence=_fence(record, 1_700_000_000_000_000))
        assert storage.contexts.load(record.context_id) == newer

    @pytest.mark.obligations("O-contexts-10")
    def test_a_record_without_a_fence_accepts_the_first_fenced_save(
        self, storage: Storage
    ) -> None:
        record = context(status="running", document='{"v":1}')
        storage.contexts.save(record)  # as written before fences existed
        fenced = dataclasses.replace(record, document='{"v":2}')
        storage.contexts.save(fenced, fence=_fence(record, 1))
        assert storage.contexts.load(record.context_id) == fenced

    @pytest.mark.obligations("O-contexts-3", "O-contexts-11")
    def test_unfenced_saves_always_write_and_keep_the_stored_fence(
        self, storage: Storage
    ) -> None:
        record = context(status="running", document='{"v":1}')
        storage.contexts.save(record, fence=_fence(record, 50))
        unfenced = dataclasses.replace(record, status="failed", document='{"v":2}')
        storage.contexts.save(unfenced)
        assert storage.contexts.load(record.context_id) == unfenced
        with pytest.raises(StaleWriterError):
            storage.contexts.save(record, fence=_fence(record, 49))
        assert storage.contexts.load(record.context_id) == unfenced
        storage.contexts.save(record, fence=_fence(record, 50))
        assert storage.contexts.load(record.context_id) == record

    @pytest.mark.obligations("O-contexts-12", "O-contexts-8", "O-contexts-9")
    def test_racing_fenced_saves_leave_the_highest_token_written(self, storage: Storage) -> None:
        tokens = [1_000 + i for i in range(8)]

        def prepare(run: str) -> None:
            storage.contexts.save(dataclasses.replace(context(run), base="b-first"))

        def save(run: str, i: int) -> bool:
            # a fresh base per whole save, as the engine writes them
            # (docs/protocol.md, "Incremental checkpoints")
            record = dataclasses.replace(
                context(run, document=f'{{"token":{tokens[i]}}}'), base=f"b{i}"
            )
            try:
                storage.contexts.save(record, fence=Fence(f"async:{run}", f"w{i}", tokens[i]))
            except StaleWriterError:
                return False
            return True

        def check(run: str, saved: list[bool]) -> None:
            loaded = storage.contexts.load(run)
            document = None if loaded is None else loaded.document
            assert saved[-1] and document == f'{{"token":{tokens[-1]}}}', teach(
                "contexts",
                "of fenced saves racing on one run, the highest token's record is the one "
                f"stored (stored {document}, saves that landed {saved})",
                "a fence read and then a write (no compare-and-set, no script): a lower "
                "token's write lands after the highest token's check",
                'docs/protocol.md, "Contexts"',
            )
            with pytest.raises(StaleWriterError):
                storage.contexts.save(
                    context(run), fence=Fence(f"async:{run}", "late", tokens[-2])
                )

        race_rounds(8, save, check, prefix="ctx", prepare=prepare)

    @pytest.mark.obligations("O-contexts-50")
    def test_racing_saves_of_one_base_leave_a_loadable_run(self, storage: Storage) -> None:
        # A record saved back with the base it was loaded with (an operator's edit, a record
        # of an older release whose base is ""), by two writers at once.
        documents = [f'{{"writer":{i}}}' for i in range(8)]

        def prepare(run: str) -> None:
            storage.contexts.save(dataclasses.replace(
                context(run), base="shared", segments=('{"s":0}',)))

        def save(run: str, i: int) -> str:
            storage.contexts.save(dataclasses.replace(
                context(run, document=documents[i]), base="shared", segments=(f'{{"s":{i}}}',)))
            return documents[i]

        def check(run: str, saved: list[str]) -> None:
            try:
                loaded = storage.contexts.load(run)
            except DeserializationError as exc:
                loaded, lost = None, str(exc)
            else:
                lost = ""
            document = None if loaded is None else loaded.document
            assert document in documents and loaded is not None and (
                loaded.segments == (f'{{"s":{documents.index(document)}}}',)
            ), teach(
                "contexts",
                "whole saves of one run racing with the same base leave one of the saved "
                f"records whole (last writer wins); got {document!r} {lost}",
                "a save that drops the pieces of its base written by a concurrent save of "
                "the same base (only the pieces of the chain it replaced may go)",
                'docs/protocol.md, "Incremental checkpoints"',
            )

        race_rounds(8, save, check, prefix="ctx", prepare=prepare)

    @pytest.mark.obligations("O-contexts-13")
    def test_a_context_over_the_document_limit_is_refused(self, storage: Storage) -> None:
        limit = storage.capabilities.max_document_bytes
        if limit is None:
            pytest.skip(NO_SIZE_LIMIT)
        record = context(document='"' + "x" * (limit + 1) + '"')
        with pytest.raises(ContextTooLargeError):
            storage.contexts.save(record)
        assert storage.contexts.load(record.context_id) is None

    # Incremental checkpoints (docs/protocol.md, "Incremental checkpoints"): a record is a base
    # document plus the segments appended after it; an append is atomic and conditional.

    @pytest.mark.obligations("O-contexts-1", "O-contexts-39")
    def test_a_record_with_segments_round_trips(self, storage: Storage) -> None:
        record = dataclasses.replace(
            context(status="running", document='{"v":0}'),
            base="b1", segments=('{"s":1}', '{"s":2,"u":"\u00e9"}'),
        )
        storage.contexts.save(record)
        assert storage.contexts.load(record.context_id) == record

    @pytest.mark.obligations("O-contexts-33", "O-contexts-34")
    def test_appends_follow_the_base_in_order(self, storage: Storage) -> None:
        record = dataclasses.replace(context(status="running", document='{"v":0}'), base="b1")
        storage.contexts.save(record)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is True
        assert appender(storage).append(
            _delta(record, 2, '{"s":2}', status="completed", updated_at=1_700_000_099.5)
        ) is True
        loaded = storage.contexts.load(record.context_id)
        assert loaded == dataclasses.replace(
            record, status="completed", updated_at=1_700_000_099.5,
            segments=('{"s":1}', '{"s":2}'),
        )
        assert [r.context_id for r in storage.contexts.scan(statuses=["completed"])] == [
            record.context_id
        ]
        assert storage.contexts.scan(statuses=["running"]) == []
        page = storage.contexts.page()
        assert [(r.context_id, r.status) for r in page.runs] == [(record.context_id, "completed")]

    @pytest.mark.obligations("O-contexts-35")
    def test_an_append_to_another_view_writes_nothing(self, storage: Storage) -> None:
        absent = dataclasses.replace(context(), base="b1")
        assert appender(storage).append(_delta(absent, 1, '{"s":1}')) is False
        assert storage.contexts.load(absent.context_id) is None
        record = dataclasses.replace(context(status="running", document='{"v":0}'), base="b1")
        storage.contexts.save(record)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is True
        before = storage.contexts.load(record.context_id)
        other_base = dataclasses.replace(record, base="b2")
        assert appender(storage).append(_delta(other_base, 2, '{"x":1}')) is False
        assert appender(storage).append(_delta(record, 1, '{"again":1}')) is False
        assert appender(storage).append(_delta(record, 3, '{"gap":1}')) is False
        assert storage.contexts.load(record.context_id) == before
        legacy = context(status="running")  # written before bases existed
        storage.contexts.save(legacy)
        assert appender(storage).append(_delta(record, 1, '{"s":1}', run=legacy)) is False
        assert storage.contexts.load(legacy.context_id) == legacy

    @pytest.mark.obligations("O-contexts-35", "O-contexts-39")
    def test_a_whole_save_replaces_the_segments(self, storage: Storage) -> None:
        record = dataclasses.replace(context(status="running", document='{"v":0}'), base="b1")
        storage.contexts.save(record)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is True
        whole = dataclasses.replace(record, base="b2", document='{"v":"whole"}')
        storage.contexts.save(whole)
        assert storage.contexts.load(record.context_id) == whole
        assert appender(storage).append(_delta(record, 2, '{"s":2}')) is False
        assert appender(storage).append(_delta(whole, 1, '{"s":"new"}')) is True
        loaded = storage.contexts.load(record.context_id)
        assert loaded is not None and loaded.segments == ('{"s":"new"}',)

    @pytest.mark.obligations("O-contexts-37")
    def test_a_fenced_append_below_the_stored_token_is_refused_as_stale(
        self, storage: Storage
    ) -> None:
        record = dataclasses.replace(context(status="running", document='{"v":0}'), base="b1")
        storage.contexts.save(record, fence=_fence(record, 100))
        assert appender(storage).append(_delta(record, 1, '{"s":1}'), fence=_fence(record, 200))
        before = storage.contexts.load(record.context_id)
        with pytest.raises(StaleWriterError) as refused:
            appender(storage).append(_delta(record, 2, '{"stale":1}'), fence=_fence(record, 100))
        assert (refused.value.token, refused.value.stored_token) == (100, 200)
        assert storage.contexts.load(record.context_id) == before
        with pytest.raises(StaleWriterError):  # the append raised the stored fence to 200
            storage.contexts.save(record, fence=_fence(record, 150))
        assert appender(storage).append(
            _delta(record, 2, '{"s":2}'), fence=_fence(record, 200)
        ) is True

    @pytest.mark.obligations("O-contexts-33", "O-contexts-38")
    def test_an_append_restamps_retention(self, storage: Storage, probe: Probe) -> None:
        record = dataclasses.replace(context(status="running"), base="b1")
        storage.contexts.save(record)
        probe.expire("context", record.context_id, after=60)
        assert_ttl(probe.ttl("context", record.context_id), 60)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is True
        assert_ttl(probe.ttl("context", record.context_id), CONTEXT_TTL)
        loaded = storage.contexts.load(record.context_id)
        assert loaded is not None and loaded.segments == ('{"s":1}',)

    @pytest.mark.obligations("O-contexts-36")
    def test_an_append_to_an_expired_context_writes_nothing(
        self, storage: Storage, probe: Probe
    ) -> None:
        record = dataclasses.replace(context(status="running"), base="b1")
        storage.contexts.save(record)
        probe.expire("context", record.context_id)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is False
        assert storage.contexts.load(record.context_id) is None

    @pytest.mark.obligations("O-contexts-5")
    def test_delete_removes_the_segments(self, storage: Storage) -> None:
        record = dataclasses.replace(context(status="running"), base="b1")
        storage.contexts.save(record)
        assert appender(storage).append(_delta(record, 1, '{"s":1}')) is True
        assert storage.contexts.delete(record.context_id) is True
        assert storage.contexts.load(record.context_id) is None
        assert appender(storage).append(_delta(record, 2, '{"s":2}')) is False
        storage.contexts.save(record)
        assert storage.contexts.load(record.context_id) == record

    @pytest.mark.obligations("O-contexts-40")
    def test_an_append_past_the_document_limit_is_refused(self, storage: Storage) -> None:
        limit = storage.capabilities.max_document_bytes
        if limit is None:
            pytest.skip(NO_SIZE_LIMIT)
        record = dataclasses.replace(context(status="running"), base="b1")
        storage.contexts.save(record)
        big = '"' + "x" * (limit - len(record.document)) + '"'
        with pytest.raises(ContextTooLargeError):
            appender(storage).append(_delta(record, 1, big))
        assert storage.contexts.load(record.context_id) == record

    @pytest.mark.obligations("O-contexts-41", "O-contexts-35")
    def test_racing_appends_at_one_position_land_once(self, storage: Storage) -> None:
        def prepare(run: str) -> None:
            storage.contexts.save(dataclasses.replace(context(run), base="b1"))

        def append(run: str, i: int) -> bool:
            record = dataclasses.replace(context(run), base="b1")
            return appender(storage).append(_delta(record, 1, f'{{"s":{i}}}'))

        def check(run: str, appended: list[bool]) -> None:
            loaded = storage.contexts.load(run)
            segments = None if loaded is None else loaded.segments
            assert appended.count(True) == 1 and segments == (
                f'{{"s":{appended.index(True)}}}',
            ), teach(
                "contexts",
                "of appends racing at one position exactly one returns True and the record "
                f"holds exactly its segment (returned {appended}, stored {segments})",
                "an append that reads the record and then writes it (no compare-and-set on "
                "the head, no script): two racers both find position - 1 segments",
                'docs/protocol.md, "Incremental checkpoints"',
            )

        race_rounds(8, append, check, prefix="ctx", prepare=prepare)

    @pytest.mark.obligations("O-contexts-14", "O-contexts-17", "O-contexts-19")
    def test_scan_pages_with_a_cursor_list_every_run_once(self, storage: Storage) -> None:
        runs = [context(status="running") for _ in range(7)]
        runs += [
            context(status="rolling_back", parent=uid("ctx"), dispatched_child=True)
            for _ in range(2)
        ]
        others = [context(status="completed"), context(status="running", parent=uid("ctx"))]
        for record in (*runs, *others):
            storage.contexts.save(record)
        pages = walk_scan(
            storage.contexts.scan,
            limit=3,
            statuses=["running", "rolling_back"],
            include_dispatched_children=True,
        )
        listed = [row.context_id for page in pages for row in page]
        assert sorted(listed) == sorted(r.context_id for r in runs)

    @pytest.mark.obligations("O-contexts-19", "O-contexts-20")
    @pytest.mark.parametrize("change", ["delete", "resave", "complete"])
    def test_a_scan_cursor_survives_a_change_to_its_last_row(
        self, storage: Storage, change: str
    ) -> None:
        runs = {r.context_id: r for r in (context(status="running") for _ in range(6))}
        for record in runs.values():
            storage.contexts.save(record)
        first = storage.contexts.scan(statuses=["running"], limit=2)
        assert len(first) == 2 and first.next_cursor is not None
        last = runs[first[-1].context_id]  # the row the cursor points after
        if change == "delete":
            storage.contexts.delete(last.context_id)
        elif change == "resave":  # a later expiry: it moves on some stores
            storage.contexts.save(dataclasses.replace(last, updated_at=1_700_000_200.0))
        else:
            storage.contexts.save(dataclasses.replace(last, status="completed"))
        rest: set[str] = set()
        cursor: str | None = first.next_cursor
        for _ in range(20):
            page = storage.contexts.scan(statuses=["running"], limit=2, cursor=cursor)
            rest |= {row.context_id for row in page}
            cursor = page.next_cursor
            if cursor is None:
                break
        assert cursor is None
        assert set(runs) - {row.context_id for row in first} <= rest  # nothing skipped

    @pytest.mark.obligations("O-contexts-21")
    def test_a_malformed_scan_cursor_raises_value_error(self, storage: Storage) -> None:
        storage.contexts.save(context())
        with pytest.raises(ValueError):
            storage.contexts.scan(cursor="%%% not a cursor %%%")

    # The lock-with-record fast paths (docs/protocol.md, "Optional fast paths"), called through
    # reactor.engine.fast_paths: the store's own methods where it declares LocksWithContexts,
    # the composition otherwise ("composed": the same storage seen without them). Both must
    # leave the lock and the record in the same state.

    @pytest.mark.obligations("O-contexts-42")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_save_taking_takes_a_free_lock_and_fences_the_save_with_its_token(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        claim = LockClaim(key=f"async:{record.context_id}", owner=uid("owner"), ttl=30.0)
        token = fast_paths.save_taking(store, record, claim)
        assert token >= 1
        assert storage.contexts.load(record.context_id) == record
        info = storage.locks.info(claim.key)
        assert info is not None and info.owner == claim.owner
        assert info.token == token, "the save is fenced with the token the lock was taken with"
        with pytest.raises(StaleWriterError):
            storage.contexts.save(record, fence=Fence(claim.key, claim.owner, token - 1))

    @pytest.mark.obligations("O-contexts-42", "O-contexts-44")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_the_taking_fast_paths_take_the_lock_with_the_claims_ttl(
        self, storage: Storage, probe: Probe, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        storage.contexts.save(record)
        saved = dataclasses.replace(context(), base="b1")
        calls: tuple[tuple[str, float, Callable[[LockClaim], int]], ...] = (
            ("save_taking", 45.0, lambda claim: fast_paths.save_taking(store, saved, claim)),
            ("load_taking", 75.0,
             lambda claim: fast_paths.load_taking(store, record.context_id, claim)[0]),
        )
        for name, ttl, take in calls:
            key = uid("async")
            assert take(LockClaim(key, "me", ttl)) >= 1
            remaining = probe.ttl("lock", key)
            assert remaining is not None and ttl - TTL_SLACK <= remaining <= ttl + 1.0, teach(
                "contexts",
                f"{name} takes the lock with the claim's TTL: a {ttl:g} s claim must leave a "
                f"lock lapsing in {ttl:g} s, not {remaining} s",
                "a native fast path that takes the lock without the claim's TTL (never "
                "lapsing: a dead worker's run is never picked up again) or with another one "
                "(a default, the record's retention, seconds read as ms or µs)",
                'docs/protocol.md, "Optional fast paths"',
            )

    @pytest.mark.obligations("O-contexts-43")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_save_taking_a_held_lock_writes_nothing(self, storage: Storage, view: str) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        key = f"async:{record.context_id}"
        assert storage.locks.acquire(key, "holder", 30.0)
        assert fast_paths.save_taking(store, record, LockClaim(key, uid("owner"), 30.0)) == 0
        assert storage.contexts.load(record.context_id) is None
        info = storage.locks.info(key)
        assert info is not None and info.owner == "holder"

    @pytest.mark.obligations("O-contexts-44")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_load_taking_reads_the_record_only_with_the_lock(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1", segments=('{"s":1}',))
        storage.contexts.save(record)
        key = f"async:{record.context_id}"
        assert storage.locks.acquire(key, "holder", 30.0)
        assert fast_paths.load_taking(store, record.context_id, LockClaim(key, "me", 30.0)) == (
            0, None,
        )
        assert storage.locks.release(key, "holder")
        token, loaded = fast_paths.load_taking(
            store, record.context_id, LockClaim(key, "me", 30.0)
        )
        assert token >= 1 and loaded == record
        info = storage.locks.info(key)
        assert info is not None and info.owner == "me" and info.token == token
        absent = uid("absent")
        token, loaded = fast_paths.load_taking(
            store, absent, LockClaim(f"async:{absent}", "me", 30.0)
        )
        assert token >= 1 and loaded is None, "an absent record still takes the lock"

    @pytest.mark.obligations("O-contexts-45", "O-contexts-33")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_append_releasing_releases_only_what_it_appended(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        key = f"async:{record.context_id}"
        token = fast_paths.save_taking(store, record, LockClaim(key, "me", 30.0))
        fence = Fence(key, "me", token)
        other_base = dataclasses.replace(_delta(record, 1, '{"a":1}'), base="other")
        assert not fast_paths.append_releasing(store, other_base, fence)
        info = storage.locks.info(key)
        assert info is not None and info.owner == "me", "nothing appended: the lock stays held"
        assert fast_paths.append_releasing(
            store, _delta(record, 1, '{"a":1}', status="completed"), fence
        )
        assert storage.locks.info(key) is None, "appended: the lock is released"
        loaded = storage.contexts.load(record.context_id)
        assert loaded is not None and loaded.segments == ('{"a":1}',)
        assert loaded.status == "completed"

    @pytest.mark.obligations("O-contexts-47")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_a_stale_releasing_write_is_refused_and_releases_nothing(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        key = f"async:{record.context_id}"
        old = fast_paths.save_taking(store, record, LockClaim(key, "old", 1.0))
        storage.locks.release(key, "old")
        newer = fast_paths.load_taking(store, record.context_id, LockClaim(key, "new", 30.0))[0]
        storage.contexts.save(record, fence=Fence(key, "new", newer))
        with pytest.raises(StaleWriterError):
            fast_paths.append_releasing(store, _delta(record, 1, '{"x":1}'), Fence(key, "old", old))
        with pytest.raises(StaleWriterError):
            fast_paths.save_releasing(store, record, Fence(key, "old", old))
        info = storage.locks.info(key)
        assert info is not None and info.owner == "new", "the newer holder keeps its lock"

    @pytest.mark.obligations("O-contexts-46")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_save_releasing_saves_then_releases(self, storage: Storage, view: str) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        key = f"async:{record.context_id}"
        token = fast_paths.save_taking(store, record, LockClaim(key, "me", 30.0))
        final = dataclasses.replace(record, status="failed", base="b2", updated_at=1.7e9 + 5)
        fast_paths.save_releasing(store, final, Fence(key, "me", token))
        assert storage.contexts.load(record.context_id) == final
        assert storage.locks.info(key) is None

    @pytest.mark.obligations("O-contexts-48")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_releasing_writes_announce_the_status_they_wrote(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        signals = storage.signals if storage.capabilities.signals else None
        channel = uid("done")
        subscription = None if signals is None else signals.subscribe(channel)
        try:
            record = dataclasses.replace(context(), base="b1")
            key = f"async:{record.context_id}"
            token = fast_paths.save_taking(store, record, LockClaim(key, "me", 30.0))
            fence = Fence(key, "me", token)
            refused = dataclasses.replace(_delta(record, 1, '{"a":1}'), base="other")
            assert not fast_paths.append_releasing(store, refused, fence, announce=channel)
            if subscription is not None:
                heard = subscription.get(timeout=0.3)
                assert heard is None, teach(
                    "contexts",
                    "an append_releasing that appended nothing announces nothing "
                    f"(heard {heard!r})",
                    "a publication sent whatever the append's outcome",
                    'docs/protocol.md, "Optional fast paths"',
                )
            done = _delta(record, 1, '{"a":1}', status="completed")
            assert fast_paths.append_releasing(store, done, fence, announce=channel)
            assert storage.locks.info(key) is None
            other = dataclasses.replace(context(status="failed"), base="b1")
            other_key = f"async:{other.context_id}"
            other_token = fast_paths.save_taking(store, other, LockClaim(other_key, "me", 30.0))
            fast_paths.save_releasing(
                store, other, Fence(other_key, "me", other_token), announce=channel
            )
            assert storage.contexts.load(other.context_id) == other
            assert storage.locks.info(other_key) is None
            if subscription is not None:
                heard_all = [subscription.get(timeout=5), subscription.get(timeout=5)]
                assert heard_all == ["completed", "failed"], teach(
                    "contexts",
                    "append_releasing and save_releasing given announce publish the status they "
                    f"wrote on that channel (heard {heard_all})",
                    "a native fast path that drops the announcement (waiters then poll)",
                    'docs/protocol.md, "Optional fast paths"',
                )
        finally:
            if subscription is not None:
                subscription.close()

    @pytest.mark.obligations("O-contexts-49")
    @pytest.mark.parametrize("view", ["native", "composed"])
    def test_a_taking_save_that_is_refused_releases_the_lock_again(
        self, storage: Storage, view: str
    ) -> None:
        store = _view(storage, view)
        record = dataclasses.replace(context(), base="b1")
        key = f"async:{record.context_id}"
        storage.contexts.save(record, fence=Fence(key, "newer", 2**52))  # a newer holder saved
        late = dataclasses.replace(record, document='{"v":"late"}')
        with pytest.raises(StaleWriterError):
            fast_paths.save_taking(store, late, LockClaim(key, "me", 30.0))
        info = storage.locks.info(key)
        assert info is None, teach(
            "contexts",
            "a save_taking whose fenced save is refused releases the lock it took (the lock "
            f"is left as it was found, free), got {info!r}",
            "a fast path that takes the lock and keeps it when the fenced save is refused: "
            "the run stays locked until the lock's TTL lapses",
            'docs/protocol.md, "Optional fast paths"',
        )
        assert storage.contexts.load(record.context_id) == record


def _delta(
    record: ContextRecord,
    position: int,
    segment: str,
    *,
    status: str = "running",
    updated_at: float = 1_700_000_050.0,
    run: ContextRecord | None = None,
) -> ContextDelta:
    """The delta appending ``segment`` at ``position`` after ``record``'s base (to the run
    ``run`` when given)."""
    return ContextDelta(
        context_id=(run or record).context_id,
        base=record.base,
        position=position,
        status=status,
        updated_at=updated_at,
        segment=segment,
    )


def _fence(record: ContextRecord, token: int) -> Fence:
    """A fence on ``record``'s liveness lock key with fencing token ``token``."""
    return Fence(key=f"async:{record.context_id}", owner=uid("owner"), token=token)


class TestContexts(ContextsContract):
    """The contexts contract against ``--reactor-storage``."""


class _ContextsOnly:
    """``contexts`` seen without its lock fast paths (the calls they stand for only)."""

    def __init__(self, contexts: object) -> None:
        self._contexts = contexts

    def __getattr__(self, name: str) -> Any:
        if name in {"save_taking", "load_taking", "append_releasing", "save_releasing"}:
            raise AttributeError(name)
        return getattr(self._contexts, name)


class _Composed:
    """``storage`` whose context store lacks the lock fast paths, so
    :mod:`reactor.engine.fast_paths` makes the composition on the same backend."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.contexts = _ContextsOnly(storage.contexts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


def _view(storage: Storage, view: str) -> Storage:
    """``storage`` itself (``"native"``) or seen without its lock fast paths."""
    if view == "native":
        return storage
    composed = _Composed(storage)
    assert not isinstance(composed.contexts, LocksWithContexts)
    return cast(Storage, composed)
