"""Fixtures of the DynamoDB/SQS adapter tests: boto3 clients on moto's server.

moto runs as a server (``$REACTOR_TEST_MOTO_URL``, started by scripts/test), never patched in
process. Every test uses fresh table and queue names (moto state is shared by the whole run,
and PurgeQueue is limited to once per 60 s).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest


@pytest.fixture
def moto_url(service_url: Callable[[str], str]) -> str:
    """The moto server's endpoint URL."""
    return service_url("moto")


@pytest.fixture
def dynamodb_client(moto_url: str) -> Iterator[Any]:
    """A DynamoDB client on moto."""
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=moto_url)
    yield client
    client.close()


@pytest.fixture
def sqs_client(moto_url: str) -> Iterator[Any]:
    """An SQS client on moto."""
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_url)
    yield client
    client.close()


@pytest.fixture
def unique() -> str:
    """A fresh name suffix for tables and queues."""
    return uuid.uuid4().hex[:10]
