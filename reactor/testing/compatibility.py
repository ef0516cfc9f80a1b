"""Checks that a new definition of a reactor can continue the stored runs of an old one
(docs/deploys.md, "Testing a new definition"; docs/testing.md, "Assertions").

:func:`compatibility_report` builds, in memory, a stored run of the old definition at every
position it can be stored at (before its first step, after each step it completes in
dependency order, at each interrupt or sleep, and finished) and judges each with the new
definition by the compatibility rules (:mod:`reactor.engine.compatibility`): forward (the run
continues) and as a rollback (it is undone or cancelled). With ``renames`` each run is first
migrated as ``Reactor.migrate`` would (:mod:`reactor.engine.run_control.migrate`).
:func:`assert_can_continue` fails with the position, rule and step of every refusal. Nothing
is stored and no runtime is needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.engine import compatibility
from reactor.engine.compatibility import Incompatibility
from reactor.engine.run_control import migrate
from reactor.errors import DefinitionMismatchError
from reactor.model.context import Context
from reactor.model.engine_state import EngineState
from reactor.model.run_records import UndoEntry
from reactor.model.status import RunStatus

__all__ = ["Position", "Verdict", "assert_can_continue", "compatibility_report", "positions"]

#: Step kinds that leave no undo entry when they complete.
_NO_UNDO = frozenset({"interrupt", "sleep"})


@dataclass(frozen=True)
class Position:
    """Where a stored run of the old definition stands.

    Attributes:
        completed: the steps it completed, in the order they ran.
        at: the step it is at (about to run, or paused at an interrupt or sleep); ``None``
            for a finished run.
    """

    completed: tuple[str, ...]
    at: str | None

    def __str__(self) -> str:
        done = ", ".join(self.completed) or "nothing"
        return f"at {self.at!r} after {done}" if self.at else f"finished after {done}"


@dataclass(frozen=True)
class Verdict:
    """How the new definition judges a run at one position.

    Attributes:
        position: the run's :class:`Position`.
        forward: the rule continuing it breaks, or ``None`` (``None`` too for a finished
            run, which is never continued).
        rollback: the rule undoing or cancelling it breaks, or ``None``.
    """

    position: Position
    forward: Incompatibility | None
    rollback: Incompatibility | None

    @property
    def ok(self) -> bool:
        """Whether the run can be both continued and rolled back."""
        return self.forward is None and self.rollback is None


def _definition(reactor: Any) -> ReactorDefinition:
    """A reactor class's definition (or a definition as is)."""
    if isinstance(reactor, ReactorDefinition):
        return reactor
    found = getattr(reactor, "definition", None)
    if not isinstance(found, ReactorDefinition):
        raise TypeError(f"expected a Reactor class or a definition, got {reactor!r}")
    return found


def positions(old: Any) -> list[Position]:
    """Every position a run of ``old`` can be stored at, in the order a run passes them.

    Args:
        old: a ``Reactor`` class (or its definition).

    Returns:
        One :class:`Position` before each step (steps in dependency order, declaration order
        between independent ones) and a finished one.
    """
    definition = _definition(old)
    order: list[str] = []
    left = list(definition.steps)
    while left:
        ready = next(name for name in left
                     if all(dep in order for dep in definition.dependencies.get(name, ())))
        order.append(ready)
        left.remove(ready)
    spots = [Position(tuple(order[:k]), order[k]) for k in range(len(order))]
    return [*spots, Position(tuple(order), None)]


def _stored(old: ReactorDefinition, position: Position, index: int) -> Context:
    """A run of ``old`` stored at ``position``, as the engine would have stored it."""
    kind = old.steps[position.at].kind if position.at else None
    status = (RunStatus.COMPLETED if position.at is None else
              RunStatus.PAUSED if kind in _NO_UNDO else RunStatus.RUNNING)
    return Context(
        context_id=f"compat-{index}", reactor=old.name, status=status,
        intermediate_results=dict.fromkeys(position.completed),
        undo_stack=[UndoEntry(step=name, kind=old.steps[name].kind)
                    for name in position.completed if old.steps[name].kind not in _NO_UNDO],
        current_step=position.at,
        engine_state=EngineState(definition=definition_id(old)),
    )


def _judged(new: ReactorDefinition, old: ReactorDefinition, ctx: Context,
            renames: Mapping[str, str], forward: bool) -> Incompatibility | None:
    """What the new definition says of ``ctx`` (migrated first when there are renames)."""
    if renames:
        if ctx.status is RunStatus.RUNNING:  # stored between steps, as a held run would be
            ctx = replace(ctx, status=RunStatus.NEEDS_VERSION)
        try:
            migrate.plan(new, ctx, renames, old=old, forward=forward)
        except DefinitionMismatchError as exc:
            return Incompatibility(exc.step, _rule(str(exc)), str(exc))
        return None
    return compatibility.judge(new, ctx, forward=forward)


def _rule(message: str) -> str:
    """The rule a refusal's message names."""
    for rule in ("completed_step_removed", "completed_step_changed", "undo_removed",
                 "current_step_removed", "pending_step_rewired"):
        if rule in message:
            return rule
    return "unknown"


def compatibility_report(
    old: Any, new: Any, *, renames: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """Judge a stored run of ``old`` at every position with ``new`` (module docstring).

    Args:
        old: the released ``Reactor`` class (or definition) whose runs are stored.
        new: the ``Reactor`` class (or definition) about to be deployed.
        renames: old step name -> new step name, when the runs will be migrated
            (``reactor runs migrate --rename``).

    Returns:
        One :class:`Verdict` per position of :func:`positions`.

    Raises:
        MigrationArgumentError: a rename is unusable (names the field).
        TypeError: ``old`` or ``new`` is neither a reactor class nor a definition.
    """
    before, after = _definition(old), _definition(new)
    verdicts = []
    for index, position in enumerate(positions(before)):
        ctx = _stored(before, position, index)
        forward = None if position.at is None else _judged(
            after, before, ctx, renames or {}, True)
        verdicts.append(Verdict(position, forward,
                                _judged(after, before, ctx, renames or {}, False)))
    return verdicts


def assert_can_continue(
    old: Any, new: Any, *, at: Iterable[str] | None = None,
    renames: Mapping[str, str] | None = None, rollback: bool = True,
) -> None:
    """Fail unless ``new`` can continue (and roll back) every stored run of ``old``.

    Args:
        old: the released ``Reactor`` class (or definition).
        new: the one about to be deployed.
        at: only the runs at these steps of ``old`` (and the finished ones are skipped);
            ``None``: every position.
        renames: old step name -> new step name, for runs migrated first.
        rollback: also require that each run can be rolled back.

    Raises:
        AssertionError: one line per refused position: where, forward or rollback, the rule
            and the step.
        ValueError: a name in ``at`` is not a step of ``old``.
    """
    before = _definition(old)
    wanted = None if at is None else list(at)
    for name in wanted or []:
        if name not in before.steps:
            raise ValueError(f"at: {name!r} is not a step of {before.name!r}")
    lines = []
    for verdict in compatibility_report(old, new, renames=renames):
        if wanted is not None and verdict.position.at not in wanted:
            continue
        for what, found in (("continue", verdict.forward),
                            ("roll back", verdict.rollback if rollback else None)):
            if found is not None:
                lines.append(f"{verdict.position}: cannot {what}: {found.rule} "
                             f"(step {found.step!r})")
    if lines:
        raise AssertionError(
            f"{_definition(new).name!r} cannot take over stored runs of the old definition:\n"
            + "\n".join(lines)
        )
