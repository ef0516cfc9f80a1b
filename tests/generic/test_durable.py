"""The compare-and-set building blocks of the durable generic stores
(reactor/generic/_durable.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from reactor.errors import StorageError
from reactor.generic._durable import DurableCollection, require_after

from .conftest import FakeDocumentStore


def test_a_scan_key_not_strictly_after_its_cursor_is_refused() -> None:
    """Keyset paging needs every returned key strictly greater than ``after``: a key equal to
    it or before it (a store whose ``after`` is broken or goes backwards) is an error naming
    both, and a key after it, or any key of a first page, is accepted."""
    require_after("c", None, "a")
    require_after("c", "a", "b")
    for key in ("b", "a", ""):
        with pytest.raises(StorageError, match=f"returned key {key!r} for after='b'"):
            require_after("c", "b", key)


def test_a_loop_gives_up_after_1000_lost_compare_and_sets_in_a_row(
    fake: FakeDocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write loop of the durable stores tolerates 1000 lost compare-and-sets in a row
    on one key, then raises ``StorageError`` naming the count, though a 1001st attempt would
    have won here (the pauses between attempts pinned to 0 s)."""
    monkeypatch.setattr("reactor.generic._durable._RANDOM.uniform", lambda a, b: 0.0)
    states = DurableCollection(fake, "c", None)
    fake.lose_next_writes = 1000
    with pytest.raises(StorageError, match="gave up after 1000 lost compare-and-sets on c/k"):
        states.update("k", lambda doc: ({"n": 1}, None, "written"))
    assert fake.lose_next_writes == 0 and fake.raw("c", "k") is None
    assert states.update("k", lambda doc: ({"n": 1}, None, "written")) == "written"


@pytest.mark.parametrize(("attempt_seconds", "unit"), [(0.004, 0.004), (0.0, 0.0002)])
def test_the_pause_before_the_nth_retry_doubles_in_units_of_the_lost_attempt(
    fake: FakeDocumentStore,
    monkeypatch: pytest.MonkeyPatch,
    attempt_seconds: float,
    unit: float,
) -> None:
    """No pause before the first attempt; before retry k (from 1) a pause drawn from
    [0, min(d * 2**(k-1), 0.05)] seconds, d the duration of the attempt that lost (at least
    0.2 ms; the pause itself not counted): with the draw pinned to its upper end and every
    attempt taking 4 ms (a network store) or no time (an in-process one), the pauses are that
    bound (docs/protocol.md, "Document stores")."""
    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    read = fake.read

    def slow_read(collection: str, key: str) -> Any:
        clock[0] += attempt_seconds
        return read(collection, key)

    monkeypatch.setattr("reactor.generic._durable._RANDOM.uniform", lambda a, b: b)
    monkeypatch.setattr(
        "reactor.generic._durable.time", SimpleNamespace(sleep=sleep, monotonic=lambda: clock[0])
    )
    monkeypatch.setattr(fake, "read", slow_read)
    states = DurableCollection(fake, "c", None)
    fake.lose_next_writes = 20
    assert states.update("k", lambda doc: ({"n": 1}, None, "written")) == "written"
    assert slept == pytest.approx([min(unit * 2 ** (k - 1), 0.05) for k in range(1, 21)])
