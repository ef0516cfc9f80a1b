"""Distributed map rollback state (docs/protocol.md#map-rollbacks), plus retention."""

from __future__ import annotations

import threading

import pytest

from reactor.model.records import (
    FAILED_ROLLBACK_OUTCOMES,
    MapRollbackMetadata,
    RollbackOutcome,
    RollbackSummary,
)
from reactor.ports.storage import Storage
from reactor_contract._support import (
    CONTEXT_TTL,
    SUITE_DOC,
    assert_ttl,
    map_metadata,
    rollback_metadata,
    teach,
    uid,
    walk_scan,
)
from reactor_contract.optional_operations import rollback_inspector
from reactor_contract.probe import Probe
from reactor_contract.test_concurrency import race_rounds

__all__ = ["MapRollbacksContract"]

UNAVAILABLE = RollbackOutcome(index=None, outcome="context_unavailable")
FAILED = RollbackOutcome(index=1, outcome="failed", failures='[{"step":"ship","error":"boom"}]')
UNDONE = RollbackOutcome(index=2, outcome="undone")
IN_FLIGHT = RollbackOutcome(
    index=4, outcome="element_in_flight",
    failures='[{"step":"ship","reason":"element_in_flight"}]',
)
_RULES = f'{SUITE_DOC}, "Rules: map rollback outcomes"'
#: Where the rollback store's first-wins claims and atomic offset are stated.
_ROLLBACKS_DOC = 'docs/protocol.md, "Map rollbacks"'


class MapRollbacksContract:
    """:class:`reactor.ports.MapRollbackStore` behaviour every adapter must show."""

    reactor_concern = "map_rollbacks"

    @pytest.mark.obligations("O-map_rollbacks-1", "O-map_rollbacks-2", "O-map_rollbacks-4")
    def test_start_happens_once_and_the_loser_reads_the_winner(self, storage: Storage) -> None:
        map_id = uid("map")
        first = rollback_metadata(map_id, total=5, kind="compensate")
        assert storage.map_rollbacks.start(first) == (True, first)
        created, seen = storage.map_rollbacks.start(rollback_metadata(map_id, total=9))
        assert created is False
        assert seen == first
        assert storage.map_rollbacks.metadata(map_id) == first
        meta = storage.map_rollbacks.metadata(map_id)
        assert meta is not None and isinstance(meta.total, int) and meta.total == 5
        assert storage.map_rollbacks.metadata(uid("map")) is None

    @pytest.mark.obligations("O-map_rollbacks-5", "O-map_rollbacks-6")
    def test_position_claims_are_clipped_but_the_offset_is_not(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=5))
        assert storage.map_rollbacks.offset(map_id) == 0
        claims = [storage.map_rollbacks.claim_positions(map_id, 2) for _ in range(4)]
        assert claims == [range(0, 2), range(2, 4), range(4, 5), range(6, 5)]
        assert [list(c) for c in claims] == [[0, 1], [2, 3], [4], []]
        assert storage.map_rollbacks.offset(map_id) == 8

    @pytest.mark.obligations("O-map_rollbacks-8", "O-map_rollbacks-10")
    def test_the_first_outcome_per_position_wins(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=3))
        assert storage.map_rollbacks.put_outcome(map_id, 0, UNAVAILABLE) is True
        assert storage.map_rollbacks.put_outcome(map_id, 1, FAILED) is True
        assert storage.map_rollbacks.put_outcome(map_id, 2, UNDONE) is True
        assert storage.map_rollbacks.put_outcome(map_id, 1, UNDONE) is False
        assert storage.map_rollbacks.outcome(map_id, 1) == FAILED
        assert storage.map_rollbacks.outcome(map_id, 7) is None

    @pytest.mark.obligations("O-map_rollbacks-12", "O-map_rollbacks-13")
    def test_outcome_listings_agree(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=3))
        for position, outcome in ((2, UNDONE), (0, UNAVAILABLE), (1, FAILED)):
            storage.map_rollbacks.put_outcome(map_id, position, outcome)
        expected = [(0, UNAVAILABLE), (1, FAILED), (2, UNDONE)]
        assert list(storage.map_rollbacks.outcomes(map_id)) == expected
        assert list(storage.map_rollbacks.outcomes(map_id, page_size=1)) == expected
        assert storage.map_rollbacks.count_outcomes(map_id) == 3
        assert storage.map_rollbacks.outcome_positions(map_id) == [0, 1, 2]
        assert storage.map_rollbacks.count_outcomes(uid("map")) == 0
        assert list(storage.map_rollbacks.outcomes(uid("map"))) == []

    @pytest.mark.obligations("O-map_rollbacks-12")
    def test_outcomes_list_in_numeric_position_order(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=200))
        for position in (100, 9, 10, 0):
            storage.map_rollbacks.put_outcome(map_id, position, UNDONE)
        assert storage.map_rollbacks.outcome_positions(map_id) == [0, 9, 10, 100]

    @pytest.mark.obligations("O-map_rollbacks-14")
    def test_indexes_seen_come_from_stored_outcomes(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=3))
        storage.map_rollbacks.put_outcome(map_id, 0, UNAVAILABLE)
        storage.map_rollbacks.put_outcome(map_id, 1, FAILED)
        storage.map_rollbacks.put_outcome(map_id, 2, UNDONE)
        assert rollback_inspector(storage).indexes_seen(map_id, [0, 1, 2]) == [False, True, True]
        assert rollback_inspector(storage).indexes_seen(map_id, []) == []

    @pytest.mark.obligations("O-map_rollbacks-19")
    def test_summary_counts_failures(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=4))
        storage.map_rollbacks.put_outcome(map_id, 0, UNAVAILABLE)
        storage.map_rollbacks.put_outcome(map_id, 1, FAILED)
        storage.map_rollbacks.put_outcome(map_id, 2, UNDONE)
        assert rollback_inspector(storage).summary(map_id) == RollbackSummary(
            total=4, settled=3, outstanding=1, failed=2
        )
        assert rollback_inspector(storage).summary(uid("map")) is None

    @pytest.mark.obligations("O-map_rollbacks-15", "O-map_rollbacks-16")
    def test_hand_off_flag_and_signal_claim(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id))
        assert storage.map_rollbacks.handed_off(map_id) is False
        storage.map_rollbacks.mark_handed_off(map_id)
        storage.map_rollbacks.mark_handed_off(map_id)
        assert storage.map_rollbacks.handed_off(map_id) is True
        assert storage.map_rollbacks.claim_signal(map_id) is True
        assert storage.map_rollbacks.claim_signal(map_id) is False

    @pytest.mark.obligations("O-map_rollbacks-20")
    def test_scan_lists_started_rollbacks_only(self, storage: Storage) -> None:
        started = rollback_metadata(uid("map"), total=5)
        storage.map_rollbacks.start(started)
        storage.maps.init(map_metadata())
        assert storage.map_rollbacks.scan() == [started]
        storage.map_rollbacks.start(rollback_metadata(uid("map")))
        assert len(storage.map_rollbacks.scan(limit=1)) == 1
        assert len(storage.map_rollbacks.scan()) == 2

    @pytest.mark.obligations("O-map_rollbacks-22")
    def test_writes_stamp_and_restamp_retention(self, storage: Storage, probe: Probe) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=5))
        storage.map_rollbacks.put_outcome(map_id, 0, FAILED)
        assert_ttl(probe.ttl("map_rollback", map_id), CONTEXT_TTL)
        probe.expire("map_rollback", map_id, after=30)
        assert_ttl(probe.ttl("map_rollback", map_id), 30)
        storage.map_rollbacks.claim_positions(map_id, 2)
        assert_ttl(probe.ttl("map_rollback", map_id, "offset"), CONTEXT_TTL)
        storage.map_rollbacks.put_outcome(map_id, 1, UNDONE)
        assert_ttl(probe.ttl("map_rollback", map_id, "outcome:1"), CONTEXT_TTL)

    @pytest.mark.obligations("O-map_rollbacks-23")
    def test_an_expired_rollback_reads_as_absent(self, storage: Storage, probe: Probe) -> None:
        map_id = uid("map")
        meta = rollback_metadata(map_id, total=2)
        storage.map_rollbacks.start(meta)
        storage.map_rollbacks.put_outcome(map_id, 0, FAILED)
        storage.map_rollbacks.mark_handed_off(map_id)
        probe.expire("map_rollback", map_id)
        assert storage.map_rollbacks.metadata(map_id) is None
        assert rollback_inspector(storage).summary(map_id) is None
        assert storage.map_rollbacks.count_outcomes(map_id) == 0
        assert rollback_inspector(storage).indexes_seen(map_id, [1]) == [False]
        assert storage.map_rollbacks.handed_off(map_id) is False
        assert storage.map_rollbacks.scan() == []
        assert storage.map_rollbacks.start(meta) == (True, meta)

    @pytest.mark.obligations("O-map_rollbacks-21")
    def test_scan_pages_with_a_cursor_list_every_rollback_once(self, storage: Storage) -> None:
        started = [rollback_metadata(uid("map")) for _ in range(7)]
        for meta in started:
            storage.map_rollbacks.start(meta)
        pages = walk_scan(storage.map_rollbacks.scan, limit=3)
        listed = [meta.map_id for page in pages for meta in page]
        assert sorted(listed) == sorted(m.map_id for m in started)

    @pytest.mark.obligations("O-map_rollbacks-2", "O-map_rollbacks-16", "O-map_rollbacks-18")
    def test_claiming_the_signal_finishes_the_rollback_out_of_the_scan(
        self, storage: Storage
    ) -> None:
        finished = rollback_metadata(uid("map"), total=1)
        running = rollback_metadata(uid("map"), total=1)
        storage.map_rollbacks.start(finished)
        storage.map_rollbacks.start(running)
        storage.map_rollbacks.put_outcome(finished.map_id, 0, UNDONE)
        storage.map_rollbacks.mark_handed_off(finished.map_id)
        assert storage.map_rollbacks.claim_signal(finished.map_id) is True
        assert storage.map_rollbacks.scan() == [running]
        assert storage.map_rollbacks.start(finished) == (False, finished)  # the owner re-enters
        assert storage.map_rollbacks.claim_signal(finished.map_id) is False
        assert storage.map_rollbacks.scan() == [running]

    @pytest.mark.obligations(
        "O-map_rollbacks-11",
        "O-map_rollbacks-13",
        "O-map_rollbacks-14",
        "O-map_rollbacks-19",
    )
    def test_every_index_is_aggregated_in_position_order(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=12))
        expected = {
            p: RollbackOutcome(index=11 - p, outcome="failed" if p % 3 else "undone",
                               failures=f'[{{"position":{p}}}]')
            for p in range(12)
        }
        expected[2] = RollbackOutcome(index=None, outcome="context_unavailable")
        expected[10] = RollbackOutcome(index=1, outcome="element_in_flight")
        for position in (7, 10, 0, 11, 2, 9, 1, 5, 3, 8, 4, 6):
            assert storage.map_rollbacks.put_outcome(map_id, position, expected[position])
        in_order = sorted(expected.items())
        for page_size in (1000, 5, 1):
            listed = list(storage.map_rollbacks.outcomes(map_id, page_size=page_size))
            assert listed == in_order, teach(
                "map_rollbacks",
                f"outcomes() lists every position once, in numeric position order, with its "
                f"index and failures (page_size={page_size}; got positions "
                f"{[p for p, _ in listed]})",
                "positions keyed as text ('10' < '9') or a pager that skips or repeats a page",
                _RULES,
            )
        named = {o.index for o in expected.values() if o.index is not None}
        assert rollback_inspector(storage).indexes_seen(map_id, list(range(12))) == [
            i in named for i in range(12)
        ]
        failed = sum(o.outcome in FAILED_ROLLBACK_OUTCOMES for o in expected.values())
        assert rollback_inspector(storage).summary(map_id) == RollbackSummary(
            total=12, settled=12, outstanding=0, failed=failed
        )

    @pytest.mark.obligations(
        "O-map_rollbacks-10",
        "O-map_rollbacks-11",
        "O-map_rollbacks-14",
        "O-map_rollbacks-19",
    )
    def test_element_in_flight_and_context_unavailable_outcomes(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=5))
        kinds = [
            RollbackOutcome(index=None, outcome="context_unavailable"),
            RollbackOutcome(index=3, outcome="context_unavailable", failures='[{"i":3}]'),
            IN_FLIGHT,
            RollbackOutcome(index=0, outcome="not_needed"),
            RollbackOutcome(index=1, outcome="undone"),
        ]
        for position, outcome in enumerate(kinds):
            assert storage.map_rollbacks.put_outcome(map_id, position, outcome) is True
        for position, outcome in enumerate(kinds):
            assert storage.map_rollbacks.outcome(map_id, position) == outcome, teach(
                "map_rollbacks",
                f"a {outcome.outcome!r} outcome round-trips with its index and failures",
                "an outcome column restricted to undone/failed, or index None stored as 0",
                _RULES,
            )
        assert rollback_inspector(storage).indexes_seen(map_id, [0, 1, 2, 3, 4]) == [
            True, True, False, True, True
        ]
        assert rollback_inspector(storage).summary(map_id) == RollbackSummary(
            total=5, settled=5, outstanding=0, failed=3
        ), teach(
            "map_rollbacks",
            "summary.failed counts failed, element_in_flight and context_unavailable outcomes "
            "(FAILED_ROLLBACK_OUTCOMES), never undone or not_needed",
            "counting only outcome == 'failed'",
            _RULES,
        )

    @pytest.mark.obligations(
        "O-map_rollbacks-8",
        "O-map_rollbacks-9",
        "O-map_rollbacks-12",
        "O-map_rollbacks-14",
        "O-map_rollbacks-19",
    )
    def test_losing_outcomes_never_count_twice(self, storage: Storage) -> None:
        map_id = uid("map")
        storage.map_rollbacks.start(rollback_metadata(map_id, total=3))
        assert storage.map_rollbacks.put_outcome(map_id, 0, FAILED) is True
        for loser in (FAILED, IN_FLIGHT, UNAVAILABLE, RollbackOutcome(5, "failed")):
            assert storage.map_rollbacks.put_outcome(map_id, 0, loser) is False
        wins: list[bool] = []
        start = threading.Barrier(8)

        def racer(index: int) -> None:
            start.wait()
            outcome = RollbackOutcome(index=10 + index, outcome="failed")
            wins.append(storage.map_rollbacks.put_outcome(map_id, 1, outcome))

        threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(wins) == [False] * 7 + [True]
        summary = rollback_inspector(storage).summary(map_id)
        assert summary == RollbackSummary(total=3, settled=2, outstanding=1, failed=2), teach(
            "map_rollbacks",
            f"a losing put_outcome changes no counter: two settled failures, got {summary}",
            "incrementing the failed or settled counter before the first-wins check",
            _RULES,
        )
        assert storage.map_rollbacks.count_outcomes(map_id) == 2
        winner = storage.map_rollbacks.outcome(map_id, 1)
        assert winner is not None and winner.index is not None
        seen = rollback_inspector(storage).indexes_seen(map_id, [5, *range(10, 18)])
        assert seen == [False] + [i == winner.index for i in range(10, 18)], teach(
            "map_rollbacks",
            "only the stored (first) outcome's index is seen, never a loser's",
            "marking the index seen before the first-wins check",
            _RULES,
        )

    # -- races (docs/protocol.md, "Map rollbacks"): 8 racers on a fresh rollback each round
    # (reactor_contract.test_concurrency.race_rounds).

    @pytest.mark.obligations("O-map_rollbacks-3")
    def test_racing_starts_have_one_winner_and_agree_on_it(self, storage: Storage) -> None:
        def check(map_id: str, results: list[tuple[bool, MapRollbackMetadata]]) -> None:
            winners = [meta for created, meta in results if created]
            assert len(winners) == 1, teach(
                "map_rollbacks",
                f"of 8 racers starting one rollback exactly one creates it: {len(winners)} did",
                "start reads the metadata and then writes it (no create-if-absent)",
                _ROLLBACKS_DOC,
            )
            assert all(meta == winners[0] for _, meta in results), teach(
                "map_rollbacks",
                "every loser of start reads the winner's metadata",
                "a loser returning its own metadata, or one read before the winner's write",
                _ROLLBACKS_DOC,
            )
            assert storage.map_rollbacks.metadata(map_id) == winners[0]

        race_rounds(
            8,
            lambda map_id, i: storage.map_rollbacks.start(rollback_metadata(map_id, total=i + 1)),
            check, prefix="map",
        )

    @pytest.mark.obligations("O-map_rollbacks-7")
    def test_racing_position_claims_never_overlap(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.map_rollbacks.start(rollback_metadata(map_id, total=16))

        def check(map_id: str, claims: list[list[int]]) -> None:
            claimed = sorted(p for batch in claims for p in batch)
            assert claimed == list(range(16)), teach(
                "map_rollbacks",
                "8 rollback jobs racing to claim 2 positions each of a rollback of 16 claim "
                f"every position exactly once: they claimed {claims}",
                "claim_positions reads the offset and writes it back (not an atomic add)",
                _ROLLBACKS_DOC,
            )
            assert storage.map_rollbacks.offset(map_id) == 16

        race_rounds(
            8, lambda map_id, _i: list(storage.map_rollbacks.claim_positions(map_id, 2)), check,
            prefix="map", prepare=prepare,
        )

    @pytest.mark.obligations("O-map_rollbacks-9")
    def test_racing_outcomes_of_one_position_have_one_winner(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.map_rollbacks.start(rollback_metadata(map_id, total=2))

        def check(map_id: str, wins: list[bool]) -> None:
            assert wins.count(True) == 1, teach(
                "map_rollbacks",
                f"of 8 outcomes racing for one position exactly one is stored: {wins}",
                "put_outcome reads the position and then writes it (no conditional write)",
                _RULES,
            )
            winner = wins.index(True)
            stored = storage.map_rollbacks.outcome(map_id, 0)
            assert stored is not None and stored.index == winner
            assert rollback_inspector(storage).indexes_seen(map_id, list(range(8))) == [
                i == winner for i in range(8)
            ]
            assert rollback_inspector(storage).summary(map_id) == RollbackSummary(
                total=2, settled=1, outstanding=1, failed=1
            )

        race_rounds(
            8,
            lambda map_id, i: storage.map_rollbacks.put_outcome(
                map_id, 0, RollbackOutcome(index=i, outcome="failed")
            ),
            check, prefix="map", prepare=prepare,
        )

    @pytest.mark.obligations("O-map_rollbacks-17", "O-map_rollbacks-18")
    def test_racing_signal_claims_have_one_winner(self, storage: Storage) -> None:
        def prepare(map_id: str) -> None:
            storage.map_rollbacks.start(rollback_metadata(map_id))

        def check(_map_id: str, wins: list[bool]) -> None:
            assert wins.count(True) == 1, teach(
                "map_rollbacks",
                f"of 8 racers claiming one rollback's signal exactly one wins: {wins}",
                "claim_signal reads the flag and then sets it (no conditional write)",
                _ROLLBACKS_DOC,
            )

        race_rounds(8, lambda map_id, _i: storage.map_rollbacks.claim_signal(map_id), check,
                    prefix="map", prepare=prepare)
        assert storage.map_rollbacks.scan() == [], "every claimed rollback left the scan"


class TestMapRollbacks(MapRollbacksContract):
    """The map-rollbacks contract against ``--reactor-storage``."""
