"""Transactional steps: a step's database writes commit with its checkpoint (docs/concepts.md,
"Transactional steps").

A leaf step declared ``transaction=True`` runs each attempt's body in a transaction the run's
storage opens (:class:`~reactor.ports.capabilities.RunsStepTransactions`), with its connection
as ``ctx.transaction``:

* an attempt whose result is not a success (a ``Failure``, raised or returned) rolls its
  transaction back at once, so a retry starts from a clean database and the compensate runs
  outside any transaction;
* a successful attempt's transaction is checked (:meth:`StepTransaction.check`: a failed
  statement the body caught, a dead connection fail the attempt with
  :class:`~reactor.errors.StepTransactionError`), then stays open in
  ``RunState.step_transaction``, bound to the executing thread, until the executor writes the
  step's checkpoint inside it (:func:`committing`) and commits: the body's writes and the
  record that the step completed become durable together, or not at all;
* anything that stops the step between its body and its checkpoint (a lost hold turning the
  result into a failure, a storage error, an interruption) rolls it back (:func:`discard`).

An undo of a transactional step runs the same way: its writes commit with the checkpoint that
pops its undo-stack entry (:mod:`reactor.engine.rollback`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Final, cast

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.env import Env
from reactor.engine.invoke import Invocation, failure_from_exception
from reactor.engine.state import KeptTransaction, RunState
from reactor.errors import ConfigurationError, StepTransactionError
from reactor.model.results import Failure, Success
from reactor.ports.capabilities import RunsStepTransactions, StepTransaction, declares

__all__ = ["begin", "check", "committing", "discard", "keep", "run_body"]


def check(definition: ReactorDefinition, env: Env) -> None:
    """Refuse, before anything is stored, a reactor with a transactional step (its own, a
    composed child's or a map element's) on a storage that cannot run one.

    Raises:
        ConfigurationError: naming the first such step and the storage.
    """
    if declares(env.storage, RunsStepTransactions):
        return
    found = _transactional(definition)
    if found:
        reactor, step = found[0]
        raise _unsupported(reactor, step, env.storage)


def _transactional(definition: ReactorDefinition) -> list[tuple[str, str]]:
    """``(reactor name, step name)`` of every transactional step, children and elements
    included."""
    found = [(definition.name, name) for name, spec in definition.steps.items()
             if spec.transaction]
    for child in definition.children.values():
        found.extend(_transactional(child))
    return found


def _unsupported(reactor: str, step: str, storage: object) -> ConfigurationError:
    return ConfigurationError(
        f"step {step!r} of reactor {reactor!r} is declared transaction=True, but the storage "
        f"{type(storage).__name__} cannot run a step in a database transaction (PostgreSQL "
        "can: docs/adapters/postgres.md, \"Transactional steps\")"
    )


def run_body(
    state: RunState, spec: StepSpec, call: Callable[[StepTransaction | None], Invocation]
) -> Invocation:
    """Call user code (a ``run`` attempt or an ``undo``) of ``spec`` in its transaction when
    the step is transactional: ``call(transaction)`` (``None`` otherwise) invokes it.

    Returns:
        ``call``'s invocation; the transaction is kept for the checkpoint (:func:`keep`) when
        it succeeded, else rolled back. A non-retryable ``Failure`` of
        :class:`~reactor.errors.ConfigurationError`, without calling ``call``, when the
        storage cannot run transactional steps.

    Raises:
        StorageError: the storage failed to open the transaction (``call`` not called).
        BaseException: whatever ``call`` raised, after a rollback.
    """
    try:
        transaction = begin(state, spec)
    except ConfigurationError as exc:  # the run is stored failed with the reason, no retry
        return Invocation(Failure(exc, retryable=False))
    try:
        invocation = call(transaction)
    except BaseException:
        if transaction is not None:
            transaction.rollback()
        raise
    if transaction is None:
        return invocation
    if not isinstance(invocation.result, Success):
        transaction.rollback()
        return invocation
    try:
        transaction.check()
    except StepTransactionError as exc:  # a failed statement the body caught, a dead connection
        transaction.rollback()
        return Invocation(failure_from_exception(exc), raised=True)
    keep(state, transaction)
    return invocation


def begin(state: RunState, spec: StepSpec) -> StepTransaction | None:
    """Open the transaction of one attempt (or undo) of ``spec``; ``None`` when the step is not
    transactional. The caller keeps it (:func:`keep`) or rolls it back.

    Raises:
        ConfigurationError: the run's storage cannot run transactional steps (it does not
            declare :class:`~reactor.ports.capabilities.RunsStepTransactions`).
        StorageError: the storage failed to open one.
    """
    if not spec.transaction:
        return None
    storage = state.env.storage
    if not declares(storage, RunsStepTransactions):
        raise _unsupported(state.definition.name, spec.name, storage)
    return cast(RunsStepTransactions, storage).begin_step_transaction()


def keep(state: RunState, transaction: StepTransaction) -> None:
    """Keep a succeeded attempt's open transaction for the step's checkpoint, bound to this
    thread from now on: what the engine reads before the checkpoint (the run's cancel
    request) runs on it, so a step never waits for a second pooled connection while it holds
    one (any transaction still kept is rolled back first: it can only be left over from a
    step that did not record)."""
    discard(state)
    binding = ExitStack()
    binding.enter_context(transaction.binding())
    state.step_transaction = KeptTransaction(transaction, binding)


def committing(state: RunState) -> AbstractContextManager[None]:
    """Run the block (the step's checkpoint) inside the kept transaction, then commit it; no
    transaction kept: just run the block (a shared no-op context, nothing built per step).

    Raises:
        StorageError: the commit failed (rolled back) or its reply was lost (the run's
            checkpoint tells whether it applied); whatever the block raised, after a rollback.
    """
    kept, state.step_transaction = state.step_transaction, None
    return _NOTHING_KEPT if kept is None else _committing(kept)


_NOTHING_KEPT: Final = nullcontext()


@contextmanager
def _committing(kept: KeptTransaction) -> Iterator[None]:
    try:
        yield
    except BaseException:
        kept.binding.close()
        kept.transaction.rollback()
        raise
    kept.binding.close()
    kept.transaction.commit()


def discard(state: RunState) -> None:
    """Roll back the kept transaction, if any (never raises)."""
    kept, state.step_transaction = state.step_transaction, None
    if kept is not None:
        kept.binding.close()
        kept.transaction.rollback()
