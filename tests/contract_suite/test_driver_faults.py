"""The contract suite's fault injector, per driver, against the real test services
(docs/contract-suite.md, "Faults injected at the driver"): it counts every request of its
client, fails exactly the Nth one after arming with the driver's own exception, applies the
request before an ``applied_then_timeout``, leaves other clients alone, counts only the arming
thread, and restores everything on uninstall."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from reactor_contract.driver_faults import (
    APPLIED_THEN_TIMEOUT,
    KINDS,
    PERMISSION,
    THROTTLED,
    TRANSIENT,
    VALIDATION,
    FaultInjector,
    UnsupportedDriver,
    driver_name,
)


def _fails_nth(faults: FaultInjector, call: Callable[[], Any], kind: str,
               expected: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException:
    """Arm request 3 with ``kind``: calls 1 and 2 pass, 3 raises ``expected``, 4 passes."""
    faults.arm(3, kind)
    call()
    call()
    with pytest.raises(expected) as raised:
        call()
    call()
    assert faults.requests == 4
    assert [f.number for f in faults.fired] == [3]
    assert faults.fired[0].error is raised.value
    assert faults.fired[0].kind == kind
    return raised.value


# -- redis-py --------------------------------------------------------------------------------


@pytest.fixture(params=["redis", "redis_cluster"])
def redis_client(request: pytest.FixtureRequest, service_url: Callable[[str], str]
                 ) -> Iterator[Any]:
    import redis
    from redis.cluster import RedisCluster

    url = service_url(request.param)
    client: Any
    if request.param == "redis_cluster":
        client = RedisCluster.from_url(url.replace("redis+cluster://", "redis://"),
                                       decode_responses=True)
    else:
        client = redis.Redis.from_url(url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


def test_redis_commands_scripts_and_pipelines_are_counted_and_failed(redis_client: Any) -> None:
    import redis

    key = f"faults-{uuid.uuid4().hex}"
    script = redis_client.register_script("return redis.call('INCR', KEYS[1])")
    script(keys=[key])  # loaded now: each later call is one EVALSHA
    bound_before = redis_client.execute_command  # bound before the install: still caught
    owner = SimpleNamespace(client=redis_client)
    with FaultInjector([(owner, "client")]) as faults:
        assert faults.drivers == ["redis"]
        _fails_nth(faults, lambda: redis_client.get(key), TRANSIENT, redis.ConnectionError)
        _fails_nth(faults, lambda: script(keys=[key]), PERMISSION, redis.ResponseError)
        _fails_nth(faults, lambda: bound_before("GET", key), VALIDATION, redis.ResponseError)
        _fails_nth(faults, lambda: redis_client.time(), THROTTLED, redis.RedisError)

        def pipelined() -> Any:
            pipe = redis_client.pipeline(transaction=False)
            pipe.get(key)
            pipe.get(key)
            return pipe.execute()

        _fails_nth(faults, pipelined, TRANSIENT, redis.ConnectionError)
        faults.arm(1, APPLIED_THEN_TIMEOUT)
        with pytest.raises(redis.TimeoutError):
            redis_client.set(key, "applied")
        faults.disarm()
        assert redis_client.get(key) == "applied"
    assert "_execute_command" not in vars(redis_client)
    assert "_internal_execute_command" not in vars(redis_client)
    assert "pipeline" not in vars(redis_client)
    counted = faults.requests
    redis_client.delete(key)
    assert faults.requests == counted  # uninstalled: nothing is counted any more


# -- pymongo and mongomock -------------------------------------------------------------------


@pytest.fixture(params=["mongodb_wire", "mongomock"])
def mongo_client(request: pytest.FixtureRequest, service_url: Callable[[str], str]
                 ) -> Iterator[Any]:
    if request.param == "mongomock":
        import mongomock

        client: Any = mongomock.MongoClient()
    else:
        import pymongo

        client = pymongo.MongoClient(service_url("mongodb_wire"))
    try:
        yield client
    finally:
        client.close()


def test_mongodb_collection_and_database_calls_are_counted_and_failed(mongo_client: Any) -> None:
    import mongomock
    import mongomock.collection
    import pymongo.collection
    from pymongo import errors

    database = mongo_client["reactor_faults"]
    name = f"faults_{uuid.uuid4().hex[:10]}"
    collection = database[name]
    classes = (pymongo.collection.Collection, mongomock.collection.Collection)
    before = {(cls, "find_one"): cls.__dict__["find_one"] for cls in classes}
    other: Any = mongomock.MongoClient()
    try:
        with FaultInjector([(database, "client")]) as faults:
            assert faults.drivers == ["pymongo"]
            # find_one calls find inside: one request
            _fails_nth(faults, lambda: collection.find_one({"_id": 1}), PERMISSION,
                       errors.OperationFailure)
            assert faults.fired[0].error.code == 13  # type: ignore[attr-defined]
            _fails_nth(faults, lambda: collection.count_documents({}), VALIDATION,
                       errors.OperationFailure)
            assert faults.fired[0].error.code == 2  # type: ignore[attr-defined]
            _fails_nth(faults, lambda: database.list_collection_names(), TRANSIENT,
                       errors.AutoReconnect)
            faults.arm(1, APPLIED_THEN_TIMEOUT)
            with pytest.raises(errors.NetworkTimeout):
                collection.insert_one({"_id": "applied"})
            faults.disarm()
            assert collection.find_one({"_id": "applied"}) == {"_id": "applied"}
            faults.arm(1, TRANSIENT)
            other["x"]["y"].find_one({})  # another client: neither counted nor failed
            assert faults.requests == 0
        for (cls, method), original in before.items():
            assert cls.__dict__[method] is original
    finally:
        database.drop_collection(name)
        other.close()


# -- boto3 / botocore ------------------------------------------------------------------------


def test_boto3_calls_are_counted_and_failed_through_the_event_system(
    service_url: Callable[[str], str],
) -> None:
    import boto3
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    endpoint = service_url("moto")
    sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    name = f"faults-{uuid.uuid4().hex[:10]}"
    try:
        with FaultInjector([(SimpleNamespace(c=sqs), "c")]) as faults:
            assert faults.drivers == ["botocore"]
            _fails_nth(faults, lambda: sqs.list_queues(), TRANSIENT, EndpointConnectionError)
            for kind, code in ((THROTTLED, "ThrottlingException"),
                               (PERMISSION, "AccessDeniedException"),
                               (VALIDATION, "ValidationException")):
                error = _fails_nth(faults, lambda: sqs.list_queues(), kind, ClientError)
                assert error.response["Error"]["Code"] == code  # type: ignore[attr-defined]
            faults.arm(1, APPLIED_THEN_TIMEOUT)
            with pytest.raises(ReadTimeoutError):
                sqs.create_queue(QueueName=name)
            faults.disarm()
            assert any(url.endswith("/" + name)
                       for url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []))
            faults.arm(1, TRANSIENT)
            dynamodb.list_tables()  # another client: neither counted nor failed
            assert faults.requests == 0
        sqs.list_queues()  # handlers gone
    finally:
        for url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []):
            sqs.delete_queue(QueueUrl=url)
        sqs.close()
        dynamodb.close()


# -- sqlite3 ---------------------------------------------------------------------------------


def test_sqlite_statements_are_counted_and_failed_through_a_proxy(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "faults.db", isolation_level=None)
    owner = SimpleNamespace(conn=connection)
    try:
        connection.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
        with FaultInjector([(owner, "conn")]) as faults:
            assert faults.drivers == ["sqlite3"]
            assert owner.conn is not connection
            _fails_nth(faults, lambda: owner.conn.execute("SELECT 1").fetchall(), TRANSIENT,
                       sqlite3.OperationalError)
            _fails_nth(faults, lambda: owner.conn.cursor().execute("SELECT 1"), VALIDATION,
                       sqlite3.DatabaseError)
            faults.arm(1, APPLIED_THEN_TIMEOUT)
            with pytest.raises(sqlite3.OperationalError):
                owner.conn.execute("INSERT INTO t VALUES ('applied')")
            faults.disarm()
            assert owner.conn.execute("SELECT k FROM t").fetchall() == [("applied",)]
            with owner.conn as entered:
                entered.execute("SELECT 1")
        assert owner.conn is connection
    finally:
        connection.close()


# -- psycopg ---------------------------------------------------------------------------------


def test_psycopg_pool_statements_are_counted_and_failed(
    service_url: Callable[[str], str],
) -> None:
    import psycopg
    from psycopg import errors, sql
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(service_url("postgres"), min_size=1, max_size=2,
                          kwargs={"autocommit": True}, open=True)
    table = sql.Identifier(f"faults_{uuid.uuid4().hex[:10]}")
    holder = SimpleNamespace(pool=pool)
    try:
        with pool.connection() as conn:
            conn.execute(sql.SQL("CREATE TABLE {} (k text)").format(table))

        def select() -> Any:
            with pool.connection() as conn:
                return conn.execute("SELECT 1").fetchone()

        with FaultInjector([(holder, "pool")]) as faults:
            assert faults.drivers == ["psycopg"]
            _fails_nth(faults, select, TRANSIENT, psycopg.OperationalError)
            _fails_nth(faults, select, PERMISSION, errors.InsufficientPrivilege)
            _fails_nth(faults, select, VALIDATION, errors.DataError)

            def cursor_select() -> Any:
                with pool.connection() as conn, conn.cursor() as cursor:
                    return cursor.execute("SELECT 1").fetchone()

            _fails_nth(faults, cursor_select, THROTTLED, psycopg.OperationalError)
            faults.arm(1, APPLIED_THEN_TIMEOUT)
            with pytest.raises(psycopg.OperationalError), pool.connection() as conn:
                conn.execute(sql.SQL("INSERT INTO {} VALUES ('applied')").format(table))
            faults.disarm()
            with pool.connection() as conn:
                rows = conn.execute(sql.SQL("SELECT k FROM {}").format(table)).fetchall()
            assert rows == [("applied",)]
        assert "connection" not in vars(pool)
    finally:
        with pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        pool.close()


# -- the injector itself ---------------------------------------------------------------------


def test_only_the_arming_thread_is_counted(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "t.db", check_same_thread=False)
    owner = SimpleNamespace(conn=connection)
    try:
        with FaultInjector([(owner, "conn")]) as faults:
            faults.arm(1, TRANSIENT)
            thread = threading.Thread(target=lambda: owner.conn.execute("SELECT 1"))
            thread.start()
            thread.join()
            assert faults.requests == 0 and faults.fired == []
            with pytest.raises(sqlite3.OperationalError):
                owner.conn.execute("SELECT 1")
    finally:
        connection.close()


def test_an_unknown_client_or_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedDriver, match="no fault injector"):
        FaultInjector([(SimpleNamespace(c=object()), "c")])
    with pytest.raises(ValueError):
        FaultInjector([])
    connection = sqlite3.connect(tmp_path / "k.db")
    try:
        assert driver_name(connection) == "sqlite3"
        faults = FaultInjector([(SimpleNamespace(c=connection), "c")])
        with pytest.raises(ValueError, match="unknown fault kind"):
            faults.arm(1, "meteor")
        with pytest.raises(ValueError):
            faults.arm(0, TRANSIENT)
        assert set(KINDS) == {TRANSIENT, THROTTLED, PERMISSION, VALIDATION, APPLIED_THEN_TIMEOUT}
    finally:
        connection.close()


# -- regressions: a retried dead_letter is one dead letter -------------------------------------


@pytest.fixture(params=["mongomock", "sqs"])
def router_and_probe(request: pytest.FixtureRequest, service_url: Callable[[str], str]
                     ) -> Iterator[tuple[Any, Any]]:
    from reactor_contract.probe import load_router_probe

    from reactor.config import router_from_url

    token = f"df{uuid.uuid4().hex[:10]}"
    if request.param == "sqs":
        url = (f"sqs://faults-{token}?region=us-east-1&endpoint_url={service_url('moto')}"
               "&visibility_timeout=1")
    else:
        url = f"mongomock://faults/reactor?prefix={token}&visibility_timeout=1"
    router = router_from_url(url)
    probe: Any = load_router_probe(url, router)
    try:
        yield router, probe
    finally:
        probe.purge_namespace()
        router.close()


@pytest.mark.parametrize("kind", [APPLIED_THEN_TIMEOUT, TRANSIENT])
def test_a_dead_letter_retried_after_its_first_write_is_one_dead_letter(
    router_and_probe: tuple[Any, Any], kind: str
) -> None:
    """The MongoDB router inserted a second dead letter, and the SQS router sent a second DLQ
    copy, when ``dead_letter`` was retried after its first write went through (its reply
    lost, or the delete after it failed): the job was listed, and requeued, twice."""
    from reactor.errors import RouterError
    from reactor.ports.router import Job

    router, probe = router_and_probe
    job = Job(kind="run", payload={"context_id": "c1", "reactor": "orders"})
    router.enqueue(job)
    delivery = None
    for _ in range(20):
        got = router.receive(max_jobs=1, wait_seconds=0.5)
        if got:
            delivery = got[0]
            break
    assert delivery is not None
    with FaultInjector(probe.driver_clients()) as faults:
        # applied_then_timeout: the first write applied, its reply lost; transient: the write
        # after it (the delete from the queue) never sent
        # the requests of dead_letter: MongoDB find_one, the letter, the delete; SQS the send
        # to the DLQ, the delete
        letter, delete = (2, 3) if faults.drivers == ["pymongo"] else (1, 2)
        faults.arm(letter if kind == APPLIED_THEN_TIMEOUT else delete, kind)
        with pytest.raises(RouterError):
            router.dead_letter(delivery, "poison")
        assert faults.fired, faults.seen
    router.dead_letter(delivery, "poison")
    letters = [d for d in router.dead_letters(limit=100) if job.id in d.body]
    assert len(letters) == 1, letters
    assert router.get_dead_letter(letters[0].id) == letters[0]
    assert router.requeue_dead_letter(letters[0].id) == job.id
    assert [d for d in router.dead_letters(limit=100) if job.id in d.body] == []
    again: list[Any] = []
    for _ in range(8):  # longer than the 1 s visibility: an unacked copy would show twice
        for got in router.receive(max_jobs=10, wait_seconds=0.3):
            router.ack(got)
            again.append(got.job.id)
    assert again == [job.id]
