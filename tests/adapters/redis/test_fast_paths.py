"""The Redis adapter's optional fast paths (docs/protocol.md, "Optional fast paths").

Each fast path must leave exactly the state of the composition of required calls it stands for
(``reactor.engine.fast_paths``) and cost one round trip:

* ``RedisMapStore.begin_element`` / ``settle_element``: one ``map.lua`` call each;
* ``RedisContextStore.save_many``: one pipeline of ``context_save`` scripts;
* ``RedisRouter.enqueue_many``: one script call for the whole batch;
* ``RedisRouter.receive``: one ``receive`` script call when a job is due (promote, reclaim and
  a non-blocking read together);
* ``RedisLockingContextStore.load_taking_claims``: the record and the run's claims (its cancel
  request) with the lock, one script call on a single server;
* ``RedisLockingContextStore.append_reading_claims``: an incremental checkpoint and the run's
  claims, one script call on a single server;
* ``RedisLockingContextStore.save_taking`` / ``load_taking`` / ``append_releasing`` /
  ``save_releasing`` and ``RedisMapStore.settle_releasing``: one script call each on a single
  server, lock and record together (the final write also publishes the completion signal); on
  the cluster the lock lives on another slot, so the context store lacks them and the engine
  composes them (the contract suite checks both give the same state).

The native call runs in one namespace and the composition in another on the same server, on
the same ids, and the raw keys of both are compared. Round trips are counted like
benchmarks/_roundtrips.py does: one ``send_packed_command`` is one request (a pipeline
included). Every test runs on the scripts/test standalone Redis and on its 3-master cluster.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from reactor_contract._support import context, map_metadata, uid

from reactor.engine import fast_paths
from reactor.errors import ContextTooLargeError, EncodeError, StorageError
from reactor.generic.router import decode_receipt
from reactor.model.records import ContextDelta, ContextRecord, Fence, LockClaim
from reactor.ports.capabilities import (
    BeginsAndSettlesElements,
    EnqueuesMany,
    LocksWithContexts,
    ReadsClaimsWhenAppending,
    ReadsClaimsWhenTaking,
    SavesContextsTogether,
    SettlesAndReleases,
)
from reactor.ports.router import MAX_ENVELOPE_BYTES, Job
from tests.adapters.redis.round_trips import RoundTrips

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis._base import RedisScripts  # noqa: E402
from reactor_redis.contexts import RedisContextStore  # noqa: E402
from reactor_redis.keys import shard_of  # noqa: E402
from reactor_redis.router import GROUP, RedisRouter  # noqa: E402

TTL = 600.0

#: The MapStore calls the composition makes (the capability's own methods are hidden).
_MAP_CALLS = frozenset({
    "metadata", "result_slots", "failed_context", "append_element", "set_failed_context",
    "put_result", "add_to_counter",
})  # fmt: skip


class _Composed:
    """A map store without the fast paths: only the calls their composition makes, so
    ``reactor.engine.fast_paths`` composes them."""

    def __init__(self, maps: Any) -> None:
        self._maps = maps

    def __getattr__(self, name: str) -> Any:
        if name not in _MAP_CALLS:
            raise AttributeError(name)
        return getattr(self._maps, name)


@pytest.fixture(params=["redis", "redis_cluster"])
def url(request: pytest.FixtureRequest, service_url: Callable[[str], str]) -> str:
    """The standalone server's or the cluster's URL."""
    found = service_url(request.param)
    return f"{found}{'&' if '?' in found else '?'}"


def _storage(url: str) -> Any:
    return reactor_redis.storage_from_url(f"{url}prefix=fp{uuid.uuid4().hex[:10]}", context_ttl=TTL)


@pytest.fixture
def pair(url: str) -> Iterator[tuple[Any, Any]]:
    """Two storages in fresh namespaces of one server: the native call's and the
    composition's."""
    native, composed = _storage(url), _storage(url)
    try:
        yield native, composed
    finally:
        native.close()
        composed.close()


@pytest.fixture
def router(url: str) -> Iterator[RedisRouter]:
    """A router on a fresh queue (visibility 1 s)."""
    built = reactor_redis.router_from_url(
        f"{url}prefix=fpq{uuid.uuid4().hex[:10]}&visibility_timeout=1"
    )
    try:
        yield built
    finally:
        built.close()



def _map_state(storage: Any, map_id: str) -> dict[str, Any]:
    """Everything stored for a map's forward state, read raw."""
    client, keys = storage.client, storage.keys
    return {
        "metadata": client.get(keys.map_key(map_id, "metadata")),
        "counter": client.get(keys.map_key(map_id, "counter")),
        "failed": client.get(keys.map_key(map_id, "failed")),
        "results": client.hgetall(keys.map_key(map_id, "results")),
        "elements": client.lrange(keys.map_key(map_id, "elements"), 0, -1),
    }


def _ttls(storage: Any, map_id: str) -> list[int]:
    """The remaining TTL (ms) of every existing key of a map."""
    client = storage.client
    return [client.pttl(key) for key in storage.keys.map_keys(map_id) if client.exists(key)]


def _shorten(storage: Any, map_id: str, ms: int = 30_000) -> None:
    for key in storage.keys.map_keys(map_id):
        storage.client.pexpire(key, ms)


# ---------------------------------------------------------------------------- capabilities


def test_the_adapter_declares_its_fast_paths(pair: tuple[Any, Any], router: Any) -> None:
    storage = pair[0]
    assert isinstance(storage.maps, BeginsAndSettlesElements)
    assert isinstance(storage.contexts, SavesContextsTogether)
    assert isinstance(router, EnqueuesMany)
    assert not isinstance(_Composed(storage.maps), BeginsAndSettlesElements)


# --------------------------------------------------------------------------- begin/settle


def _both(pair: tuple[Any, Any], name: str, *args: Any, **kwargs: Any) -> Any:
    """The native store's method ``name`` and, in the other namespace, the composition
    ``reactor.engine.fast_paths.<name>`` makes; their results, compared."""
    native, composed = pair
    mine = getattr(native.maps, name)(*args, **kwargs)
    theirs = getattr(fast_paths, name)(_Composed(composed.maps), *args, **kwargs)
    assert mine == theirs
    return mine


@pytest.mark.parametrize(
    "case", ["unknown map", "fresh", "read only", "settled", "failed", "again"]
)
def test_begin_element_leaves_the_state_its_composition_leaves(
    pair: tuple[Any, Any], case: str
) -> None:
    meta = map_metadata(count=4)
    map_id = meta.map_id
    for storage in pair:
        if case != "unknown map":
            storage.maps.init(meta)
        if case == "settled":
            storage.maps.put_result(map_id, 1, '"done"')
        if case == "failed":
            storage.maps.set_failed_context(map_id, "ctx-x")
        if case == "again":
            storage.maps.append_element(map_id, "ctx-0")
    context_id = None if case == "read only" else "ctx-1"
    start = _both(pair, "begin_element", map_id, 1, context_id)
    assert start.metadata == (None if case == "unknown map" else meta)
    assert start.settled is (case == "settled")
    assert start.failed_context == ("ctx-x" if case == "failed" else None)
    expected = {"fresh": 0, "again": 1}.get(case)
    assert start.position == expected
    assert _map_state(pair[0], map_id) == _map_state(pair[1], map_id)


def test_begin_element_rewrites_retention_only_when_it_appends(pair: tuple[Any, Any]) -> None:
    storage = pair[0]
    meta = map_metadata(count=2)
    storage.maps.init(meta)
    _shorten(storage, meta.map_id)
    storage.maps.begin_element(meta.map_id, 0, None)  # a pure read writes nothing
    assert max(_ttls(storage, meta.map_id)) <= 30_000
    storage.maps.set_failed_context(meta.map_id, "ctx-x")
    _shorten(storage, meta.map_id)
    start = storage.maps.begin_element(meta.map_id, 0, "ctx-0")  # refused: an element failed
    assert start.position is None and max(_ttls(storage, meta.map_id)) <= 30_000
    storage.client.delete(storage.keys.map_key(meta.map_id, "failed"))
    assert storage.maps.begin_element(meta.map_id, 0, "ctx-0").position == 0
    assert min(_ttls(storage, meta.map_id)) > 30_000  # the append re-stamped every key


def test_settle_element_leaves_the_state_its_composition_leaves(pair: tuple[Any, Any]) -> None:
    meta = map_metadata(count=3)
    for storage in pair:
        storage.maps.init(meta)
    map_id = meta.map_id
    calls: list[tuple[int, str, str | None]] = [
        (0, '"a"', None), (2, '"c"', "ctx-2"), (1, '"b"', "ctx-1"), (2, '"c2"', None),
    ]  # fmt: skip
    counters = [
        _both(pair, "settle_element", map_id, index, value, failed_context=failed)
        for index, value, failed in calls
    ]
    assert counters == [2, 1, 0, -1]
    assert _map_state(pair[0], map_id) == _map_state(pair[1], map_id)
    assert pair[0].maps.failed_context(map_id) == "ctx-2"  # the first failure wins
    assert pair[0].maps.result_slots(map_id, [0, 1, 2]) == ['"a"', '"b"', '"c2"']
    _shorten(pair[0], map_id)
    pair[0].maps.settle_element(map_id, 0, '"a"')
    assert min(_ttls(pair[0], map_id)) > 30_000  # a settle re-stamps every key


def test_negative_indexes_are_refused(pair: tuple[Any, Any]) -> None:
    maps = pair[0].maps
    with pytest.raises(ValueError):
        maps.begin_element(uid("map"), -1, "ctx")
    with pytest.raises(ValueError):
        maps.settle_element(uid("map"), -1, '"v"')


def test_begin_and_settle_are_one_round_trip_each(
    pair: tuple[Any, Any], trips: RoundTrips
) -> None:
    maps = pair[0].maps
    meta = map_metadata(count=2)
    maps.init(meta)
    maps.begin_element(meta.map_id, 0, None)  # the script is loaded on this map's node
    assert trips.of(lambda: maps.begin_element(meta.map_id, 0, None)) == 1
    assert trips.of(lambda: maps.begin_element(meta.map_id, 0, "ctx-0")) == 1
    assert trips.of(lambda: maps.settle_element(meta.map_id, 0, '"v"', failed_context="c")) == 1


# ----------------------------------------------------------------------------- save_many


def _records(n: int, **changes: Any) -> list[ContextRecord]:
    out = [context(document=f'{{"n":{i}}}', **changes) for i in range(n)]
    out.append(context(parent=out[0].context_id, root=out[0].context_id, dispatched_child=True))
    return out


def _context_state(storage: Any, context_id: str) -> tuple[Any, ...]:
    client, keys = storage.client, storage.keys
    prefix = keys.context_index_prefix(shard_of(context_id))
    members = sorted(
        name for name in ("running", "child:running")
        if client.zscore(prefix + name, context_id) is not None
    )  # fmt: skip
    return (
        client.hgetall(keys.context(context_id)),
        client.lrange(keys.context_segments(context_id), 0, -1),
        members,
        client.pttl(keys.context(context_id)) > (TTL - 60) * 1000,
    )


def test_save_many_leaves_the_state_of_a_save_each(pair: tuple[Any, Any]) -> None:
    native, composed = pair
    records = _records(20)
    native.contexts.save_many(records)
    for record in records:
        composed.contexts.save(record)
    for record in records:
        assert native.contexts.load(record.context_id) == record
        assert _context_state(native, record.context_id) == _context_state(
            composed, record.context_id
        )
    native.contexts.save_many([])  # nothing to do


def test_save_many_is_one_request_per_node(pair: tuple[Any, Any], trips: RoundTrips) -> None:
    storage = pair[0]
    records = _records(30)
    storage.contexts.save_many(records)  # the script is loaded on every node concerned
    nodes = 1
    if hasattr(storage.client, "get_node_from_key"):  # a cluster: one request per node
        keys = [storage.keys.context(record.context_id) for record in records]
        nodes = len({storage.client.get_node_from_key(key).name for key in keys})
        assert nodes > 1, "30 records spread over the cluster's masters"
    assert trips.of(lambda: storage.contexts.save_many(records)) == nodes


def test_save_many_loads_the_script_when_the_server_lost_it(pair: tuple[Any, Any]) -> None:
    storage = pair[0]
    records = _records(5)
    storage.contexts.save_many(records[:1])
    storage.client.script_flush()
    storage.contexts.save_many(records)
    assert [storage.contexts.load(r.context_id) for r in records] == records


def test_save_many_checks_every_size_before_sending_anything(pair: tuple[Any, Any]) -> None:
    storage = pair[0]
    limited = RedisContextStore(
        storage.client, RedisScripts(storage.client), storage.keys,
        context_ttl=TTL, max_document_bytes=100,
    )  # fmt: skip
    small, big = context(document='{"a":1}'), context(document='"' + "x" * 200 + '"')
    with pytest.raises(ContextTooLargeError):
        limited.save_many([small, big])
    assert limited.load(small.context_id) is None


def test_a_script_error_in_save_many_raises_storage_error(pair: tuple[Any, Any]) -> None:
    storage = pair[0]
    good, bad = context(), context()
    storage.client.set(storage.keys.context(bad.context_id), "not a hash")
    with pytest.raises(StorageError):
        storage.contexts.save(bad)  # what a save of it raises ...
    with pytest.raises(StorageError):
        storage.contexts.save_many([bad, good])  # ... save_many raises too
    assert storage.contexts.load(good.context_id) == good  # not atomic across records


# --------------------------------------------------------------------------- enqueue_many


def _jobs(n: int) -> list[Job]:
    return [Job(kind="run", payload={"i": i}) for i in range(n)]


def test_enqueue_many_queues_every_job_in_order(router: Any) -> None:
    jobs = _jobs(5)
    assert router.enqueue_many(jobs) == [job.id for job in jobs]
    got = router.receive(max_jobs=10, wait_seconds=0)
    assert [d.job for d in got] == jobs
    assert [d.delivery_count for d in got] == [1] * 5
    assert router.enqueue_many([]) == []


def test_enqueue_many_queues_nothing_when_an_envelope_cannot_be_encoded(router: Any) -> None:
    jobs = [*_jobs(2), Job(kind="run", payload={"x": "y" * (MAX_ENVELOPE_BYTES + 1)})]
    with pytest.raises(EncodeError):
        router.enqueue_many(jobs)
    assert router.receive(max_jobs=10, wait_seconds=0) == []
    assert router.queue_stats().ready == 0


def test_enqueue_many_is_one_round_trip(router: Any, trips: RoundTrips) -> None:
    router.enqueue_many(_jobs(1))  # the group exists and the script is loaded
    assert trips.of(lambda: router.enqueue_many(_jobs(50))) == 1


# ------------------------------------------------------------------------------- receive


def _warm(router: Any) -> None:
    """One enqueue and receive: the group exists, the script is loaded, the prune ran."""
    router.enqueue(Job(kind="run", payload={}))
    for delivery in router.receive(max_jobs=1, wait_seconds=1):
        router.ack(delivery)


def test_receiving_an_available_job_is_one_round_trip(router: Any, trips: RoundTrips) -> None:
    _warm(router)
    job = Job(kind="run", payload={"fresh": True})
    router.enqueue(job)
    got: list[Any] = []
    assert trips.of(lambda: got.extend(router.receive(max_jobs=5, wait_seconds=5))) == 1
    assert [(d.job, d.delivery_count) for d in got] == [(job, 1)]
    assert decode_receipt(got[0].receipt) == (got[0].receipt.split(":", 1)[1][:-1], "1")
    assert trips.of(lambda: router.receive(max_jobs=5, wait_seconds=0)) == 1  # empty, no wait


def test_a_reclaimed_or_promoted_job_is_one_round_trip(router: Any, trips: RoundTrips) -> None:
    _warm(router)
    job = Job(kind="run", payload={})
    router.enqueue(job)
    first = router.receive(max_jobs=1, wait_seconds=1)
    assert [d.job.id for d in first] == [job.id]
    time.sleep(1.1)  # the 1 s lease lapses: the next receive re-claims it
    got: list[Any] = []
    assert trips.of(lambda: got.extend(router.receive(max_jobs=1, wait_seconds=5))) == 1
    assert [(d.job.id, d.delivery_count) for d in got] == [(job.id, 2)]
    router.ack(got[0])
    delayed = Job(kind="run", payload={"delayed": True})
    router.enqueue(delayed, delay_seconds=0.05)
    time.sleep(0.1)  # due: the next receive promotes and reads it in the same call
    got.clear()
    assert trips.of(lambda: got.extend(router.receive(max_jobs=1, wait_seconds=5))) == 1
    assert [(d.job.id, d.delivery_count) for d in got] == [(delayed.id, 1)]
    assert got[0].job.not_before is not None  # a delayed job records when it was due


def test_receive_fills_max_jobs_from_reclaimed_and_new_entries(router: Any) -> None:
    _warm(router)
    old, new = _jobs(2)
    router.enqueue(old)
    assert [d.job.id for d in router.receive(max_jobs=1, wait_seconds=1)] == [old.id]
    time.sleep(1.1)
    router.enqueue(new)
    got = router.receive(max_jobs=5, wait_seconds=0)
    assert [(d.job.id, d.delivery_count) for d in got] == [(old.id, 2), (new.id, 1)]
    pending = router.client.xpending(router.primitive._keys[0], GROUP)
    assert pending["pending"] == 2


def test_a_waiting_receive_still_gets_a_job_enqueued_meanwhile(router: Any) -> None:
    _warm(router)
    job = Job(kind="run", payload={"late": True})
    timer = threading.Timer(0.3, router.enqueue, args=(job,))
    timer.start()
    try:
        got = router.receive(max_jobs=1, wait_seconds=5)
    finally:
        timer.join()
    assert [d.job for d in got] == [job]


# ------------------------------------------------------------------ locks with records


def test_lock_and_record_travel_together_on_a_single_server_only(
    pair: tuple[Any, Any], url: str
) -> None:
    storage = pair[0]
    single = "cluster" not in url
    assert isinstance(storage.contexts, LocksWithContexts) is single
    assert isinstance(storage.maps, SettlesAndReleases)


def test_each_lock_with_record_call_is_one_round_trip(
    pair: tuple[Any, Any], url: str, trips: RoundTrips
) -> None:
    storage = pair[0]
    expected = 2 if "cluster" in url else 1  # the cluster composes: lock, then record
    _lock_and_record_calls(storage)  # connections made, scripts loaded: then count
    record = dataclasses.replace(context(uid("run")), base="b1")
    key = f"async:{record.context_id}"
    claim = LockClaim(key, "me", 30.0)
    token = 0

    def take() -> None:
        nonlocal token
        token = fast_paths.save_taking(storage, record, claim)

    assert trips.of(take) == expected and token >= 1
    fence = Fence(key, "me", token)
    delta = ContextDelta(record.context_id, "b1", 1, "completed", 1.7e9 + 1, '{"a":1}')
    assert trips.of(lambda: fast_paths.append_releasing(storage, delta, fence)) == expected
    assert storage.locks.info(key) is None
    got: list[Any] = []
    assert trips.of(
        lambda: got.append(fast_paths.load_taking(storage, record.context_id, claim))
    ) == expected
    token, loaded = got[0]
    assert loaded is not None and loaded.segments == ('{"a":1}',)
    assert trips.of(
        lambda: fast_paths.save_releasing(storage, record, Fence(key, "me", token))
    ) == expected
    assert storage.locks.info(key) is None
    meta = map_metadata(count=1)
    storage.maps.init(meta)
    element_key = f"map_element:{meta.map_id}:0"
    element_token = storage.locks.acquire(element_key, "me", 30.0)
    assert trips.of(lambda: fast_paths.settle_releasing(
        storage, meta.map_id, 0, '"v"', fence=Fence(element_key, "me", element_token)
    )) == expected
    assert storage.locks.info(element_key) is None


def test_the_taking_load_reads_the_claims_its_composition_reads(
    pair: tuple[Any, Any], url: str, trips: RoundTrips
) -> None:
    native, composed = pair
    single = "cluster" not in url
    assert isinstance(native.contexts, ReadsClaimsWhenTaking) is single
    _lock_and_record_calls(native)  # connections made, scripts loaded: then count
    for storage in (native, composed):
        storage.contexts.save(context("run-claims"))
        assert storage.claims.claim_interrupt_resume("run-claims", "@cancel", '{"r":1}')
    paths = ("@cancel", "approve", "@cancel")
    got: list[Any] = []
    claim = LockClaim("async:run-claims", "me", 30.0)
    assert trips.of(lambda: got.append(
        fast_paths.load_taking_claims(native, "run-claims", claim, paths)
    )) == (1 if single else 2)
    token, record, claims = got[0]
    assert token >= 1 and record is not None and record.context_id == "run-claims"
    expected = composed.claims.interrupt_resumes("run-claims", list(paths))
    assert expected == {"@cancel": '{"r":1}'}
    assert claims == (expected if single else None)  # the cluster composes: not read
    # another owner holds the lock: nothing read, nothing taken
    assert fast_paths.load_taking_claims(
        native, "run-claims", LockClaim("async:run-claims", "other", 30.0), paths
    ) == (0, None, None)
    # no claim stored: an empty reading, not "not read"
    native.contexts.save(context("run-bare"))
    bare = fast_paths.load_taking_claims(
        native, "run-bare", LockClaim("async:run-bare", "me", 30.0), paths
    )
    assert bare[0] >= 1 and bare[2] == ({} if single else None)


def test_the_append_reads_the_claims_its_composition_reads(
    pair: tuple[Any, Any], url: str, trips: RoundTrips
) -> None:
    native, composed = pair
    single = "cluster" not in url
    assert isinstance(native.contexts, ReadsClaimsWhenAppending) is single
    _lock_and_record_calls(native)
    paths = ("@cancel", "approve")
    for storage in (native, composed):
        storage.contexts.save(dataclasses.replace(context("run-app"), base="b1"))
    delta = ContextDelta("run-app", "b1", 1, "running", 1.7e9 + 1, '{"a":1}')
    got: list[Any] = []
    assert trips.of(lambda: got.append(
        fast_paths.append_reading_claims(native, delta, None, paths)
    )) == 1
    assert got[0] == (True, {} if single else None)  # nothing claimed: an empty reading
    for storage in (native, composed):
        assert storage.claims.claim_interrupt_resume("run-app", "@cancel", '{"r":2}')
    second = dataclasses.replace(delta, position=2, segment='{"b":2}')
    appended, claims = fast_paths.append_reading_claims(native, second, None, paths)
    assert composed.contexts.append(delta) and composed.contexts.append(second)
    expected = composed.claims.interrupt_resumes("run-app", list(paths))
    assert appended and claims == (expected if single else None)
    assert expected == {"@cancel": '{"r":2}'}
    # the stored record is what the plain appends leave
    native_record = native.contexts.load("run-app")
    composed_record = composed.contexts.load("run-app")
    assert native_record is not None and composed_record is not None
    assert native_record.segments == composed_record.segments == ('{"a":1}', '{"b":2}')
    # nothing written (another segment count): no claims read
    stale = dataclasses.replace(delta, position=1, segment='{"c":3}')
    assert fast_paths.append_reading_claims(native, stale, None, paths) == (False, None)


def _lock_and_record_calls(storage: Any) -> None:
    """Each lock-with-record call once, on a throw-away run and map."""
    record = dataclasses.replace(context(uid("warm")), base="b1")
    key = f"async:{record.context_id}"
    token = fast_paths.save_taking(storage, record, LockClaim(key, "w", 30.0))
    delta = ContextDelta(record.context_id, "b1", 1, "running", 1.7e9, "{}")
    fast_paths.append_releasing(storage, delta, Fence(key, "w", token))
    token = fast_paths.load_taking(storage, record.context_id, LockClaim(key, "w", 30.0))[0]
    fast_paths.save_releasing(storage, record, Fence(key, "w", token))
    meta = map_metadata(count=1)
    storage.maps.init(meta)
    element = f"map_element:{meta.map_id}:0"
    token = storage.locks.acquire(element, "w", 30.0)
    fast_paths.settle_releasing(storage, meta.map_id, 0, '"w"', fence=Fence(element, "w", token))


@pytest.mark.parametrize("final", ["append", "save"])
def test_the_releasing_final_write_publishes_the_status(
    pair: tuple[Any, Any], final: str
) -> None:
    storage = pair[0]
    record = dataclasses.replace(context(uid("run")), base="b1")
    key = f"async:{record.context_id}"
    token = fast_paths.save_taking(storage, record, LockClaim(key, "me", 30.0))
    channel = f"run:{record.context_id}:done"
    subscription = storage.signals.subscribe(channel)
    try:
        if final == "append":
            delta = ContextDelta(record.context_id, "b1", 1, "completed", 1.7e9 + 1, "{}")
            assert fast_paths.append_releasing(
                storage, delta, Fence(key, "me", token), announce=channel
            )
        else:
            done = dataclasses.replace(record, status="failed")
            fast_paths.save_releasing(storage, done, Fence(key, "me", token), announce=channel)
        assert subscription.get(5.0) == ("completed" if final == "append" else "failed")
    finally:
        subscription.close()
