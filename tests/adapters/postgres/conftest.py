"""Fixtures of the PostgreSQL adapter tests (docs/adapters/postgres.md): the private cluster
scripts/test starts (``REACTOR_TEST_POSTGRES_URL``), one fresh schema per test, dropped after."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql


@pytest.fixture
def pg_url(service_url: Callable[[str], str]) -> str:
    """The cluster's URL (fails, never skips, when scripts/test did not start it)."""
    return service_url("postgres")


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A schema name no other test uses; the schema is dropped when the test ends."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def schema_url(pg_url: str, schema: str) -> str:
    """The cluster's URL with ``?schema=`` set to the test's own schema."""
    return f"{pg_url}?schema={schema}"
