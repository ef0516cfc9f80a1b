"""Transactional steps on real PostgreSQL transactions (docs/adapters/postgres.md,
"Transactional steps"): the body's writes through ``ctx.transaction`` and the step's checkpoint
commit together, so a committed step's rows exist exactly once and an uncommitted one's not at
all — through retries, failures, undo, a checkpoint failing inside the transaction and a commit
whose reply is lost. Process kills are in tests/kill/test_transactional_kill.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from reactor_postgres.documents import PostgresDocumentStore
from reactor_postgres.transactions import PostgresStepTransaction

from reactor import Input, Reactor, Retries, config, input, step
from reactor.config import Runtime
from reactor.errors import StepTransactionError, StepTransactionMisuseError, StorageError
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus

pytestmark = pytest.mark.postgres

CALLS: list[str] = []


def _ledger(ctx: Any) -> sql.Composed:
    """The test's ledger table, in the storage's own schema (the test drops it)."""
    schema = ctx.transaction.execute("SELECT current_setting('reactor.test_schema')").fetchone()
    return sql.SQL("{}.ledger").format(sql.Identifier(schema[0]))


def _insert(ctx: Any, what: str) -> None:
    ctx.transaction.execute(
        sql.SQL("INSERT INTO {} (run_id, what) VALUES (%s, %s)").format(_ledger(ctx)),
        (ctx.run_id, what),
    )


class Payment(Reactor, name="test_pg_transactional.payment"):
    returns = "debit"
    fail_at = Input(str, default="")

    @step(transaction=True, retries=Retries(max_attempts=3), fail_at=input("fail_at"))
    def debit(inputs: Any, ctx: Any) -> str:
        CALLS.append(f"debit:{ctx.attempt}")
        assert isinstance(ctx.transaction, psycopg.Connection)
        _insert(ctx, f"debit:{ctx.attempt}")
        if inputs.fail_at == "debit" or (inputs.fail_at == "debit-once" and ctx.attempt == 1):
            raise RuntimeError("declined")
        return "debited"

    @debit.undo
    def _refund(result: Any, inputs: Any, ctx: Any) -> None:
        CALLS.append("refund")
        ctx.transaction.execute(
            sql.SQL("DELETE FROM {} WHERE run_id = %s").format(_ledger(ctx)), (ctx.run_id,)
        )
        if inputs.fail_at == "refund":
            raise RuntimeError("refund failed")

    @step(wait_for="debit", fail_at=input("fail_at"))
    def ship(inputs: Any, ctx: Any) -> str:
        CALLS.append("ship")
        if inputs.fail_at in ("ship", "refund"):
            raise RuntimeError("no stock")
        return "shipped"


@pytest.fixture
def runtime(schema_url: str, schema: str, pg_url: str) -> Iterator[Runtime]:
    CALLS.clear()
    url = f"{schema_url}&options=-c%20reactor.test_schema%3D{schema}"
    rt = config.configure(storage=url, router="local://?workers=0")
    rt.storage.ping()  # migrates: the schema exists
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {}.ledger (run_id text, what text)").format(
            sql.Identifier(schema)))
    try:
        yield rt
    finally:
        config.reset()


def _rows(pg_url: str, schema: str) -> list[str]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT what FROM {}.ledger ORDER BY what").format(
            sql.Identifier(schema))).fetchall()
    return [r[0] for r in rows]


def test_a_committed_step_writes_its_rows_once(runtime: Runtime, pg_url: str,
                                               schema: str) -> None:
    result = Payment.run()
    assert isinstance(result, Success) and result.value == "debited"
    assert _rows(pg_url, schema) == ["debit:1"]
    assert Payment.find(result.run_id).status is RunStatus.COMPLETED


def test_a_failed_attempt_leaves_no_row_and_the_retry_commits_one(
    runtime: Runtime, pg_url: str, schema: str
) -> None:
    result = Payment.run(fail_at="debit-once")
    assert isinstance(result, Success)
    assert CALLS == ["debit:1", "debit:2", "ship"]
    assert _rows(pg_url, schema) == ["debit:2"]


def test_a_failed_step_leaves_no_row(runtime: Runtime, pg_url: str, schema: str) -> None:
    result = Payment.run(fail_at="debit")
    assert isinstance(result, Failure)
    assert CALLS == ["debit:1", "debit:2", "debit:3"]
    assert _rows(pg_url, schema) == []


def test_an_undo_deletes_in_the_transaction_that_pops_it(
    runtime: Runtime, pg_url: str, schema: str
) -> None:
    result = Payment.run(fail_at="ship")
    assert isinstance(result, Failure) and not result.rollback_failures
    assert CALLS == ["debit:1", "ship", "refund"]
    assert _rows(pg_url, schema) == []


def test_a_failed_undo_rolls_its_delete_back(runtime: Runtime, pg_url: str, schema: str) -> None:
    result = Payment.run(fail_at="refund")
    assert isinstance(result, Failure)
    assert [f.step for f in result.rollback_failures] == ["debit"]
    assert _rows(pg_url, schema) == ["debit:1"]  # the refund's DELETE never committed


def _recover(runtime: Runtime, run_id: str) -> None:
    """One sweep re-dispatches the run (its lock was released); one worker pass finishes it."""
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 1
    assert Worker(runtime, liveness_wait=0.0).run_pending() >= 1
    assert Payment.find(run_id).status is RunStatus.COMPLETED


def test_a_checkpoint_failing_inside_the_transaction_takes_the_rows_with_it(
    runtime: Runtime, pg_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PostgresDocumentStore._run

    def failing(self: PostgresDocumentStore, name: str, *args: Any, **kwargs: Any) -> Any:
        if getattr(self.client._bound, "connection", None) is not None:  # in the transaction
            raise StorageError(f"injected: the checkpoint's {name} failed")
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(PostgresDocumentStore, "_run", failing)
    with pytest.raises(StorageError, match="injected") as caught:
        Payment.run()
    assert _rows(pg_url, schema) == []
    monkeypatch.setattr(PostgresDocumentStore, "_run", real)
    run_id = caught.value.run_id
    assert run_id is not None
    _recover(runtime, run_id)
    assert _rows(pg_url, schema) == ["debit:1"]  # the step ran again, committed once


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_lost_commit_reply_runs_the_step_exactly_once_either_way(
    runtime: Runtime, pg_url: str, schema: str, monkeypatch: pytest.MonkeyPatch,
    applied: bool,
) -> None:
    real_commit = PostgresStepTransaction.commit

    def lost(self: PostgresStepTransaction) -> None:
        if applied:
            real_commit(self)
        else:
            self.rollback()
        raise StorageError("injected: the COMMIT reply was lost")

    monkeypatch.setattr(PostgresStepTransaction, "commit", lost)
    with pytest.raises(StorageError, match="COMMIT reply") as caught:
        Payment.run()
    monkeypatch.setattr(PostgresStepTransaction, "commit", real_commit)
    assert _rows(pg_url, schema) == (["debit:1"] if applied else [])
    run_id = caught.value.run_id
    assert run_id is not None
    _recover(runtime, run_id)
    assert len(_rows(pg_url, schema)) == 1
    assert CALLS.count("ship") == 1
    assert CALLS.count("debit:1") == (1 if applied else 2)


def test_every_connection_goes_back_to_the_pool(runtime: Runtime) -> None:
    for fail_at in ("", "debit", "ship", "refund", "debit-once"):
        Payment.run(fail_at=fail_at)
    stats = runtime.storage.client.pool.get_stats()  # type: ignore[attr-defined]
    assert stats.get("pool_size", 0) - stats.get("pool_available", 0) == 0, stats


class Swallowing(Reactor, name="test_pg_transactional.swallowing"):
    """A body that writes, runs a failing statement, catches the error and returns."""

    @step(transaction=True, retries=Retries(max_attempts=2))
    def careless(inputs: Any, ctx: Any) -> str:
        CALLS.append(f"careless:{ctx.attempt}")
        _insert(ctx, f"careless:{ctx.attempt}")
        try:
            ctx.transaction.execute("SELEKT 1")
        except psycopg.Error:
            pass  # the transaction is aborted now
        return "returned anyway"

    @careless.compensate
    def _compensate(error: Any, inputs: Any, ctx: Any) -> None:
        CALLS.append("compensated")


def test_a_failed_statement_the_body_caught_fails_the_attempt_not_the_storage(
    runtime: Runtime, pg_url: str, schema: str
) -> None:
    """Found by a newcomer: the checkpoint then failed inside the aborted transaction as a
    storage error, the run stayed running and workers ran the body again without end."""
    result = Swallowing.run()
    assert isinstance(result, Failure)
    assert isinstance(result.error, StepTransactionError)
    assert "savepoint" in result.message
    assert CALLS == ["careless:1", "careless:2", "compensated"]
    assert Swallowing.find(result.run_id).status is RunStatus.FAILED
    assert _rows(pg_url, schema) == []


class Committing(Reactor, name="test_pg_transactional.committing"):
    """A body that commits the step's transaction itself."""

    @step(transaction=True, retries=Retries(max_attempts=3))
    def eager(inputs: Any, ctx: Any) -> str:
        CALLS.append(f"eager:{ctx.attempt}")
        _insert(ctx, f"eager:{ctx.attempt}")
        ctx.transaction.commit()
        return "committed by hand"


def test_a_body_cannot_end_the_step_transaction_itself(
    runtime: Runtime, pg_url: str, schema: str
) -> None:
    result = Committing.run()
    assert isinstance(result, Failure)
    assert isinstance(result.error, StepTransactionMisuseError)
    assert "ctx.transaction.commit()" in result.message
    assert CALLS == ["eager:1"]  # a misuse is not retried
    assert _rows(pg_url, schema) == []  # and its write never committed


def test_one_pooled_connection_is_enough_for_a_transactional_step(
    schema_url: str, schema: str, pg_url: str
) -> None:
    """Found by a newcomer: with pool_max_size=1 the cancel-request read after the body waited
    10 s for a second connection the step itself held, and the run failed."""
    CALLS.clear()
    url = f"{schema_url}&pool_max_size=1&options=-c%20reactor.test_schema%3D{schema}"
    rt = config.configure(storage=url, router="local://?workers=0", cancel_check_interval=0.0)
    try:
        rt.storage.ping()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE TABLE {}.ledger (run_id text, what text)").format(
                sql.Identifier(schema)))
        result = Payment.run()  # before: StorageError after a 10 s pool timeout
        assert isinstance(result, Success)
        assert _rows(pg_url, schema) == ["debit:1"]
    finally:
        config.reset()
