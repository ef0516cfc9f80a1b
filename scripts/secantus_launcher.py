"""Starts a SecantusDB server (MongoDB wire protocol) for the test suite and waits for SIGTERM.

Usage: ``python scripts/secantus_launcher.py HOST PORT``

Why a launcher: the ``secantusd-py`` CLI of secantusdb 0.7.0b3 ignores ``ttl_sweep_seconds``, and
the tests want the TTL monitor to sweep often, so that it races the adapter's own expiry checks
while a test runs (docs/adapters/mongodb.md). Storage is in memory, so nothing is left on disk.
SecantusDB is a test-only dependency (GPL-2.0): it is never imported by the ``reactor`` package.

The TTL monitor (:func:`install_tiered_ttl_sweep`): every second it sweeps each collection
written in the last :data:`RECENT_SECONDS`; every :data:`FULL_SWEEP_SECONDS` it sweeps every
collection, as mongod's own monitor does (once a minute). SecantusDB's stock sweeper walks every
collection every second: each test namespaces its collections with a fresh prefix and none is
dropped, so over a run the stock sweep grows to thousands of collections a second and takes a
whole core, mostly re-reading collections of tests that finished long ago.

The retryable-write records (:func:`install_batched_retryable_prune`): SecantusDB keeps the reply
of every retryable write for 30 minutes, at most 10,000 of them, and prunes on every write by
walking all of them, and, once the cap is reached, by sorting all of them to drop the oldest.
Every write of a suite run is retryable, so after 10,000 writes each write costs a 10,000-item
sort (measured: an insert went from 1.7 ms to 10-20 ms; the contract suite's racing-appends test
from 43 s to 134 s on its second run, and it timed out in CI with two suites at once). The
launcher prunes the same records at most once a second, and when the cap is passed trims them
to nine tenths of it, so the sort runs once per thousand writes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

#: Seconds a collection stays in the every-second sweep after its last write.
RECENT_SECONDS = 120.0
#: Seconds between two sweeps of every collection (mongod's TTL monitor period).
FULL_SWEEP_SECONDS = 60.0


def install_tiered_ttl_sweep(storage_cls: Any) -> None:
    """Makes ``storage_cls.prune_ttl_all_collections`` (what SecantusDB's sweeper thread calls
    every ``ttl_sweep_seconds``) sweep only recently written collections, and every collection
    each :data:`FULL_SWEEP_SECONDS`. Writes are noted through ``_write_index_entries``, which
    every insert, update and upsert of a document of an indexed collection goes through (each
    collection with a TTL index is indexed)."""
    full_sweep = storage_cls.prune_ttl_all_collections
    write_index_entries = storage_cls._write_index_entries
    written: dict[tuple[str, str], float] = {}
    guard = threading.Lock()
    next_full = [time.monotonic() + FULL_SWEEP_SECONDS]

    def noting_writes(self: Any, db: str, coll: str, *args: Any, **kwargs: Any) -> Any:
        written[(db, coll)] = time.monotonic()
        return write_index_entries(self, db, coll, *args, **kwargs)

    def tiered_sweep(self: Any, *, now: Any = None) -> int:
        started = time.monotonic()
        if started >= next_full[0]:
            next_full[0] = started + FULL_SWEEP_SECONDS
            return int(full_sweep(self, now=now))
        with guard:
            for namespace, last in list(written.items()):
                if started - last > RECENT_SECONDS:
                    del written[namespace]  # a later write puts it back
            recent = list(written)
        total = 0
        for db, coll in recent:
            # a collection dropped meanwhile: skipped, as the stock sweep does
            with contextlib.suppress(Exception):
                total += self.prune_ttl(db, coll, now=now)
        return total

    storage_cls._write_index_entries = noting_writes
    storage_cls.prune_ttl_all_collections = tiered_sweep


#: Seconds between two prunes of the retryable-write records (below the cap).
RETRYABLE_PRUNE_SECONDS = 1.0


def install_batched_retryable_prune(registry_cls: Any, lifetime: float, cap: int) -> None:
    """Makes ``registry_cls._prune_retryable_locked`` (what SecantusDB's transaction registry
    calls on every retryable write and every lookup) drop the records older than ``lifetime``
    seconds at most once per :data:`RETRYABLE_PRUNE_SECONDS`, and, when there are more than
    ``cap``, trim them to nine tenths of ``cap``, oldest first (the stock prune does both on
    every call: a walk of every record, and a full sort of them once the cap is reached)."""
    next_prune = [0.0]

    def batched_prune(self: Any) -> None:
        records = self._retryable
        now = self._time()
        if len(records) <= cap and now < next_prune[0]:
            return
        next_prune[0] = now + RETRYABLE_PRUNE_SECONDS
        cutoff = now - lifetime
        for key in [key for key, (_reply, at, _identity) in records.items() if at < cutoff]:
            records.pop(key, None)
        excess = len(records) - cap * 9 // 10
        if len(records) > cap and excess > 0:
            oldest = sorted(records.items(), key=lambda item: item[1][1])[:excess]
            for key, _record in oldest:
                records.pop(key, None)

    registry_cls._prune_retryable_locked = batched_prune


def main(argv: list[str]) -> int:
    """Runs the server on ``argv[0]:argv[1]`` until SIGTERM or SIGINT; returns the exit code."""
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[0], int(argv[1])
    from secantus import SecantusDBServer, transactions  # type: ignore[import-untyped]
    from secantus.storage import Storage  # type: ignore[import-untyped]

    install_tiered_ttl_sweep(Storage)
    install_batched_retryable_prune(
        transactions.TransactionRegistry,
        transactions._RETRYABLE_RECORD_LIFETIME_SECONDS,
        transactions._RETRYABLE_RECORD_MAX,
    )
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    server = SecantusDBServer(host=host, port=port, storage_path=":memory:", ttl_sweep_seconds=1)
    server.start()
    print(f"secantus listening on {server.uri}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
