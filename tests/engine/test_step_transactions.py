"""Transactional steps in the engine (docs/concepts.md, "Transactional steps"), on a memory
storage that declares the capability with a recording fake transaction: which attempt's
transaction commits, which roll back, and that the step's checkpoint is written inside the
one that commits. The PostgreSQL tests (tests/adapters/postgres/test_transactional_steps.py)
prove the same on real transactions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reactor import Input, Reactor, Step, config
from reactor.config import Runtime
from reactor.dsl import Retries, async_step, compose, input, step, with_lock
from reactor.engine import step_transactions
from reactor.errors import (
    ConfigurationError,
    DefinitionError,
    StepTransactionError,
    StorageError,
)
from reactor.memory.storage import MemoryStorage
from reactor.model.results import Failure, Halt, Success
from reactor.model.signals import halt
from reactor.model.status import RunStatus
from reactor.ports.capabilities import RunsStepTransactions, declares
from tests.fake_clock import FakeClock


class FakeTransaction:
    """Logs ``begin:<n>``, ``commit:<n>`` and ``rollback:<n>`` to its storage."""

    def __init__(self, storage: TransactionalMemory) -> None:
        storage.opened += 1
        self.number = storage.opened
        self.storage = storage
        self.over = False
        storage.log.append(f"begin:{self.number}")

    @property
    def connection(self) -> str:
        return f"connection-{self.number}"

    @contextmanager
    def binding(self) -> Iterator[None]:
        self.storage.bound = self.number
        try:
            yield
        finally:
            self.storage.bound = None

    def check(self) -> None:
        if self.storage.aborted:
            raise StepTransactionError("aborted by a statement the body caught")

    def commit(self) -> None:
        assert not self.over
        self.over = True
        if self.storage.fail_commit:
            self.storage.log.append(f"commit-failed:{self.number}")
            raise StorageError("commit reply lost")
        self.storage.log.append(f"commit:{self.number}")

    def rollback(self) -> None:
        if not self.over:
            self.over = True
            self.storage.log.append(f"rollback:{self.number}")


class TransactionalMemory(MemoryStorage):
    """A memory storage that declares ``RunsStepTransactions``; every document write is
    logged as ``write@<n>`` inside transaction ``n``'s binding, else not at all."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.opened = 0
        self.bound: int | None = None
        self.fail_commit = False
        self.fail_bound_write = False
        self.aborted = False
        real = self.documents.write

        def write(*args: Any, **kwargs: Any) -> bool:
            if self.bound is not None:
                if self.fail_bound_write:
                    raise StorageError("the checkpoint failed")
                self.log.append(f"write@{self.bound}")
            return real(*args, **kwargs)

        self.documents.write = write  # type: ignore[method-assign]

    def begin_step_transaction(self) -> FakeTransaction:
        return FakeTransaction(self)


@pytest.fixture
def storage(fake_clock: FakeClock) -> Iterator[TransactionalMemory]:
    store = TransactionalMemory()
    config.configure(storage=store, router="inline://", clock=fake_clock)
    yield store
    config.reset()


def _phases(log: list[str]) -> list[str]:
    """The log with consecutive duplicate writes folded."""
    folded: list[str] = []
    for entry in log:
        if not (folded and entry.startswith("write@") and folded[-1] == entry):
            folded.append(entry)
    return folded


SEEN: list[Any] = []


class Flow(Reactor, name="test_step_transactions.flow"):
    fail_at = Input(str)

    @step(transaction=True, fail_at=input("fail_at"))
    def debit(inputs: Any, ctx: Any) -> str:
        SEEN.append(("debit", ctx.transaction))
        if inputs.fail_at == "debit":
            raise RuntimeError("declined")
        return "debited"

    @debit.undo
    def _undo_debit(result: Any, inputs: Any, ctx: Any) -> None:
        SEEN.append(("undo", ctx.transaction))
        if inputs.fail_at == "undo":
            raise RuntimeError("undo failed")

    @debit.compensate
    def _compensate_debit(error: Any, inputs: Any, ctx: Any) -> None:
        SEEN.append(("compensate", ctx.transaction))

    @step(wait_for="debit", fail_at=input("fail_at"))
    def ship(inputs: Any, ctx: Any) -> str:
        SEEN.append(("ship", ctx.transaction))
        if inputs.fail_at in ("ship", "undo"):
            raise RuntimeError("no stock")
        return "shipped"


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


def test_the_step_checkpoint_commits_in_the_body_transaction(
    storage: TransactionalMemory,
) -> None:
    result = Flow.run(fail_at="")
    assert isinstance(result, Success)
    assert SEEN == [("debit", "connection-1"), ("ship", None)]
    assert _phases(storage.log) == ["begin:1", "write@1", "commit:1"]
    assert Flow.find(result.run_id).status is RunStatus.COMPLETED


class Flaky(Reactor, name="test_step_transactions.flaky"):
    @step(transaction=True, retries=Retries(max_attempts=3))
    def work(inputs: Any, ctx: Any) -> int:
        SEEN.append(ctx.transaction)
        if len(SEEN) < 3:
            raise RuntimeError("transient")
        return len(SEEN)


def test_each_attempt_has_its_own_transaction_and_only_the_last_commits(
    storage: TransactionalMemory,
) -> None:
    result = Flaky.run()
    assert isinstance(result, Success)
    assert SEEN == ["connection-1", "connection-2", "connection-3"]
    assert _phases(storage.log) == [
        "begin:1", "rollback:1", "begin:2", "rollback:2", "begin:3", "write@3", "commit:3",
    ]


def test_a_failed_step_rolls_back_before_its_compensate_runs_outside_it(
    storage: TransactionalMemory,
) -> None:
    result = Flow.run(fail_at="debit")
    assert isinstance(result, Failure)
    assert SEEN == [("debit", "connection-1"), ("compensate", None)]
    assert storage.log == ["begin:1", "rollback:1"]  # nothing written inside it


def test_an_undo_writes_in_the_transaction_of_the_checkpoint_that_pops_it(
    storage: TransactionalMemory,
) -> None:
    result = Flow.run(fail_at="ship")
    assert isinstance(result, Failure)
    assert SEEN == [("debit", "connection-1"), ("ship", None), ("undo", "connection-2")]
    assert _phases(storage.log) == ["begin:1", "write@1", "commit:1",
                                    "begin:2", "write@2", "commit:2"]
    assert not result.rollback_failures


def test_a_failed_undo_rolls_back_and_the_rollback_goes_on(
    storage: TransactionalMemory,
) -> None:
    result = Flow.run(fail_at="undo")
    assert isinstance(result, Failure)
    assert [f.step for f in result.rollback_failures] == ["debit"]
    assert _phases(storage.log) == ["begin:1", "write@1", "commit:1", "begin:2", "rollback:2"]


def test_a_checkpoint_that_fails_inside_the_transaction_rolls_it_back(
    storage: TransactionalMemory,
) -> None:
    storage.fail_bound_write = True
    with pytest.raises(StorageError, match="the checkpoint failed"):
        Flow.run(fail_at="")
    assert storage.log == ["begin:1", "rollback:1"]
    assert SEEN == [("debit", "connection-1")]


def test_a_lost_commit_reply_raises_and_the_run_stays_where_the_store_has_it(
    storage: TransactionalMemory,
) -> None:
    storage.fail_commit = True
    with pytest.raises(StorageError, match="commit reply lost"):
        Flow.run(fail_at="")
    assert storage.log[-1] == "commit-failed:1"
    assert SEEN == [("debit", "connection-1")]  # nothing ran after the unknown commit


class Unstorable(Reactor, name="test_step_transactions.unstorable"):
    @step(transaction=True)
    def work(inputs: Any, ctx: Any) -> object:
        return object()  # the codec cannot store it

    @work.compensate
    def _compensate(error: Any, inputs: Any, ctx: Any) -> None:
        SEEN.append("compensated")


def test_an_unstorable_result_rolls_the_transaction_back_and_fails_the_step(
    storage: TransactionalMemory,
) -> None:
    result = Unstorable.run()
    assert isinstance(result, Failure)
    assert SEEN == ["compensated"]
    assert storage.log[0] == "begin:1" and storage.log[-1] == "rollback:1"
    assert "commit:1" not in storage.log


class Halting(Reactor, name="test_step_transactions.halting"):
    @step(transaction=True)
    def work(inputs: Any, ctx: Any) -> None:
        halt("enough")


def test_a_halting_step_commits_with_the_halt_checkpoint(storage: TransactionalMemory) -> None:
    result = Halting.run()
    assert isinstance(result, Halt)
    assert _phases(storage.log) == ["begin:1", "write@1", "commit:1"]
    assert Halting.find(result.run_id).status is RunStatus.HALTED


class Child(Reactor, name="test_step_transactions.child"):
    @step(transaction=True)
    def inner(inputs: Any, ctx: Any) -> str:
        return "inner"


class Parent(Reactor, name="test_step_transactions.parent"):
    child = compose(Child)


def test_a_storage_without_transactions_refuses_the_run_before_storing_it(
    runtime: Runtime,
) -> None:
    assert not declares(runtime.storage, RunsStepTransactions)
    for reactor in (Flow, Parent):
        with pytest.raises(ConfigurationError, match=r"transaction=True.*MemoryStorage"):
            reactor.run(fail_at="")
    assert SEEN == []
    assert runtime.storage.contexts.page(limit=10).runs == ()  # nothing stored


def test_a_worker_whose_storage_cannot_fails_the_run_with_the_reason(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(step_transactions, "check", lambda definition, env: None)
    result = Flow.run(fail_at="")
    assert isinstance(result, Failure)
    assert isinstance(result.error, ConfigurationError)
    assert SEEN == []  # neither the body nor its compensate ran
    assert Flow.find(result.run_id).status is RunStatus.FAILED


class Locked(Step):
    coordination = with_lock(key="k")


class Transactional(Step):
    transaction = True

    def run(self) -> int:
        return 1


def test_definition_errors_name_the_step_and_the_problem() -> None:
    with pytest.raises(DefinitionError, match="transaction= must be True, False or None"):
        step(transaction="yes")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="cannot declare step-level coordination"):
        step(Locked, transaction=True)
    with pytest.raises(DefinitionError, match="cannot declare step-level coordination"):

        @step(transaction=True, coordination=with_lock(key="k"))
        def locked(inputs: Any, ctx: Any) -> None:
            return None

    with pytest.raises(DefinitionError, match="async unit cannot be transactional"):
        async_step(Transactional)
    with pytest.raises(DefinitionError, match="must be True or False"):

        class Bad(Step):
            transaction = 1  # type: ignore[assignment]

    assert step(Transactional).transaction is True
    assert step(Transactional, transaction=False).transaction is False


def test_a_transaction_that_cannot_commit_fails_the_attempt_and_is_retried(
    storage: TransactionalMemory,
) -> None:
    storage.aborted = True
    result = Flaky.run()  # every attempt "succeeds", but its transaction is aborted
    assert isinstance(result, Failure)
    assert isinstance(result.error, StepTransactionError)
    assert SEEN == ["connection-1", "connection-2", "connection-3"]
    assert storage.log == ["begin:1", "rollback:1", "begin:2", "rollback:2",
                           "begin:3", "rollback:3"]


def test_the_kept_transaction_is_bound_from_the_body_to_the_commit(
    storage: TransactionalMemory, runtime: Runtime
) -> None:
    """What the engine reads between the body and the checkpoint (the cancel request) runs
    in the transaction: a step never needs a second connection while it holds one."""
    config.configure(storage=storage, router="inline://", cancel_check_interval=0.0)
    real = storage.claims.interrupt_resumes
    bound_reads: list[int | None] = []

    def reading(*args: object, **kwargs: object) -> object:
        bound_reads.append(storage.bound)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    storage.claims.interrupt_resumes = reading  # type: ignore[method-assign]
    assert isinstance(Flow.run(fail_at=""), Success)
    assert 1 in bound_reads  # the read after debit's body, inside transaction 1
