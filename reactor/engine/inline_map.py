"""Inline map steps: one element-reactor run per element, sequentially
(docs/concepts.md, "Inline map").

Each element runs as its own execution with its **own stored context** (a separate record with
``parent_context_id``), whose ``map_metadata`` records the map step, the map id and the element
index (as ruby_reactor's ``map_step.rb``). The parent records ``{index: context_id}`` in
``composed_contexts[step]`` (a ``map_ref``) **before** each element starts, so an interrupted map
can still be rolled back.

* ``atomic=True`` (default): stop at the first failed element (which rolled itself back), roll
  back the completed elements highest index first, and fail the map step with the element's
  error; the element rollback failures carry ``map_step``/``element_index``.
* ``atomic=False``: run every element; the value is a
  :class:`~reactor.model.results.MapResults` of per-element ``Success``/``Failure``.
* An element ``Halt`` halts the whole run (completed elements are kept, not rolled back).

A completed map is pushed on the undo stack with its completed elements; undoing it replays each
element's undo stack (:func:`reactor.engine.rollback.roll_back_elements`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.engine.arguments import resolve, resolve_arguments
from reactor.engine.map_rollback import roll_back_fan_out
from reactor.engine.rollback import roll_back_elements
from reactor.engine.start import launch
from reactor.engine.state import Execute, InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import ArgumentResolutionError
from reactor.model.results import Failure, Halt, MapResults, Paused, Success

__all__ = ["run_map"]


def _elements(source: Any) -> list[Any]:
    if isinstance(source, str | bytes | Mapping) or not isinstance(source, Iterable):
        raise ArgumentResolutionError(
            f"map source must be a sequence of elements, got {type(source).__name__}"
        )
    return list(source)


def run_map(state: RunState, spec: StepSpec, *, execute: Execute) -> StepOutcome:
    """Run map step ``spec`` over its source's elements (see the module docstring).

    Args:
        state: the run owning the map step.
        spec: the map step (it has a ``source``).
        execute: runs each element's steps (the executor passes its own
            :func:`reactor.engine.executor.execute`: an element is a run of its own, started
            with :func:`reactor.engine.start.launch`).

    Returns:
        The step's outcome: ``Success`` (a list of values, or ``MapResults`` when not
        ``atomic``) with an undo entry naming the completed elements; an element's ``Halt``;
        or, ``atomic``, the failed element's ``Failure`` after the completed elements were
        rolled back (their rollback failures attributed to the map step and index).

    Raises:
        KeyboardInterrupt, SystemExit, ...: an interruption inside an element, after that
            element was stored ``aborted`` (the parent's ``map_ref`` names it).
    """
    assert spec.source is not None
    ctx = state.ctx
    name = spec.name
    element_definition = state.definition.children[name]
    try:
        items = _elements(resolve(spec.source, ctx))
    except ArgumentResolutionError as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    map_id = uuid.uuid4().hex
    ref: dict[str, Any] = {"type": "map_ref", "map_id": map_id, "elements": {}}
    ctx.composed_contexts[name] = ref
    in_flight = InFlight(step=name, kind="map", arguments={"map_id": map_id})
    state.in_flight = in_flight
    completed: list[tuple[int, str]] = []
    results: list[Success | Failure] = []

    def entry() -> dict[str, Any]:
        return {
            "step": name, "kind": "map", "arguments": {"map_id": map_id}, "result": None,
            "map_id": map_id, "elements": [list(pair) for pair in completed],
        }

    for index, item in enumerate(items):
        try:
            arguments = resolve_arguments(spec, ctx, element=item)
        except ArgumentResolutionError as exc:
            element_result: Success | Failure = Failure(exc, retryable=False)
        else:
            element_id = str(uuid.uuid4())
            ref["elements"][str(index)] = element_id
            in_flight.body_started = True
            state.checkpoint.save()
            element_ctx, outcome = launch(
                element_definition,
                arguments,
                state.env,
                execute=execute,
                context_id=element_id,
                parent=ctx,
                secret_inputs=state.definition.child_redacted(name, ctx.redacted),
                map_metadata={
                    "map_step": name,
                    "map_id": map_id,
                    "index": index,
                    "parent_reactor": state.definition.name,
                },
            )
            # A map element never pauses: its reactor declares no interrupt (definition check).
            assert not isinstance(outcome, Paused)
            if isinstance(outcome, Halt):
                # The halted element keeps the steps it completed: Reactor.undo reaches them.
                completed.append((index, element_id))
                return StepOutcome(outcome, {}, body_started=True, undo_entry=entry())
            element_result = outcome.with_run_id(element_ctx.context_id)
            if not isinstance(element_result, Failure):
                completed.append((index, element_id))
        if isinstance(element_result, Failure):
            attributed = [f.in_map(name, index) for f in element_result.rollback_failures]
            element_result = replace(element_result, rollback_failures=attributed)
            if spec.atomic:
                rolled = roll_back_elements(
                    state.env, element_definition, name, completed,
                    roll_back_fan_out=roll_back_fan_out,
                )
                completed.clear()
                failure = replace(
                    element_result, rollback_failures=[*attributed, *rolled], run_id=None
                )
                return StepOutcome(failure, {}, body_started=in_flight.body_started)
        results.append(element_result)
    value: Any = (
        MapResults(results) if not spec.atomic
        else [r.value for r in results if isinstance(r, Success)]
    )
    return StepOutcome(Success(value), {}, body_started=True, undo_entry=entry())
