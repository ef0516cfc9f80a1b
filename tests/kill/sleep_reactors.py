"""Reactors of tests/kill/test_sleep_kill.py, imported by the worker processes: a run that
sleeps 2 s between two logged steps (docs/schedules.md, "Durable sleep")."""

from __future__ import annotations

from typing import Any

from reactor import Input, Reactor, input, sleep, step
from tests.kill.reactors import record


class SleepFlow(Reactor, name="kill.sleep_flow"):
    """``before`` -> a 2 s sleep -> ``after``; each step appends its name to ``log_path``."""

    log_path = Input(str)

    @step(log_path=input("log_path"))
    def before(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "before")
        return "before"

    nap = sleep(seconds=2, wait_for="before")

    @step(log_path=input("log_path"), wait_for="nap")
    def after(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, "after")
        return "after"
