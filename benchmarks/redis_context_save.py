"""Round trips and Redis commands per context save, reactor_redis on Redis.

Round trips are counted on the client (benchmarks/_roundtrips.py: every request redis-py
writes); the server's commands come from ``INFO commandstats`` deltas (the commands clients
sent plus those the Lua script ran).

Usage: ``python benchmarks/redis_context_save.py redis://127.0.0.1:PORT/0 [N]``. Saves N
contexts (half status changes) and prints the per-save round trips and command counts.
Use a server nobody else is using while it runs; no assertions.
"""

from __future__ import annotations

import sys
import uuid

import reactor_redis
import redis
from _roundtrips import (
    counting,
    format_counts,
    inside_scripts,
    server_calls,
    server_delta,
    snapshot,
    unexplained,
)

from reactor.model.records import ContextRecord


def main(url: str, n: int) -> None:
    """Save ``n`` contexts and print the round trips and command deltas per save."""
    storage = reactor_redis.storage_from_url(url + ("&" if "?" in url else "?") + "prefix=bench")
    client = redis.Redis.from_url(url.split("?")[0], decode_responses=True)
    ids = [str(uuid.uuid4()) for _ in range(n)]
    record = ContextRecord("warm", "R", "running", "{}", 1.0, 1.0)
    storage.contexts.save(record)  # connect, load the script
    with counting():
        server_before, client_before = server_calls(client), snapshot()
        for i, cid in enumerate(ids):
            status = "running" if i % 2 else "completed"
            storage.contexts.save(ContextRecord(cid, "R", status, '{"k":1}', 1.0, 2.0))
        sent = snapshot() - client_before
        server = server_delta(server_before, server_calls(client))
    commands = sent.by_command()
    inside = inside_scripts(server, commands)
    print(f"per context save: round trips = {sent.total_round_trips() / n:.2f} "
          f"({format_counts(commands, n)})")  # fmt: skip
    print(f"per context save: server commands = {sum(server.values()) / n:.2f} "
          f"({format_counts(server, n)}), of which {sum(inside.values()) / n:.2f} inside "
          f"the script")  # fmt: skip
    problem = unexplained(server, commands)
    if problem:
        print(f"WARNING: {problem}")
    storage.close()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
