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
* **The root's deadline** (docs/concepts.md, "Run deadlines") governs every element: each is
  created with a copy of it and checks it before each of its steps, and no element starts
  once it passed: the map step fails with ``RunDeadlineExceeded`` after rolling back the
  completed elements, highest index first (``atomic`` or not), and the run stops.

A completed map is pushed on the undo stack with its completed elements; undoing it replays each
element's undo stack (:func:`reactor.engine.rollback.roll_back_elements`).

**Re-execution** (docs/workers.md, "Maps resume"). When the map step runs again with its
``map_ref`` already stored in the parent (a worker recovering the run after a crash inside
the map, at any nesting depth: a composed child's map is saved with its root), the step
**adopts** the stored map id and the element ids it names, never a fresh one, so the
elements that ran before the crash are resumed or rolled back, not leaked. Each named
element is read back like a composed child (:mod:`reactor.engine.compose`):

* ``completed`` — its stored value, nothing runs again;
* ``failed`` — its stored ``Failure`` (it rolled itself back);
* ``halted`` — its stored halt;
* ``cancelled`` — a ``Failure`` (an undo rolled it back);
* ``running``/``pending``/``aborted`` — continued from its own checkpoint (completed element
  steps are not run again), or its rollback a crash cut off is finished;
* not stored (a crash between the parent's save naming it and the element's first save) —
  started under the same id.

Elements the stored reference does not name yet run as usual, under the same map id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.arguments import resolve, resolve_arguments
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.rollback import roll_back_elements
from reactor.engine.run_control import deadline
from reactor.engine.start import launch
from reactor.engine.state import Executor, InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import ArgumentResolutionError, DeserializationError
from reactor.model.context import Context
from reactor.model.results import Failure, Halt, MapResults, Paused, Success
from reactor.model.run_records import MapMembership, MapRef, UndoEntry
from reactor.model.status import RunStatus

__all__ = ["is_inline_ref", "run_map"]


def _elements(source: Any) -> list[Any]:
    if isinstance(source, str | bytes | Mapping) or not isinstance(source, Iterable):
        raise ArgumentResolutionError(
            f"map source must be a sequence of elements, got {type(source).__name__}"
        )
    return list(source)


def is_inline_ref(ref: object) -> bool:
    """Whether ``ref`` (a parent's ``composed_contexts`` entry) is a stored inline map
    reference (a :class:`~reactor.model.run_records.MapRef`, not a fan-out one)."""
    return isinstance(ref, MapRef) and not ref.is_fan_out


def _stored_element(state: RunState, element_id: str) -> Context | None:
    """The element's stored context (``None``: never stored, or unreadable: started again
    under the same id).

    Raises:
        StorageError: the backend failed.
    """
    try:
        return load_context(state.env, element_id)
    except DeserializationError:
        return None


def _resume_element(
    state: RunState, definition: ReactorDefinition, element: Context, executor: Executor
) -> Success | Failure | Halt:
    """The outcome of an element the stored map reference names (see "Re-execution")."""
    status = element.status
    if status is RunStatus.COMPLETED:
        value: Any = element.returned_value(definition.returns)
        return Success(value)
    if status is RunStatus.HALTED:
        return _stored_halt(element)
    if status is RunStatus.FAILED:
        return element.failure or Failure(
            "the map element failed", retryable=False, reactor_name=element.reactor
        )
    if status is RunStatus.CANCELLED:
        return Failure(f"map element {element.context_id} was rolled back (cancelled)",
                       retryable=False, reactor_name=element.reactor)
    element_state = RunState(definition, element, state.env, Checkpointer(state.env, element))
    if element.rollback is not None and element.failure is None:
        element.rollback = None  # an interruption of forward work: resume like a crash
    if element.rollback is not None:  # a crash cut the element's own rollback off
        element.status = RunStatus.RUNNING
        try:
            return executor.conclude_failure(element_state)
        except INTERRUPTIONS as exc:
            executor.abort(element_state, exc)
            raise
    element.status = RunStatus.RUNNING
    result = executor.execute(element_state)
    assert not isinstance(result, Paused)  # a map element never pauses
    return result


def _stored_halt(element: Context) -> Halt:
    """The ``Halt`` a halted element returned, rebuilt from its trace (reason and step)."""
    entry = element.last_trace("halt")
    return Halt(None) if entry is None else Halt(entry.detail, step_name=entry.step)


def _deadline_cut(state: RunState, step: str, index: int) -> Failure | None:
    """The map step's ``Failure`` of :class:`~reactor.errors.RunDeadlineExceeded` when the
    deadline governing ``state`` passed before element ``index`` starts, else ``None``."""
    passed = deadline.passed(state)
    if passed is None:
        return None
    return deadline.cut_failure(
        state.checkpoint.context.root_context_id or state.checkpoint.context.context_id,
        passed, f"map step {step!r} would start element {index} after it",
    )


def run_map(state: RunState, spec: StepSpec, *, executor: Executor) -> StepOutcome:
    """Run map step ``spec`` over its source's elements (see the module docstring); a map
    re-executed with its reference stored adopts it ("Re-execution" above).

    Args:
        state: the run owning the map step.
        spec: the map step (it has a ``source``).
        executor: the executor's entry points (it passes its own): ``execute`` runs each
            element's steps (an element is a run of its own, started with
            :func:`reactor.engine.start.launch`), ``conclude_failure`` and ``abort`` finish
            or store an adopted element whose rollback a crash cut off.

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
    stored = ctx.composed_contexts.get(name)
    known: dict[int, str] = {}
    if isinstance(stored, MapRef) and is_inline_ref(stored):  # re-executed: adopt the map
        map_id, known = stored.map_id, dict(stored.elements)  # and the elements it names
    else:
        map_id = uuid.uuid4().hex
    ctx.composed_contexts[name] = MapRef(map_id=map_id, elements=dict(known))
    in_flight = InFlight(step=name, kind="map", arguments={"map_id": map_id})
    state.in_flight = in_flight
    completed: list[tuple[int, str]] = []
    results: list[Success | Failure] = []

    def entry() -> UndoEntry:
        return UndoEntry(
            step=name, kind="map", arguments={"map_id": map_id}, result=None,
            map_id=map_id, elements=tuple(completed),
        )

    for index, item in enumerate(items):
        try:
            arguments = resolve_arguments(spec, ctx, element=item)
        except ArgumentResolutionError as exc:
            element_result: Success | Failure = Failure(exc, retryable=False)
        else:
            in_flight.body_started = True
            element_id = known.get(index)
            adopted = None if element_id is None else _stored_element(state, element_id)
            outcome: Success | Failure | Halt | Paused
            if adopted is not None:
                assert element_id is not None
                element_ctx = adopted
                outcome = _resume_element(state, element_definition, adopted, executor)
            else:
                cut = _deadline_cut(state, name, index)
                if cut is not None:  # no element starts after the root's deadline
                    rolled = roll_back_elements(
                        state.env, element_definition, name, completed,
                        roll_back_fan_out=roll_back_fan_out,
                    )
                    failure = replace(cut, rollback_failures=rolled)
                    return StepOutcome(failure, {}, body_started=in_flight.body_started)
                if element_id is None:
                    element_id = str(uuid.uuid4())
                    ref = ctx.map_ref(name)
                    assert ref is not None
                    ctx.composed_contexts[name] = ref.with_element(index, element_id)
                    state.checkpoint.save()  # named before it starts (a crash adopts it)
                element_ctx, outcome = launch(
                    element_definition,
                    arguments,
                    state.env,
                    execute=executor.execute,
                    context_id=element_id,
                    parent=ctx,
                    secret_inputs=state.definition.child_redacted(name, ctx.redacted),
                    map_metadata=MapMembership(
                        map_step=name,
                        map_id=map_id,
                        index=index,
                        parent_reactor=state.definition.name,
                    ),
                    deadline=deadline.governing(state),  # the root's governs the element
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
