"""A contract run leaves no data behind, and the Redis, MongoDB, DynamoDB + SQS and PostgreSQL
adapters are certified (docs/contract-suite.md, "Cleanup: nothing left behind" and "Verdicts").

Each test runs ``reactor contract`` (``reactor_contract.cli.run`` in a subprocess, from an
empty directory so this repository's pytest settings do not apply) on a selection of the suite
that writes into every concern, then looks into the backend: nothing with the run's prefix may
remain. The runs use a ``?prefix=`` of their own (on DynamoDB a table, on PostgreSQL a schema of
their own too), so a run beside them on the same server is never counted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: Tests that write into every concern, with their fence tombstones, and the ones an adapter
#: may be stronger than (size limits, clock skew, bodies a transport cannot carry).
SELECTION = (
    "cleanup or share_nothing or round_trips or fencing or tombstone or document_limit "
    "or skewed or poison or dead_letter or ordered or semaphore or rate or period"
)
#: The router ``reactor contract`` uses when none is given.
LOCAL = "local://?visibility_timeout=1"
#: Seconds one selected run may take.
RUN_TIMEOUT = 600.0

#: Each test waits for its run (up to :data:`RUN_TIMEOUT`) and then checks the backend: the
#: suite's default per-test timeout (300 s) would cut a run on a slow test server short of its
#: own bound (the DynamoDB + SQS run took over 300 s on moto with two suites on the machine).
pytestmark = pytest.mark.timeout(RUN_TIMEOUT + 120)


def run_contract(
    tmp_path: Path, storage: str, router: str | None = None, *extra: str
) -> tuple[int, dict[str, Any], str]:
    """``reactor contract`` in a subprocess: ``(exit code, verdict JSON, output)``."""
    verdict = tmp_path / "verdict.json"
    code = (
        "import sys; from reactor_contract.cli import run; "
        "sys.exit(run(sys.argv[1], sys.argv[2] or None, sys.argv[4:], json_path=sys.argv[3]))"
    )
    args = [sys.executable, "-c", code, storage, router or "", str(verdict),
            "-q", "-p", "no:cacheprovider", "-k", SELECTION, *extra]
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    done = subprocess.run(args, cwd=workdir, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, env=dict(os.environ), check=False)
    output = done.stdout + done.stderr
    assert verdict.exists(), output[-4000:]
    return done.returncode, json.loads(verdict.read_text()), output


def _verdict_lines(verdict: dict[str, Any]) -> str:
    """The verdict, its gaps and its not-applicable lines, for an assertion message."""
    return (f"verdict {verdict['verdict']!r}, gaps {verdict['gaps']}, "
            f"not applicable {verdict['not_applicable']}")


def _assert_clean_run(verdict: dict[str, Any], output: str) -> None:
    assert verdict["failures"] == [], output[-4000:]
    assert verdict["concerns"]["cleanup"]["verdict"] == "ok", output[-4000:]
    cleanup = verdict["cleanup"]
    assert cleanup["namespaces_left_unpurged"] == 0 and cleanup["errors"] == [], cleanup
    assert cleanup["namespaces_purged"] > 20 and cleanup["records_deleted"] > 0, cleanup
    assert "nothing left behind" in output


def test_a_memory_run_purges_every_namespace(tmp_path: Path) -> None:
    """The reference adapters empty every namespace they opened and are certified without a
    gap: an in-process store has no driver to inject faults into, which is not applicable,
    not a gap."""
    code, verdict, output = run_contract(tmp_path, "memory://", LOCAL)
    assert code == 0 and verdict["gaps"] == [], f"{_verdict_lines(verdict)}\n{output[-4000:]}"
    _assert_clean_run(verdict, output)


def test_a_sqlite_run_leaves_no_row_behind(tmp_path: Path) -> None:
    """The third-party-style SQLite example empties its documents table: no row remains."""
    database = tmp_path / "contract.db"
    code, verdict, output = run_contract(tmp_path, f"sqlite://{database}", LOCAL)
    # 6 for its one declared gap, signals (when the selection reaches them)
    assert code in (0, 6), f"{_verdict_lines(verdict)}\n{output[-4000:]}"
    assert all(g.startswith("signals:") for g in verdict["gaps"]), verdict["gaps"]
    _assert_clean_run(verdict, output)
    with sqlite3.connect(database) as connection:
        left = connection.execute("SELECT collection, key FROM documents").fetchall()
    assert left == [], f"{len(left)} rows left behind, e.g. {left[:5]}"


@pytest.mark.parametrize("service", ["redis", "redis_cluster"])
def test_the_redis_adapter_is_certified_and_leaves_no_key_behind(
    tmp_path: Path, service_url: Callable[[str], str], service: str
) -> None:
    """The flagship is stronger than some tests' premises (no size limit, a server clock):
    those are not gaps, so the verdict is "certified" (exit 0), and every key the run wrote
    under its prefix is gone, on every primary of a cluster too."""
    import redis
    from redis.cluster import RedisCluster

    base = service_url(service)
    prefix = f"cleanup-{uuid.uuid4().hex[:8]}"
    url = f"{base}{'&' if '?' in base else '?'}prefix={prefix}"
    code, verdict, output = run_contract(tmp_path, url, url)
    assert code == 0 and verdict["verdict"] == "certified", output[-4000:]
    assert verdict["gaps"] == []
    assert any("stronger than the premise: no document size limit" in line
               for line in verdict["not_applicable"]), verdict["not_applicable"]
    assert any("stronger than the premise: server clock" in line
               for line in verdict["not_applicable"]), verdict["not_applicable"]
    _assert_clean_run(verdict, output)
    client: Any
    if service == "redis_cluster":
        client = RedisCluster.from_url(base.replace("redis+cluster://", "redis://"))
    else:
        client = redis.Redis.from_url(base)
    try:
        left = list(client.scan_iter(match=f"{prefix}*", count=1000))
    finally:
        client.close()
    assert left == [], f"{len(left)} keys left behind, e.g. {left[:5]}"


def _with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` appended to its query string."""
    extra = "&".join(f"{name}={value}" for name, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}"


#: A slow test server (SecantusDB, moto) gets each contract test 240 s before calling it a hang,
#: as in scripts/test's own runs of those adapters.
SLOW_SERVER = "--reactor-test-timeout=240"


@pytest.mark.mongodb
def test_a_mongodb_run_leaves_no_collection_behind(
    tmp_path: Path, service_url: Callable[[str], str]
) -> None:
    """The MongoDB adapter on the SecantusDB wire server is certified with no gap, and every
    collection the run created under its prefix (documents, signals, a router's jobs and dead
    letters, in every test's namespace ``<prefix>-<token>``) has been dropped."""
    from pymongo import MongoClient

    base = service_url("mongodb_wire")
    prefix = f"cleanup_{uuid.uuid4().hex[:8]}"
    url = _with_query(base, prefix=prefix)
    code, verdict, output = run_contract(tmp_path, url, url, SLOW_SERVER)
    assert code == 0 and verdict["verdict"] == "certified", (
        f"{_verdict_lines(verdict)}\n{output[-4000:]}")
    assert verdict["gaps"] == [], _verdict_lines(verdict)
    _assert_clean_run(verdict, output)
    client: MongoClient[dict[str, Any]] = MongoClient(base)
    try:
        database = client.get_default_database("reactor")
        left = sorted(name for name in database.list_collection_names()
                      if name.startswith(prefix))
    finally:
        client.close()
    assert left == [], f"{len(left)} collections left behind, e.g. {left[:5]}"


@pytest.mark.dynamodb
def test_a_dynamodb_and_sqs_run_leaves_no_item_and_no_queue_behind(
    tmp_path: Path, service_url: Callable[[str], str]
) -> None:
    """DynamoDB storage + SQS router on moto's server: after the run, the run's own table holds
    no item (the table is the user's and stays; every item of every test's namespace is
    deleted, expired ones and fence tombstones included) and no queue (nor ``-dlq``) with the
    run's prefix exists."""
    import boto3

    endpoint = service_url("moto")
    run = f"cleanup-{uuid.uuid4().hex[:8]}"
    common = {"region": "us-east-1", "endpoint_url": endpoint, "prefix": run}
    storage = _with_query(f"dynamodb://{run}", clock_skew_budget="0.25", **common)
    router = _with_query("sqs://reactor-jobs", **common)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
    try:
        code, verdict, output = run_contract(tmp_path, storage, router, SLOW_SERVER)
        assert code == 0 and verdict["verdict"] == "certified", (
            f"{_verdict_lines(verdict)}\n{output[-4000:]}")
        assert verdict["gaps"] == [], _verdict_lines(verdict)
        _assert_clean_run(verdict, output)
        items: list[str] = []
        request: dict[str, Any] = {"TableName": run, "ConsistentRead": True}
        while True:
            page = dynamodb.scan(**request)
            items += [f"{i['pk']['S']}/{i['sk']['S']}" for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        assert items == [], f"{len(items)} items left behind, e.g. {items[:5]}"
        queues = sqs.list_queues(QueueNamePrefix=run).get("QueueUrls", [])
        assert queues == [], f"{len(queues)} queues left behind, e.g. {queues[:5]}"
    finally:
        try:
            dynamodb.delete_table(TableName=run)
        except dynamodb.exceptions.ResourceNotFoundException:
            pass
        dynamodb.close()
        sqs.close()


@pytest.mark.postgres
def test_a_postgres_run_leaves_no_row_behind(
    tmp_path: Path, service_url: Callable[[str], str]
) -> None:
    """The PostgreSQL adapter (application clock, as scripts/test runs it) in a schema of the
    run's own: after the run its documents, jobs and dead-letter tables hold no row (every
    test's namespace ``<prefix>-<token>:`` deleted, and every queue of every router emptied)."""
    import psycopg
    from psycopg import sql

    base = service_url("postgres")
    schema = f"cleanup_{uuid.uuid4().hex[:8]}"
    common = {"schema": schema, "clock": "application"}
    storage = _with_query(base, clock_skew_budget="0.25", **common)
    router = _with_query(base, visibility_timeout="1", **common)
    try:
        code, verdict, output = run_contract(tmp_path, storage, router)
        assert code == 0 and verdict["verdict"] == "certified", (
            f"{_verdict_lines(verdict)}\n{output[-4000:]}")
        assert verdict["gaps"] == [], _verdict_lines(verdict)
        _assert_clean_run(verdict, output)
        left: dict[str, list[tuple[Any, ...]]] = {}
        with psycopg.connect(base, autocommit=True) as connection:
            for table, columns in (("documents", "collection, key"), ("jobs", "queue, id"),
                                   ("dead_letters", "queue, id")):
                rows = connection.execute(
                    sql.SQL("SELECT {} FROM {}.{} LIMIT 5").format(
                        sql.SQL(columns), sql.Identifier(schema), sql.Identifier(table))
                ).fetchall()
                if rows:
                    left[table] = rows
        assert left == {}, f"rows left behind in schema {schema}: {left}"
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
