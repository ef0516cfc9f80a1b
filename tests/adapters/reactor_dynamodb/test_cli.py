"""``reactor dynamodb create-table``: the typer sub-app and :func:`create_table` on moto."""

from __future__ import annotations

from typing import Any

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
