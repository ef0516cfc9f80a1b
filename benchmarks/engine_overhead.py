"""Per-step overhead of the synchronous engine on the in-memory storage.

Runs a 10-step reactor (each step a trivial function that adds one to its input) and calls
the same ten functions directly, in the same process, and prints:

* the mean time per run and per step for both;
* the engine's per-step overhead (engine per-step time minus direct per-step time);
* the ratio engine/direct.

Every engine run checkpoints at start and after each step, the last one final (11 saves of the
context through ``storage.contexts``: one whole, ten appended), validates inputs, keeps a trace
and an undo stack. No assertion is made: this prints a measurement (docs/architecture.md,
"Engine cost per step").

With ``--storage URL`` (e.g. ``redis://127.0.0.1:PORT/0``, ``sqlite:///tmp/x.db``) the same run
goes to that storage; it also prints the CPU time of this process per step (wall time minus
waiting on the server) and, when the storage answers ``ping()`` (``reactor.ports.inspection
.Pingable``), one round trip measured in the same process, with the step's ratio to it.

With ``--switch-check`` it measures instead what the check of the reactor's suspend switch
before each step costs (docs/operations.md, "Suspend and unsuspend"): the CPU time per step as
shipped, with the check replaced by one answering "off" at no cost, and as shipped with a
switch set on another reactor, alternated in this process (the median of 5 rounds), and the
check's own cost per call.

Usage::

    .venv/bin/python benchmarks/engine_overhead.py [--runs N] [--storage URL] [--switch-check]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from reactor import Reactor, config
from reactor.dsl import (
    Input,
    input,
    result,
    step,
)
from reactor.engine.env import make_env
from reactor.engine.run_control import reactor_suspension, suspension
from reactor.model.engine_state import Suspension
from reactor.model.results import Success
from reactor.model.status import RunStatus
from reactor.ports.inspection import Pingable

STEPS = 10


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def _direct_add_one(x: int) -> int:
    return x + 1


def _build_reactor() -> type[Reactor]:
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, STEPS):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = f"s{STEPS - 1}"
    return type("TenSteps", (Reactor,), namespace)


def _time(
    fn: Callable[[], Any], runs: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    samples = []
    for _ in range(5):
        started = clock()
        for _ in range(runs):
            fn()
        samples.append((clock() - started) / runs)
    return statistics.median(samples)


def main() -> None:
    """Measure and print the overhead figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per sample (5 samples)")
    parser.add_argument("--storage", default="memory://", help="the storage URL")
    parser.add_argument("--switch-check", action="store_true",
                        help="measure the suspend switch's check per step instead")
    args = parser.parse_args()

    runtime = config.configure(storage=args.storage, router="inline://")
    reactor_cls = _build_reactor()
    assert reactor_cls.run(start=0) == Success(STEPS)  # warm up and sanity check
    if args.switch_check:
        _switch_check(reactor_cls, args.runs)
        config.reset()
        return

    def direct() -> int:
        x = 0
        for _ in range(STEPS):
            x = _direct_add_one(x)
        return x

    engine_run = _time(lambda: reactor_cls.run(start=0), args.runs)
    direct_run = _time(direct, args.runs * 100)
    per_step_engine = engine_run / STEPS
    per_step_direct = direct_run / STEPS
    overhead = per_step_engine - per_step_direct
    print(f"steps per run:            {STEPS}")
    print(f"engine, per run:          {engine_run * 1e6:10.1f} us")
    print(f"direct calls, per run:    {direct_run * 1e6:10.3f} us")
    print(f"engine overhead per step: {overhead * 1e6:10.1f} us")
    print(f"ratio engine/direct:      {engine_run / direct_run:10.0f}x")
    cpu_run = _time(lambda: reactor_cls.run(start=0), args.runs, time.process_time)
    print(f"engine CPU per step:      {cpu_run / STEPS * 1e6:10.1f} us (this process)")
    storage = runtime.storage
    if isinstance(storage, Pingable):
        round_trip = _time(storage.ping, args.runs * 10)
        print(f"one round trip (ping):    {round_trip * 1e6:10.1f} us")
        print(f"step / round trip:        {per_step_engine / round_trip:10.2f}x")

    # Same run with per-step checkpoints throttled away (start and end saves only), to show
    # how much of the overhead is persistence (codec + storage) rather than orchestration.
    config.configure(storage=args.storage, router="inline://", checkpoint_min_interval=3600.0)
    throttled = _time(lambda: reactor_cls.run(start=0), args.runs)
    print(
        f"per step with checkpoint_min_interval=3600 (2 saves/run): "
        f"{(throttled - direct_run) / STEPS * 1e6:.1f} us "
        f"(ratio {throttled / direct_run:.0f}x)"
    )
    config.reset()


def _switch_check(reactor_cls: type[Reactor], runs: int) -> None:
    """Print the suspend switch check's cost per step (see the module docstring)."""
    shipped = suspension.switched

    def per_step() -> float:
        return _time(lambda: reactor_cls.run(start=0), runs, time.process_time) / STEPS

    rounds: dict[str, list[float]] = {"shipped": [], "no check": [], "other switch set": []}
    env = make_env()
    for _ in range(5):
        rounds["shipped"].append(per_step())
        suspension.switched = lambda state: None  # type: ignore[assignment]
        rounds["no check"].append(per_step())
        suspension.switched = shipped  # type: ignore[assignment]
        reactor_suspension.switch_on(env, "another.reactor", Suspension("bench", "bench", 0.0))
        rounds["other switch set"].append(per_step())
        reactor_suspension.switch_off(env, "another.reactor")
    for name, samples in rounds.items():
        print(f"CPU per step, {name + ':':18} {statistics.median(samples) * 1e6:8.1f} us")

    class _State:  # what switched() reads of an execution: a stored root run
        pass

    state: Any = _State()
    state.env = env
    state.ctx = type("Ctx", (), {"persisted": object(), "map_metadata": None,
                                 "rollback": None, "status": RunStatus.RUNNING,
                                 "reactor": reactor_cls.reactor_name})()
    state.checkpoint = type("Checkpoint", (), {"context": state.ctx})()
    calls = runs * 1000
    started = time.process_time()
    for _ in range(calls):
        shipped(state)
    print(f"one check (cached):          {(time.process_time() - started) / calls * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
