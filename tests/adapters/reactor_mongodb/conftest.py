"""Fixtures of the MongoDB adapter tests: one database per test on every MongoDB backend.

Backends: ``mongomock`` (in-process), ``wire`` (SecantusDB from scripts/test) and ``real``
(``$REACTOR_TEST_MONGODB_URL``, only when exported). Each test gets a fresh database name.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from reactor_mongodb.testing import client_for

from tests.services import ServiceUnavailable, mongodb_urls

_BACKENDS = ["mongomock", "wire"]
if os.environ.get("REACTOR_TEST_MONGODB_URL", "").strip():
    _BACKENDS.append("real")


@pytest.fixture(params=_BACKENDS)
def mongo_db(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """``(backend name, database)``: a fresh database on one backend, dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:12]}"
    if request.param == "mongomock":
        client: Any = client_for(name)
        yield "mongomock", client[name]
        return
    try:
        urls = mongodb_urls()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    url = urls[0] if request.param == "wire" else urls[-1]
    client = MongoClient(url, serverSelectionTimeoutMS=5000)
    try:
        yield request.param, client[name]
    finally:
        client.drop_database(name)
        client.close()
