"""Background runs: handing a run to a worker and continuing it there
(docs/workers.md, "Background runs").

Caller side:

* ``Background(all=True)``: :func:`start_all` stores the run (raw inputs, status ``running``,
  input validation left to the worker) and enqueues a ``run`` job.
* ``Background(after=/before=)``: :func:`trigger` builds the executor hook that stops the caller
  at the cut point by raising :class:`HandOff`; :func:`dispatch` then checkpoints the context
  (with its undo stack) and enqueues the ``run`` job — persist, then enqueue
  (docs/architecture.md, "Execution invariants"). The caller keeps the run's liveness lock
  until after the enqueue.

Either way the caller gets a :class:`~reactor.engine.dispatch.DispatchHandle`, or the final
result when the run already finished (the inline router runs the job before ``enqueue``
returns; docs/architecture.md, "Liveness locks and keys").

Worker side: :func:`continue_run` resumes a stored run under its liveness lock, with writes
fenced on that lock. Inside the worker the hand-off never re-triggers; a failure also undoes the
steps that ran in the caller (the undo stack was persisted); a step retry with backoff raises
:class:`RetryLater` instead of sleeping, after saving the context, so the job handler re-enqueues
the run with the delay (docs/concepts.md, "Retries"); a :class:`~reactor.engine.parks.Park`
is saved and re-raised for the handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from reactor.dsl.background import Background
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.engine import compatibility, coordination, executor, observe
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.coordination import is_admitted, mark_admitted  # re-exported (docs/workers.md)
from reactor.engine.dispatch import DispatchHandle, stored_result
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.engine.parks import Park
from reactor.engine.start import invalid_inputs
from reactor.engine.state import RunState
from reactor.errors import ContextTooLargeError, EncodeError, InputValidationError
from reactor.model.context import Context
from reactor.model.engine_state import EngineState, HandOffMode
from reactor.model.results import Failure, Paused, Success
from reactor.model.run_links import RunLinks
from reactor.model.status import RunStatus
from reactor.ports.capabilities import RunsJobsInline
from reactor.ports.payloads import RunPayload, job

__all__ = [
    "HandOff",
    "RetryLater",
    "continue_run",
    "dispatch",
    "is_admitted",
    "mark_admitted",
    "start_all",
    "trigger",
]


class HandOff(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the :func:`trigger` hook inside the caller's executor at the cut point.

    A ``BaseException`` so nothing between the hook and :func:`reactor.engine.api.run` treats
    it as a failure.

    Attributes:
        state: the caller's execution state at the cut point.
        mode: ``"after"`` or ``"before"``.
        step: the step named by the ``Background`` declaration.
    """

    def __init__(self, state: RunState, mode: HandOffMode, step: str) -> None:
        super().__init__(f"hand-off {mode} {step!r}")
        self.state = state
        self.mode = mode
        self.step = step


class RetryLater(BaseException):  # noqa: N818 - control flow, not an error
    """Raised inside a worker instead of sleeping before a step retry (the context is saved).

    Attributes:
        delay: seconds until the next attempt.
        step: the step that will be retried (``ctx.current_step``).
    """

    def __init__(self, delay: float, step: str | None = None) -> None:
        super().__init__(f"retry {step!r} in {delay:g}s")
        self.delay = delay
        self.step = step


def trigger(
    background: Background | None,
) -> Callable[[RunState, str, str], None] | None:
    """The executor hook of a ``Background(after=/before=)`` reactor, for the caller only.

    Returns:
        ``hook(state, when, step)`` raising :class:`HandOff` when ``when`` is the declared
        mode and ``step`` the declared step (``before``: ``current_step`` is set to it, the
        worker's resume cursor); ``None`` for ``all=True`` or no background.
    """
    if background is None or background.mode == "all" or background.step is None:
        return None
    mode, target = background.mode, background.step

    def hook(state: RunState, when: str, step: str) -> None:
        if when == mode and step == target:
            state.ctx.current_step = step if when == "before" else None
            raise HandOff(state, mode, step)

    return hook


def dispatch(
    env: Env, ctx: Context, checkpoint: Checkpointer, *, mode: HandOffMode,
    after_save: Callable[[], None] | None = None,
) -> DispatchHandle | Success | Failure | Paused:
    """Save ``ctx`` as ``running``, then enqueue its ``run`` job (persist before enqueue).

    Args:
        env: the caller's environment (storage and router).
        ctx: the run's root context (undo stack and results so far included).
        checkpoint: saves ``ctx``.
        mode: ``"all"``, ``"after"`` or ``"before"`` (kept as ``EngineState.handed_off``).
        after_save: called once the run is saved, before its job is enqueued (an
            idempotent start releases its liveness hold there, so the worker is not made
            to wait for it: docs/run-control.md).

    Returns:
        A :class:`DispatchHandle`; or the run's final result when the job already ran: a
        router that runs jobs inside ``enqueue`` (:class:`~reactor.ports.capabilities.
        RunsJobsInline`, ``inline://``) ran it there (a ``Paused`` when it stopped at an
        interrupt). Any other router only queued it (the handle's ``wait`` reads the outcome).

    Raises:
        EncodeError, ContextTooLargeError: the context cannot be stored (nothing enqueued).
        StorageError, RouterError: the backend failed.
    """
    ctx.status = RunStatus.RUNNING
    ctx.engine_state = replace(ctx.engine_state, handed_off=mode)
    if mode != "all":
        mark_admitted(ctx)
    checkpoint.save()
    if after_save is not None:
        after_save()
    job_id = env.runtime.router.enqueue(
        job(RunPayload(context_id=ctx.context_id, reactor=ctx.reactor))
    )
    if isinstance(env.runtime.router, RunsJobsInline):  # the job ran inside enqueue
        stored = load_context(env, ctx.context_id)
        if stored is not None and (result := stored_result(stored)) is not None:
            return result
    return DispatchHandle(
        run_id=ctx.context_id,
        job_id=job_id,
        reactor=ctx.reactor,
        results=dict(ctx.intermediate_results),
        runtime=env.runtime,
    )


def start_all(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    env: Env,
    *,
    context_id: str,
    links: RunLinks | None = None,
    hold: Liveness | None = None,
    deadline: float | None = None,
) -> DispatchHandle | Success | Failure | Paused:
    """Store a ``Background(all=True)`` run with its raw inputs and enqueue it.

    Input validation happens in the worker.
    Inputs the codec cannot store fail the run at once (stored ``failed``, nothing enqueued).

    Args:
        definition: the reactor.
        inputs: the raw inputs.
        env: the caller's environment.
        context_id: the run's id.
        links: the run-control links the run starts with (an idempotency key,
            ``retried_from``: docs/run-control.md); ``None``: none.
        hold: the caller's liveness hold on ``async:<context_id>`` (an idempotent start): the
            first save is fenced with it and it is released right after that save, before
            the enqueue.
        deadline: the run's deadline, epoch seconds on the runtime clock (docs/concepts.md,
            "Run deadlines"); ``None``: none.

    Returns:
        See :func:`dispatch`; a ``Failure`` (with ``run_id``) for unstorable inputs.
    """
    ctx = Context(
        context_id=context_id,
        reactor=definition.name,
        inputs=dict(inputs),
        redacted=sorted(definition.contract.redacted),
        created_at=env.now(),
        engine_state=EngineState(
            validate_inputs=True, links=links or RunLinks(), deadline=deadline,
            definition=definition_id(definition),
        ),
    )
    # Enqueue-time ordering: the ordered-lock ticket is taken before the save.
    coordination.assign_ordered_ticket(definition, ctx, env)
    checkpoint = (
        Checkpointer(env, ctx) if hold is None
        else FencedCheckpointer(env, ctx, hold)
    )
    with observe.run(env, ctx, "start", started=True):  # docs/observability.md
        try:
            return dispatch(
                env, ctx, checkpoint, mode="all",
                after_save=None if hold is None else hold.release,
            )
        except (EncodeError, ContextTooLargeError) as exc:
            shown = {name: "<unstorable>" for name in ctx.inputs}
            failure = Failure(exc, retryable=False, reactor_name=definition.name, inputs=shown)
            ctx.inputs = shown
            ctx.engine_state = replace(ctx.engine_state, validate_inputs=False)
            ctx.status = RunStatus.FAILED
            ctx.failure = failure
            checkpoint.save()
            return failure.with_run_id(context_id)


def _raise_retry_later(state: RunState) -> Callable[[float], None]:
    def wait(delay: float) -> None:
        raise RetryLater(delay, state.ctx.current_step)

    return wait


def continue_run(
    definition: ReactorDefinition, ctx: Context, env: Env, liveness: Liveness
) -> Success | Failure | Paused:
    """Continue a stored ``running`` run inside a worker (the ``run`` job).

    Validates the inputs first for ``all=True`` runs (an invalid input stores the run
    ``failed``; no step runs); finishes a rollback a crash cut off; otherwise runs every step
    not yet recorded, starting with ``current_step``, with the persisted undo stack. Every
    write is fenced on ``liveness``.

    Args:
        definition: the run's reactor definition.
        ctx: the stored context (status ``running``).
        env: the worker's environment.
        liveness: the execution's hold on ``async:<id>``.

    Returns:
        The run's final result (``Success``, ``Halt`` or ``Failure``), already saved; or
        ``Paused`` when it stopped at an interrupt (saved ``paused``: the job ends, and
        ``Reactor.resume`` continues the run; docs/run-control.md, "Interrupts").

    Raises:
        RetryLater: a step retry is due after a delay (the context was saved).
        Park: the execution parked (the context was saved).
        LockLost: the liveness lock lapsed; nothing more was written.
        NeedsVersion: ``definition`` cannot safely continue the run (docs/deploys.md,
            "Compatibility rules"): it was saved ``needs_version``; nothing ran.
    """
    checkpoint = FencedCheckpointer(env, ctx, liveness)
    found = compatibility.judge(definition, ctx, forward=ctx.rollback is None)
    if found is not None:  # docs/deploys.md, "Compatibility rules": never run it silently
        compatibility.hold(ctx, found, definition, env.clock.now())
        checkpoint.save()
        raise compatibility.NeedsVersion(found)
    state = RunState(definition, ctx, env, checkpoint, claims_read=liveness.claims_read)
    state.retry_wait = _raise_retry_later(state)
    with observe.run(env, ctx, "worker"):  # docs/observability.md, "Middleware"
        try:
            if ctx.engine_state.validate_inputs:
                raw = dict(ctx.inputs)
                try:
                    ctx.inputs = definition.contract.validate(raw)
                except InputValidationError as exc:
                    ctx.engine_state = replace(ctx.engine_state, validate_inputs=False)
                    return invalid_inputs(ctx, checkpoint, definition, raw, exc)
                ctx.engine_state = replace(ctx.engine_state, validate_inputs=False)
            if ctx.rollback is not None:
                return executor.conclude_failure(state)
            return executor.execute(state)
        except (RetryLater, Park) as pause:
            if isinstance(pause, Park) and pause.step is not None:
                mark_admitted(ctx)  # a step-level park: the reactor-level gates were passed
            ctx.status = RunStatus.RUNNING
            checkpoint.save()
            raise
