"""Concurrent branches: independent leaf steps of one run at the same time (docs/concepts.md,
"Concurrency").

A reactor declaring ``max_concurrency = N`` (N > 1) lets the executor start up to N ready leaf
steps at once. Each runs in a thread of the run's own :class:`Branches` pool, against a
*shadow* of the run's context: a shallow copy with its own snapshot of the results so far, its
own trace and its own engine state, so the branch's bookkeeping (retry counts, trace entries,
a parked hold) never races the executor's thread, the run's single writer, which records each
settled branch and checkpoints. :meth:`Branches.wait` merges a settled branch's bookkeeping
into the run's context before the executor sees its outcome.

Only leaf steps (``kind == "step"``) branch, and of those neither a transactional step (its
transaction is bound to the thread that commits it with the checkpoint) nor a step under a
step-level ordered lock (its ticket lives in the run's engine state); every other step kind
runs alone, once the branches in flight have settled (:func:`branches_off`). A branch's retry
waits in its own thread: a worker does not re-enqueue a run to wait for one branch's retry.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from reactor.dsl.coordination import OrderedLockDecl
from reactor.dsl.declarations import StepSpec
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome

__all__ = ["Branch", "Branches", "branches_off"]


def branches_off(spec: StepSpec) -> bool:
    """Whether ``spec`` may run as a concurrent branch (module docstring): a leaf step that
    is not transactional and holds no step-level ordered lock."""
    return (
        spec.kind == "step"
        and not spec.transaction
        and not any(isinstance(decl, OrderedLockDecl) for decl in spec.coordination)
    )


class _BranchCheckpoint(Checkpointer):
    """A branch never saves: the executor's thread is the run's only writer."""

    def save(self, *, force: bool = True) -> None:
        """Refuse: a save from a branch thread would race the run's writer.

        Raises:
            RuntimeError: always (an engine bug: nothing a branch runs checkpoints).
        """
        raise RuntimeError(
            "a concurrent branch tried to checkpoint the run: only the executor's thread "
            "saves (docs/concepts.md, \"Concurrency\")"
        )


@dataclass
class Branch:
    """One leaf step running in a branch thread.

    Attributes:
        spec: the step.
        state: the branch's own run state (its ``ctx`` is the shadow context).
        started: epoch seconds (storage clock) when the branch started.
        outcome: once settled without raising, what the step produced.
        error: once settled by an exception (an interruption, a park...), that exception.
        base_engine_state: the run's engine state when the branch started (its shadow
            changed it when they differ).
    """

    spec: StepSpec
    state: RunState
    started: float
    base_engine_state: Any = None
    outcome: StepOutcome | None = None
    error: BaseException | None = None

    @property
    def name(self) -> str:
        """The step name."""
        return self.spec.name


class Branches:
    """The branches of one execution: starts them, waits for them, merges what they did.

    Args:
        state: the run's state (the executor's).
        limit: at most this many branches in flight (the reactor's ``max_concurrency``).
        run_step: runs one leaf step to its final result, in a branch thread
            (the executor's observed step runner).
    """

    def __init__(
        self,
        state: RunState,
        limit: int,
        run_step: Callable[[RunState, StepSpec], StepOutcome],
    ) -> None:
        self._state = state
        self._limit = limit
        self._run_step = run_step
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._in_flight: dict[concurrent.futures.Future[StepOutcome], Branch] = {}

    @property
    def busy(self) -> bool:
        """Whether a branch is in flight."""
        return bool(self._in_flight)

    @property
    def full(self) -> bool:
        """Whether ``limit`` branches are in flight."""
        return len(self._in_flight) >= self._limit

    def start(self, spec: StepSpec) -> Branch:
        """Start leaf step ``spec`` in a branch thread, with the context variables of the
        calling thread (an ``await Reactor.arun`` caller's loop, the current span).

        Returns:
            The started branch.
        """
        state = self._state
        shadow = copy.copy(state.ctx)
        shadow.intermediate_results = dict(state.ctx.intermediate_results)
        shadow.execution_trace = []
        branch_state = replace(
            state,
            ctx=shadow,
            checkpoint=_BranchCheckpoint(state.env, shadow),
            in_flight=None,
            step_holds=(),
            retry_wait=None,  # waits in its own thread (module docstring)
            hand_off=None,
            step_transaction=None,
        )
        branch = Branch(
            spec=spec, state=branch_state, started=state.now(),
            base_engine_state=shadow.engine_state,
        )
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._limit, thread_name_prefix="reactor-branch"
            )
        context = contextvars.copy_context()
        future = self._pool.submit(context.run, self._run_step, branch_state, spec)
        self._in_flight[future] = branch
        return branch

    def wait(self) -> list[Branch]:
        """Wait until at least one branch settles; merge every settled branch's bookkeeping
        into the run's context (:meth:`_merge`) and return them in the order they started.

        Raises:
            BaseException: an interruption of the waiting thread (Ctrl-C); the branches stay
                in flight, and a later :meth:`wait` collects them.
        """
        done, _ = concurrent.futures.wait(
            self._in_flight, return_when=concurrent.futures.FIRST_COMPLETED
        )
        settled = []
        for future in [f for f in self._in_flight if f in done]:
            branch = self._in_flight.pop(future)
            try:
                branch.outcome = future.result()
            except BaseException as exc:  # handed to the executor, which decides
                branch.error = exc
            self._merge(branch)
            settled.append(branch)
        return settled

    def _merge(self, branch: Branch) -> None:
        """Bring what the branch recorded in its shadow context into the run's: its trace
        entries, its attempt count and, when it changed it (a parked hold), the engine
        state."""
        ctx, shadow, name = self._state.ctx, branch.state.ctx, branch.name
        ctx.execution_trace.extend(shadow.execution_trace)
        attempts = shadow.attempts_of(name)
        if attempts != ctx.attempts_of(name):
            ctx.count_attempts(name, attempts)
        if shadow.engine_state is not branch.base_engine_state:
            ctx.engine_state = shadow.engine_state

    def close(self) -> None:
        """Let the pool's threads end (without waiting for a branch still in flight)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def __enter__(self) -> Branches:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
