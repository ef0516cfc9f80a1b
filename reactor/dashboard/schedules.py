"""The schedules as the dashboard shows them (docs/dashboard.md, "Schedules"; docs/schedules.md,
"Managing schedules").

One row per schedule from :func:`reactor.schedules.list_schedules`, the read API the CLI uses
too: those declared in code in the dashboard's process and every stored one, whether or not
its reactor is registered here (a stored schedule is read from its stored definition; a code
schedule of another process is known by its stored state only). Each row says which of pause
and resume apply to it now, as the run page does for the run actions.
"""

from __future__ import annotations

from typing import Any

from reactor import registry
from reactor.config import Runtime
from reactor.dashboard.security import Guard
from reactor.errors import UnknownReactorError
from reactor.schedules import ScheduleView, list_schedules
from reactor.schedules.records import keeps_schedules

__all__ = ["SCHEDULE_ACTIONS", "schedule_listing", "schedule_row"]

#: The schedule actions, in the order the schedules page shows them.
SCHEDULE_ACTIONS: tuple[str, ...] = ("pause", "resume")


def _registered(name: str | None) -> bool:
    if name is None:
        return False
    try:
        registry.get(name)
    except UnknownReactorError:
        return False
    return True


def schedule_row(view: ScheduleView, guard: Guard, *, stores: bool) -> dict[str, Any]:
    """One schedule as JSON-native values: every :class:`~reactor.schedules.ScheduleView`
    field (times in epoch seconds, the last run's status as its text), whether its reactor is
    registered in this process (``reactor_registered``), and ``actions: {"pause", "resume"}``
    each ``{"enabled": bool, "reason": str | None}`` (docs/dashboard.md, "Schedules").

    Args:
        view: the schedule, from :func:`reactor.schedules.list_schedules`.
        guard: who may act (a read-only dashboard disables both actions).
        stores: whether the storage keeps schedules (without it nothing can be paused).
    """
    refusal = None
    if not guard.actions_enabled:
        refusal = "the dashboard is read-only (start it with a token to enable actions)"
    elif not stores:
        refusal = "the storage keeps no schedules (docs/schedules.md, \"Managing schedules\")"

    def decide(ok: bool, why: str) -> dict[str, Any]:
        if refusal is not None:
            return {"enabled": False, "reason": refusal}
        return {"enabled": ok, "reason": None if ok else why}

    return {
        "name": view.name,
        "reactor": view.reactor,
        "reactor_registered": _registered(view.reactor),
        "spec": view.spec,
        "timezone": view.timezone,
        "source": view.source,
        "paused": view.paused,
        "last_tick": view.last_tick,
        "last_action": view.last_action,
        "last_reason": view.last_reason,
        "last_run_id": view.last_run_id,
        "last_run_status": view.last_run_status.value if view.last_run_status else None,
        "next_tick": view.next_tick,
        "next_due": view.next_due,
        "pending": view.pending,
        "catchup": view.catchup,
        "overlap": view.overlap,
        "jitter": view.jitter,
        "max_catchup": view.max_catchup,
        "actions": {
            "pause": decide(not view.paused, "the schedule is paused already"),
            "resume": decide(view.paused, "the schedule is not paused"),
        },
    }


def schedule_listing(runtime: Runtime, guard: Guard) -> dict[str, Any]:
    """Every schedule, by name: ``{"schedules": [row, ...], "stores_schedules": bool}``
    (rows: :func:`schedule_row`).

    Raises:
        StorageError: the backend failed, or a stored schedule is malformed (503).
    """
    stores = keeps_schedules(runtime.storage)
    return {
        "schedules": [schedule_row(view, guard, stores=stores)
                      for view in list_schedules(runtime=runtime)],
        "stores_schedules": stores,
    }
