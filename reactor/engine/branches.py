"""Concurrent branches: independent leaf steps of one run at the same time (docs/concepts.md,
"Concurrency").

A reactor declaring ``max_concurrency = N`` (N > 1) lets the executor start up to N ready leaf
steps at once. Each runs in a thread of the run's own :class:`Branches` pool, against a
*shadow* of the run's context: a shallow copy with its own snapshot of the results so far, its
own trace and its own engine state, so the branch's bookkeeping (retry counts, trace entries,
a parked hold) never races the executor's thread, the run's single writer, which records each
settled branch and checkpoints. :meth:`Branches.wait` merges a settled branch's bookkeeping
into the run's context before the executor sees its outcome: its trace entries, its attempt
count and what it changed of the engine state (a three-way merge against the engine state it
started from, so two branches' changes never overwrite each other).

A run never contends with itself: a ready step whose step-level lock or period key a branch
in flight holds, or whose semaphore key as many branches in flight hold as the semaphore's
limit, does not start until one of them settled (:meth:`Branches.admits`; a lock is owned by
the run's root id and re-entrant, so two branches under one key would both "hold" it at once,
and two branches of one period key would both pass its check before either marked it).

No branch outlives its group: :meth:`Branches.drain` waits for every branch in flight (the
executor calls it before an ``Exception`` of its own, a failed checkpoint, leaves the group),
and :meth:`Branches.close` joins the pool's threads.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from reactor.dsl.coordination import LockDecl, OrderedLockDecl, PeriodDecl, SemaphoreDecl
from reactor.dsl.declarations import StepSpec
from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.coordination.keys import step_default_key
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome
from reactor.model.engine_state import EngineState

__all__ = [
    "Branch",
    "Branches",
    "SiblingKey",
    "branches_off",
    "merge_engine_state",
    "sibling_keys",
]


#: ``(primitive, key, limit)``: a step-level lock or period key (limit 1), or semaphore key
#: (its limit), that a branch holds; key ``None``: not known before the step runs (it stands
#: for every key of the primitive, limit 1).
SiblingKey = tuple[str, str | None, int]


def branches_off(spec: StepSpec) -> bool:
    """Whether ``spec`` may run as a concurrent branch (module docstring): a leaf step that
    is not transactional and holds no step-level ordered lock."""
    return (
        spec.kind == "step"
        and not spec.transaction
        and not any(isinstance(decl, OrderedLockDecl) for decl in spec.coordination)
    )


def sibling_keys(state: RunState, spec: StepSpec) -> tuple[SiblingKey, ...]:
    """The step-level lock, period and semaphore keys leaf step ``spec`` will hold, computed
    as its coordination computes them (from its resolved, validated arguments), with the
    number of branches of one run that may hold each at once: 1 for a lock (re-entrant for the
    run's owner, so it must be kept to one branch here) and for a period (the second branch
    must see the first one's mark), the limit for a semaphore.

    A step that reads an ``async_step`` unit's result is not resolved here (the read blocks,
    or parks in a worker, and belongs to the branch): each of its keys is unknown (``None``).

    Returns:
        The keys; ``()`` when the step declares none, or when its arguments or a key cannot be
        computed (the step then fails on its own, holding nothing, when it runs).
    """
    decls = [d for d in spec.coordination if isinstance(d, LockDecl | PeriodDecl | SemaphoreDecl)]
    if not decls:
        return ()
    definition = state.definition
    if any(definition.steps[dep].kind == "async_step"
           for dep in definition.dependencies.get(spec.name, ())):
        return tuple((decl.primitive, None, 1) for decl in decls)
    try:
        arguments: Mapping[str, Any] = resolve_arguments(spec, state.ctx)
        if spec.step_class is not None:
            arguments = spec.step_class.contract.validate(arguments, step_name=spec.name)
        default = step_default_key(definition.name, spec)
        return tuple(
            (decl.primitive, decl.resolve_key(arguments, default),
             decl.limit if isinstance(decl, SemaphoreDecl) else 1)
            for decl in decls
        )
    except Exception:  # resolution, validation or a key function failed: the step will too
        return ()


def merge_engine_state(
    current: EngineState, base: EngineState, changed: EngineState
) -> EngineState:
    """``current`` with what ``changed`` changed of ``base`` (a three-way merge): a field the
    branch did not change keeps the run's current value; in a mapping field (parked holds,
    step tickets...) only the keys the branch changed are taken from it.

    Args:
        current: the run's engine state now.
        base: the engine state the branch started from.
        changed: the branch's engine state when it settled.
    """
    updates: dict[str, Any] = {}
    for f in fields(EngineState):
        was, now = getattr(base, f.name), getattr(changed, f.name)
        if was == now:
            continue
        if isinstance(was, Mapping) and isinstance(now, Mapping):
            merged = dict(getattr(current, f.name))
            for key in set(was) | set(now):
                if key not in now:
                    merged.pop(key, None)
                elif key not in was or was[key] != now[key]:
                    merged[key] = now[key]
            updates[f.name] = merged
        else:
            updates[f.name] = now
    return replace(current, **updates) if updates else current


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
        base_engine_state: the run's engine state when the branch started (what its shadow
            changed of it is merged into the run's: :func:`merge_engine_state`).
        keys: the step-level lock, period and semaphore keys it holds
            (:func:`sibling_keys`).
    """

    spec: StepSpec
    state: RunState
    started: float
    base_engine_state: EngineState = field(default_factory=EngineState)
    outcome: StepOutcome | None = None
    error: BaseException | None = None
    keys: tuple[SiblingKey, ...] = ()

    @property
    def body_started(self) -> bool:
        """Whether the step's body started (its compensate is owed when it did not
        complete)."""
        if self.outcome is not None:
            return self.outcome.body_started
        in_flight = self.state.in_flight
        return in_flight is not None and in_flight.body_started

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
        self._keys: dict[str, tuple[SiblingKey, ...]] = {}

    @property
    def busy(self) -> bool:
        """Whether a branch is in flight."""
        return bool(self._in_flight)

    @property
    def full(self) -> bool:
        """Whether ``limit`` branches are in flight."""
        return len(self._in_flight) >= self._limit

    def admits(self, spec: StepSpec) -> bool:
        """Whether ready leaf step ``spec`` may start now without contending with a branch
        of its own run (module docstring): none of its step-level lock or period keys is
        held by a branch in flight, and none of its semaphore keys by as many as the
        limit (an unknown key, :data:`SiblingKey`, conflicts with every key of its
        primitive)."""
        keys = self._keys.get(spec.name)
        if keys is None:  # its arguments are fixed once it is ready: computed once
            keys = self._keys[spec.name] = sibling_keys(self._state, spec)
        for primitive, key, limit in keys:
            holders = sum(
                1 for branch in self._in_flight.values()
                if any(p == primitive and (k == key or None in (k, key))
                       for p, k, _ in branch.keys)
            )
            if holders >= limit:
                return False
        return True

    def start(self, spec: StepSpec) -> Branch:
        """Start leaf step ``spec`` in a branch thread, with the context variables of the
        calling thread (an ``await Reactor.arun`` caller's loop, the current span).

        Returns:
            The started branch.
        """
        state = self._state
        keys = self._keys.pop(spec.name, None)
        if keys is None:
            keys = sibling_keys(state, spec)
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
            base_engine_state=shadow.engine_state, keys=keys,
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

    def drain(self) -> None:
        """Wait until every branch in flight settled, and drop them unrecorded: the group
        stops for an ``Exception`` of the executor's thread (a failed checkpoint...), and no
        branch may run on after it propagates. An interruption of the waiting thread does
        not stop the wait (the bodies are never cancelled: the caller would get its error
        while user code of the run still ran)."""
        while self._in_flight:
            try:
                done, _ = concurrent.futures.wait(
                    self._in_flight, return_when=concurrent.futures.ALL_COMPLETED
                )
            except INTERRUPTIONS:
                continue
            for future in done:
                self._in_flight.pop(future, None)

    def _merge(self, branch: Branch) -> None:
        """Bring what the branch recorded in its shadow context into the run's: its trace
        entries, its attempt count and what it changed of the engine state (a parked hold,
        a cleared wait: :func:`merge_engine_state`)."""
        ctx, shadow, name = self._state.ctx, branch.state.ctx, branch.name
        ctx.execution_trace.extend(shadow.execution_trace)
        attempts = shadow.attempts_of(name)
        if attempts != ctx.attempts_of(name):
            ctx.count_attempts(name, attempts)
        if shadow.engine_state is not branch.base_engine_state:
            ctx.engine_state = merge_engine_state(
                ctx.engine_state, branch.base_engine_state, shadow.engine_state
            )

    def close(self) -> None:
        """Shut the pool down and join its threads once nothing is in flight (no thread of
        the run outlives it). With branches still in flight (the group unwinds for a
        ``BaseException`` that is no interruption, as a process dying would), let the threads
        end on their own instead."""
        if self._pool is not None:
            self._pool.shutdown(wait=not self._in_flight)
            self._pool = None

    def __enter__(self) -> Branches:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
