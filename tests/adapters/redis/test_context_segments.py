"""Incremental checkpoints on Redis: a run's base in its hash, its segments in a list
(docs/protocol.md, "Incremental checkpoints"; ``reactor_redis.contexts``).

Every test runs on the scripts/test standalone Redis and on its 3-master cluster (the hash and
the list share one slot, so the append script and the load's ``MULTI``/``EXEC`` work there).
"Nothing written" is checked on the raw keys: the hash, the list and the scan index members.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor.errors import ContextTooLargeError, DeserializationError, StaleWriterError
from reactor.model.records import ContextDelta, ContextRecord, Fence
from tests.adapters.redis.round_trips import RoundTrips

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis._base import RedisScripts  # noqa: E402
from reactor_redis.contexts import RedisContextStore  # noqa: E402
from reactor_redis.keys import shard_of  # noqa: E402

TTL = 600.0


@pytest.fixture(params=["redis", "redis_cluster"])
def storage(request: pytest.FixtureRequest, service_url: Callable[[str], str]) -> Iterator[Any]:
    """A Redis storage (standalone or cluster) in a fresh namespace, ``context_ttl=TTL``."""
    url = service_url(request.param)
    built = reactor_redis.storage_from_url(
        f"{url}{'&' if '?' in url else '?'}prefix=seg{uuid.uuid4().hex[:10]}", context_ttl=TTL
    )
    try:
        yield built
    finally:
        built.close()


def _store(storage: Any, *, ttl: float | None = TTL, limit: int | None = None) -> Any:
    """Another context store on the same client and namespace (a size limit, another TTL)."""
    return RedisContextStore(
        storage.client, RedisScripts(storage.client), storage.keys,
        context_ttl=ttl, max_document_bytes=limit,
    )  # fmt: skip


def _record(context_id: str, **changes: Any) -> ContextRecord:
    fields: dict[str, Any] = {
        "context_id": context_id, "reactor": "orders", "status": "running",
        "document": '{"base":1}', "created_at": 10.0, "updated_at": 11.0, "base": "b1",
    }  # fmt: skip
    fields.update(changes)
    return ContextRecord(**fields)


def _delta(context_id: str, position: int = 1, **changes: Any) -> ContextDelta:
    fields: dict[str, Any] = {
        "context_id": context_id, "base": "b1", "position": position, "status": "running",
        "updated_at": 11.0 + position, "segment": f'{{"seg":{position}}}',
    }  # fmt: skip
    fields.update(changes)
    return ContextDelta(**fields)


def _new_id() -> str:
    return str(uuid.uuid4())


def _raw(storage: Any, context_id: str) -> tuple[Any, ...]:
    """Everything stored for a run: hash, list, and the index sets it is a member of."""
    client, keys = storage.client, storage.keys
    prefix = keys.context_index_prefix(shard_of(context_id))
    indexes = {
        name: client.zscore(prefix + name, context_id)
        for name in ("running", "completed", "child:running", "child:completed")
    }
    return (
        client.hgetall(keys.context(context_id)),
        client.lrange(keys.context_segments(context_id), 0, -1),
        {name: score for name, score in indexes.items() if score is not None},
    )


def _ids(page: Any) -> set[str]:
    return {row.context_id for row in page}


# ------------------------------------------------------------------------------ append/load


def test_append_then_load_returns_base_and_segments_in_order(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    assert contexts.append(_delta(context_id, 1)) is True
    assert contexts.append(_delta(context_id, 2, segment='{"é":"ü"}', status="completed")) is True

    loaded = contexts.load(context_id)
    assert loaded == _record(
        context_id, status="completed", updated_at=13.0,
        segments=('{"seg":1}', '{"é":"ü"}'),
    )  # fmt: skip
    head = storage.client.hgetall(storage.keys.context(context_id))
    assert head["_count"] == "2"
    assert int(head["_bytes"]) == loaded.stored_bytes  # UTF-8 bytes, not characters


def test_a_record_written_before_incremental_checkpoints_loads_as_before(storage: Any) -> None:
    context_id = _new_id()
    key = storage.keys.context(context_id)
    storage.client.hset(key, mapping={
        "id": context_id, "reactor": "orders", "status": "running", "document": "{}",
        "created_at": "1.0", "updated_at": "2.0", "child": "0",
    })  # fmt: skip
    loaded = storage.contexts.load(context_id)
    assert loaded == ContextRecord(
        context_id=context_id, reactor="orders", status="running", document="{}",
        created_at=1.0, updated_at=2.0,
    )  # fmt: skip
    before = _raw(storage, context_id)
    assert storage.contexts.append(_delta(context_id, 1)) is False  # no base: save it whole
    assert _raw(storage, context_id) == before


def test_append_to_an_absent_record_returns_false(storage: Any) -> None:
    context_id = _new_id()
    assert storage.contexts.append(_delta(context_id, 1)) is False
    assert _raw(storage, context_id) == ({}, [], {})


@pytest.mark.parametrize(
    "changes",
    [{"base": "other"}, {"position": 1}, {"position": 3}, {"position": 5}],
    ids=["wrong-base", "position-behind", "position-ahead", "position-far-ahead"],
)
def test_append_with_another_view_returns_false_and_writes_nothing(
    storage: Any, changes: dict[str, Any]
) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    assert contexts.append(_delta(context_id, 1)) is True
    before = _raw(storage, context_id)
    wanted: dict[str, Any] = {"position": 2, "status": "completed", **changes}
    assert contexts.append(_delta(context_id, **wanted)) is False
    assert _raw(storage, context_id) == before


def test_save_after_appends_drops_the_old_segments(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    for position in (1, 2, 3):
        assert contexts.append(_delta(context_id, position))
    contexts.save(_record(context_id, base="b2", document='{"whole":1}'))

    assert contexts.load(context_id) == _record(context_id, base="b2", document='{"whole":1}')
    assert storage.client.exists(storage.keys.context_segments(context_id)) == 0
    assert contexts.append(_delta(context_id, 4)) is False  # the old base's view
    assert contexts.append(_delta(context_id, 1, base="b2")) is True
    assert contexts.load(context_id).segments == ('{"seg":1}',)


def test_a_loaded_record_saved_back_keeps_its_segments(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))
    contexts.append(_delta(context_id, 2))
    loaded = contexts.load(context_id)
    contexts.save(loaded)
    assert contexts.load(context_id) == loaded
    assert contexts.append(_delta(context_id, 3)) is True
    assert contexts.load(context_id).segments == ('{"seg":1}', '{"seg":2}', '{"seg":3}')


def test_save_stores_many_segments(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    segments = tuple(f'{{"n":{i}}}' for i in range(2500))  # several RPUSH chunks in the script
    contexts.save(_record(context_id, segments=segments))
    assert contexts.load(context_id).segments == segments


# ------------------------------------------------------------------------------------ fences


def test_a_fenced_append_below_the_stored_fence_raises_and_writes_nothing(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id), fence=Fence("async:r", "new", 5))
    before = _raw(storage, context_id)
    with pytest.raises(StaleWriterError) as caught:
        contexts.append(_delta(context_id, 1), fence=Fence("async:r", "old", 4))
    assert (caught.value.token, caught.value.stored_token) == (4, 5)
    assert _raw(storage, context_id) == before


def test_a_fenced_append_raises_the_stored_fence(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id), fence=Fence("async:r", "a", 5))
    assert contexts.append(_delta(context_id, 1), fence=Fence("async:r", "a", 5)) is True
    assert contexts.append(_delta(context_id, 2), fence=Fence("async:r", "b", 7)) is True
    assert contexts.append(_delta(context_id, 3)) is True  # unfenced keeps the stored fence
    assert storage.client.hget(storage.keys.context(context_id), "_fence") == "7"
    with pytest.raises(StaleWriterError):
        contexts.save(_record(context_id), fence=Fence("async:r", "a", 6))


# ------------------------------------------------------------------------------- size limit


def test_the_size_limit_counts_document_and_segments(storage: Any) -> None:
    context_id = _new_id()
    document = '{"base":1}'  # 10 bytes
    limited = _store(storage, limit=len(document) + len('{"seg":1}'))
    with pytest.raises(ContextTooLargeError):
        limited.save(_record(context_id, segments=('{"seg":1}', "x")))
    assert _raw(storage, context_id) == ({}, [], {})

    limited.save(_record(context_id))
    assert limited.append(_delta(context_id, 1)) is True  # exactly at the limit
    before = _raw(storage, context_id)
    with pytest.raises(ContextTooLargeError) as caught:
        limited.append(_delta(context_id, 2, segment="é"))  # 2 bytes, 1 character
    assert (caught.value.size_bytes, caught.value.limit_bytes) == (21, 19)
    assert _raw(storage, context_id) == before


# -------------------------------------------------------------------------- TTL and indexes


def test_an_append_restamps_the_ttl_of_the_hash_and_the_list(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    client, keys = storage.client, storage.keys
    record_key, list_key = keys.context(context_id), keys.context_segments(context_id)
    contexts.save(_record(context_id, segments=("s",)))
    assert 0 < client.pttl(list_key) <= TTL * 1000
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))
    client.pexpire(record_key, 5000)
    client.pexpire(list_key, 4000)
    index = keys.context_index_prefix(shard_of(context_id)) + "running"
    score_before = client.zscore(index, context_id)

    assert contexts.append(_delta(context_id, 2)) is True
    for key in (record_key, list_key):
        assert TTL * 1000 - 60_000 < client.pttl(key) <= TTL * 1000
    assert client.zscore(index, context_id) >= score_before  # re-scored with the new expiry


def test_without_a_ttl_an_append_leaves_both_keys_persistent(storage: Any) -> None:
    context_id = _new_id()
    forever = _store(storage, ttl=None)
    forever.save(_record(context_id))
    assert forever.append(_delta(context_id, 1)) is True
    client, keys = storage.client, storage.keys
    assert client.pttl(keys.context(context_id)) == -1
    assert client.pttl(keys.context_segments(context_id)) == -1


def test_an_append_moves_the_scan_index_with_the_status(storage: Any) -> None:
    contexts = storage.contexts
    root, child, element = _new_id(), _new_id(), _new_id()
    contexts.save(_record(root))
    contexts.save(_record(child, parent_context_id=root, dispatched_child=True))
    contexts.save(_record(element, parent_context_id=root))
    for context_id in (root, child, element):
        assert contexts.append(_delta(context_id, 1, status="completed"))

    assert _raw(storage, root)[2].keys() == {"completed"}
    assert _raw(storage, child)[2].keys() == {"child:completed"}
    assert _raw(storage, element)[2] == {}
    assert _ids(contexts.scan(statuses=["running"], include_dispatched_children=True)) == set()
    assert _ids(contexts.scan(statuses=["completed"], include_dispatched_children=True)) == {
        root, child,
    }  # fmt: skip
    assert [(r.context_id, r.status) for r in contexts.page().runs] == [(root, "completed")]


def test_delete_removes_the_segment_list(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))
    assert contexts.delete(context_id) is True
    assert _raw(storage, context_id) == ({}, [], {})
    assert contexts.load(context_id) is None
    assert contexts.delete(context_id) is False


# ------------------------------------------------------------------------ atomic head/list


def test_load_keeps_the_segments_the_head_counts(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))
    storage.client.rpush(storage.keys.context_segments(context_id), "stray")  # uncounted
    assert contexts.load(context_id).segments == ('{"seg":1}',)
    assert contexts.append(_delta(context_id, 2)) is True  # trimmed to the head's count
    assert storage.client.lrange(storage.keys.context_segments(context_id), 0, -1) == [
        '{"seg":1}', '{"seg":2}',
    ]  # fmt: skip


def test_lost_segments_fail_the_load_and_refuse_the_append(storage: Any) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))
    contexts.append(_delta(context_id, 2))
    storage.client.rpop(storage.keys.context_segments(context_id))  # e.g. evicted
    with pytest.raises(DeserializationError, match=context_id):
        contexts.load(context_id)
    assert contexts.append(_delta(context_id, 3)) is False  # the writer saves whole


def test_one_round_trip_per_append_and_per_load(storage: Any, trips: RoundTrips) -> None:
    contexts, context_id = storage.contexts, _new_id()
    contexts.save(_record(context_id))
    contexts.append(_delta(context_id, 1))  # scripts loaded, cluster slots known
    contexts.load(context_id)
    trips.count = 0
    for position in range(2, 12):
        assert contexts.append(_delta(context_id, position))
    assert trips.count == 10
    trips.count = 0
    assert len(contexts.load(context_id).segments) == 11
    assert trips.count == 1
