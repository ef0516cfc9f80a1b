"""``reactor dynamodb create-table``: the typer sub-app and :func:`create_table` on moto."""

from __future__ import annotations

import time
from typing import Any

import botocore.client
import pytest
from botocore.exceptions import ClientError
from reactor_dynamodb import create_table
from reactor_dynamodb.cli import app
from reactor_dynamodb.documents import GSI_NAME
from typer.testing import CliRunner


def _url(moto_url: str, table: str) -> str:
    return f"dynamodb://{table}?region=us-east-1&endpoint_url={moto_url}"


def test_create_table_creates_once(moto_url: str, unique: str, dynamodb_client: Any) -> None:
    table = f"cli-{unique}"
    assert create_table(_url(moto_url, table)) is True
    assert create_table(_url(moto_url, table)) is False
    described = dynamodb_client.describe_table(TableName=table)["Table"]
    assert [g["IndexName"] for g in described["GlobalSecondaryIndexes"]] == [GSI_NAME]
    ttl = dynamodb_client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at"


def test_a_create_whose_answer_was_lost_and_retried_still_counts_as_created(
    moto_url: str, unique: str, dynamodb_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's first ``CreateTable`` attempt creates the table but its answer is lost (a
    read timeout on a loaded server); botocore's retry gets ``ResourceInUseException``. The
    call made the table, so it reports ``True``, and a later call ``False`` (as does a retried
    request for a table that existed before the call started)."""
    real = botocore.client.BaseClient._make_api_call
    lost = {"CreateTable"}

    def lose_the_first_answer(self: Any, operation: str, params: dict[str, Any]) -> Any:
        answer = real(self, operation, params)
        if operation in lost:
            lost.discard(operation)
            raise ClientError(
                {"Error": {"Code": "ResourceInUseException", "Message": "Table already exists"},
                 "ResponseMetadata": {"RetryAttempts": 1}},
                operation,
            )
        return answer

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", lose_the_first_answer)
    table = f"cli-{unique}"
    assert create_table(_url(moto_url, table)) is True
    # the retry meets a table made before this call started (no clock slack): not its own
    made = dynamodb_client.describe_table(TableName=table)["Table"]["CreationDateTime"]
    while time.time() <= made.timestamp():  # moto's timestamps are this machine's clock
        time.sleep(0.01)
    lost.add("CreateTable")
    monkeypatch.setattr("reactor_dynamodb.documents.CREATED_BY_RETRY_SLACK", 0.0)
    assert create_table(_url(moto_url, table)) is False


def test_cli_reports_created_then_exists(moto_url: str, unique: str) -> None:
    runner = CliRunner()
    url = _url(moto_url, f"cli2-{unique}")
    first = runner.invoke(app, ["create-table", url])
    assert first.exit_code == 0 and first.output.strip() == "created"
    second = runner.invoke(app, ["create-table", url, "--no-wait"])
    assert second.exit_code == 0 and second.output.strip() == "exists"


def test_cli_rejects_a_non_dynamodb_url() -> None:
    result = CliRunner().invoke(app, ["create-table", "redis://127.0.0.1:1/0"])
    assert result.exit_code == 2
