"""The SQL the SQLite example issues: one autocommit statement per document operation.

Every compare-and-set is a single statement that SQLite runs as its own transaction (the
module docstring of ``reactor_sqlite.documents``), so no ``BEGIN``/``COMMIT`` is ever sent.
These tests pin that, and check that the single statements still serialize two connections
writing one file (what two processes do).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reactor_sqlite import SQLiteDocumentStore, SQLiteStorage

from reactor import Reactor, config
from reactor.dsl import Input, input, result, step
from reactor.model.results import Success


@contextmanager
def traced(store: SQLiteDocumentStore) -> Iterator[list[str]]:
    """The first word of every statement the store's connection runs inside the block."""
    seen: list[str] = []
    store.connection.set_trace_callback(lambda sql: seen.append(sql.split(None, 1)[0].upper()))
    try:
        yield seen
    finally:
        store.connection.set_trace_callback(None)


def test_a_compare_and_set_write_is_one_statement(tmp_path: Path) -> None:
    store = SQLiteDocumentStore(str(tmp_path / "cas.db"), purge_every=0)
    try:
        assert store.write("c", "k", {"n": 0}, expected_version=None, expires_at=None)
        version = store.read("c", "k").version
        with traced(store) as seen:
            assert store.write("c", "k", {"n": 1}, expected_version=version, expires_at=None)
        assert seen == ["UPDATE"]
        assert not store.connection.in_transaction
    finally:
        store.close()


def test_every_write_shape_is_one_statement_and_no_transaction(tmp_path: Path) -> None:
    store = SQLiteDocumentStore(str(tmp_path / "shapes.db"), purge_every=0)
    try:
        with traced(store) as seen:
            assert store.write("c", "k", {"n": 0}, expected_version=None, expires_at=None)
            assert not store.write("c", "k", {"n": 9}, expected_version=None, expires_at=None)
            assert not store.write("c", "k", {"n": 9}, expected_version="stale", expires_at=None)
            assert not store.write("c", "k", None, expected_version=None, expires_at=None)
            assert not store.write("c", "k", None, expected_version="stale", expires_at=None)
            version = store.read("c", "k").version
            assert store.write("c", "k", None, expected_version=version, expires_at=None)
            assert store.write("c", "k", None, expected_version=None, expires_at=None)
            assert store.purge() == 0
        assert seen == [
            "INSERT",  # insert-if-absent, written
            "INSERT",  # insert-if-absent, refused (ON CONFLICT DO NOTHING)
            "UPDATE",  # compare-and-set, lost
            "SELECT",  # delete-if-absent while a row exists
            "DELETE",  # compare-and-delete, lost
            "SELECT",  # the read
            "DELETE",  # compare-and-delete, won
            "SELECT",  # delete-if-absent with nothing stored
            "DELETE",  # purge
        ]
        assert not store.connection.in_transaction
    finally:
        store.close()


def test_a_write_is_committed_when_it_returns(tmp_path: Path) -> None:
    path = str(tmp_path / "visible.db")
    writer, reader = SQLiteDocumentStore(path), SQLiteDocumentStore(path)
    try:
        assert writer.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
        assert reader.read("c", "k").value == {"n": 1}
    finally:
        writer.close()
        reader.close()


def test_two_connections_on_one_file_never_lose_an_update(tmp_path: Path) -> None:
    """Read-modify-write loops on separate connections (separate SQLite lock holders, as two
    processes are): every increment lands exactly once."""
    path = str(tmp_path / "race.db")
    seed = SQLiteDocumentStore(path)
    assert seed.write("c", "counter", {"n": 0}, expected_version=None, expires_at=None)
    seed.close()
    per_writer, writers = 150, 3
    lost: list[int] = []

    def increment() -> None:
        store = SQLiteDocumentStore(path, purge_every=0)
        try:
            misses = 0
            for _ in range(per_writer):
                while True:
                    current = store.read("c", "counter")
                    assert current.value is not None
                    new = {"n": int(current.value["n"]) + 1}
                    if store.write(
                        "c", "counter", new, expected_version=current.version, expires_at=None
                    ):
                        break
                    misses += 1
            lost.append(misses)
        finally:
            store.close()

    threads = [threading.Thread(target=increment) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lost) == writers  # every writer finished
    check = SQLiteDocumentStore(path)
    try:
        assert check.read("c", "counter").value == {"n": per_writer * writers}
    finally:
        check.close()


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def test_an_engine_run_sends_no_transaction_statements(tmp_path: Path) -> None:
    """A whole run (start, ten checkpointed steps, finish): only SELECT/INSERT/UPDATE/DELETE,
    never BEGIN or COMMIT."""
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, 10):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = "s9"
    chain: type[Reactor] = type("TenStepChain", (Reactor,), namespace)
    runtime = config.configure(storage=f"sqlite://{tmp_path / 'run.db'}", router="inline://")
    try:
        assert isinstance(runtime.storage, SQLiteStorage)
        with traced(runtime.storage.documents) as seen:
            assert chain.run(start=0) == Success(10)
        assert seen and set(seen) <= {"SELECT", "INSERT", "UPDATE", "DELETE"}
    finally:
        config.reset()
