"""Release v2 of the reactors of the rolling-deploy test (``--import tests.kill.deploy_v2``;
docs/deploys.md, "Routing by version"); release v1 is :mod:`tests.kill.deploy_v1`.

``Incompatible`` renames its first step ``reserve`` to ``hold_stock`` (and ``charge`` reads
it): a v1 run that completed ``reserve`` breaks ``completed_step_removed``, a v1 run not
started yet ``pending_step_rewired`` (``charge``). ``Compatible`` adds a step ``notify`` after
``finish``: a v1 run continues under v2.
"""

from __future__ import annotations

from typing import Any

from reactor import Background, Input, Reactor, input, interrupt, result, step
from tests.kill.deploy_journal import COMPATIBLE, INCOMPATIBLE, journal

__all__ = ["RELEASE", "Compatible", "Incompatible"]

RELEASE = "v2"


class Incompatible(Reactor, name=INCOMPATIBLE):
    """v2: ``hold_stock`` (with an undo), ``approval``, ``charge`` reading ``hold_stock``."""

    background = Background(all=True)
    journal = Input(str)

    @step(journal=input("journal"))
    def hold_stock(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "incompatible", "hold_stock", inputs, ctx)
        return "stock"

    @hold_stock.undo
    def release_stock(value: Any, inputs: Any, ctx: Any) -> None:
        journal(RELEASE, "incompatible", "undo-hold_stock", inputs, ctx)

    approval = interrupt(wait_for="hold_stock")

    @step(journal=input("journal"), reservation=result("hold_stock"), wait_for=["approval"])
    def charge(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "incompatible", "charge", inputs, ctx)
        return f"charged {inputs.reservation}"


class Compatible(Reactor, name=COMPATIBLE):
    """v2: v1's ``prepare``, ``approval``, ``finish``, then a new step ``notify``."""

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

    @step(journal=input("journal"), wait_for=["finish"])
    def notify(inputs: Any, ctx: Any) -> str:
        journal(RELEASE, "compatible", "notify", inputs, ctx)
        return "notified"
