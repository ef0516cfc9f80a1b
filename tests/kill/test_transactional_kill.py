"""A transactional step killed with ``SIGKILL`` around its ``COMMIT`` in a real worker process
happened exactly once or not at all: its rows and its checkpoint commit together, so a crash
before the ``COMMIT`` leaves neither (the next execution runs the step again) and a crash after
it leaves both (the step never runs again). Processes: docs/workers.md; recovery after the dead
worker's lease lapses: docs/coordination.md, "Renewal and loss".

PostgreSQL only (the storage that runs transactional steps), storage and router in a schema of
the test's own (dropped at teardown), the backend's generous ``context_lock_ttl``
(``tests.kill.conftest.LEASE``) and 1 s sweeps. The run is
:class:`~tests.kill.transactional_reactors.TransactionalFlow`: ``a -> b -> c``, each step
inserting one row ``(run_id, step, attempt, pid)`` into a ``ledger`` table of the schema
through ``ctx.transaction`` and logging ``start:<step>:<pid>`` to an ``O_APPEND`` file before.
Both workers import :mod:`tests.kill.transactional_points`, whose point of step ``b`` fires
once per run (its arm file stays): worker 1 kills itself there; worker 2 (``--sweep``)
recovers the run once worker 1's liveness lease lapsed. Then: the run is ``completed``, the
ledger holds exactly one row per step, and ``b`` ran again exactly when it was killed before its
``COMMIT`` applied.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from reactor import DispatchHandle, Success
from reactor.config import Runtime
from reactor.model.keys import run_liveness_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from tests.kill.conftest import (
    Backend,
    WorkerProcesses,
    kill_settings,
    recovery_bound,
    wait_until,
    with_query,
)
from tests.kill.reactors import entries
from tests.kill.transactional_reactors import (
    LEDGER_COLUMNS,
    STEPS,
    TransactionalFlow,
    ledger_table,
)

pytestmark = pytest.mark.postgres

#: Besides the backend's lease (``kill_settings``); the conftest's ``caller`` reads it too.
SETTINGS: dict[str, object] = {"sweeper_interval": 1}

POINTS = ("--import", "tests.kill.transactional_points")

#: The kill point of step ``b`` -> the steps committed when worker 1 died (``None``: a race,
#: either ``{"a"}`` or ``{"a", "b"}``).
COMMITTED_AT_KILL: dict[str, set[str] | None] = {
    "body": {"a"},
    "before-commit": {"a"},
    "after-commit": {"a", "b"},
    "racing-commit": None,
}


@pytest.fixture
def pg_url(service_url: Callable[[str], str]) -> str:
    """The PostgreSQL cluster scripts/test started (fails, never skips, when missing)."""
    return service_url("postgres")


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped when it ends (after its workers are reaped)."""
    name = f"kill{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def backend(pg_url: str, schema: str) -> Backend:
    """PostgreSQL storage and router side by side in the test's schema (overrides the
    conftest's parametrized ``backend``: this scenario needs PostgreSQL)."""
    url = with_query(pg_url, schema=schema)
    return Backend("postgres", url, url)


@pytest.fixture
def workers(backend: Backend, tmp_path: Path) -> Iterator[WorkerProcesses]:
    """The conftest's worker factory, reaped before the schema is dropped."""
    pool = WorkerProcesses(tmp_path)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def ledger(pg_url: str, schema: str) -> None:
    """The ``ledger`` table, in the test's schema (the storage's migration creates the schema
    if missing, so either may come first)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(
            ledger_table(schema), sql.SQL(LEDGER_COLUMNS)))


def _rows(pg_url: str, schema: str, run_id: str) -> list[tuple[str, int, int]]:
    """The committed ledger rows of ``run_id``: ``(step, attempt, pid)``, by step."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT step, attempt, pid FROM {} WHERE run_id = %s ORDER BY step, pid")
            .format(ledger_table(schema)),
            (run_id,),
        ).fetchall()
    return [(str(step), int(attempt), int(pid)) for step, attempt, pid in rows]


def _starts(log: Path) -> dict[str, list[int]]:
    """Step -> the pids of its body's executions, in order."""
    starts: dict[str, list[int]] = {s: [] for s in STEPS}
    for line in entries(str(log)):
        kind, _, rest = line.partition(":")
        if kind == "start":
            step, _, pid = rest.partition(":")
            starts[step].append(int(pid))
    return starts


def _kills(log: Path) -> list[str]:
    return [line for line in entries(str(log)) if line.startswith("kill:")]


@pytest.mark.parametrize("point", list(COMMITTED_AT_KILL))
def test_a_transactional_step_killed_around_its_commit_happened_exactly_once(
    point: str, backend: Backend, caller: Runtime, ledger: None, workers: WorkerProcesses,
    pg_url: str, schema: str, tmp_path: Path,
) -> None:
    log, arm = tmp_path / "steps.log", tmp_path / "arm"
    arm.touch()
    handle = TransactionalFlow.run(schema=schema, log_path=str(log), arm_path=str(arm),
                                   kill_at=point)
    assert isinstance(handle, DispatchHandle)
    run_id = handle.run_id
    settings = kill_settings(backend, SETTINGS)

    doomed = workers.start(backend, *POINTS, settings=settings)
    wait_until(lambda: doomed.poll() is not None, 90, f"worker 1 to kill itself at {point}",
               workers.logs)
    assert doomed.returncode == -signal.SIGKILL, workers.logs()
    killed_at = time.monotonic()
    assert _kills(log) == [f"kill:{point}:{doomed.pid}"]

    # What the kill left: the ledger rows and the checkpoint agree, step by step.
    rows = _rows(pg_url, schema, run_id)
    committed = {step for step, _, _ in rows}
    assert rows == sorted((s, 1, doomed.pid) for s in committed), rows
    view = TransactionalFlow.find(run_id, runtime=caller)
    assert view.status is RunStatus.RUNNING
    assert set(view.results) == committed, (view.results, rows)
    expected = COMMITTED_AT_KILL[point]
    if expected is None:
        assert committed in ({"a"}, {"a", "b"}), rows
        print(f"\n[racing-commit] the SIGKILL landed {'after' if 'b' in committed else 'before'}"
              " the COMMIT applied")
    else:
        assert committed == expected, rows
    assert _starts(log) == {"a": [doomed.pid], "b": [doomed.pid], "c": []}

    rescuer = workers.start(backend, *POINTS, "--sweep", "--threads", "2", settings=settings)
    wait_until(lambda: handle.status() in TERMINAL_STATUSES, recovery_bound(backend),
               "worker 2 to recover the run after worker 1's lease lapsed", workers.logs)
    print(f"\n[kill timing] {point}: recovered {time.monotonic() - killed_at:.2f}s after SIGKILL")
    result = handle.wait(timeout=10)
    assert isinstance(result, Success), (result, workers.logs())
    assert result.value == {"a": "a", "b": "b", "c": "c"}
    assert handle.status() is RunStatus.COMPLETED

    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(timeout=30) == 0, workers.logs()
    assert not caller.storage.locks.held(run_liveness_key(run_id))

    # Exactly one row per step. b ran again (in worker 2) if and only if the kill came before
    # its COMMIT applied; a (committed before) and c (after the kill) ran once each.
    b_pid = doomed.pid if "b" in committed else rescuer.pid
    rows = _rows(pg_url, schema, run_id)
    assert [(step, pid) for step, _, pid in rows] == [
        ("a", doomed.pid), ("b", b_pid), ("c", rescuer.pid)
    ], rows
    b_starts = [doomed.pid] if "b" in committed else [doomed.pid, rescuer.pid]
    assert _starts(log) == {"a": [doomed.pid], "b": b_starts, "c": [rescuer.pid]}
    assert _kills(log) == [f"kill:{point}:{doomed.pid}"]  # fired once in the run
