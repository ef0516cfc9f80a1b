"""Reactors shared by the testing-kit tests (registered once, under ``tests.testing.*``)."""

from __future__ import annotations

from typing import Any

from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    Retries,
    Step,
    async_step,
    element,
    input,
    map_step,
    result,
    step,
)

#: What the step bodies and undos did, in order (cleared by each test module's fixture).
CALLS: list[str] = []


class Reserve(Step):
    """Completes; its undo is recorded."""

    def run(self) -> str:
        CALLS.append("run reserve")
        return "r-1"

    def undo(self) -> None:
        CALLS.append("undo reserve")


class Charge(Step):
    """Completes, with three attempts 10 s then 20 s apart; its undo is recorded."""

    retries = Retries(max_attempts=3, backoff="exponential", base_delay=10)

    def run(self) -> str:
        CALLS.append(f"run charge {self.context.attempt if self.context else 0}")
        return "c-1"

    def undo(self) -> None:
        CALLS.append("undo charge")

    def compensate(self) -> None:
        CALLS.append("compensate charge")


class Order(Reactor, name="tests.testing.order"):
    """reserve -> charge -> ship (a function step)."""

    reserve = step(Reserve)
    charge = step(Charge, wait_for=["reserve"])

    @step(wait_for=["charge"])
    def ship(inputs: Any, ctx: Any) -> str:
        CALLS.append("run ship")
        return "s-1"

    returns = "ship"


class BackgroundOrder(Order, name="tests.testing.background_order"):
    """:class:`Order` run by a worker."""

    background = Background(all=True)


class SlowRetry(Reactor, name="tests.testing.slow_retry"):
    """One step retried after 600 s, in a worker."""

    background = Background(all=True)

    @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=600))
    def call(inputs: Any, ctx: Any) -> str:
        CALLS.append(f"run call {ctx.attempt}")
        return "done"


class Double(Reactor, name="tests.testing.double"):
    """A fan-out element: doubles ``x``."""

    x = Input(int)

    @step(x=input("x"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.x) * 2

    returns = "double"


class FanOutDoubles(Reactor, name="tests.testing.fan_out"):
    """Doubles every element of ``xs`` in a fan-out map, two per throw."""

    xs = Input(list)
    doubled = map_step(Double, source=input("xs"), args={"x": element("doubled")},
                       fan_out=FanOut(batch_size=2))


class WithUnit(Reactor, name="tests.testing.with_unit"):
    """A synchronous run that reads an async step's result."""

    x = Input(int)

    @async_step(x=input("x"))
    def unit(inputs: Any, ctx: Any) -> int:
        return int(inputs.x) * 10

    @step(v=result("unit"))
    def reader(inputs: Any, ctx: Any) -> int:
        return int(inputs.v) + 1

    returns = "reader"


class NeverSettles(Reactor, name="tests.testing.never_settles"):
    """A worker retry loop: every attempt fails, one hour apart, 1000 attempts."""

    background = Background(all=True)

    @step(retries=Retries(max_attempts=1000, backoff="fixed", base_delay=3600))
    def flaky(inputs: Any, ctx: Any) -> None:
        raise ConnectionError("still down")
