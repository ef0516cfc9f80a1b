"""The minimum-lease table of docs/coordination.md (the "Minimum leases" paragraph under the
primitives table) states what the declarations and the clients accept, per clock-skew budget."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from reactor import with_lock, with_ordered_lock, with_semaphore
from reactor.coordination import Lock, OrderedLock, Semaphore
from reactor.errors import DefinitionError
from reactor.memory import MemoryStorage

DOC = Path(__file__).resolve().parents[2] / "docs" / "coordination.md"
_HEADER = "| Primitive (field) |"


def _table() -> tuple[list[float], dict[str, list[str]]]:
    """The budgets of the table's columns and its rows: primitive -> one cell per budget."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(_HEADER))
    budgets = [float(m) for m in re.findall(r"B = ([0-9.]+)", lines[start])]
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return budgets, rows


def _accepts(kind: str, lease: float, skew: float) -> bool:
    """Whether both the declaration and the client take ``lease`` under budget ``skew``."""
    storage = MemoryStorage()
    makers: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "with_lock auto-extended (ttl)": (
            lambda: with_lock("k", ttl=lease),
            lambda: Lock(storage.locks, "k", ttl=lease, auto_extend=True, skew=skew)),
        "with_lock(auto_extend=False) (ttl)": (
            lambda: with_lock("k", ttl=lease, auto_extend=False),
            lambda: Lock(storage.locks, "k", ttl=lease, auto_extend=False, skew=skew)),
        "with_semaphore (lease)": (
            lambda: with_semaphore("k", limit=2, lease=lease),
            lambda: Semaphore(storage.semaphores, "k", limit=2, lease=lease, skew=skew)),
        "with_ordered_lock (poison_pill_timeout)": (
            lambda: with_ordered_lock("k", poison_pill_timeout=lease),
            lambda: OrderedLock(storage.ordered_locks, "k", poison_pill_timeout=lease,
                                skew=skew)),
    }
    declare, client = makers[kind.replace("`", "")]
    try:
        declare()
        client()
    except (DefinitionError, ValueError):
        return False
    return True


def test_the_table_covers_every_primitive_and_budget() -> None:
    budgets, rows = _table()
    assert budgets == [0.0, 0.25, 1.0]
    assert len(rows) == 5 and all(len(cells) == 3 for cells in rows.values())
    assert rows["`with_rate_limit`, `with_period`"][0].startswith("none")


@pytest.mark.parametrize("kind", [
    "`with_lock` auto-extended (`ttl`)", "`with_lock(auto_extend=False)` (`ttl`)",
    "`with_semaphore` (`lease`)", "`with_ordered_lock` (`poison_pill_timeout`)",
])
def test_each_stated_minimum_is_the_accepted_minimum(kind: str) -> None:
    budgets, rows = _table()
    for skew, cell in zip(budgets, rows[kind], strict=True):
        match = re.fullmatch(r"(>=|>) ([0-9.]+) s", cell)
        assert match, f"{kind} at B={skew}: {cell!r}"
        bound = float(match.group(2))
        if match.group(1) == ">=":  # the bound itself is accepted, a hair below is not
            assert _accepts(kind, bound, skew), (kind, skew, bound)
            assert not _accepts(kind, bound - 1e-4, skew), (kind, skew, bound)
        else:  # stated to 4 decimals: the bound is refused, the next 0.0001 s accepted
            assert not _accepts(kind, bound, skew), (kind, skew, bound)
            assert _accepts(kind, bound + 1e-4, skew), (kind, skew, bound)
