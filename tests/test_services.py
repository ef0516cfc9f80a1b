"""Smoke tests of the services scripts/test starts: each one answers real commands.

These prove the test infrastructure, not reactor: if one fails, the adapter tests that follow
would fail for a reason that has nothing to do with the adapter.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import boto3
import pymongo
import pytest
import redis
from botocore.config import Config
from redis.cluster import RedisCluster

from tests.services import ServiceUnavailable, cluster_startup_node, mongodb_urls, service_url

ServiceUrl = Callable[[str], str]

_AWS_CONFIG = Config(
    region_name="us-east-1",
    connect_timeout=5,
    read_timeout=30,
    retries={"max_attempts": 2, "mode": "standard"},
)


@pytest.mark.redis
def test_redis_standalone_answers(service_url: ServiceUrl) -> None:
    url = service_url("redis")
    client = redis.Redis.from_url(url, socket_timeout=5, decode_responses=True)
    try:
        assert client.ping() is True
        assert client.connection_pool.connection_kwargs["port"] != 6379
        key = f"reactor-test:{uuid.uuid4()}"
        assert client.set(key, "v1", nx=True, px=10_000) is True
        assert client.set(key, "v2", nx=True, px=10_000) is None
        assert client.get(key) == "v1"
        assert client.delete(key) == 1
        assert client.config_get("save")["save"] == ""
    finally:
        client.close()


@pytest.mark.redis
def test_redis_cluster_has_three_masters_and_routes_keys(service_url: ServiceUrl) -> None:
    host, port = cluster_startup_node(service_url("redis_cluster"))
    client = RedisCluster(host=host, port=port, socket_timeout=5, decode_responses=True)
    try:
        assert client.ping() is True
        primaries = client.get_primaries()
        assert len(primaries) == 3
        info = client.cluster_info(target_nodes=RedisCluster.PRIMARIES)
        assert {node_info["cluster_state"] for node_info in info.values()} == {"ok"}
        # Keys land on different slots, hence (with 3 masters) on different nodes.
        keys = [f"reactor-test:{uuid.uuid4()}:{i}" for i in range(12)]
        for i, key in enumerate(keys):
            assert client.set(key, str(i), px=10_000) is True
        assert len({client.keyslot(k) for k in keys}) > 1
        assert [client.get(k) for k in keys] == [str(i) for i in range(12)]
        # Multi-key Lua works when every key shares a hash tag.
        tag = f"{{reactor-test:{uuid.uuid4()}}}"
        script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[2])"
        client.set(f"{tag}:b", "b-value", px=10_000)
        assert client.eval(script, 2, f"{tag}:a", f"{tag}:b", "a-value") == "b-value"
        assert client.get(f"{tag}:a") == "a-value"
        assert client.delete(*keys, f"{tag}:a", f"{tag}:b") == len(keys) + 2
    finally:
        client.close()


@pytest.mark.dynamodb
def test_moto_dynamodb_lists_created_table(service_url: ServiceUrl) -> None:
    endpoint = service_url("moto")
    client = boto3.client("dynamodb", endpoint_url=endpoint, config=_AWS_CONFIG)
    table = f"reactor-test-{uuid.uuid4().hex}"
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        assert table in client.list_tables()["TableNames"]
        client.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(
                TableName=table,
                Item={"pk": {"S": "a"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        item = client.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]
        assert item["n"] == {"N": "1"}
    finally:
        client.delete_table(TableName=table)
    assert table not in client.list_tables()["TableNames"]


@pytest.mark.dynamodb
def test_moto_sqs_lists_created_queue_and_delivers(service_url: ServiceUrl) -> None:
    endpoint = service_url("moto")
    client = boto3.client("sqs", endpoint_url=endpoint, config=_AWS_CONFIG)
    name = f"reactor-test-{uuid.uuid4().hex}"
    queue_url = client.create_queue(QueueName=name)["QueueUrl"]
    try:
        assert queue_url in client.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
        client.send_message(QueueUrl=queue_url, MessageBody='{"kind":"run"}')
        messages = client.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=5
        ).get("Messages", [])
        assert [m["Body"] for m in messages] == ['{"kind":"run"}']
        client.delete_message(QueueUrl=queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
    finally:
        client.delete_queue(QueueUrl=queue_url)


@pytest.mark.mongodb
def test_mongodb_wire_server_pings_and_stores(mongodb_service_urls: list[str]) -> None:
    for url in mongodb_service_urls:
        client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
            url, serverSelectionTimeoutMS=5000, tz_aware=True
        )
        try:
            assert client.admin.command("ping")["ok"] == 1
            collection = client["reactor_test"][f"smoke_{uuid.uuid4().hex}"]
            collection.insert_one({"_id": "run-1", "status": "pending"})
            updated = collection.find_one_and_update(
                {"_id": "run-1", "status": "pending"},
                {"$set": {"status": "running"}},
                return_document=pymongo.ReturnDocument.AFTER,
            )
            assert updated == {"_id": "run-1", "status": "running"}
            collection.drop()
        finally:
            client.close()


def test_missing_service_names_scripts_test_outside_ci() -> None:
    with pytest.raises(ServiceUnavailable) as info:
        service_url("redis", environ={})
    assert info.value.variable == "REACTOR_TEST_REDIS_URL"
    assert "scripts/test" in str(info.value)


def test_missing_service_in_ci_says_it_is_required() -> None:
    with pytest.raises(ServiceUnavailable, match="requires every service"):
        service_url("moto", environ={"CI": "true"})
    with pytest.raises(ServiceUnavailable, match="requires every service"):
        service_url("moto", environ={"REACTOR_REQUIRE_SERVICES": "1"})


def test_real_mongodb_is_optional_and_added_after_the_wire_server() -> None:
    wire = "mongodb://127.0.0.1:1/?directConnection=true"
    assert mongodb_urls({"REACTOR_TEST_MONGODB_WIRE_URL": wire}) == [wire]
    real = "mongodb://db.example:27017/"
    env = {"REACTOR_TEST_MONGODB_WIRE_URL": wire, "REACTOR_TEST_MONGODB_URL": real}
    assert mongodb_urls(env) == [wire, real]


def test_cluster_url_parsing() -> None:
    assert cluster_startup_node("redis+cluster://127.0.0.1:7001") == ("127.0.0.1", 7001)
    with pytest.raises(ValueError):
        cluster_startup_node("redis://127.0.0.1:7001")
