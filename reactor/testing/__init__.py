"""``reactor.testing``: a kit for testing your own reactors (docs/testing.md).

* :class:`TestEnvironment` (and the pytest fixture ``reactor_env``): an isolated in-memory
  runtime, installed as the active one and restored on exit.
* :class:`TestClock` (``env.clock``): time moves only when the test says so;
  ``env.clock.advance(seconds)`` fires retries, delayed jobs, parks and expiries; it is the
  runtime's clock, so the engine's waits (retries, coordination) never really sleep.
* ``env.run_until_idle()``: run background runs, async steps and fan-out maps to completion,
  synchronously; :class:`NotIdleError` names what is still pending when they do not settle.
* ``env.fail_step(...)``, ``env.storage_fails(...)``: fault injection.
* :func:`assert_completed`, :func:`assert_failed`, :func:`assert_rolled_back`,
  :func:`assert_trace`, :func:`rollback_order`, :func:`step_events`, :func:`run_view`:
  assertions on stored runs.
* :func:`assert_can_continue`, :func:`compatibility_report`: whether a new definition can
  continue the stored runs of an old one (docs/deploys.md, "Testing a new definition").

The names are imported on first use, so the pytest plugin (:mod:`reactor.testing.plugin`,
inside this package) costs a test session nothing until a test asks for its fixture.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactor.testing.assertions import (
        RunRef,
        assert_completed,
        assert_failed,
        assert_rolled_back,
        assert_trace,
        rollback_order,
        run_view,
        step_events,
    )
    from reactor.testing.clock import TestClock
    from reactor.testing.compatibility import (
        Position,
        Verdict,
        assert_can_continue,
        compatibility_report,
    )
    from reactor.testing.environment import TestEnvironment
    from reactor.testing.errors import InjectedFault, NotIdleError
    from reactor.testing.faults import StepFault, StorageFault
    from reactor.testing.jobs import JobMode, PendingJob

__all__ = [
    "InjectedFault",
    "JobMode",
    "NotIdleError",
    "PendingJob",
    "Position",
    "RunRef",
    "StepFault",
    "StorageFault",
    "TestClock",
    "TestEnvironment",
    "Verdict",
    "assert_can_continue",
    "assert_completed",
    "assert_failed",
    "assert_rolled_back",
    "assert_trace",
    "compatibility_report",
    "rollback_order",
    "run_view",
    "step_events",
]

#: Public name -> the module that defines it.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ["RunRef", "assert_completed", "assert_failed", "assert_rolled_back", "assert_trace",
         "rollback_order", "run_view", "step_events"],
        "reactor.testing.assertions",
    ),
    "TestClock": "reactor.testing.clock",
    **dict.fromkeys(
        ["Position", "Verdict", "assert_can_continue", "compatibility_report"],
        "reactor.testing.compatibility",
    ),
    "TestEnvironment": "reactor.testing.environment",
    "InjectedFault": "reactor.testing.errors",
    "NotIdleError": "reactor.testing.errors",
    "StepFault": "reactor.testing.faults",
    "StorageFault": "reactor.testing.faults",
    "JobMode": "reactor.testing.jobs",
    "PendingJob": "reactor.testing.jobs",
}


def __getattr__(name: str) -> Any:
    """Import a public name of the kit on first use (module docstring).

    Raises:
        AttributeError: ``name`` is not one of :data:`__all__`.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'reactor.testing' has no attribute {name!r}")
    found = getattr(importlib.import_module(home), name)  # safe: only the fixed _HOMES table
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    """The public names (:data:`__all__`) and the module's own attributes."""
    return sorted({*globals(), *__all__})
