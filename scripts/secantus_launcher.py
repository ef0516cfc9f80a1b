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

The ordered walks (:func:`install_ordered_index_walk`): SecantusDB plans a query on an index only
when the filter has no top-level operator (``$or``, ``$and``), never serves an ``_id`` range from
the ``_id`` index, and always reads, decodes and sorts every candidate before it applies the
limit. Every limited read of the adapter is such a query (a document scan is ``{_id: {$gt:
after}, $or: [...expiry...]}`` sorted by ``_id``; a claim is ``{queue, due_at: {$lte: now},
$and: [...lease...]}`` sorted by ``due_at, _id``, limit 1), so each one decoded and sorted the
whole collection: in a 300-order soak a run's load (the key-range read of its checkpoint pieces)
cost 35 ms of server CPU with 1,700 pieces stored and a claim 32 ms with 400 jobs queued, 77 % of
the server's time, and growing with the collection until the soak could not drain. mongod walks
``_id_`` or the compound index in order and stops at the limit; the launcher makes SecantusDB do
the same for these shapes. A claim's write (:func:`install_narrowed_index_lookup`) re-asserts
the query under the claimed ``_id`` (``{_id, $and: [query]}``), which SecantusDB also planned as
a scan of the whole collection; it is now an ``_id`` lookup (docs/workers.md, "Soak").
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
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


#: Top-level operators an ordered walk leaves to the match of each document it reads (their
#: clauses only narrow what the plain fields select).
_NARROWING_OPERATORS = frozenset({"$and", "$or", "$nor"})
#: The ``_id`` range operators an ``_id`` walk serves (with text bounds).
_ID_RANGE_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})


def install_ordered_index_walk(storage_cls: Any) -> None:
    """Makes ``storage_cls.find_matching`` (what ``find`` and ``findAndModify`` call) read a
    limited, sorted query in index order and stop at the limit, as mongod does, when an index
    gives the sort order. The stock method reads, decodes and sorts every candidate first, and
    plans no index at all for a filter with a top-level ``$or``/``$and`` or an ``_id`` range.

    The plain (non-operator) fields of the filter pick the walk:

    * only ``_id`` (or nothing) and the sort ``{_id: 1}``: the ``_id`` index from the range's
      lower bound (bounds of ``$gt``/``$gte``/``$lt``/``$lte`` must be text);
    * text equalities on the leading fields of a compound index, optionally a range on the
      next one, and the sort naming the index's following fields in its directions: that
      index's entries under the equalities (from the range's lower bound), read with
      SecantusDB's own entry scans (``_range_scan_index``, ``_scan_index_for_id_keys``), which
      hand back record ids in index order.

    Each document read is matched against the whole filter, so the walk returns exactly what
    the stock method returns. Anything else (no limit, a hint, a collation, ``min``/``max``,
    another top-level operator, a multikey index, system and time-series collections) goes to
    the stock method unchanged."""
    stock = storage_cls.find_matching
    # deferred: SecantusDB is a test-only dependency, imported once the server is set up
    from secantus import storage as module  # type: ignore[import-untyped]
    from secantus.projection import apply_projection_batch  # type: ignore[import-untyped]
    from secantus.query import matches  # type: ignore[import-untyped]

    def sort_fields(sort: Any) -> list[tuple[str, int]] | None:
        try:
            fields = [(str(field), int(direction)) for field, direction in dict(sort).items()]
        except (TypeError, ValueError):
            return None
        if not fields or any(direction not in (1, -1) for _field, direction in fields):
            return None
        return fields

    def beyond(value: Any, upper: dict[str, Any]) -> bool:
        """Whether ``value`` sorts after an upper bound (``$lt``/``$lte``) of its own type, so
        that in ascending index order no later value can be within it."""
        for op, bound in upper.items():
            if isinstance(value, bool) or isinstance(bound, bool):
                continue
            if isinstance(value, int | float) and isinstance(bound, int | float):
                if math.isnan(value) or math.isnan(bound):
                    continue
                if value > bound or (op == "$lt" and value == bound):
                    return True
            elif isinstance(value, str) and isinstance(bound, str):
                mine, theirs = value.encode(), bound.encode()
                if mine > theirs or (op == "$lt" and mine == theirs):
                    return True
        return False

    def within(id_key: bytes, bounds: list[tuple[bytes, int, bool]]) -> bool:
        """Whether ``id_key`` lies on the right side of every ``(key, side, inclusive)``
        bound (``side`` 1: above it, -1: below it)."""
        return all((id_key > key if side > 0 else id_key < key) or (inclusive and id_key == key)
                   for key, side, inclusive in bounds)

    def id_walk(self: Any, db: str, coll: str, plain: dict[str, Any]) -> Iterator[int] | None:
        """Record ids in ``_id`` order within ``plain``'s ``_id`` bounds (lazily), or ``None``
        when they are not a text range."""
        spec = plain.get("_id", {})
        if not isinstance(spec, dict) or not set(spec) <= _ID_RANGE_OPERATORS:
            return None
        if not all(isinstance(bound, str) for bound in spec.values()):
            return None
        sides = {"$gt": (1, False), "$gte": (1, True), "$lt": (-1, False), "$lte": (-1, True)}
        bounds = [(module._id_key(bound), *sides[op]) for op, bound in spec.items()]
        lower = [key for key, side, _inclusive in bounds if side > 0]
        upper = [(key, side, inclusive) for key, side, inclusive in bounds if side < 0]

        def walk() -> Iterator[int]:
            cursor = self._cursor(module._NAT_SEQ_TABLE)
            cursor.set_key(db, coll, max(lower) if lower else b"")
            found = cursor.search_near()
            if found == module.wt.WT_NOTFOUND or (found < 0 and cursor.next() != 0):
                return
            while True:
                row_db, row_coll, raw_key = cursor.get_key()
                if (row_db, row_coll) != (db, coll):
                    return
                id_key = bytes(raw_key)
                if not within(id_key, upper):
                    return  # past the upper bound: every later key is too
                if within(id_key, bounds):
                    yield int(cursor.get_value())
                if cursor.next() != 0:
                    return

        return walk()

    def compound_walk(
        self: Any, db: str, coll: str, plain: dict[str, Any], fields: list[tuple[str, int]]
    ) -> tuple[list[int], Callable[[dict[str, Any]], bool]] | None:
        """Record ids in the order of the compound index SecantusDB picks for ``plain``, when
        that order is ``fields``' (the index's fields after the pinned equalities), with the
        test of a document past which no later one can match; or ``None``.

        The ids are read from the equalities' prefix, from the range's lower bound on: the
        stock range lookup drops entries equal to an inclusive upper bound when the index has
        fields after the ranged one, so the upper bound is left to the match."""
        ranged = self._partition_compound_range_filter(plain) if plain else None
        if ranged is not None:
            pinned, field, ops = ranged
            picked = self._pick_compound_range_index(db, coll, plain)
        elif plain and all(not isinstance(value, dict) for value in plain.values()):
            pinned, field, ops = plain, None, {}
            picked = self._pick_compound_eq_index(db, coll, plain)
        else:
            return None
        if picked is None or not all(isinstance(value, str) for value in pinned.values()):
            return None  # SecantusDB's compound lookups miss documents under a null prefix
        name, key_spec = picked
        index_fields = list(key_spec)
        if set(index_fields[: len(pinned)]) != set(pinned):
            return None
        following = [(name_, int(key_spec[name_])) for name_ in index_fields[len(pinned):]]
        if following[: len(fields)] != fields or self.index_is_multikey(db, coll, name):
            return None
        prefix = module.COMPOUND_SEP.join(
            module.encode_value_directed(pinned[name_], int(key_spec[name_]))
            for name_ in index_fields[: len(pinned)]) + module.COMPOUND_SEP
        lower = [(op, bound) for op, bound in ops.items() if op in ("$gt", "$gte")]
        if set(ops) - {"$gt", "$gte", "$lt", "$lte"} or len(lower) > 1 or any(
                not isinstance(bound, str | int | float) or isinstance(bound, bool)
                for bound in ops.values()):
            return None
        if lower and following[0][1] == 1:
            op, bound = lower[0]
            found = self._range_scan_index(
                db, coll, name, prefix + module.encode_value_directed(bound, 1), op == "$gte",
                None, True, prefix=prefix)
        else:
            found = self._scan_index_for_id_keys(db, coll, name, prefix, prefix=True)
        upper = {op: bound for op, bound in ops.items() if op in ("$lt", "$lte")}

        def past(document: dict[str, Any]) -> bool:
            if field is None or not upper or "." in field or following[0][1] != 1:
                return False
            return beyond(document.get(field), upper)

        return [int(record_id) for record_id in found], past

    def ordered_find(self: Any, db: str, coll: str, filter: Any = None, **options: Any) -> Any:
        skip, limit = int(options.get("skip") or 0), int(options.get("limit") or 0)
        fields = sort_fields(options.get("sort")) if options.get("sort") else None
        if (limit <= 0 or fields is None or not isinstance(filter, dict) or skip < 0
                or any(options.get(name) is not None
                       for name in ("hint", "collation", "min_bound", "max_bound"))
                or db in ("admin", "local", "config") or coll.startswith("system.")
                or any(str(key).startswith("$") and key not in _NARROWING_OPERATORS
                       for key in filter)):
            return stock(self, db, coll, filter, **options)
        plain = {key: value for key, value in filter.items() if not str(key).startswith("$")}
        out: list[dict[str, Any]] | None = None
        self._refresh_read_snapshot()
        with self._lock:
            if not self._is_timeseries(db, coll):
                plan: tuple[Iterable[int], Callable[[dict[str, Any]], bool]] | None = None
                if set(plain) <= {"_id"} and fields == [("_id", 1)]:
                    walk = id_walk(self, db, coll, plain)
                    plan = None if walk is None else (walk, lambda document: False)
                else:
                    plan = compound_walk(self, db, coll, plain, fields)
                if plan is not None:
                    out = read_in_order(self, db, coll, plan, filter, options.get("let"),
                                        skip + limit)
        if out is None:
            return stock(self, db, coll, filter, **options)
        out = out[skip:]
        projection = options.get("projection")
        if projection:
            out = apply_projection_batch(
                out, projection, filter,
                metas=self._projection_metas(db, coll, out, projection, filter,
                                             options.get("sort"), None, None),
                has_sort=True,
            )
        return out

    def read_in_order(
        self: Any, db: str, coll: str,
        plan: tuple[Iterable[int], Callable[[dict[str, Any]], bool]],
        filter: Any, let: Any, wanted: int,
    ) -> list[dict[str, Any]]:
        """The first ``wanted`` documents of the plan's record ids (in that order) that match
        ``filter``, up to the first document the plan says is past every match."""
        record_ids, past = plan
        documents = self._cursor_optional(module._doc_table_for(db, coll))
        out: list[dict[str, Any]] = []
        if documents is None:
            return out  # a collection never written has no document table yet
        seen: set[int] = set()
        for record_id in record_ids:
            module._deadline.check()
            if record_id in seen:
                continue
            seen.add(record_id)
            documents.reset()
            documents.set_key(db, coll, record_id)
            if documents.search() != 0:
                continue
            document = module.bson.decode(
                module._unframe_doc_value(bytes(documents.get_value()))[1])
            if matches(document, filter, vars=let):
                out.append(document)
                if len(out) >= wanted:
                    break
            elif past(document):
                break
        return out

    storage_cls.find_matching = ordered_find


def install_narrowed_index_lookup(storage_cls: Any) -> None:
    """Makes ``storage_cls._try_index_id_keys`` (how every read and write picks its candidates
    from an index) plan a filter with top-level ``$and``/``$or``/``$nor`` on its plain fields
    when those are an ``_id`` point lookup or equalities on text. The stock method plans no
    index for such a filter, so ``findAndModify``'s write, which re-asserts the query as
    ``{_id: <matched>, $and: [query]}``, read the whole collection to update one document.

    Every caller matches each candidate against the whole filter, so fewer candidates never
    change a result. Other shapes are left to the stock method: its compound lookups miss
    documents under a null equality and at an inclusive upper bound of a range followed by more
    index fields, which its plain filters already meet and the narrowed ones are kept from."""
    stock = storage_cls._try_index_id_keys

    def narrowed(self: Any, db: str, coll: str, filter: Any, *, collation: Any = None) -> Any:
        if isinstance(filter, dict) and any(str(key).startswith("$") for key in filter) \
                and all(key in _NARROWING_OPERATORS or not str(key).startswith("$")
                        for key in filter):
            plain = {key: value for key, value in filter.items()
                     if key not in _NARROWING_OPERATORS}
            point = list(plain) == ["_id"] and not isinstance(plain["_id"], dict | list)
            if plain and (point or all(isinstance(value, str) for value in plain.values())):
                return stock(self, db, coll, plain, collation=collation)
        return stock(self, db, coll, filter, collation=collation)

    storage_cls._try_index_id_keys = narrowed


def main(argv: list[str]) -> int:
    """Runs the server on ``argv[0]:argv[1]`` until SIGTERM or SIGINT; returns the exit code."""
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[0], int(argv[1])
    # deferred: SecantusDB is a test-only dependency (GPL-2.0), never imported by reactor
    from secantus import SecantusDBServer, transactions
    from secantus.storage import Storage  # type: ignore[import-untyped]

    install_tiered_ttl_sweep(Storage)
    install_ordered_index_walk(Storage)
    install_narrowed_index_lookup(Storage)
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
