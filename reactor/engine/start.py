"""Starting one stored run: its context, its input validation, then its execution.

docs/concepts.md, "A synchronous run": a run creates a context with a fresh id, validates the
inputs (an invalid input stores the context as ``failed`` and returns a ``Failure`` with
field-level ``validation_errors``; no step runs), then executes. The same start serves a
top-level run (:func:`reactor.engine.api.run`) and each element of an inline map
(docs/concepts.md, "Inline map"): both pass the executor's ``execute`` in, so this module sits
below the executor (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.engine import observe
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer, Liveness
from reactor.engine.state import Execute, RunState
from reactor.errors import EncodeError, InputValidationError
from reactor.model.context import Context, new_context_id
from reactor.model.engine_state import EngineState
from reactor.model.results import Failure, Paused, Success
from reactor.model.run_links import RunLinks
from reactor.model.run_records import MapMembership
from reactor.model.status import RunStatus

__all__ = ["invalid_inputs", "launch"]


def launch(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    env: Env,
    *,
    execute: Execute,
    context_id: str | None = None,
    parent: Context | None = None,
    map_metadata: MapMembership | None = None,
    hand_off: Callable[[RunState, str, str], None] | None = None,
    hold: Liveness | None = None,
    secret_inputs: Iterable[str] = (),
    links: RunLinks | None = None,
    deadline: float | None = None,
) -> tuple[Context, Success | Failure | Paused]:
    """Create, validate and execute one stored run (a top-level run or a map element).

    Args:
        definition: the reactor to run.
        inputs: the raw inputs.
        env: the execution environment.
        execute: runs the validated run's steps (:func:`reactor.engine.executor.execute`,
            passed in by the caller: an inline map element is a run of its own, started from
            inside the executor).
        context_id: the id to use (default: a fresh UUID).
        parent: the parent context (map elements).
        map_metadata: the element's membership of its map (map elements).
        hand_off: the ``background after:/before:`` hook of a caller's root run
            (:func:`reactor.engine.background.trigger`).
        hold: the caller's liveness hold on ``context_id``: every save is fenced with it, so
            a caller frozen past its lock's TTL cannot overwrite the execution that took the
            run over (docs/workers.md, "Stale writers and fenced saves").
        secret_inputs: input names that are secrets besides the reactor's ``redact=True``
            ones (a map element's arguments fed from the parent's secrets).
        links: the run-control links the run starts with (an idempotency key,
            ``retried_from``: docs/run-control.md); ``None``: none.
        deadline: the run's deadline, epoch seconds on the runtime clock (docs/concepts.md,
            "Run deadlines"); ``None``: none.

    Returns:
        ``(context, result)``; the result has no ``run_id`` yet (``Paused`` when the run
        stopped at an interrupt: docs/run-control.md, "Interrupts").

    Raises:
        Whatever ``execute`` raises (interruptions after storing the run ``aborted``, the
        hand-offs of docs/workers.md and docs/fan_out.md, storage errors).
    """
    contract = definition.contract
    ctx = Context(
        context_id=context_id or new_context_id(),
        reactor=definition.name,
        redacted=sorted(contract.redacted | set(secret_inputs)),
        parent_context_id=parent.context_id if parent else None,
        root_context_id=(parent.root_context_id or parent.context_id) if parent else None,
        map_metadata=map_metadata,
        created_at=env.now(),
        engine_state=EngineState(
            links=links or RunLinks(), deadline=deadline, definition=definition_id(definition)
        ),
    )
    checkpoint = (
        Checkpointer(env, ctx) if hold is None
        else FencedCheckpointer(env, ctx, hold)
    )
    with observe.run(env, ctx, "start" if parent is None else "element", started=True):
        try:
            ctx.inputs = contract.validate(inputs)
        except InputValidationError as exc:
            return ctx, invalid_inputs(ctx, checkpoint, definition, inputs, exc)
        state = RunState(definition, ctx, env, checkpoint, hand_off=hand_off)
        return ctx, execute(state)


def invalid_inputs(
    ctx: Context,
    checkpoint: Checkpointer,
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    exc: InputValidationError,
) -> Failure:
    """Store a run whose inputs failed validation as ``failed``; no step runs.

    docs/concepts.md, "A synchronous run": the stored inputs are the redacted raw ones and the
    ``Failure`` carries field-level ``validation_errors``. Inputs the codec cannot store are
    kept by name only (``"<unstorable>"``). Used at every place a run's inputs are validated: a
    new run (:func:`launch`), a ``Background(all=True)`` run in its worker
    (docs/workers.md, "Background runs") and a fan-out map element in its job
    (docs/fan_out.md).

    Args:
        ctx: the run's context (``inputs`` and ``status`` are overwritten).
        checkpoint: saves ``ctx``.
        definition: the run's reactor.
        inputs: the raw inputs that failed validation.
        exc: the validation error.

    Returns:
        The run's final non-retryable ``Failure`` (without ``run_id``), already saved.

    Raises:
        StorageError: the backend failed while saving.
    """
    shown = definition.contract.redact(inputs)
    failure = Failure(
        exc,
        retryable=False,
        reactor_name=definition.name,
        inputs=shown,
        validation_errors=exc.field_errors,
    )
    ctx.inputs = dict(shown)
    ctx.status = RunStatus.FAILED
    ctx.failure = failure
    try:
        checkpoint.save()
    except EncodeError:  # the invalid value may not even be storable: keep the names only
        placeholder = {k: "<unstorable>" for k in shown}
        ctx.inputs = placeholder
        ctx.failure = failure = Failure(
            exc, retryable=False, reactor_name=definition.name, inputs=placeholder,
            validation_errors=exc.field_errors,
        )
        checkpoint.save()
    return failure
