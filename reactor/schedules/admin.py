"""Managing schedules: add, pause, resume, remove, and the read API every view uses
(docs/schedules.md, "Managing schedules").

``reactor schedules add|list|pause|resume|remove`` call these; the dashboard reads
:func:`list_schedules`. Every change is a compare-and-set on the schedule's stored document
(:mod:`reactor.schedules.records`), retried when a scheduler wrote it in between, so an
operator's change never undoes a scheduler's and the other way round.

* **add** stores a schedule's definition; its ticks start after the moment it is added.
* **pause** stops new ticks: no scheduler decides one while it is paused (a run already
  started goes on). A schedule declared in code can be paused too: its stored state says so.
* **resume** continues from now: the ticks that fell during the pause are not run (no
  catch-up for a pause), and a decision left pending when it was paused is dropped.
* **remove** deletes a stored schedule (its runs stay). A schedule declared in code is
  removed from the code; ``pause`` stops it meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from reactor import config, registry
from reactor.config import Runtime
from reactor.errors import (
    ConfigurationError,
    ScheduleConflictError,
    ScheduleNotFoundError,
    ScheduleValueError,
    UnknownReactorError,
)
from reactor.model.status import RunStatus
from reactor.ports.storage import ScheduleStore
from reactor.schedules.declared import declared
from reactor.schedules.records import ScheduleState, keeps_schedules, schedule_store
from reactor.schedules.scheduler import stored_schedules
from reactor.schedules.spec import Schedule, check_name

__all__ = [
    "ScheduleView",
    "add_schedule",
    "list_schedules",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
]

#: Compare-and-set attempts of one change before it gives up (a scheduler writes a schedule's
#: document twice per tick at most).
_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """One schedule as the CLI and the dashboard show it.

    Attributes:
        name: the schedule's name.
        reactor: the reactor it starts (``None``: declared in code in a process this one did
            not import, known by its stored state only).
        spec: when it ticks: ``cron '0 2 * * *' (Europe/Paris)``, ``every 60 s``, or
            ``None`` (see ``reactor``).
        timezone: the time zone of its cron expression (``None`` when unknown).
        source: ``"code"`` or ``"stored"``.
        paused: no tick is decided while set.
        last_tick: the last tick settled (epoch seconds, UTC), or ``None``.
        last_action: ``"run"`` or ``"skip"`` for it.
        last_reason: why it was skipped.
        last_run_id: the last run the schedule started.
        last_run_status: that run's status now (``None`` when it is gone or unknown).
        next_tick: the next tick to come (epoch seconds, after now and after the last tick
            settled; ``None`` while paused or when unknown).
        next_due: when that tick's run starts, its jitter added.
        pending: a tick decided and not yet carried out (epoch seconds), or ``None``.
        catchup, overlap, jitter, max_catchup: its policies (``None`` when unknown).
    """

    name: str
    reactor: str | None
    spec: str | None
    timezone: str | None
    source: str
    paused: bool
    last_tick: float | None
    last_action: str | None
    last_reason: str | None
    last_run_id: str | None
    last_run_status: RunStatus | None
    next_tick: float | None
    next_due: float | None
    pending: float | None
    catchup: str | None
    overlap: str | None
    jitter: float | None
    max_catchup: int | None


def _runtime(runtime: Runtime | None) -> Runtime:
    return runtime or config.current()


def _managed_store(runtime: Runtime) -> ScheduleStore:
    if not keeps_schedules(runtime.storage):
        raise ConfigurationError(
            f"the storage {type(runtime.storage).__name__} keeps no schedules (it does not "
            "declare KeepsSchedules; docs/protocol.md, \"Schedules\")"
        )
    return schedule_store(runtime.storage)


def add_schedule(schedule: Schedule, *, runtime: Runtime | None = None) -> ScheduleView:
    """Store ``schedule`` (``reactor schedules add``): every scheduler runs it from its next
    tick on.

    Args:
        schedule: the schedule; its reactor must be registered in this process, so that its
            arguments are checked against the reactor's inputs.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The stored schedule's view.

    Raises:
        ScheduleValueError: the reactor is not registered here (``field="reactor"``), or the
            arguments do not match its inputs (``field="args"``).
        ScheduleConflictError: a schedule of that name is stored already (or a code schedule
            of that name keeps its state under it), or is declared in this process.
        ConfigurationError: the storage keeps no schedules.
        StorageError: the backend failed.
    """
    rt = _runtime(runtime)
    try:
        definition = registry.get(schedule.reactor).definition
    except UnknownReactorError as exc:
        raise ScheduleValueError(
            f"no reactor is registered as {schedule.reactor!r} here: import the module that "
            "defines it (reactor schedules add --import MODULE)",
            field="reactor",
        ) from exc
    schedule.check_inputs(definition)
    if schedule.name in declared():
        raise ScheduleConflictError(
            f"schedule {schedule.name!r} is declared in code here; give this one another name",
            name=schedule.name,
        )
    store = _managed_store(rt)
    now = rt.clock.now()
    state = ScheduleState.new(now, schedule.to_definition())
    if store.put(schedule.name, state.to_document(), expected_version=None) is None:
        raise ScheduleConflictError(
            f"a schedule named {schedule.name!r} exists already (remove it first, or choose "
            "another name)",
            name=schedule.name,
        )
    return _view(rt, schedule.name, schedule, state, now)


def _change(
    rt: Runtime, name: str, change: Callable[[ScheduleState, float], ScheduleState | None],
    *, create_for_code: bool = False,
) -> ScheduleState:
    """Apply ``change`` to schedule ``name``'s stored state by compare-and-set (``None``:
    nothing to write); create the state of a code schedule declared here when asked."""
    check_name(name)
    store = _managed_store(rt)
    for _ in range(_ATTEMPTS):
        now = rt.clock.now()
        record = store.get(name)
        if record is None:
            if not (create_for_code and name in declared()):
                raise ScheduleNotFoundError(f"no schedule named {name!r}", name=name)
            current = ScheduleState.new(now)
            version = None
        else:
            current = ScheduleState.from_document(name, record.document)
            version = record.version
        changed = change(current, now)
        if changed is None:
            return current
        if store.put(name, changed.to_document(), expected_version=version) is not None:
            return changed
    raise ScheduleConflictError(
        f"schedule {name!r} kept changing under this change ({_ATTEMPTS} attempts)", name=name
    )


def pause_schedule(name: str, *, runtime: Runtime | None = None) -> ScheduleView:
    """Pause schedule ``name``: no tick is decided until it is resumed.

    Args:
        name: a stored schedule, or one declared in code (in this process, or whose state a
            scheduler stored).
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        Its view (already paused: unchanged).

    Raises:
        ScheduleNotFoundError: no such schedule.
        ScheduleValueError: ``name`` is not a schedule name.
        ConfigurationError: the storage keeps no schedules.
        StorageError: the backend failed.
    """
    rt = _runtime(runtime)

    def pause(state: ScheduleState, now: float) -> ScheduleState | None:
        if state.paused:
            return None
        return replace(state, paused=True, paused_at=now, updated_at=now)

    state = _change(rt, name, pause, create_for_code=True)
    return _view(rt, name, _known(name, state), state, rt.clock.now())


def resume_schedule(name: str, *, runtime: Runtime | None = None) -> ScheduleView:
    """Resume schedule ``name`` from now: the ticks that fell while it was paused are not run,
    and a decision left pending is dropped.

    Returns:
        Its view (not paused: unchanged).

    Raises:
        ScheduleNotFoundError, ScheduleValueError, ConfigurationError, StorageError: as
            :func:`pause_schedule`.
    """
    rt = _runtime(runtime)

    def resume(state: ScheduleState, now: float) -> ScheduleState | None:
        if not state.paused:
            return None
        return replace(state, paused=False, paused_at=None, pending=None,
                       cursor=max(state.cursor, now), updated_at=now)

    state = _change(rt, name, resume)
    return _view(rt, name, _known(name, state), state, rt.clock.now())


def remove_schedule(name: str, *, runtime: Runtime | None = None) -> None:
    """Delete the stored schedule ``name`` (its runs stay).

    Raises:
        ScheduleNotFoundError: no such stored schedule.
        ScheduleConflictError: ``name`` is declared in code (remove it from the code; pause it
            meanwhile).
        ScheduleValueError, ConfigurationError, StorageError: as :func:`pause_schedule`.
    """
    rt = _runtime(runtime)
    check_name(name)
    store = _managed_store(rt)
    for _ in range(_ATTEMPTS):
        record = store.get(name)
        if record is None:
            raise ScheduleNotFoundError(f"no schedule named {name!r}", name=name)
        state = ScheduleState.from_document(name, record.document)
        if state.definition is None:
            raise ScheduleConflictError(
                f"schedule {name!r} is declared in code: remove it from the code (pause it "
                "meanwhile: reactor schedules pause)",
                name=name,
            )
        if store.delete(name, expected_version=record.version):
            return
    raise ScheduleConflictError(
        f"schedule {name!r} kept changing under the removal ({_ATTEMPTS} attempts)", name=name
    )


def _known(name: str, state: ScheduleState) -> Schedule | None:
    code = declared().get(name)
    if code is not None:
        return code
    if state.definition is None:
        return None
    try:
        return Schedule.from_definition(name, state.definition)
    except ScheduleValueError:
        return None


def list_schedules(*, runtime: Runtime | None = None) -> list[ScheduleView]:
    """Every schedule, by name: those declared in code in this process and those stored
    (stored state included), with their last and next ticks (docs/schedules.md, "Managing
    schedules"). Works on a storage without schedules too (code schedules only).

    Raises:
        StorageError: the backend failed.
    """
    rt = _runtime(runtime)
    now = rt.clock.now()
    states: dict[str, ScheduleState] = {}
    if keeps_schedules(rt.storage):
        states = {name: state for name, state, _ in stored_schedules(schedule_store(rt.storage))}
    names = sorted(set(states) | set(declared()))
    return [_view(rt, name, _known(name, states[name]) if name in states else declared()[name],
                  states.get(name), now) for name in names]


def _view(
    rt: Runtime, name: str, schedule: Schedule | None, state: ScheduleState | None, now: float
) -> ScheduleView:
    code = name in declared()
    last = state.last if state is not None else None
    paused = state.paused if state is not None else False
    next_tick = next_due = None
    if schedule is not None and not paused:
        after = max(state.cursor if state is not None else now, now)
        next_tick = schedule.rule.after(after)
        if next_tick is not None:
            next_due = schedule.due(next_tick)
    run_id = state.last_run_id if state is not None else None
    status = None
    if run_id is not None:
        record = rt.storage.contexts.load(run_id)
        status = RunStatus(record.status) if record is not None else None
    return ScheduleView(
        name=name,
        reactor=schedule.reactor if schedule is not None else None,
        spec=schedule.spec if schedule is not None else None,
        timezone=schedule.timezone if schedule is not None else None,
        source="code" if code or (state is not None and state.definition is None) else "stored",
        paused=paused,
        last_tick=last.tick if last is not None else None,
        last_action=last.action if last is not None else None,
        last_reason=last.reason if last is not None else None,
        last_run_id=run_id,
        last_run_status=status,
        next_tick=next_tick,
        next_due=next_due,
        pending=state.pending.tick if state is not None and state.pending is not None else None,
        catchup=schedule.catchup if schedule is not None else None,
        overlap=schedule.overlap if schedule is not None else None,
        jitter=schedule.jitter if schedule is not None else None,
        max_catchup=schedule.max_catchup if schedule is not None else None,
    )
