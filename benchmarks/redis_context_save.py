"""Redis commands per context save (``INFO commandstats`` deltas), reactor_redis on Redis.

Usage: ``python benchmarks/redis_context_save.py redis://127.0.0.1:PORT/0 [N]``. Saves N
contexts (half status changes) and prints the per-save command counts and round trips.
Use a server nobody else is using while it runs; no assertions.
"""

from __future__ import annotations

import sys
import uuid

import reactor_redis
import redis

from reactor.model.records import ContextRecord


def _stats(client: redis.Redis) -> dict[str, int]:
    info = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in info.items()}


def main(url: str, n: int) -> None:
    """Save ``n`` contexts and print the command deltas per save."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    client = redis.Redis.from_url(url.split("?")[0], decode_responses=True)
    ids = [str(uuid.uuid4()) for _ in range(n)]
    record = ContextRecord("warm", "R", "running", "{}", 1.0, 1.0)
    storage.contexts.save(record)  # load the script
    before = _stats(client)
    for i, cid in enumerate(ids):
        status = "running" if i % 2 else "completed"
        storage.contexts.save(ContextRecord(cid, "R", status, '{"k":1}', 1.0, 2.0))
    after = _stats(client)
    deltas = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    deltas.pop("info", None)
    shown = {k: round(v / n, 2) for k, v in sorted(deltas.items()) if v}
    round_trips = deltas.get("evalsha", 0) + deltas.get("eval", 0)
    print(f"per context save: round trips (EVALSHA) = {round_trips / n:.2f}")
    print(f"per context save: commands = {shown}")
    storage.close()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
