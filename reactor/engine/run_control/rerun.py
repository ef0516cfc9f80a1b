"""Which steps a rewind or a fork runs again, and whether a stored run still matches its
reactor's definition (docs/operations.md, "Pause, rewind, fork"; the undo rules are in
docs/concepts.md, "Rollback").

**The steps run again from step S** are S itself, every step recorded after S (results are
recorded in completion order, the undo stack in the same order), and every step that depends
on one of these, directly or not. The other recorded steps keep their results. Because the
undo entries of the steps recorded after S are the newest ones, the entries of the steps run
again are always the top of the undo stack (:func:`undo_keep`).

**A stored run matches** its definition when every step it recorded (a result, an undo entry,
its held failed step) is declared, with the kind it was recorded with.
"""

from __future__ import annotations

from collections.abc import Iterable

from reactor.dsl.definition import ReactorDefinition
from reactor.engine import compatibility
from reactor.errors import DefinitionMismatchError
from reactor.model.context import Context

__all__ = ["RERUNNABLE_KINDS", "check_matches", "rerun_steps", "undo_keep", "unsupported"]

#: The step kinds a rewind or a fork can run again (an ``interrupt`` would meet its old
#: resume claim, an ``async_step`` or ``async_reactor`` its old unit or child run, a fan-out
#: map its old elements).
RERUNNABLE_KINDS = frozenset({"step", "compose", "map"})


def check_matches(definition: ReactorDefinition, ctx: Context, *, failed: str | None) -> None:
    """Refuse a stored run whose recorded steps no longer match ``definition``.

    Args:
        definition: the reactor's definition in this process.
        ctx: the stored run.
        failed: the run's held failed step, if any.

    Raises:
        DefinitionMismatchError: a recorded step is not declared, or has another kind.
    """
    steps = definition.steps
    recorded = [*ctx.intermediate_results, *([failed] if failed is not None else [])]
    for name in recorded:
        if name not in steps:
            raise _mismatch(ctx, name, f"step {name!r} of the run is not declared by "
                            f"{definition.name!r} any more")
    for entry in ctx.undo_stack:
        spec = steps.get(entry.step)
        if spec is None:
            raise _mismatch(ctx, entry.step, f"step {entry.step!r} on the run's undo stack "
                            f"is not declared by {definition.name!r} any more")
        if spec.kind != entry.kind:
            raise _mismatch(ctx, entry.step, f"step {entry.step!r} was recorded as kind "
                            f"{entry.kind!r} and is declared as kind {spec.kind!r} now")
    compatibility.require(definition, ctx)  # the other rules of docs/deploys.md


def _mismatch(ctx: Context, step: str, why: str) -> DefinitionMismatchError:
    return DefinitionMismatchError(
        f"run {ctx.context_id!r} no longer matches its reactor's definition: {why}",
        run_id=ctx.context_id, status=ctx.status.value, step=step,
    )


def rerun_steps(definition: ReactorDefinition, ctx: Context, start: str) -> list[str]:
    """The steps run again from step ``start`` (see the module docstring), in declaration
    order.

    Args:
        definition: the reactor's definition (``start`` declared).
        ctx: the stored run.
        start: the step to start from (recorded or not).

    Returns:
        The step names.
    """
    recorded = list(ctx.intermediate_results)
    chosen = {start}
    if start in ctx.intermediate_results:
        chosen.update(recorded[recorded.index(start):])
    dependents: dict[str, list[str]] = {}
    for name, deps in definition.dependencies.items():
        for dep in deps:
            dependents.setdefault(dep, []).append(name)
    pending = list(chosen)
    while pending:
        for dependent in dependents.get(pending.pop(), ()):
            if dependent not in chosen:
                chosen.add(dependent)
                pending.append(dependent)
    return [name for name in definition.steps if name in chosen]


def undo_keep(ctx: Context, rerun: Iterable[str]) -> int:
    """How many undo entries stay when the steps ``rerun`` are undone: the entries below the
    oldest entry of a step run again (those above it all belong to steps run again).

    Args:
        ctx: the stored run.
        rerun: the steps run again.

    Returns:
        The number of oldest entries to keep.
    """
    names = set(rerun)
    for index, entry in enumerate(ctx.undo_stack):
        if entry.step in names:
            return index
    return len(ctx.undo_stack)


def unsupported(definition: ReactorDefinition, rerun: Iterable[str]) -> str | None:
    """The first step of ``rerun`` a rewind or fork cannot run again (its kind is not in
    :data:`RERUNNABLE_KINDS`, or it is a fan-out map), else ``None``."""
    for name in rerun:
        spec = definition.steps[name]
        if spec.kind not in RERUNNABLE_KINDS or spec.fan_out is not None:
            return name
    return None
