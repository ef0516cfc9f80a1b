"""Compose steps: running a child reactor inline (engine.md §1.2 "Compose").

The child runs in the same process with its own context, embedded in the parent's
``composed_contexts[step]`` and saved with the parent's record. Its inputs are validated first
(a violation fails the compose step without starting the child). A failed child rolls itself
back before the parent sees the ``Failure``: the parent's compensate of the compose step is then
a no-op, and the child's rollback failures are flattened into the parent's, prefixed with the
compose step's name. A completed child puts the compose step on the parent's undo stack;
undoing it replays the child's undo stack (:mod:`reactor.engine.rollback`).
"""

from __future__ import annotations

from dataclasses import replace

from reactor.dsl.declarations import StepSpec
from reactor.engine.arguments import resolve_arguments
from reactor.engine.state import InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.model.context import Context, new_context_id
from reactor.model.errors import ArgumentResolutionError, InputValidationError
from reactor.model.results import Failure

__all__ = ["run_compose"]


def run_compose(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run compose step ``spec`` (the child to its end, rolled back if it failed)."""
    from reactor.engine.executor import execute  # recursion: the executor dispatches here

    ctx = state.ctx
    name = spec.name
    child_definition = state.definition.children[name]
    try:
        arguments = resolve_arguments(spec, ctx)
        inputs = child_definition.contract.validate(arguments)
    except ArgumentResolutionError as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    except InputValidationError as exc:
        failure = Failure(exc, retryable=False, validation_errors=exc.field_errors)
        return StepOutcome(failure, arguments, body_started=False)
    state.in_flight = InFlight(step=name, kind="compose", arguments=inputs, body_started=True)
    child = Context(
        context_id=new_context_id(),
        reactor=child_definition.name,
        inputs=inputs,
        redacted=sorted(child_definition.contract.redacted),
        parent_context_id=ctx.context_id,
        root_context_id=ctx.root_context_id or ctx.context_id,
        created_at=state.now(),
    )
    ctx.composed_contexts[name] = child
    result = execute(RunState(child_definition, child, state.env, state.checkpoint))
    entry = {"step": name, "kind": "compose", "arguments": inputs, "result": None}
    if isinstance(result, Failure):
        flattened = [f.nested(name) for f in result.rollback_failures]
        return StepOutcome(
            replace(result, rollback_failures=flattened, run_id=None), inputs, body_started=True
        )
    # A halted child keeps its progress: the entry lets Reactor.undo roll it back later.
    return StepOutcome(result, inputs, body_started=True, undo_entry=entry)
