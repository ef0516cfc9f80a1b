"""The schedule of tests/kill/test_schedule_kill.py, imported by the scheduler and worker
processes: ``Tick`` every second, recording its tick in the log named by the environment
variable ``REACTOR_TEST_SCHEDULE_LOG`` (docs/schedules.md, "Running schedulers")."""

from __future__ import annotations

import os
from typing import Any

from reactor import Input, Reactor, input, step
from reactor.schedules import Schedule, register
from tests.kill.reactors import record

#: The environment variable naming the tick log of the processes.
LOG_VARIABLE = "REACTOR_TEST_SCHEDULE_LOG"


class Tick(Reactor, name="kill.schedule_tick"):
    """Appends its tick to ``log_path`` (one ``O_APPEND`` write)."""

    log_path = Input(str)
    tick = Input(str)

    @step(log_path=input("log_path"), tick=input("tick"))
    def note(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, inputs.tick)
        return inputs.tick


def every_second(log_path: str) -> Schedule:
    """The schedule under test: every second, every missed tick caught up, overlaps allowed."""
    return Schedule(Tick, every=1, args={"log_path": log_path}, tick_input="tick",
                    name="kill-every-second", catchup="all", overlap="allow")


if os.environ.get(LOG_VARIABLE):
    register(every_second(os.environ[LOG_VARIABLE]))
