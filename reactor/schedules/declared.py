"""Schedules declared in code: the process-wide list a scheduler runs besides the stored ones
(docs/schedules.md, "Declaring a schedule in code").

``register(Schedule(Nightly, cron="0 2 * * *", name="nightly"))`` at import time of a module
the scheduler's process imports (``reactor schedules run --import myapp.schedules``,
``reactor worker --schedules --import ...``). Registering an equal schedule again (a module
imported twice) changes nothing; another schedule under a registered name is refused.
"""

from __future__ import annotations

import threading

from reactor.errors import ScheduleConflictError, ScheduleNotFoundError
from reactor.schedules.spec import Schedule

__all__ = ["declared", "register", "unregister"]

_lock = threading.Lock()
_schedules: dict[str, Schedule] = {}


def register(schedule: Schedule) -> Schedule:
    """Declare ``schedule`` in this process (see the module docstring).

    Args:
        schedule: the schedule.

    Returns:
        ``schedule`` (so a module can keep it: ``NIGHTLY = register(Schedule(...))``).

    Raises:
        TypeError: ``schedule`` is not a :class:`~reactor.schedules.Schedule`.
        ScheduleConflictError: another schedule is registered under its name.
    """
    if not isinstance(schedule, Schedule):
        raise TypeError(f"register() takes a Schedule, got {type(schedule).__name__}")
    with _lock:
        found = _schedules.get(schedule.name)
        if found is not None and (found != schedule or found.args != schedule.args):
            raise ScheduleConflictError(
                f"another schedule is registered as {schedule.name!r} ({found.spec} of "
                f"{found.reactor!r}); give this one another name=",
                name=schedule.name,
            )
        _schedules[schedule.name] = schedule
    return schedule


def unregister(name: str) -> None:
    """Forget the code schedule ``name`` in this process (tests; its stored state stays).

    Raises:
        ScheduleNotFoundError: none is registered under ``name``.
    """
    with _lock:
        if _schedules.pop(name, None) is None:
            raise ScheduleNotFoundError(f"no schedule is registered as {name!r}", name=name)


def declared() -> dict[str, Schedule]:
    """The schedules registered in this process, by name (a copy)."""
    with _lock:
        return dict(_schedules)
