"""A contract run leaves no data behind, and the Redis adapter is certified
(docs/contract-suite.md, "Cleanup: nothing left behind" and "Verdicts").

Each test runs ``reactor contract`` (``reactor_contract.cli.run`` in a subprocess, from an
empty directory so this repository's pytest settings do not apply) on a selection of the suite
that writes into every concern, then looks into the backend: nothing with the run's prefix may
remain. The runs use a ``?prefix=`` of their own, so a run beside them on the same server is
never counted.
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


def _assert_clean_run(verdict: dict[str, Any], output: str) -> None:
    assert verdict["failures"] == [], output[-4000:]
    assert verdict["concerns"]["cleanup"]["verdict"] == "ok", output[-4000:]
    cleanup = verdict["cleanup"]
    assert cleanup["namespaces_left_unpurged"] == 0 and cleanup["errors"] == [], cleanup
    assert cleanup["namespaces_purged"] > 20 and cleanup["records_deleted"] > 0, cleanup
    assert "nothing left behind" in output


def test_a_memory_run_purges_every_namespace(tmp_path: Path) -> None:
    code, verdict, output = run_contract(tmp_path, "memory://", LOCAL)
    assert code == 0, output[-4000:]
    _assert_clean_run(verdict, output)


def test_a_sqlite_run_leaves_no_row_behind(tmp_path: Path) -> None:
    database = tmp_path / "contract.db"
    code, verdict, output = run_contract(tmp_path, f"sqlite://{database}", LOCAL)
    assert code in (0, 6), output[-4000:]  # 6 when signals (a declared gap) are selected
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

