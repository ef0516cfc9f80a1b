"""Job throughput of the Redis router (the queue toolkit over Redis Streams) vs raw redis-py.

Usage: ``python benchmarks/redis_router.py redis://127.0.0.1:PORT/0 [N] [--native REF]``.
Each loop moves one job through enqueue, receive and ack; the floor does the same with the
fewest raw stream commands (``XADD``, ``XREADGROUP``, ``XACK`` + ``XDEL``) and no envelope.
Prints jobs/s of each (median of 10 alternating chunks), the ratio, and the round trips of one
loop (benchmarks/_roundtrips.py). ``--native REF`` also times the router module as it was at
git ``REF`` (the native router before the toolkit) in the same run: how the choice to build
the Redis router on the toolkit was judged (docs/adapters/redis.md). No assertions.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import reactor_redis
import redis
from _roundtrips import count_calls, format_counts
from _timing import interleaved, rate

from reactor.ports.router import Job


def _native_router(ref: str) -> Any:
    """The ``RedisRouter`` class of git ``ref``, its module and Lua loaded beside today's."""
    root = Path(__file__).resolve().parent.parent
    tmp = Path(tempfile.mkdtemp(prefix="native-router-"))
    for name in ("router.py", "scripts/router.lua", "scripts/_common.lua"):
        text = subprocess.run(["git", "show", f"{ref}:adapters/reactor_redis/{name}"],
                              cwd=root, check=True, capture_output=True, text=True).stdout
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    spec = importlib.util.spec_from_file_location("native_redis_router", tmp / "router.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sources = {n: (tmp / "scripts" / "_common.lua").read_text() + "\n"
               + (tmp / "scripts" / f"{n}.lua").read_text() for n in ("router",)}
    module._source = lambda name: sources[name]  # its own Lua, not today's
    return module.RedisRouter


def main(url: str, n: int, native: str | None) -> None:
    """Run the loops and print the numbers."""
    client = redis.Redis.from_url(url.split("?")[0])
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    ours = reactor_redis.router_from_url(f"{url}{'&' if '?' in url else '?'}prefix={prefix}")
    job = Job(kind="run", payload={"order": 1})
    stream = f"{prefix}-floor"
    try:
        client.xgroup_create(stream, "g", id="0", mkstream=True)
    except redis.ResponseError:
        pass

    def toolkit(_: int) -> None:
        ours.enqueue(job)
        [delivery] = ours.receive(max_jobs=1)
        ours.ack(delivery)

    def floor(_: int) -> None:
        client.xadd(stream, {"body": job.to_json()})
        reply = client.xreadgroup("g", "c", {stream: ">"}, count=1)
        entry_id = reply[0][1][0][0]
        client.xack(stream, "g", entry_id)
        client.xdel(stream, entry_id)

    loops = {"toolkit": toolkit, "floor": floor}
    if native is not None:
        old = _native_router(native)(redis.Redis.from_url(url.split("?")[0]),
                                     prefix=f"{prefix}n", queue="jobs")

        def native_loop(_: int) -> None:
            old.enqueue(job)
            [delivery] = old.receive(max_jobs=1)
            old.ack(delivery)

        loops["native"] = native_loop
    for fn in loops.values():
        rate(100, fn)  # warm up (script loading, the group)
    rates = interleaved(n, loops)
    print("jobs/s (enqueue+receive+ack)  " + "  ".join(f"{k}={v:,.0f}" for k, v in rates.items()))
    print(f"ratio toolkit / raw floor = {rates['toolkit'] / rates['floor']:.2f}")
    if "native" in rates:
        ratio = rates["toolkit"] / rates["native"]
        print(f"ratio toolkit / native router at {native} = {ratio:.2f}")
    sent, server = count_calls(100, toolkit, client)
    print(f"toolkit, one job: round trips {sent.total_round_trips() / 100:.2f} "
          f"({format_counts(sent.by_script(), 100)}), server commands "
          f"{sum(server.values()) / 100:.2f} ({format_counts(server, 100)})")
    ours.close()
    client.delete(stream)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--native")]
    ref = None
    for i, a in enumerate(sys.argv):
        if a == "--native" and i + 1 < len(sys.argv):
            ref = sys.argv[i + 1]
            args = [x for x in args if x != ref]
    main(args[0] if args else "redis://127.0.0.1:6379/0", int(args[1]) if len(args) > 1 else 3000,
         ref)
