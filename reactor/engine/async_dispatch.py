"""``async_step`` in the parent run: dispatching a unit (docs/workers.md, "Async steps
(``async_step``)"; the invariants of docs/architecture.md, "Execution invariants").

The semantics, dispatch guard included, are those of :mod:`reactor.engine.async_step`'s
docstring, "Dispatch"; the readers of a dispatched unit live there. The dispatch is a module of
its own because its guard resolves the unit's arguments (:mod:`reactor.engine.arguments`), and
argument resolution reads a unit's result through :mod:`reactor.engine.async_step`
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

import logging

from reactor.dsl.coordination import LockDecl, SemaphoreDecl
from reactor.dsl.declarations import StepSpec
from reactor.engine.arguments import resolve_arguments
from reactor.engine.coordination import step_default_key
from reactor.engine.state import RunState
from reactor.errors import (
    ArgumentResolutionError,
    AsyncStepDeadlockError,
    CoordinationKeyError,
    InputValidationError,
)
from reactor.model.engine_state import AsyncStepRef
from reactor.model.records import StepResultRecord
from reactor.model.results import Failure
from reactor.ports.payloads import StepPayload, job

__all__ = ["dispatch"]

log = logging.getLogger("reactor.async_step")


def _held_by_execution(state: RunState, decl: LockDecl | SemaphoreDecl, key: str) -> bool:
    ctx = state.ctx
    if isinstance(decl, LockDecl):
        info = state.env.storage.locks.info(key)
        return info is not None and info.owner == (ctx.root_context_id or ctx.context_id)
    # A semaphore slot is a fresh token per hold: the execution holds a limit-1 slot on this
    # key when its own reactor-level declaration took it.
    for own in state.definition.coordination:
        if isinstance(own, LockDecl | SemaphoreDecl):
            try:
                if own.resolve_key(ctx.inputs, state.definition.name) == key:
                    return True
            except CoordinationKeyError:
                continue
    return False


def _guard(state: RunState, spec: StepSpec) -> Failure | None:
    """The dispatch guard (:mod:`reactor.engine.async_step`, "Dispatch", 2); ``None`` when the
    unit may go."""
    decls = [
        d for d in spec.coordination
        if isinstance(d, LockDecl) or (isinstance(d, SemaphoreDecl) and d.limit == 1)
    ]
    if not decls:
        return None
    try:
        arguments = resolve_arguments(spec, state.ctx)
        if spec.step_class is not None:
            arguments = spec.step_class.contract.validate(arguments, step_name=spec.name)
    except (ArgumentResolutionError, InputValidationError):
        return None  # the unit's own job reports it (before taking any hold)
    default_key = step_default_key(state.definition.name, spec)
    for decl in decls:
        try:
            key = decl.resolve_key(arguments, default_key)
        except CoordinationKeyError:
            continue
        if _held_by_execution(state, decl, key):
            error = AsyncStepDeadlockError(
                f"async_step {spec.name!r} refused: its {decl.primitive} {key!r} is held by "
                "the dispatching execution (the unit would wait for its own parent)",
                step=spec.name, key=key,
            )
            return Failure(error, retryable=False)
    return None


def dispatch(state: RunState, spec: StepSpec) -> Failure | None:
    """Dispatch async unit ``spec`` of ``state.ctx`` (:mod:`reactor.engine.async_step`,
    "Dispatch": re-attach to a stored record, else guard, persist, then enqueue).

    Args:
        state: the run owning the unit (its checkpoint saves the stored root record).
        spec: the ``async_step`` step.

    Returns:
        ``None`` once the unit is dispatched (or re-attached); a ``Failure`` when the dispatch
        guard refused it.

    Raises:
        EncodeError, ContextTooLargeError, StorageError, RouterError: persisting or enqueueing
            failed (before the enqueue: nothing was dispatched).
    """
    ctx = state.ctx
    env = state.env
    name = spec.name
    store = env.storage.step_results
    existing = store.get(ctx.context_id, name)
    record_ctx = state.checkpoint.context  # the stored record the worker loads (the root)
    if existing is None:
        refused = _guard(state, spec)
        if refused is not None:
            return refused
        now = env.now()
        store.put(StepResultRecord(
            context_id=ctx.context_id, step_name=name, status="dispatched",
            root_context_id=record_ctx.context_id, reactor=record_ctx.reactor,
            dispatched_at=now, updated_at=now,
        ))
        dispatched_at = now
    else:
        dispatched_at = existing.dispatched_at
        log.info("event=async_step_reattached context_id=%s step=%s status=%s",
                 ctx.context_id, name, existing.status)
    ctx.engine_state = ctx.engine_state.with_async_step(name, AsyncStepRef(dispatched_at))
    state.trace("dispatched", name)
    ctx.current_step = None
    state.in_flight = None
    state.checkpoint.save()
    if existing is None:
        env.runtime.router.enqueue(job(StepPayload(
            root_context_id=record_ctx.context_id, reactor=record_ctx.reactor,
            step_context_id=ctx.context_id, step_name=name,
        )))
        log.info("event=async_step_dispatched context_id=%s step=%s", ctx.context_id, name)
    return None
