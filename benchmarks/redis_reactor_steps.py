"""Redis commands and round trips per checkpointed step of a real 10-step reactor.

Configures ``reactor.configure(storage="redis://...", router="inline://")``, runs a 10-step
reactor (each step adds one to its input) N times and reads the server's ``INFO
commandstats`` before and after. Prints, per run and per step, the commands the server
executed (top-level commands, i.e. round trips, and the commands run inside Lua scripts)
so the target of one round trip per checkpointed step is
measured on the real engine, not on a synthetic save loop.

Usage: ``python benchmarks/redis_reactor_steps.py redis://127.0.0.1:PORT/0 [RUNS]``. Use a
server nobody else is using while it runs; no assertions.
"""

from __future__ import annotations

import sys
from typing import Any

import redis

from reactor import Reactor, config
from reactor.dsl import (
    Input,
    input,
    result,
    step,
)
from reactor.model.results import Success

STEPS = 10
#: Commands a client sends itself; everything else in commandstats ran inside a script.
_SCRIPT_CALLS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def _build_reactor() -> type[Reactor]:
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, STEPS):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = f"s{STEPS - 1}"
    return type("TenStepsRedis", (Reactor,), namespace)


def _stats(client: redis.Redis) -> dict[str, int]:
    info = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in info.items()}


def _total_commands(client: redis.Redis) -> int:
    """The server's ``total_commands_processed`` (client commands and commands run by scripts).

    Round trips are this delta minus the script-internal commands of ``commandstats``.
    """
    return int(client.info("stats")["total_commands_processed"])


def main(url: str, runs: int) -> None:
    """Run the reactor ``runs`` times and print command counts per run and per step."""
    config.configure(storage=url + ("&" if "?" in url else "?") + "prefix=bench-steps",
                     router="inline://")  # fmt: skip
    reactor_cls = _build_reactor()
    assert reactor_cls.run(start=0) == Success(STEPS)  # warm up (script loading)
    client = redis.Redis.from_url(url.split("?")[0], decode_responses=True)
    before, total_before = _stats(client), _total_commands(client)
    for _ in range(runs):
        assert reactor_cls.run(start=0) == Success(STEPS)
    after, total_after = _stats(client), _total_commands(client)
    deltas = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    for own in ("info", "info|commandstats", "info|stats"):
        deltas.pop(own, None)
    deltas = {k: v for k, v in deltas.items() if v}
    # INFO calls made by this benchmark between the two snapshots: one commandstats + one stats
    total = total_after - total_before - 2
    scripts = sum(deltas.get(name, 0) for name in _SCRIPT_CALLS)
    inside = sum(v for k, v in deltas.items() if k not in _SCRIPT_CALLS)
    # every command counted in commandstats is either a round trip or ran inside a script
    round_trips = total - inside
    print(f"runs: {runs}, steps per run: {STEPS}")
    print(f"round trips per run:  {round_trips / runs:.2f}  (script calls {scripts / runs:.2f})")
    print(f"round trips per step: {round_trips / runs / STEPS:.2f}  (a run checkpoints at start, "
          f"after each step and at the end, and takes/releases its liveness lock)")  # fmt: skip
    print("commands per run: "
          + ", ".join(f"{k}={v / runs:.2f}" for k, v in sorted(deltas.items())))  # fmt: skip
    config.reset()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200)
