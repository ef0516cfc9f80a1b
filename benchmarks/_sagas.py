"""The reactors the benchmarks run: chains of trivial steps and a fan-out map of one-step
elements, defined once (benchmarks/redis_reactor_steps.py, benchmarks/celery_compare.py,
benchmarks/step_scaling.py)."""

from __future__ import annotations

import threading
from typing import Any

from reactor import Background, FanOut, Reactor, element, map_step
from reactor.dsl import Input, input, result, step

__all__ = ["FanElement", "FanOwner", "chain", "owner_thread"]

#: The thread that ran the fan-out owner's last step (a worker thread of this process).
owner_thread: list[int | None] = [None]


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def chain(steps: int, *, background: bool = False) -> type[Reactor]:
    """A reactor of ``steps`` steps, each adding one to the previous result (input
    ``start``); with ``background``, run by a worker (``Background(all=True)``)."""
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, steps):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = f"s{steps - 1}"
    if background:
        namespace["background"] = Background(all=True)
    name = f"Chain{steps}{'Background' if background else 'Sync'}"
    return type(name, (Reactor,), namespace)


class FanElement(Reactor, name="bench.element"):
    """One fan-out element: one trivial step."""

    n = Input(int)

    @step(n=input("n"))
    def work(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) + 1

    returns = "work"


class FanOwner(Reactor, name="bench.owner"):
    """``items`` -> fan-out map ``m`` of ``count`` elements -> ``done`` (how many succeeded)."""

    count = Input(int)

    @step(count=input("count"))
    def items(inputs: Any, ctx: Any) -> list[int]:
        return list(range(inputs.count))

    m = map_step(FanElement, source=result("items"), args={"n": element("m")},
                 fan_out=FanOut(batch_size=50))  # fmt: skip

    @step(m=result("m"))
    def done(inputs: Any, ctx: Any) -> int:
        owner_thread[0] = threading.get_ident()
        return sum(1 for _ in inputs.m.successes())

    returns = "done"
