"""Release v1 of the reactors of the rolling-deploy test (``--import tests.kill.deploy_v1``;
docs/deploys.md, "Routing by version"). Release v2 is :mod:`tests.kill.deploy_v2`; a process
imports one of them.

Both reactors run in a worker (``Background(all=True)``) and wait at an interrupt ``approval``
after their first step. Every step body and undo appends ``<release> <reactor> <step>
<run id>`` to its process's journal (:func:`tests.kill.deploy_journal.journal`), so the test
can tell which release ran what.
"""

from __future__ import annotations

from typing import Any

from reactor import Background, Input, Reactor, input, interrupt, result, step
from tests.kill.deploy_journal import COMPATIBLE, INCOMPATIBLE, journal

__all__ = ["RELEASE", "Compatible", "Incompatible"]

RELEASE = "v1"


class Incompatible(Reactor, name=INCOMPATIBLE):
    """v1: ``reserve`` (with an undo), ``approval``, ``charge`` reading ``reserve``."""

    background = Background(all=True)
    journal = Input(str)

    @step(journal=input("journal"))
    def reserve(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "incompatible", "reserve", inputs, ctx)
        return "stock"

    @reserve.undo
    def release_stock(value: Any, inputs: Any, ctx: Any) -> None:
        journal(RELEASE, "incompatible", "undo-reserve", inputs, ctx)

    approval = interrupt(wait_for="reserve")

    @step(journal=input("journal"), reservation=result("reserve"), wait_for=["approval"])
    def charge(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "incompatible", "charge", inputs, ctx)
        return f"charged {inputs.reservation}"


class Compatible(Reactor, name=COMPATIBLE):
    """v1: ``prepare`` (with an undo), ``approval``, ``finish``."""

    background = Background(all=True)
    journal = Input(str)

    @step(journal=input("journal"))
    def prepare(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "compatible", "prepare", inputs, ctx)
        return "prepared"

    @prepare.undo
    def unprepare(value: Any, inputs: Any, ctx: Any) -> None:
        journal(RELEASE, "compatible", "undo-prepare", inputs, ctx)

    approval = interrupt(wait_for="prepare")

    @step(journal=input("journal"), prepared=result("prepare"), wait_for=["approval"])
    def finish(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "compatible", "finish", inputs, ctx)
        return "done"
