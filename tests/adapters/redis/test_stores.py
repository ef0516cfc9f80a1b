"""The Redis stores' own behaviour outside the contract: closing, the server clock, index
trims, the map scan's cursor, a rollback summary without failures, a refused taking save and
the rate-limit window cache.

Runs on the scripts/test standalone Redis.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from reactor_contract._support import context, map_metadata, rollback_metadata, uid

from reactor.errors import StaleWriterError
from reactor.model.coordination.rate_limits import window_id as model_window_id
from reactor.model.records import (
    Fence,
    LockClaim,
    RateWindow,
    RollbackOutcome,
    RollbackSummary,
)
from tests.adapters.redis.round_trips import RoundTrips

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis import rate_limits  # noqa: E402
from reactor_redis._scan import IndexTrimmer, ShardPosition  # noqa: E402
from reactor_redis.keys import SHARDS, shard_of  # noqa: E402


@pytest.fixture
def storage(service_url: Callable[[str], str]) -> Iterator[Any]:
    """A storage in a fresh namespace of the standalone server."""
    url = service_url("redis")
    built = reactor_redis.storage_from_url(
        f"{url}{'&' if '?' in url else '?'}prefix=st{uuid.uuid4().hex[:10]}", context_ttl=600.0
    )
    try:
        yield built
    finally:
        built.close()


def test_close_disconnects_the_clients_connections(storage: Any) -> None:
    storage.ping()
    pool = storage.client.connection_pool
    connections = [*pool._available_connections, *pool._in_use_connections]
    assert connections and any(c._sock is not None for c in connections)
    storage.close()
    assert all(c._sock is None for c in connections)


def test_the_server_time_adds_the_microseconds_as_a_fraction(
    storage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.client, "time", lambda: (1_700_000_000, 999_999))
    assert storage._server_time() == 1_700_000_000.999999


def test_a_trim_of_clean_indexes_removes_nothing(storage: Any) -> None:
    assert storage.contexts.trimmer.trim() == 0


def test_the_map_scan_cursor_resumes_after_the_last_map_listed(storage: Any) -> None:
    """Maps are listed in creation order; a page's cursor holds the score (created_at) and id
    of its last map, so the next page starts right after it."""
    made = [map_metadata(uid("map"), created_at=1_700_000_000.0 + n) for n in range(3)]
    for meta in made:
        storage.maps.init(meta)
    first = storage.maps.scan(limit=2)
    assert [m.map_id for m in first] == [m.map_id for m in made[:2]]
    assert first.next_cursor is not None
    rest = storage.maps.scan(limit=2, cursor=first.next_cursor)
    assert [m.map_id for m in rest] == [made[2].map_id]


def test_a_rollback_summary_without_failures_counts_none(storage: Any) -> None:
    map_id = uid("map")
    storage.map_rollbacks.start(rollback_metadata(map_id, total=2))
    storage.map_rollbacks.put_outcome(map_id, 0, RollbackOutcome(index=0, outcome="undone"))
    assert storage.map_rollbacks.summary(map_id) == RollbackSummary(
        total=2, settled=1, outstanding=1, failed=0
    )


def test_a_refused_taking_save_names_the_lock_taken(storage: Any) -> None:
    """``save_taking`` on a record whose stored fence is above the new token: refused, and
    the error names the lock key of the claim (the save had no fence of its own)."""
    record = context(uid("run"))
    key = f"async:{record.context_id}"
    storage.contexts.save(record, fence=Fence(key, "earlier", 10**17))
    with pytest.raises(StaleWriterError) as refused:
        storage.contexts.save_taking(record, LockClaim(key, "me", 30.0))
    assert refused.value.key == key


def test_each_rate_window_is_encoded_once(
    storage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[RateWindow] = []
    original = model_window_id

    def window_id(window: RateWindow) -> str:
        encoded.append(window)
        return original(window)

    monkeypatch.setattr(rate_limits, "window_id", window_id)
    minute, hour = RateWindow("minute", 60.0, 5), RateWindow("hour", 3600.0, 50)
    for window in (minute, hour, minute, hour):
        assert storage.rate_limits.hit(uid("rl"), [window]).allowed
    assert encoded == [minute, hour]


def test_a_scan_cursor_of_another_index_set_starts_the_next_set_at_its_start() -> None:
    """The resume position applies only inside the index set the cursor names: when that set
    is not scanned now (other statuses than the page before), the first set still to read is
    read from its start, not from the cursor's score and member."""
    position = ShardPosition(3, "running", "1700", "run-9")
    assert position.resume(3, ["failed", "running", "waiting"]) == (
        ["running", "waiting"], "1700", "run-9"
    )
    assert position.resume(3, ["failed", "succeeded"]) == (["succeeded"], "", "")
    assert position.resume(4, ["running"]) == (["running"], "", "")


class _Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_index_trimmer_trims_at_most_once_per_interval() -> None:
    clock = _Monotonic()
    calls: list[str] = []

    def scripts(name: str, keys: Sequence[str], args: Sequence[Any]) -> int:
        calls.append(name)
        return 0

    trimmer = IndexTrimmer(scripts, lambda shard: f"p:{shard}:", ["a"], interval=60.0,
                           clock=clock)
    trimmer.maybe_trim()
    assert len(calls) == SHARDS  # the first call trims every shard
    clock.now += 30.0
    trimmer.maybe_trim()
    assert len(calls) == SHARDS  # 30 s later: skipped
    clock.now += 30.0
    trimmer.maybe_trim()
    assert len(calls) == 2 * SHARDS  # 60 s after the first trim: trims again


def test_a_context_scan_page_full_inside_a_shard_resumes_there(storage: Any) -> None:
    """A page of more than 256 rows filled in the middle of a shard ends with a cursor into
    that shard, and the next page lists the rest of it: every run once."""
    in_shard_0 = (i for i in (str(uuid.uuid4()) for _ in itertools.count()) if shard_of(i) == 0)
    made = list(itertools.islice(in_shard_0, 320))
    for run_id in made:
        storage.contexts.save(context(run_id))
    first = storage.contexts.scan(limit=300)
    assert len(first) == 300 and first.next_cursor is not None
    rest = storage.contexts.scan(limit=300, cursor=first.next_cursor)
    assert rest.next_cursor is None
    listed = [r.context_id for r in first] + [r.context_id for r in rest]
    assert sorted(listed) == sorted(made)


def test_the_map_scan_cursor_holds_the_score_of_the_last_map_listed(storage: Any) -> None:
    """Maps created in turn whose ids sort the other way: the cursor pairs the last map's id
    with its own score (not the first one's), so the next page does not list them again."""
    base = uid("map")
    made = [
        map_metadata(f"{base}-{letter}", created_at=1_700_000_000.0 + n)
        for n, letter in enumerate("cba")
    ]
    for meta in made:
        storage.maps.init(meta)
    first = storage.maps.scan(limit=2)
    assert [m.map_id for m in first] == [m.map_id for m in made[:2]]
    rest = storage.maps.scan(limit=2, cursor=first.next_cursor)
    assert [m.map_id for m in rest] == [made[2].map_id]


def test_a_negative_tail_position_is_refused(storage: Any) -> None:
    map_id = uid("map")
    storage.maps.init(map_metadata(map_id))
    with pytest.raises(ValueError, match="tail position"):
        storage.maps.element_ids_from_tail(map_id, position=-1, count=1, total=3)


def test_a_window_shorter_than_a_microsecond_buckets_by_the_microsecond(storage: Any) -> None:
    """Buckets are ``floor(now / seconds)``: a 1 µs window's bucket is the server's time in
    µs (a window below 1 µs is read as 1 µs). Such a key expires within a millisecond of the
    hit, so on a loaded machine the read after it may come too late: each window is hit on
    fresh keys until one read finds the bucket (at most 50 tries)."""
    for seconds in (1e-6, 1e-7):
        window = RateWindow("tiny", seconds, 5)
        for _ in range(50):
            key = uid("rl")
            before = storage.client.time()
            assert storage.rate_limits.hit(key, [window]).allowed
            after = storage.client.time()
            stored = storage.client.hget(
                storage.rate_limits._prefix + key, f"{model_window_id(window)}|b"
            )
            if stored is not None:
                break
        assert stored is not None, "every key expired before it could be read"
        assert before[0] * 1_000_000 + before[1] <= int(stored)
        assert int(stored) <= after[0] * 1_000_000 + after[1]


def test_the_server_clock_is_calibrated_every_60_seconds_by_default(
    storage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    wall = _Monotonic()
    reads: list[float] = []

    def server_time() -> tuple[int, int]:
        reads.append(wall.now)
        return int(wall.now), 0

    monkeypatch.setattr(storage._clock, "_wall", wall)
    monkeypatch.setattr(storage.client, "time", server_time)
    storage.now()
    wall.now += 59.5
    storage.now()
    assert reads == [1000.0]  # 59.5 s on: the offset measured is still used
    wall.now += 0.5
    storage.now()
    assert reads == [1000.0, 1060.0]


def test_a_filtered_page_lists_each_run_of_a_long_shard_once(storage: Any) -> None:
    """A filtered page reads a shard a chunk (101 rows) at a time and reads it again only once
    its buffer is empty: the runs of a shard longer than a chunk are examined once each, so
    the two oldest, the only ones the filter keeps, are listed once, with no cursor."""
    in_shard_0 = (i for i in (str(uuid.uuid4()) for _ in itertools.count()) if shard_of(i) == 0)
    made = list(itertools.islice(in_shard_0, 103))
    for n, run_id in enumerate(made):
        status = "completed" if n < 2 else "running"
        storage.contexts.save(context(run_id, status=status, created_at=1_700_000_000.0 + n))
    page = storage.contexts.page(limit=5, statuses={"completed"})
    assert [r.context_id for r in page.runs] == [made[1], made[0]]
    assert page.next_cursor is None


def test_a_hit_on_no_windows_is_allowed(storage: Any) -> None:
    """All of no windows admit: the hit is allowed (and charges nothing)."""
    decision = storage.rate_limits.hit(uid("rl"), [])
    assert decision.allowed and decision.window_index is None


def test_a_tail_read_of_no_ids_costs_no_round_trip(storage: Any, trips: RoundTrips) -> None:
    map_id = uid("map")
    storage.maps.init(map_metadata(map_id))
    for element in ("a", "b", "c"):
        storage.maps.append_element(map_id, element)
    got: list[str] = []

    def read() -> None:
        got.extend(storage.maps.element_ids_from_tail(map_id, position=0, count=0, total=3))

    assert trips.of(read) == 0
    assert got == []


def test_a_semaphore_lease_extended_below_a_microsecond_is_one_microsecond(
    storage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease that rounds to 0 µs is sent as 1 µs, as ``acquire`` does: a lease of 0 would
    store the holder's expiry at the script's own now, already lapsed."""
    semaphores = storage.semaphores
    leases: list[tuple[str, int]] = []
    run = semaphores._scripts

    def scripts(name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if name == "semaphore" and args[0] in ("acquire", "extend"):
            leases.append((str(args[0]), int(args[2])))
        return run(name, keys, args)

    monkeypatch.setattr(semaphores, "_scripts", scripts)
    key = uid("sem")
    assert semaphores.acquire(key, "h", 1, 30.0)
    assert semaphores.extend(key, "h", 1e-7)
    assert leases == [("acquire", 30_000_000), ("extend", 1)]
