"""Reactors of the schedule tests: each appends its tick to a module-level journal."""

from __future__ import annotations

from typing import Any

from reactor import Input, Reactor, input, sleep, step

#: Ticks the runs of :class:`Report` saw, in the order their bodies ran.
JOURNAL: list[str] = []


class Report(Reactor, name="tests.schedules.report"):
    """One step that records ``tick`` (the schedule's ``tick_input``) and ``region``."""

    tick = Input(str)
    region = Input(str, default="eu")

    @step(tick=input("tick"), region=input("region"))
    def build(inputs: Any, ctx: Any) -> str:
        JOURNAL.append(inputs.tick)
        return f"{inputs.region}:{inputs.tick}"


class Plain(Reactor, name="tests.schedules.plain"):
    """A reactor without inputs."""

    @step()
    def act(inputs: Any, ctx: Any) -> str:
        return "done"


class Napping(Reactor, name="tests.schedules.napping"):
    """Records its tick, then sleeps an hour (durable sleep): unfinished meanwhile."""

    tick = Input(str)

    @step(tick=input("tick"))
    def note(inputs: Any, ctx: Any) -> str:
        JOURNAL.append(inputs.tick)
        return inputs.tick

    nap = sleep(seconds=3600, wait_for="note")
