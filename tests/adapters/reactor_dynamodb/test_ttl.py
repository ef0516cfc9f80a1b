"""The DynamoDB storage verifies its table's TTL setting on every start (moto's server).

docs/adapters/dynamodb.md, "TTL on every start": an existing table whose TTL is off gets it
enabled on ``expires_at``; a table whose TTL is on is only described; when TTL cannot be
enabled the storage still starts and logs one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import reactor_dynamodb
from botocore.exceptions import ClientError
from reactor_dynamodb._aws import make_client as real_make_client
from reactor_dynamodb.documents import DynamoDocumentStore

TTL_EVENT = "event=dynamodb_ttl_unavailable"


@pytest.fixture
def table(dynamodb_client: Any, unique: str) -> Iterator[str]:
    """A table created by hand, without any TTL setting."""
    name = f"ttl-{unique}"
    dynamodb_client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    )
    yield name
    dynamodb_client.delete_table(TableName=name)


@pytest.fixture
def ttl_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Counts the storage clients' TTL requests; set ``deny`` to make UpdateTimeToLive fail."""
    seen: dict[str, Any] = {"describe": 0, "update": 0, "deny": False}

    def describe(**_: Any) -> None:
        seen["describe"] += 1

    def update(**_: Any) -> None:
        seen["update"] += 1
        if seen["deny"]:
            raise ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}},
                "UpdateTimeToLive",
            )

    def make_client(*args: Any, **kwargs: Any) -> Any:
        client = real_make_client(*args, **kwargs)
        client.meta.events.register("before-call.dynamodb.DescribeTimeToLive", describe)
        client.meta.events.register("before-call.dynamodb.UpdateTimeToLive", update)
        return client

    monkeypatch.setattr("reactor_dynamodb.make_client", make_client)
    return seen


def _url(table: str, moto_url: str) -> str:
    return f"dynamodb://{table}?region=us-east-1&endpoint_url={moto_url}"


def _ttl(dynamodb_client: Any, table: str) -> dict[str, Any]:
    out: dict[str, Any] = dynamodb_client.describe_time_to_live(TableName=table)
    return dict(out["TimeToLiveDescription"])


def test_an_existing_table_without_ttl_gets_it_on_start_once(
    table: str, moto_url: str, dynamodb_client: Any, ttl_calls: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _ttl(dynamodb_client, table)["TimeToLiveStatus"] == "DISABLED"
    with caplog.at_level(logging.INFO, logger="reactor_dynamodb"):
        reactor_dynamodb.storage_from_url(_url(table, moto_url)).documents.close()
    ttl = _ttl(dynamodb_client, table)
    assert ttl["TimeToLiveStatus"] in ("ENABLED", "ENABLING")
    assert ttl["AttributeName"] == "expires_at"
    assert ttl_calls == {"describe": 1, "update": 1, "deny": False}
    assert "event=dynamodb_ttl_enabled" in caplog.text

    reactor_dynamodb.storage_from_url(_url(table, moto_url)).documents.close()  # idempotent
    assert ttl_calls == {"describe": 2, "update": 1, "deny": False}
    assert TTL_EVENT not in caplog.text


def test_a_start_that_cannot_enable_ttl_warns_and_still_starts(
    table: str, moto_url: str, dynamodb_client: Any, ttl_calls: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ttl_calls["deny"] = True
    with caplog.at_level(logging.WARNING, logger="reactor_dynamodb"):
        storage = reactor_dynamodb.storage_from_url(_url(table, moto_url))
    try:
        assert storage.now() > 0
    finally:
        storage.documents.close()
    assert ttl_calls["update"] == 1
    [warning] = [r for r in caplog.records if TTL_EVENT in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert table in warning.getMessage() and "not authorized" in warning.getMessage()
    assert _ttl(dynamodb_client, table)["TimeToLiveStatus"] == "DISABLED"


@pytest.mark.parametrize("attribute", ["deleted_at", "purge_at"])
def test_ttl_on_another_attribute_is_left_alone_and_warned_about(
    table: str, attribute: str, dynamodb_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A table whose TTL is enabled on another attribute (named before or after
    ``expires_at``) keeps it: ``ensure_ttl`` answers ``False`` with a warning that expired
    items will not be purged."""
    dynamodb_client.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
    )
    store = DynamoDocumentStore(dynamodb_client, table)
    with caplog.at_level(logging.WARNING, logger="reactor_dynamodb"):
        assert store.ensure_ttl() is False
    assert "TTL is enabled on another attribute" in caplog.text
    assert _ttl(dynamodb_client, table)["AttributeName"] == attribute
