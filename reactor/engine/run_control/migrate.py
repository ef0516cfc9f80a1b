"""``Reactor.migrate``: move a stored run onto the current definition of its reactor, with a
mapping for renamed steps (docs/deploys.md, "Operator tools").

1. The arguments are checked and the run read (nothing locked yet): a running or rolling-back
   run, or a map element, is refused (:class:`~reactor.errors.RunStateError`: an execution
   owns it). Each rename ``old -> new`` must name a step the run knows (one it recorded, or
   one its stored definition declared), a step the current definition declares, no two olds
   one new, a new name the run has not recorded, and a ``step`` or ``compose`` step (the
   records of the other kinds are keyed by the step's name outside the run's document)
   (:class:`~reactor.errors.MigrationArgumentError`, ``field="renames"``). A run already on
   the current fingerprint skips a rename of a step it does not know (migrated before).
2. The run is rewritten in memory: renamed steps' results, undo-stack entries, trace entries,
   attempt counts, composed children, its ``current_step``, its rollback's and failure hold's
   step. The stored per-step digests are renamed too (a renamed step's digest replaces the
   one of an old step of its new name, which the run never reached); when the retained old
   definition of the run's fingerprint is imported (:mod:`reactor.engine.retained`) they are
   recomputed from its steps' shapes with the renames applied to their wiring, so a step
   that reads a renamed step does not count as rewired.
3. The rewritten run is judged against the current definition by the compatibility rules
   (:mod:`reactor.engine.compatibility`; forward for a run that may still continue, rollback
   only for a finished one). Incompatible: :class:`~reactor.errors.DefinitionMismatchError`
   naming the step and rule, nothing changed.
4. Otherwise, under the run's liveness lock (not waited for: a held lock is
   :class:`~reactor.errors.LockAcquisitionError`, no concurrent writer is overwritten), the
   run is read again, steps 1-3 repeated on what is stored now, and the run is stored with
   the current definition's stamp (fingerprint, version label, step digests) in a fenced
   save. A ``needs_version`` run goes back to its previous status and its ``run`` job is
   enqueued, as :func:`reactor.engine.run_control.resume_version.resume_version` does.

``dry_run=True`` stops after step 3 and returns what would change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id, step_digest, step_shape
from reactor.engine import api, compatibility, liveness, retained
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.run_control import resume_version
from reactor.engine.run_control.arguments import check_run_id
from reactor.errors import (
    DefinitionMismatchError,
    LockAcquisitionError,
    MigrationArgumentError,
    RunStateError,
)
from reactor.model.context import Context
from reactor.model.engine_state import DefinitionStamp
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus

__all__ = ["RENAMABLE_KINDS", "Migration", "migrate", "plan"]

log = logging.getLogger("reactor.deploys")

#: The step kinds a migration may rename: every record of theirs is in the run's document.
RENAMABLE_KINDS: Final = frozenset({"step", "compose"})

#: Statuses an execution owns: never rewritten by an operator.
_OWNED: Final = frozenset({RunStatus.RUNNING, RunStatus.ROLLING_BACK})

#: Statuses of a run that can only be rolled back from now on (judged as a rollback).
_FINISHED: Final = frozenset({
    RunStatus.COMPLETED, RunStatus.HALTED, RunStatus.FAILED, RunStatus.CANCELLED,
    RunStatus.ABORTED,
})


@dataclass(frozen=True)
class Migration:
    """What a migration of one run did, or would do (``dry_run``).

    Attributes:
        run_id: the run.
        reactor: its reactor name.
        status: its status before.
        new_status: its status after (a ``needs_version`` run's previous status).
        source: the definition stamp it was stored with (``None``: stored before
            fingerprints).
        target: the current definition's stamp it carries afterwards.
        renamed: the renames that applied to this run (old -> new step name).
        changed: ``False`` when the run already carried the current definition and no
            rename applied: nothing was (or would be) written.
        dry_run: nothing was written.
        handle: the ``run`` job's handle when a ``needs_version`` run was handed back to a
            worker; else ``None``.
    """

    run_id: str
    reactor: str
    status: RunStatus
    new_status: RunStatus
    source: DefinitionStamp | None
    target: DefinitionStamp
    renamed: Mapping[str, str] = field(default_factory=dict)
    changed: bool = True
    dry_run: bool = False
    handle: DispatchHandle | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-native summary: ``{"run_id", "reactor", "status", "new_status", "from",
        "to", "renamed", "changed", "dry_run"}`` (``from``/``to``: ``{"fingerprint",
        "version"}``)."""
        def stamp(value: DefinitionStamp | None) -> dict[str, Any] | None:
            if value is None:
                return None
            return {"fingerprint": value.fingerprint, "version": value.version}

        return {
            "run_id": self.run_id, "reactor": self.reactor, "status": self.status.value,
            "new_status": self.new_status.value, "from": stamp(self.source),
            "to": stamp(self.target), "renamed": dict(self.renamed), "changed": self.changed,
            "dry_run": self.dry_run,
        }


def migrate(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    renames: Mapping[str, str] | None = None,
    to_version: str | None = None,
    dry_run: bool = False,
    runtime: Runtime | None = None,
) -> Migration:
    """Move stored run ``run_id`` onto ``definition`` (see the module docstring).

    Args:
        definition: the current definition of the run's reactor; ``None``: the one
            registered under the run's reactor name.
        run_id: the run.
        renames: old step name -> new step name, for steps the new definition renamed.
        to_version: when given, the current definition's ``version`` label must be this
            (a guard against migrating to another release than meant).
        dry_run: judge and report only; nothing is written.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The :class:`Migration`.

    Raises:
        MigrationArgumentError: an unusable argument (``exc.field``); nothing changed.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the run is ``running`` or ``rolling_back`` (an execution owns it:
            suspend it first, or wait), or is a map element; nothing changed.
        DefinitionMismatchError: the renamed run still breaks a compatibility rule
            (``exc.step``; the message names the rule); nothing changed.
        LockAcquisitionError: an execution holds the run's liveness lock (try again).
        UnknownReactorError: ``definition`` is ``None`` and the run's reactor is not
            registered here.
        StorageError, RouterError: a backend failed.
    """
    check_run_id("migrate", run_id, MigrationArgumentError)
    wanted = _check_renames(renames)
    if to_version is not None and (not isinstance(to_version, str) or not to_version.strip()):
        raise MigrationArgumentError(
            f"migrate(to_version=...) must be a non-blank string or None, got {to_version!r}",
            field="to_version",
        )
    env = make_env(runtime)
    ctx = api.load_run(definition, run_id, env, open_secrets=False)
    if definition is None:
        definition = registry.get(ctx.reactor).definition
    assert definition is not None
    if to_version is not None and definition.version != to_version:
        raise MigrationArgumentError(
            f"migrate(to_version={to_version!r}): the current definition of "
            f"{definition.name!r} is labelled {definition.version!r}; deploy that release "
            "(or import its module) first", field="to_version",
        )
    found = plan(definition, ctx, wanted)  # refused before the lock: nothing changed
    if dry_run or not found.changed:
        return replace(found, dry_run=dry_run)
    hold = liveness.take(env, run_id)
    if hold is None or hold.lock is None:  # re-entrant: an execution of this thread owns it
        if hold is not None:
            hold.release()
        raise LockAcquisitionError(
            f"run {run_id!r} is held by an execution (its liveness lock): migrate does not "
            "overwrite a concurrent writer; try again once it stopped",
            key=run_liveness_key(run_id),
        )
    try:
        stored = api.load_run(definition, run_id, env, open_secrets=False)
        done = plan(definition, stored, wanted, apply=True)
        if done.changed:
            resume_version.unhold(stored)
            FencedCheckpointer(env, stored, hold).save()
    finally:
        hold.release()
    log.info("event=run_migrated run_id=%s reactor=%s from=%s to=%s renamed=%s", run_id,
             stored.reactor, None if done.source is None else done.source.fingerprint,
             done.target.fingerprint, dict(done.renamed))
    if done.changed and done.status is RunStatus.NEEDS_VERSION:
        return replace(done, handle=resume_version.enqueue(env, stored))
    return done


def plan(
    definition: ReactorDefinition, ctx: Context, renames: Mapping[str, str], *,
    apply: bool = False, old: ReactorDefinition | None = None, forward: bool | None = None,
) -> Migration:
    """Check, rename and judge ``ctx`` for :func:`migrate`; with ``apply`` the renamed state
    and the current definition's stamp are written into ``ctx`` (the caller saves it).

    Args:
        definition: the current definition.
        ctx: the stored run (with ``apply``: loaded under its liveness lock).
        renames: old step name -> new step name (checked by :func:`migrate`'s argument
            check).
        apply: change ``ctx`` in place.
        old: the definition the run was stored under (its steps' shapes are renamed);
            ``None``: the retained one of the run's fingerprint, if imported.
        forward: judge it as continuing (``True``) or as rolled back only (``False``);
            ``None``: by its status (a finished run, or one rolling back, is rolled back
            only).

    Returns:
        The :class:`Migration` (``handle`` unset).

    Raises:
        RunStateError, MigrationArgumentError, DefinitionMismatchError: as :func:`migrate`.
    """
    run_id = ctx.context_id
    if ctx.status in _OWNED:
        raise RunStateError(
            f"run {run_id!r} is {ctx.status.value}: an execution owns it; suspend it "
            "(reactor runs suspend) or wait until it stops, then migrate it",
            run_id=run_id, status=ctx.status.value,
        )
    if ctx.map_metadata is not None:
        raise RunStateError(
            f"run {run_id!r} is an element of map step {ctx.map_metadata.map_step!r}: migrate "
            "its top-level run", run_id=run_id, status=ctx.status.value,
        )
    source = ctx.engine_state.definition
    target = definition_id(definition)
    if old is None:
        old = retained.retained_for(ctx)
    applied, named = _applicable(definition, ctx, source, old, renames)
    restored = ctx.status
    held = ctx.engine_state.needs_version
    if ctx.status is RunStatus.NEEDS_VERSION and held is not None:
        restored = RunStatus.parse(held.status)
    if source is not None and source.fingerprint == target.fingerprint and not applied:
        return Migration(run_id, ctx.reactor, ctx.status, ctx.status, source, target,
                         changed=False)
    renamed = _renamed(ctx, applied)
    digests = _renamed_digests(source, old, named)
    judged = replace(renamed, engine_state=replace(
        renamed.engine_state,
        definition=None if source is None else DefinitionStamp(
            source.fingerprint, source.version, digests
        ),
    ))
    if forward is None:
        forward = ctx.status not in _FINISHED and ctx.rollback is None
    found = compatibility.judge(definition, judged, forward=forward)
    if found is not None:
        hint = ""
        if found.rule == "pending_step_rewired" and applied and old is None:
            hint = (
                "; a step that reads a renamed step changes shape: import the retained "
                f"definition of fingerprint {source.fingerprint if source else '?'} "
                "(retained=True) so its wiring can be renamed too"
            )
        raise DefinitionMismatchError(
            f"migrate: {found.reason}{hint} (docs/deploys.md, \"Operator tools\")",
            run_id=run_id, status=ctx.status.value, step=found.step,
        )
    if apply:
        _copy_into(ctx, renamed)
        ctx.engine_state = replace(ctx.engine_state, definition=target)
    return Migration(run_id, ctx.reactor, judged.status, restored, source, target,
                     renamed=applied)


def _check_renames(renames: object) -> dict[str, str]:
    """``renames`` as a dict, refused unless it maps non-blank names to non-blank names,
    no two to one, none to itself."""
    if renames is None:
        return {}
    if not isinstance(renames, Mapping):
        raise MigrationArgumentError(
            f"migrate(renames=...) must be a mapping old step -> new step, got "
            f"{type(renames).__name__}", field="renames",
        )
    checked: dict[str, str] = {}
    taken: dict[str, str] = {}
    for old, new in renames.items():
        for name in (old, new):
            if not isinstance(name, str) or not name.strip():
                raise MigrationArgumentError(
                    f"migrate(renames=...): {name!r} is not a step name (a non-blank string)",
                    field="renames",
                )
        if old == new:
            raise MigrationArgumentError(
                f"migrate(renames=...): step {old!r} is renamed to itself", field="renames",
            )
        if new in taken:
            raise MigrationArgumentError(
                f"migrate(renames=...): steps {taken[new]!r} and {old!r} are both renamed to "
                f"{new!r}", field="renames",
            )
        taken[new] = old
        checked[old] = new
    return checked


def _recorded(ctx: Context) -> set[str]:
    """The step names the run's document records."""
    names = {*ctx.intermediate_results, *(e.step for e in ctx.undo_stack),
             *ctx.composed_contexts}
    for name in (ctx.current_step, None if ctx.rollback is None else ctx.rollback.step):
        if name is not None:
            names.add(name)
    hold = ctx.engine_state.failure_hold
    if hold is not None:
        names.add(hold.step)
    return names


def _applicable(
    definition: ReactorDefinition, ctx: Context, source: DefinitionStamp | None,
    old: ReactorDefinition | None, renames: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """The renames that apply to ``ctx``, each checked: those of a step the run records
    (its records move) and those of a step the run knows (its stored step digest moves too).

    A rename is refused unless its old name is a step the run knows and its new name a
    ``step``/``compose`` step of ``definition`` the run does not record (unless that step is
    renamed away too): the renamed steps' records never land on another step's. A run that
    already carries ``definition``'s fingerprint was migrated before (or started under it):
    a rename of a step it does not know is one already applied, and is skipped.
    """
    recorded = _recorded(ctx)
    declared: set[str] = set()
    if source is not None and source.steps:
        declared.update(source.steps)
    if old is not None:
        declared.update(old.steps)
    known = recorded | declared
    current = source is not None and source.fingerprint == definition_id(definition).fingerprint
    applied: dict[str, str] = {}
    named: dict[str, str] = {}
    for before, after in renames.items():
        spec = definition.steps.get(after)
        if spec is None:
            raise MigrationArgumentError(
                f"migrate(renames=...): step {after!r} is not declared by "
                f"{definition.name!r} (declared: {', '.join(definition.steps)})",
                field="renames",
            )
        if spec.kind not in RENAMABLE_KINDS:
            raise MigrationArgumentError(
                f"migrate(renames=...): step {after!r} is a {spec.kind} step; only step and "
                "compose steps can be renamed (the records of the others are keyed by the "
                "step's name outside the run)", field="renames",
            )
        if before not in known:
            if current:  # migrated already: nothing of ``before`` is left to move
                continue
            raise MigrationArgumentError(
                f"migrate(renames=...): run {ctx.context_id!r} has no step {before!r} "
                f"(it knows: {', '.join(sorted(known)) or 'none'})", field="renames",
            )
        if after in recorded and after not in renames:
            raise MigrationArgumentError(
                f"migrate(renames=...): run {ctx.context_id!r} already records a step "
                f"{after!r}: renaming {before!r} to it would overwrite it", field="renames",
            )
        named[before] = after
        if before in recorded:
            applied[before] = after
    return applied, named


def _renamed(ctx: Context, renames: Mapping[str, str]) -> Context:
    """A copy of ``ctx`` with every record of a renamed step under its new name."""
    if not renames:
        return replace(ctx)

    def name(step: str) -> str:
        return renames.get(step, step)

    def keys(values: Mapping[str, Any] | None) -> Any:
        return None if values is None else {name(k): v for k, v in values.items()}

    counters = ctx.retry_context
    state = ctx.engine_state
    hold = state.failure_hold
    if hold is not None:
        hold = replace(hold, step=name(hold.step), rewinding=(
            None if hold.rewinding is None else name(hold.rewinding)
        ))
    return replace(
        ctx,
        intermediate_results=keys(ctx.intermediate_results),
        undo_stack=[e if e.step not in renames else replace(e, step=name(e.step))
                    for e in ctx.undo_stack],
        execution_trace=[t if t.step is None or t.step not in renames
                         else replace(t, step=name(t.step)) for t in ctx.execution_trace],
        composed_contexts=keys(ctx.composed_contexts),
        current_step=None if ctx.current_step is None else name(ctx.current_step),
        retry_context=replace(counters, attempts=keys(counters.attempts),
                              spent=keys(counters.spent), heartbeats=keys(counters.heartbeats)),
        rollback=None if ctx.rollback is None or ctx.rollback.step is None else replace(
            ctx.rollback, step=name(ctx.rollback.step)
        ),
        engine_state=replace(state, failure_hold=hold),
        failure=_renamed_failure(ctx, renames),
    )


def _renamed_failure(ctx: Context, renames: Mapping[str, str]) -> Any:
    """The run's stored failure, naming its step by its new name."""
    failure = ctx.failure
    if failure is None or failure.step_name is None or failure.step_name not in renames:
        return failure
    return replace(failure, step_name=renames[failure.step_name])


def _copy_into(ctx: Context, renamed: Context) -> None:
    """Write the renamed records of ``renamed`` into ``ctx`` (the one the checkpointer
    saves)."""
    ctx.intermediate_results = renamed.intermediate_results
    ctx.undo_stack = renamed.undo_stack
    ctx.execution_trace = renamed.execution_trace
    ctx.composed_contexts = renamed.composed_contexts
    ctx.current_step = renamed.current_step
    ctx.retry_context = renamed.retry_context
    ctx.rollback = renamed.rollback
    ctx.failure = renamed.failure
    ctx.engine_state = replace(ctx.engine_state,
                               failure_hold=renamed.engine_state.failure_hold)


def _renamed_digests(
    source: DefinitionStamp | None, old: ReactorDefinition | None,
    renames: Mapping[str, str],
) -> dict[str, str] | None:
    """The run's stored step digests under the new names: recomputed from the retained old
    definition's shapes with the renames applied to their wiring when it is imported, else
    the stored digests re-keyed (``None``: the run has none).

    A renamed step's digest takes its new name even when the old definition declared a
    step of that name too (one the run never reached, not renamed itself): that old step's
    digest is dropped, never kept in its place, so the renamed step is judged by its own
    shape (its undo included)."""
    taken = set(renames.values())

    def keep(name: str) -> bool:
        return name in renames or name not in taken

    if old is not None:
        return {
            renames.get(name, name): step_digest(
                _rewired(step_shape(spec, old.children), renames)
            )
            for name, spec in old.steps.items() if keep(name)
        }
    if source is None or source.steps is None:
        return None
    return {renames.get(name, name): digest for name, digest in source.steps.items()
            if keep(name)}


def _rewired(shape: dict[str, Any], renames: Mapping[str, str]) -> dict[str, Any]:
    """A step shape (:func:`reactor.dsl.fingerprint.step_shape`) whose ``result``/``element``
    wiring and ``wait_for`` name renamed steps by their new names."""
    def wire(template: Any) -> Any:
        if isinstance(template, list) and len(template) > 1 and template[0] in (
            "result", "element"
        ):
            return [template[0], renames.get(template[1], template[1]), *template[2:]]
        return template

    out = dict(shape)
    out["args"] = {arg: wire(t) for arg, t in shape["args"].items()}
    out["wait_for"] = sorted(renames.get(n, n) for n in shape["wait_for"])
    if out.get("source") is not None:
        out["source"] = wire(out["source"])
    return out

