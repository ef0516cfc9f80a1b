"""Step Result Records (docs/protocol.md#step-results), plus retention and logical expiry."""

from __future__ import annotations

import dataclasses

import pytest

from reactor.ports.storage import Storage
from reactor_contract._support import (
    CONTEXT_TTL,
    SUITE_DOC,
    assert_ttl,
    step_result,
    teach,
    uid,
    walk_scan,
)
from reactor_contract.probe import Probe

__all__ = ["StepResultsContract"]

_RULES = f'{SUITE_DOC}, "Rules: step result records"'


class StepResultsContract:
    """:class:`reactor.ports.StepResultStore` behaviour every adapter must show."""

    reactor_concern = "step_results"

    @pytest.mark.obligations("O-step_results-1")
    def test_put_then_get_round_trips_every_field(self, storage: Storage) -> None:
        ctx = uid("ctx")
        record = step_result(
            ctx,
            "charge",
            status="dispatched",
            root_context_id="root-1",
            reactor="payouts",
            dispatched_at=1_700_000_000.25,
            updated_at=1_700_000_003.5,
            parked_until=1_700_000_090.0,
            waiting="lock:accounts:42",
            contention_attempts=3,
            data={"ticket": {"nonce": 2, "epoch": 1}, "tags": ["a", "b"], "none": None},
        )
        storage.step_results.put(record)
        assert storage.step_results.get(ctx, "charge") == record

    @pytest.mark.obligations("O-step_results-2")
    def test_dispatched_then_completed_reads_the_last_record(self, storage: Storage) -> None:
        ctx = uid("ctx")
        storage.step_results.put(step_result(ctx, "charge", status="dispatched"))
        done = step_result(ctx, "charge", status="completed", outcome='{"ok":true}')
        storage.step_results.put(done)
        assert storage.step_results.get(ctx, "charge") == done

    @pytest.mark.obligations("O-step_results-3", "O-step_results-4")
    def test_records_are_scoped_by_context_and_step(self, storage: Storage) -> None:
        ctx, other = uid("ctx"), uid("ctx")
        charge = step_result(ctx, "charge", outcome='"a"', status="completed")
        ship = step_result(ctx, "ship", outcome='"b"', status="completed")
        storage.step_results.put(charge)
        storage.step_results.put(ship)
        assert storage.step_results.get(ctx, "charge") == charge
        assert storage.step_results.get(ctx, "ship") == ship
        assert storage.step_results.get(other, "charge") is None
        assert storage.step_results.get(ctx, "unknown") is None

    @pytest.mark.obligations("O-step_results-7")
    def test_scan_lists_stored_records(self, storage: Storage) -> None:
        records = [step_result(uid("ctx"), "charge") for _ in range(3)]
        for record in records:
            storage.step_results.put(record)
        found = storage.step_results.scan()
        assert sorted(found, key=lambda r: r.context_id) == sorted(
            records, key=lambda r: r.context_id
        )

    @pytest.mark.obligations("O-step_results-8")
    def test_status_filter_applies_before_the_limit(self, storage: Storage) -> None:
        for _ in range(5):
            storage.step_results.put(step_result(uid("ctx"), status="completed", outcome="1"))
        lost = step_result(uid("ctx"), status="dispatched")
        storage.step_results.put(lost)
        assert storage.step_results.scan(status="dispatched", limit=1) == [lost]
        assert len(storage.step_results.scan(status="completed", limit=2)) == 2
        assert len(storage.step_results.scan(limit=4)) == 4

    @pytest.mark.obligations("O-step_results-9")
    def test_scan_follows_status_changes(self, storage: Storage) -> None:
        ctx = uid("ctx")
        storage.step_results.put(step_result(ctx, status="dispatched"))
        storage.step_results.put(step_result(ctx, status="completed", outcome="1"))
        assert storage.step_results.scan(status="dispatched") == []
        assert len(storage.step_results.scan(status="completed")) == 1

    @pytest.mark.obligations("O-step_results-5")
    def test_every_put_restamps_retention(self, storage: Storage, probe: Probe) -> None:
        ctx = uid("ctx")
        storage.step_results.put(step_result(ctx, "charge"))
        assert_ttl(probe.ttl("step_result", f"{ctx}:charge"), CONTEXT_TTL)
        probe.expire("step_result", f"{ctx}:charge", after=30)
        assert_ttl(probe.ttl("step_result", f"{ctx}:charge"), 30)
        storage.step_results.put(step_result(ctx, "charge", status="completed", outcome="1"))
        assert_ttl(probe.ttl("step_result", f"{ctx}:charge"), CONTEXT_TTL)

    @pytest.mark.obligations("O-step_results-6")
    def test_an_expired_record_reads_as_absent(self, storage: Storage, probe: Probe) -> None:
        ctx = uid("ctx")
        storage.step_results.put(step_result(ctx, "charge"))
        probe.expire("step_result", f"{ctx}:charge")
        assert storage.step_results.get(ctx, "charge") is None
        assert storage.step_results.scan() == []
        assert storage.step_results.scan(status="dispatched") == []

    @pytest.mark.obligations("O-step_results-8", "O-step_results-10")
    def test_scan_pages_with_a_cursor_list_every_record_once(self, storage: Storage) -> None:
        dispatched = [step_result(uid("ctx"), "charge", status="dispatched") for _ in range(7)]
        for record in dispatched:
            storage.step_results.put(record)
        storage.step_results.put(step_result(uid("ctx"), status="completed", outcome="1"))
        pages = walk_scan(storage.step_results.scan, limit=3, status="dispatched")
        listed = [row.context_id for page in pages for row in page]
        assert sorted(listed) == sorted(r.context_id for r in dispatched)

    @pytest.mark.obligations("O-step_results-6", "O-step_results-11")
    def test_expired_records_never_end_a_scan_early(
        self, storage: Storage, probe: Probe
    ) -> None:
        # The step sweeper pages through `dispatched` records; lapsed ones ahead of live ones in
        # the index must not use up a page and end the walk before the live ones are reached.
        base = uid("ctx")
        dead = [f"{base}-0{i}" for i in range(4)]
        live = [f"{base}-1{i}" for i in range(3)]
        for ctx in (*dead, *live):
            storage.step_results.put(step_result(ctx))
        for ctx in dead:
            probe.expire("step_result", f"{ctx}:charge")
        for limit in (1, 2, 3):
            pages = walk_scan(storage.step_results.scan, limit=limit, status="dispatched")
            listed = sorted(row.context_id for page in pages for row in page)
            assert listed == live, teach(
                "step_results",
                f"a sweeper walk (limit={limit}) over {len(dead)} expired records ahead of "
                f"{len(live)} live ones lists every live one, got {listed}: only a next_cursor "
                "of None ends a scan, and a page is never short because expired records used "
                "up its limit",
                "expired records filtered after a limited read, and a short page taken for "
                "the end of the index (next_cursor None): the sweeper stops before the live "
                "records behind them",
                'docs/protocol.md, "Conventions" (Scans), and docs/writing-an-adapter.md, '
                '"Scans, expiry and the clock"',
            )

    @pytest.mark.obligations("O-step_results-1", "O-step_results-2", "O-step_results-7")
    def test_parks_keep_counters_data_and_timestamps_in_get_and_scan(
        self, storage: Storage
    ) -> None:
        ctx = uid("ctx")
        first = step_result(ctx, "charge", status="dispatched", dispatched_at=1_700_000_000.1)
        storage.step_results.put(first)
        latest = first
        for attempt in (1, 2, 3):  # three parks on contention, as the engine writes them
            latest = step_result(
                ctx, "charge", status="dispatched", dispatched_at=first.dispatched_at,
                updated_at=1_700_000_000.1 + attempt, parked_until=4_000_000_000.0 + attempt,
                waiting=f"lock:accounts:{attempt}", contention_attempts=attempt,
                data={"ticket": {"nonce": attempt, "epoch": 7}},
            )
            storage.step_results.put(latest)
        assert storage.step_results.get(ctx, "charge") == latest, teach(
            "step_results",
            "a park rewrites the whole record: contention_attempts, parked_until, waiting and "
            "data survive, exactly as written",
            "a put that merges into the old record or keeps only some columns",
            _RULES,
        )
        rows = storage.step_results.scan(status="dispatched")
        assert list(rows) == [latest], teach(
            "step_results",
            "scan rows carry every field of the record (the step sweeper reads "
            "parked_until and contention_attempts from them, never from get)",
            "a status index that stores a projection of the record",
            _RULES,
        )

    @pytest.mark.obligations("O-step_results-1", "O-step_results-7")
    def test_timestamps_and_data_round_trip_exactly(self, storage: Storage) -> None:
        ctx = uid("ctx")
        record = step_result(
            ctx, "charge", status="dispatched",
            dispatched_at=1_700_000_000.123456, updated_at=1_700_000_000.1,
            parked_until=1_700_000_000.000001,
            data={
                "args": ["\u00e9t\u00e9 \u2603", "", 0.1, -3, 2**53 - 1, True, None],
                "nested": {"list": [[1, 2], {"k": "v"}], "empty": {}, "float": 1e-7},
            },
        )
        storage.step_results.put(record)
        found = storage.step_results.get(ctx, "charge")
        assert found == record, teach(
            "step_results",
            f"timestamps and data round-trip exactly (wrote {record!r}, read {found!r})",
            "timestamps rounded (to ms, %.14g, a float32 column) or data re-encoded lossily",
            _RULES,
        )
        assert list(storage.step_results.scan(status="dispatched")) == [record]

    @pytest.mark.obligations("O-step_results-13")
    def test_a_malformed_scan_cursor_raises_value_error(self, storage: Storage) -> None:
        storage.step_results.put(step_result(uid("ctx")))
        with pytest.raises(ValueError):
            storage.step_results.scan(cursor="%%% not a cursor %%%")

    @pytest.mark.obligations("O-step_results-10", "O-step_results-12")
    @pytest.mark.parametrize("change", ["reput", "complete"])
    def test_a_scan_cursor_survives_a_change_to_its_last_row(
        self, storage: Storage, change: str
    ) -> None:
        records = {r.context_id: r for r in (step_result(uid("ctx")) for _ in range(6))}
        for record in records.values():
            storage.step_results.put(record)
        first = storage.step_results.scan(status="dispatched", limit=2)
        assert len(first) == 2 and first.next_cursor is not None
        last = records[first[-1].context_id]  # the row the cursor points after
        if change == "reput":  # a later expiry: it moves on some stores
            storage.step_results.put(dataclasses.replace(last, updated_at=1_700_000_200.0))
        else:
            storage.step_results.put(
                dataclasses.replace(last, status="completed", outcome='"done"')
            )
        rest: set[str] = set()
        cursor: str | None = first.next_cursor
        for _ in range(20):
            page = storage.step_results.scan(status="dispatched", limit=2, cursor=cursor)
            rest |= {row.context_id for row in page}
            cursor = page.next_cursor
            if cursor is None:
                break
        assert cursor is None
        skipped = set(records) - {row.context_id for row in first} - rest
        assert not skipped, teach(
            "step_results",
            f"a scan cursor continues after its position when the record it points after "
            f"was rewritten ({change}); the walk skipped {sorted(skipped)}",
            "a cursor that resumes at the rank its record had (the record moved: the walk "
            "jumps past others) instead of after the position itself",
            'docs/workers.md, "Sweep cursors and dispatch leases"',
        )


class TestStepResults(StepResultsContract):
    """The step-results contract against ``--reactor-storage``."""
