"""The MongoDB wire test server's query plans (scripts/secantus_launcher.py,
``install_ordered_index_walk`` and ``install_narrowed_index_lookup``): the adapter's limited
reads stop at their limit and a claim's write reads one document, instead of decoding the whole
collection, and both return what a collection scan returns (docs/workers.md, "Soak")."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import random
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from secantus import storage as secantus_storage  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[3]

#: The adapter's document-scan filter (reactor_mongodb.documents, ``scan``) at ``now`` = 50.
LIVE: dict[str, Any] = {"$or": [{"exp": None}, {"exp": {"$gt": 50.0}}]}
#: The adapter's claim filter (reactor_mongodb.router, ``_claim_one``) at ``now`` = 50.
CLAIMABLE: dict[str, Any] = {"$and": [
    {"$or": [{"lease_until": None}, {"lease_until": {"$lte": 50.0}}]},
    {"$or": [{"deliveries": {"$exists": False}}, {"deliveries": {"$type": "number"}}]},
]}


@pytest.fixture(scope="module")
def launcher() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(
        "reactor_secantus_launcher", str(ROOT / "scripts" / "secantus_launcher.py"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _store(storage_cls: Any) -> Any:
    """An in-memory store of ``storage_cls`` holding 200 runs of 10 checkpoint pieces (every
    third one expired) and a queue of 300 jobs (every fourth one leased), indexed as the
    adapter indexes them."""
    store = storage_cls(":memory:")
    store.create_index("d", "pieces", "reactor_scan", {"idx": 1, "_id": 1})
    store.insert("d", "pieces", [
        {"_id": f"run{run:03d}/base/{position:08d}", "idx": f"run{run:03d}",
         "exp": 10.0 if (run + position) % 3 == 0 else None, "value": "{}"}
        for run in range(200) for position in range(10)
    ])
    store.create_index("d", "jobs", "reactor_due", {"queue": 1, "due_at": 1, "_id": 1})
    store.insert("d", "jobs", [
        {"_id": f"job{number:04d}", "queue": "default", "due_at": float(number % 120),
         "lease_until": 90.0 if number % 4 == 0 else None, "lease": None, "deliveries": 0}
        for number in range(300)
    ])
    return store


@pytest.fixture
def stores(launcher: ModuleType) -> Iterator[tuple[Any, Any]]:
    """``(stock store, store with the ordered walks)``, the same documents in both."""

    class Walking(secantus_storage.Storage):  # type: ignore[misc]
        pass

    launcher.install_ordered_index_walk(Walking)
    launcher.install_narrowed_index_lookup(Walking)
    stock, walking = _store(secantus_storage.Storage), _store(Walking)
    try:
        yield stock, walking
    finally:
        stock.close()
        walking.close()


def _decoding(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the documents the store decodes from here on (one counter, in a list)."""
    decode = secantus_storage.bson.decode
    count = [0]

    def counting(data: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return decode(data, *args, **kwargs)

    monkeypatch.setattr(secantus_storage.bson, "decode", counting)
    return count


def test_a_key_range_read_of_one_runs_pieces_decodes_its_pieces_not_the_collection(
    stores: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stock, walking = stores
    query = {"_id": {"$gt": "run100/base/"}, **LIVE}
    expected = stock.find_matching("d", "pieces", query, sort={"_id": 1}, limit=12)
    decoded = _decoding(monkeypatch)
    found = walking.find_matching("d", "pieces", query, sort={"_id": 1}, limit=12)
    assert found == expected
    assert [doc["_id"][:6] for doc in found[:6]] == ["run100"] * 6
    # the 12 live pieces, the expired ones between them and the collection's catalog entries:
    # 2,000 before the walk
    assert decoded[0] <= 30


def test_a_claim_decodes_the_jobs_before_the_first_claimable_one_not_the_queue(
    stores: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stock, walking = stores
    query = {"queue": "default", "due_at": {"$lte": 50.0}, **CLAIMABLE}
    sort = {"due_at": 1, "_id": 1}
    expected = stock.find_matching("d", "jobs", query, sort=sort, limit=1)
    decoded = _decoding(monkeypatch)
    found = walking.find_matching("d", "jobs", query, sort=sort, limit=1)
    assert found == expected and found[0]["_id"] == "job0001"
    # four jobs (three leased ones first) and the collection's catalog entries: 300 before
    assert decoded[0] <= 20


def test_a_claims_write_reasserting_the_query_reads_the_claimed_job_only(
    stores: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stock, walking = stores
    query = {"queue": "default", "due_at": {"$lte": 50.0}, **CLAIMABLE}
    lease = {"$set": {"lease": "mine", "lease_until": 60.0}}
    # findAndModify's write: the matched _id plus the query again (a stolen job matches nothing)
    stock.update_matching("d", "jobs", {"_id": "job0001", "$and": [query]}, lease)
    decoded = _decoding(monkeypatch)
    walking.update_matching("d", "jobs", {"_id": "job0001", "$and": [query]}, lease)
    assert decoded[0] <= 20  # of 300, with the catalog entries
    walking.update_matching("d", "jobs", {"_id": "job0000", "$and": [query]}, lease)  # leased
    for store in (stock, walking):
        leases = {doc["_id"]: doc["lease"] for doc in store.find_matching("d", "jobs", {})}
        assert leases["job0001"] == "mine" and leases["job0000"] is None


def test_an_indexed_scan_with_an_expiry_filter_walks_its_index(
    stores: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stock, walking = stores
    query = {"idx": "run007", "_id": {"$gt": "run007/base/00000002"}, **LIVE}
    expected = stock.find_matching("d", "pieces", query, sort={"_id": 1}, limit=3)
    decoded = _decoding(monkeypatch)
    assert walking.find_matching("d", "pieces", query, sort={"_id": 1}, limit=3) == expected
    assert decoded[0] <= 20  # of 2,000


def test_the_walks_return_what_a_collection_scan_returns(stores: tuple[Any, Any]) -> None:
    stock, walking = stores
    rng = random.Random(7)
    for _ in range(120):
        narrowing: dict[str, Any] = rng.choice([{}, LIVE, CLAIMABLE, {"$nor": [{"exp": None}]}])
        query: dict[str, Any]
        sort: dict[str, int]
        shape = rng.randrange(4)
        if shape == 0:
            bounds = {op: f"run{rng.randrange(210):03d}/" + rng.choice(["", "base/0000000"])
                      for op in rng.sample(["$gt", "$gte", "$lt", "$lte"], rng.randrange(3))}
            collection, query, sort = "pieces", {**narrowing}, {"_id": 1}
            if bounds:
                query["_id"] = bounds
        elif shape == 1:
            op = rng.choice(["$lt", "$lte", "$gt", "$gte"])
            collection, sort = "jobs", rng.choice([{"due_at": 1, "_id": 1}, {"due_at": 1}])
            query = {"queue": "default", "due_at": {op: float(rng.randrange(125))}, **narrowing}
        elif shape == 2:
            collection, sort = "pieces", {"_id": 1}
            query = {"idx": f"run{rng.randrange(210):03d}", **narrowing}
        else:
            collection, sort = "jobs", {"due_at": 1, "_id": 1}
            query = {"queue": rng.choice(["default", "other"]), **narrowing}
        skip, limit = rng.choice([0, 0, 2]), rng.randrange(1, 15)
        expected = stock.find_matching("d", collection, query, sort=sort, skip=skip,
                                       limit=limit, hint={"$natural": 1})
        found = walking.find_matching("d", collection, query, sort=sort, skip=skip,
                                      limit=limit)
        keys = list(sort)
        assert [[doc.get(key) for key in keys] for doc in found] == \
            [[doc.get(key) for key in keys] for doc in expected], (query, sort, skip, limit)
        if keys[-1] == "_id":
            assert found == expected, (query, sort, skip, limit)
