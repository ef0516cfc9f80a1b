"""Redis keys stay bounded (docs/adapters/redis.md, "Bounded keys").

* Index sets of expired runs and step results are trimmed by the scans the sweep ticks run
  (``IndexTrimmer``), so after many finished runs with a short ``context_ttl`` the indexes hold
  nothing of them. The test waits for the records' own expiry (1 ms TTL, checked with
  ``EXISTS``, a bounded poll) and then counts the members the code maintains, never relying on
  Redis's lazy expiry of the index keys.
* Workers leave the stream's consumer group on ``close()``; consumers idle past the bound with
  no pending entry are deleted by the prune ``receive`` runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from reactor_contract._support import eventually

from reactor.model.records import ContextRecord, StepResultRecord
from reactor.ports.router import Job

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis.keys import SHARDS  # noqa: E402
from reactor_redis.router import GROUP, RedisRouter  # noqa: E402

RUNS = 1000


@pytest.fixture
def redis_url(service_url: Callable[[str], str]) -> str:
    """The scripts/test standalone Redis."""
    return service_url("redis")


@pytest.fixture
def storage(redis_url: str) -> Iterator[Any]:
    """A Redis storage in a fresh namespace whose records live 1 ms."""
    built = reactor_redis.storage_from_url(
        f"{redis_url}{'&' if '?' in redis_url else '?'}prefix=bk{uuid.uuid4().hex[:10]}",
        context_ttl=0.001,
    )
    try:
        yield built
    finally:
        built.close()


def _members(storage: Any, keys: list[str]) -> int:
    return sum(int(storage.client.zcard(key)) for key in keys)


def test_terminal_runs_leave_the_indexes_once_expired(storage: Any) -> None:
    keys = storage.keys
    for i in range(RUNS):
        context_id = f"run-{i}-{uuid.uuid4().hex[:8]}"
        storage.contexts.save(ContextRecord(
            context_id=context_id, reactor="orders", status="completed", document="{}",
            created_at=1.0 + i, updated_at=2.0 + i,
        ))
        storage.step_results.put(StepResultRecord(
            context_id=context_id, step_name="charge", status="completed",
            root_context_id=context_id, reactor="orders", dispatched_at=1.0, updated_at=2.0,
        ))
    last = keys.context(context_id)
    assert eventually(lambda: storage.client.exists(last) == 0, timeout=5.0) is not None
    context_indexes = [
        keys.context_index_prefix(s) + name
        for s in range(SHARDS) for name in ("completed", "child:completed")
    ] + [keys.context_pages(s) for s in range(SHARDS)]
    step_indexes = [keys.step_index_prefix(s) + "completed" for s in range(SHARDS)]
    assert _members(storage, context_indexes) >= RUNS  # nothing trimmed them yet

    # what a sweep tick does: scan the live statuses only
    storage.contexts.scan(statuses=["running"], limit=100)
    storage.step_results.scan(status="dispatched", limit=100)

    assert _members(storage, context_indexes) == 0
    assert _members(storage, step_indexes) == 0
    assert list(storage.client.scan_iter(match=f"{keys.prefix}:*", count=1000)) == []


def _consumers(client: Any, stream: str) -> list[str]:
    if not client.exists(stream):
        return []
    return [str(c["name"]) for c in client.xinfo_consumers(stream, GROUP)]


def _router(client: Any, prefix: str, **options: Any) -> RedisRouter:
    return RedisRouter(client, prefix=prefix, queue="jobs", visibility_timeout=1,
                       owns_client=False, **options)


def test_workers_leave_the_group_on_close(storage: Any) -> None:
    client, prefix = storage.client, storage.keys.prefix
    stream = reactor_redis.keys.Keys(prefix).queue("jobs")[0]
    for _ in range(20):
        router = _router(client, prefix)
        router.enqueue(Job(kind="run", payload={"n": 1}))
        found = router.receive(1, wait_seconds=2)
        assert len(found) == 1
        router.ack(found[0])
        router.close()
    assert len(_consumers(client, stream)) <= 1


def test_an_idle_consumer_without_pending_entries_is_pruned(storage: Any) -> None:
    client, prefix = storage.client, storage.keys.prefix
    stream = reactor_redis.keys.Keys(prefix).queue("jobs")[0]
    idle = _router(client, prefix)  # served a job, then its process was killed
    idle.enqueue(Job(kind="run", payload={"n": 1}))
    done = idle.receive(1, wait_seconds=2)
    assert len(done) == 1
    idle.ack(done[0])
    holder = _router(client, prefix)  # killed while holding a job
    holder.enqueue(Job(kind="run", payload={"n": 2}))
    held = holder.receive(1, wait_seconds=2)
    assert len(held) == 1
    assert {idle.consumer, holder.consumer} <= set(_consumers(client, stream))

    live = _router(client, prefix, consumer_idle_timeout=0.05, consumer_prune_interval=0)
    got = []

    def idle_pruned() -> bool:
        got.extend(live.receive(1, wait_seconds=0))  # every receive prunes (interval 0)
        return idle.consumer not in _consumers(client, stream)

    assert eventually(idle_pruned, timeout=5.0), "the idle consumer was never pruned"
    if not got:  # the held job's lease has not lapsed yet: its holder must stay
        assert holder.consumer in _consumers(client, stream)

    again = got or eventually(lambda: live.receive(1, wait_seconds=0.2), timeout=10.0)
    assert again is not None and again[0].job.id == held[0].job.id  # re-claimed from holder
    live.ack(again[0])
    assert eventually(
        lambda: (live.receive(1, wait_seconds=0) or True)
        and holder.consumer not in _consumers(client, stream),
        timeout=5.0,
    )
    live.close()
    assert _consumers(client, stream) == []
