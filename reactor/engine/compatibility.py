"""Whether a process may continue a stored run under its own definition of the run's reactor
(docs/deploys.md, "Compatibility rules").

A run stores the definition it was started under (``private_data.definition``: its
fingerprint and, since step digests, one 8-hex digest per declared step's shape). When the
fingerprint in this process is the same, nothing more is read or compared. Otherwise the
rules, in this order, each naming the step it refuses:

``completed_step_removed``
    a step the run completed (a result or an undo entry) is not declared any more: its undo
    would be lost.
``completed_step_changed``
    a completed step is declared with another kind than it was recorded with.
``undo_removed``
    (needs the step digests) a completed leaf step whose shape differs from the stored one
    only in having lost its ``undo``.
``current_step_removed``
    (continuing forward only) the step the run is at (``current_step``) is not declared.
``pending_step_rewired``
    (continuing forward only; needs the step digests) a step the run has not completed, that
    the old definition declared, is declared with another shape now: its arguments, edges,
    kind or child changed.

A run stored without step digests (or before fingerprints) is judged by the first two rules
and ``current_step_removed``, and otherwise continued as before. Steps added to the
definition, steps removed that the run never reached and changes the fingerprint does not
cover are allowed. A rollback (``forward=False``) is judged by the first three rules only:
it needs every completed step's undo, not the pending steps' wiring.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Final

from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id, step_digest, step_shape
from reactor.errors import DefinitionMismatchError
from reactor.model.context import Context
from reactor.model.engine_state import VersionHold
from reactor.model.status import RunStatus

__all__ = ["LEAF_KINDS", "Incompatibility", "NeedsVersion", "hold", "judge", "require"]

log = logging.getLogger("reactor.deploys")

#: The step kinds that carry their own ``undo`` (the others undo a child run or a map).
LEAF_KINDS: Final = frozenset({"step", "async_step"})


@dataclass(frozen=True)
class Incompatibility:
    """Why ``definition`` cannot safely continue a stored run (see the module docstring).

    Attributes:
        step: the step the rule names.
        rule: the rule's name (``completed_step_removed``, ``completed_step_changed``,
            ``undo_removed``, ``current_step_removed``, ``pending_step_rewired``).
        reason: the reason in words, naming the run, the step and the rule.
    """

    step: str
    rule: str
    reason: str


class NeedsVersion(Exception):  # noqa: N818 - a control-flow signal, like Park
    """A worker stored a run ``needs_version`` instead of continuing it (raised after the
    save; the job ends).

    Args:
        found: why.

    Attributes:
        found: as given.
    """

    def __init__(self, found: Incompatibility) -> None:
        super().__init__(found.reason)
        self.found = found


def judge(
    definition: ReactorDefinition, ctx: Context, *, forward: bool = True
) -> Incompatibility | None:
    """Judge the stored run ``ctx`` against ``definition`` (docs/deploys.md, "Compatibility
    rules"). With an equal fingerprint this compares two strings and returns.

    Args:
        definition: the run's reactor definition in this process.
        ctx: the stored run.
        forward: ``True``: the run continues its steps; ``False``: it is only rolled back.

    Returns:
        The first rule the run breaks, or ``None`` when it may be continued.
    """
    stored = ctx.engine_state.definition
    if stored is not None and stored.fingerprint == definition_id(definition).fingerprint:
        return None
    old = None if stored is None else stored.steps
    steps = definition.steps
    run = ctx.context_id
    completed = [*ctx.intermediate_results, *(e.step for e in ctx.undo_stack)]
    for name in completed:
        if name not in steps:
            return Incompatibility(name, "completed_step_removed", (
                f"run {run!r}: step {name!r} was completed and is not declared by "
                f"{definition.name!r} any more (completed_step_removed: its undo would be lost)"
            ))
    for entry in ctx.undo_stack:
        spec = steps[entry.step]
        if entry.kind is not None and spec.kind != entry.kind:
            return Incompatibility(entry.step, "completed_step_changed", (
                f"run {run!r}: step {entry.step!r} was completed as kind {entry.kind!r} and is "
                f"declared as kind {spec.kind!r} now (completed_step_changed)"
            ))
        if old is not None and spec.kind in LEAF_KINDS and _lost_undo(
            definition, entry.step, old.get(entry.step)
        ):
            return Incompatibility(entry.step, "undo_removed", (
                f"run {run!r}: step {entry.step!r} was completed with an undo that "
                f"{definition.name!r} does not declare any more (undo_removed)"
            ))
    if not forward:
        return None
    at = ctx.current_step
    if at is not None and at not in steps and at not in ctx.intermediate_results:
        return Incompatibility(at, "current_step_removed", (
            f"run {run!r}: the step it is at, {at!r}, is not declared by {definition.name!r} "
            "any more (current_step_removed)"
        ))
    if old is None:
        return None
    new = definition_id(definition).steps or {}
    for name, digest in new.items():
        if name in ctx.intermediate_results or name not in old or old[name] == digest:
            continue
        return Incompatibility(name, "pending_step_rewired", (
            f"run {run!r}: step {name!r} has not completed and {definition.name!r} declares "
            "it with other wiring than the run was started with (pending_step_rewired)"
        ))
    return None


def require(definition: ReactorDefinition, ctx: Context, *, forward: bool = True) -> None:
    """Refuse a stored run ``definition`` cannot safely continue (a synchronous caller:
    resume, undo, cancel, retry, rewind). Nothing is changed.

    Args:
        definition: the run's reactor definition in this process.
        ctx: the stored run.
        forward: as for :func:`judge`.

    Raises:
        DefinitionMismatchError: :func:`judge` found a rule the run breaks (``exc.step``
            names the step; the message names the rule).
    """
    found = judge(definition, ctx, forward=forward)
    if found is not None:
        way_out = (
            "deploy the definition the run was started with and call Reactor.resume_version, "
            "or move the run onto this one with reactor runs migrate"
            if forward else
            "import the definition the run was started with (a retained class: reactor runs "
            "undo|cancel --import MODULE), or move the run onto this one with reactor runs "
            "migrate --rename OLD=NEW"
        )
        raise DefinitionMismatchError(
            f"{found.reason}; {way_out} (docs/deploys.md, \"Operator tools\")",
            run_id=ctx.context_id, status=ctx.status.value, step=found.step,
        )


def hold(ctx: Context, found: Incompatibility, definition: ReactorDefinition,
         now: float) -> None:
    """Mark ``ctx`` ``needs_version`` with ``found`` (the caller saves it) and log
    ``event=needs_version`` (docs/deploys.md, "Compatibility rules").

    Args:
        ctx: the run (not saved here).
        found: what :func:`judge` returned.
        definition: the definition that refused it.
        now: epoch seconds on the runtime clock.
    """
    fingerprint = definition_id(definition).fingerprint
    ctx.engine_state = replace(ctx.engine_state, needs_version=VersionHold(
        step=found.step, rule=found.rule, reason=found.reason, fingerprint=fingerprint,
        status=ctx.status.value, at=now,
    ))
    ctx.status = RunStatus.NEEDS_VERSION
    log.warning(
        "event=needs_version run_id=%s reactor=%s step=%s rule=%s fingerprint=%s reason=%s",
        ctx.context_id, ctx.reactor, found.step, found.rule, fingerprint, found.reason,
    )


def _lost_undo(definition: ReactorDefinition, name: str, stored: str | None) -> bool:
    """Whether step ``name`` lost its undo: its stored digest is the digest of its current
    shape with ``undo`` set back."""
    if stored is None:
        return False
    shape = step_shape(definition.steps[name], definition.children)
    if shape.get("undo", True):
        return False
    return step_digest({**shape, "undo": True}) == stored
