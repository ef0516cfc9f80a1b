"""Release v1 of reactor :data:`NAME`, kept as a retained definition (docs/deploys.md,
"Operator tools") for tests/cli/test_runs_deploys.py: imported with ``--import`` to undo runs
stored under v1 after the current release removed ``reserve``. Its bodies record what they
do in :data:`EFFECTS`."""

from __future__ import annotations

from typing import Any

from reactor import Input, Reactor, input, result, step

NAME = "tests.cli.deploys.shop"
EFFECTS: list[str] = []


class ShopV1(Reactor, name=NAME, retained=True):
    """v1: ``reserve`` (undone by releasing) then ``charge`` (undone by refunding)."""

    version = "v1"
    order = Input(str)

    @step(order=input("order"))
    def reserve(inputs: Any, ctx: Any) -> str:
        EFFECTS.append("reserve")
        return f"r-{inputs.order}"

    @reserve.undo
    def release(result: Any, inputs: Any, ctx: Any) -> None:
        EFFECTS.append(f"retained release {result}")

    @step(reservation=result("reserve"))
    def charge(inputs: Any, ctx: Any) -> str:
        EFFECTS.append("charge")
        return "ch-1"

    @charge.undo
    def refund(result: Any, inputs: Any, ctx: Any) -> None:
        EFFECTS.append(f"retained refund {result}")
