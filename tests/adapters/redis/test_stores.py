"""The Redis stores' own behaviour outside the contract: closing, the server clock, index
trims, the map scan's cursor, a rollback summary without failures, a refused taking save and
the rate-limit window cache.

Runs on the scripts/test standalone Redis.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
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

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis import rate_limits  # noqa: E402


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
