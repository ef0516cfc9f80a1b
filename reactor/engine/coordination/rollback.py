"""Re-taking a step's lock and semaphore around its undo/compensate (docs/coordination.md,
"Rollback"): :func:`rollback_holds`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from reactor.coordination.lock import Lock
from reactor.coordination.semaphore import Semaphore
from reactor.dsl.coordination import (
    LockDecl,
    SemaphoreDecl,
)
from reactor.engine.coordination.holds import (
    Held,
    skew_budget,
)
from reactor.engine.coordination.keys import root_id, step_default_key
from reactor.engine.parks import Park, park_delay
from reactor.errors import (
    CoordinationError,
    CoordinationKeyError,
    LockAcquisitionError,
    SemaphoreAcquisitionError,
)
from reactor.model.engine_state import Waiting
from reactor.model.results import (
    RollbackFailure,
)

if TYPE_CHECKING:
    from reactor.dsl.declarations import StepSpec
    from reactor.engine.state import RunState


@contextmanager
def rollback_holds(
    state: RunState, spec: StepSpec, arguments: Mapping[str, Any], kind: Literal["undo",
                                                                              "compensate"]
) -> Iterator[RollbackFailure | None]:
    """Re-take a step's lock and semaphore around its undo/compensate (docs/coordination.md,
    "Rollback").

    Yields ``None`` when the holds were taken (or the step declares neither): run the hook,
    the holds are released afterwards. Yields a ``RollbackFailure`` with reason
    ``"coordination_unavailable"`` when a synchronous caller could not take a hold within
    ``rollback_wait``, or a key could not be computed: skip the hook and record the failure.

    Args:
        state: the context being rolled back.
        spec: the leaf step.
        arguments: the stored step arguments (not validated; the Step class's defaults are
            applied).
        kind: ``"undo"`` or ``"compensate"``.

    Raises:
        Park: inside a worker (``Env.in_worker``), a hold is contended: the holds taken so far
            are released, ``waiting`` is noted and the context saved with its rollback in
            progress; the redelivery resumes the rollback at this hook.
    """
    decls = [d for d in spec.coordination if isinstance(d, LockDecl | SemaphoreDecl)]
    if not decls:
        yield None
        return
    args = dict(arguments)
    if spec.step_class is not None:
        args = spec.step_class.contract.with_defaults(args)
    default_key = step_default_key(state.definition.name, spec)
    owner = root_id(state.ctx)
    storage = state.env.storage
    clock = state.env.clock
    worker = state.env.in_worker
    held: list[Held] = []
    failure: RollbackFailure | None = None
    try:
        for decl in sorted(decls, key=lambda d: 0 if isinstance(d, LockDecl) else 1):
            key = decl.resolve_key(args, default_key)
            wait = 0.0 if worker else decl.effective_rollback_wait
            client: Lock | Semaphore
            if isinstance(decl, LockDecl):
                client = Lock(
                    storage.locks, key, owner=owner, ttl=decl.ttl, wait=wait,
                    auto_extend=decl.auto_extend, clock=clock, skew=skew_budget(storage),
                )
            else:
                client = Semaphore(
                    storage.semaphores, key, limit=decl.limit, lease=decl.lease, wait=wait,
                    clock=clock, skew=skew_budget(storage),
                )
            client.acquire()
            held.append(Held(key, client))
    except (CoordinationError, CoordinationKeyError, ValueError) as exc:
        # ValueError: a lease the backend cannot honour (not above its clock-skew budget).
        for hold in reversed(held):
            hold.release()
        held = []
        if worker and isinstance(exc, LockAcquisitionError | SemaphoreAcquisitionError):
            _park_rollback(state, spec.name, exc)
        failure = RollbackFailure(
            step=spec.name, kind=kind, reason="coordination_unavailable",
            message=f"{kind} skipped: {exc}",
        )
    if failure is None and worker and state.ctx.engine_state.waiting is not None:
        state.ctx.engine_state = replace(state.ctx.engine_state, waiting=None)
    try:
        yield failure
    finally:
        for hold in reversed(held):
            hold.release()


def _park_rollback(state: RunState, step: str,
                   exc: LockAcquisitionError | SemaphoreAcquisitionError) -> NoReturn:
    """Note what the rollback waits on, save the context (its rollback in progress) and park."""
    reason: Literal["lock", "semaphore"] = (
        "lock" if isinstance(exc, LockAcquisitionError) else "semaphore"
    )
    state.ctx.engine_state = replace(
        state.ctx.engine_state, waiting=Waiting(scope=step, primitive=reason, key=exc.key)
    )
    state.trace("contention_park", step, detail=f"rollback {reason} {exc.key}")
    state.checkpoint.save()
    raise Park(delay=park_delay(state.env.settings), reason=reason, key=exc.key, step=step)
