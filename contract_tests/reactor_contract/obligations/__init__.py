"""The obligation catalogue: every normative statement of docs/protocol.md and
docs/writing-an-adapter.md, numbered, and the contract tests that check each
(docs/contract-suite.md, "The obligation catalogue"; the numbered list is docs/obligations.md).

An obligation is one testable promise an adapter makes: a "must", a "never", an "at most", a
return value or an error. Each has an id ``O-<concern>-<n>`` that never changes meaning (a
statement that changes gets a new number; a number is never reused). A contract test names
the obligations it checks with the ``obligations`` marker::

    @pytest.mark.obligations("O-locks-1", "O-locks-4")
    def test_a_held_lock_refuses_another_owner(self, storage): ...

(on a class, the marker applies to each of its tests). The plugin refuses an id that is not in
the catalogue at collection, and ``reactor contract --obligations`` prints which tests check
each obligation and fails when one is checked by none.

Some obligations can only be checked with a probability (a race that a non-atomic adapter
loses only when two requests interleave): those say so in :attr:`Obligation.checked` and
explain the odds in :attr:`Obligation.how`.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Literal

__all__ = [
    "CATALOGUE",
    "CONCERNS",
    "MARKER",
    "Obligation",
    "coverage",
    "markdown",
    "unknown_ids",
]

#: The pytest marker a test names its obligations with.
MARKER = "obligations"

#: The concerns the catalogue is split into, one module of this package each, in the order
#: docs/obligations.md lists them.
CONCERNS: tuple[str, ...] = (
    "documents",
    "surface",
    "keys",
    "contexts",
    "locks",
    "leases",
    "claims",
    "step_results",
    "maps",
    "map_rollbacks",
    "sweeps",
    "listings",
    "semaphores",
    "ordered_locks",
    "rate_limits",
    "periods",
    "rounding",
    "signals",
    "step_transactions",
    "schedules",
    "routers",
    "dead_letters",
    "driver_faults",
    "declarations",
    "cleanup",
)

_ID = re.compile(r"^O-(?P<concern>[a-z_]+)-(?P<number>[1-9][0-9]*)$")


@dataclasses.dataclass(frozen=True)
class Obligation:
    """One numbered promise of the adapter protocol.

    Attributes:
        id: ``"O-<concern>-<n>"``, e.g. ``"O-locks-3"``.
        statement: the promise, precise enough to test, in one or two sentences.
        source: the doc section that states it, e.g. ``'docs/protocol.md, "Locks"'``.
        checked: ``"always"`` when a broken adapter fails its tests on every run;
            ``"probabilistic"`` when it fails only with a probability (a race).
        how: for a probabilistic obligation, how the odds are made overwhelming (rounds,
            barriers, processes); otherwise empty.
    """

    id: str
    statement: str
    source: str
    checked: Literal["always", "probabilistic"] = "always"
    how: str = ""

    def __post_init__(self) -> None:
        match = _ID.match(self.id)
        if match is None or match["concern"] not in CONCERNS:
            raise ValueError(f"obligation id {self.id!r} is not O-<concern>-<n> of a known concern")
        if not self.statement.strip() or not self.source.startswith("docs/"):
            raise ValueError(f"obligation {self.id}: a statement and a docs/ source are required")
        if (self.checked == "probabilistic") != bool(self.how.strip()):
            raise ValueError(
                f"obligation {self.id}: 'how' explains the odds of a probabilistic check, "
                "and only of one"
            )

    @property
    def concern(self) -> str:
        """The concern of the id (``"locks"`` for ``"O-locks-3"``)."""
        return self.id.split("-", 1)[1].rsplit("-", 1)[0]


def _load() -> dict[str, Obligation]:
    """Every concern module's ``OBLIGATIONS``, by id; refuses duplicates and misfiled ids."""
    found: dict[str, Obligation] = {}
    for concern in CONCERNS:
        module = importlib.import_module(f"{__name__}.{concern}")  # safe: a CONCERNS name
        for obligation in module.OBLIGATIONS:
            if obligation.concern != concern:
                raise ValueError(f"obligation {obligation.id} is filed under {concern}")
            if obligation.id in found:
                raise ValueError(f"obligation {obligation.id} is defined twice")
            found[obligation.id] = obligation
    return found


#: Every obligation, by id, in catalogue order.
CATALOGUE: Mapping[str, Obligation] = _load()


def unknown_ids(ids: Iterable[str]) -> list[str]:
    """The ids of ``ids`` that are not in :data:`CATALOGUE`, in order, once each."""
    seen: list[str] = []
    for oid in ids:
        if oid not in CATALOGUE and oid not in seen:
            seen.append(oid)
    return seen


def coverage(marked: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Which tests check each obligation.

    Args:
        marked: ``{test node id: the obligation ids its marker names}``.

    Returns:
        ``{obligation id: the node ids that check it}`` for every obligation of the catalogue,
        in catalogue order (an empty list: checked by no test).
    """
    out: dict[str, list[str]] = {oid: [] for oid in CATALOGUE}
    for nodeid, ids in marked.items():
        for oid in ids:
            if oid in out and nodeid not in out[oid]:
                out[oid].append(nodeid)
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown() -> str:
    """docs/obligations.md: the catalogue as a numbered table per concern (generated; a test
    keeps the file equal to this)."""
    lines = [
        "# Adapter obligations",
        "",
        "<!-- Generated from contract_tests/reactor_contract/obligations/ by",
        "     `python -m reactor_contract.obligations > docs/obligations.md`; do not edit. -->",
        "",
        "Every promise an adapter makes, numbered (docs/contract-suite.md, \"The obligation",
        "catalogue\"). Each is checked by the contract tests that name it; `reactor contract",
        "--obligations` lists them. \"probabilistic\": a broken adapter fails the check only",
        "with a probability, made overwhelming as the last column says.",
        "",
    ]
    for concern in CONCERNS:
        rows = [o for o in CATALOGUE.values() if o.concern == concern]
        if not rows:
            continue
        lines += [f"## {concern}", "", "| id | obligation | stated in | checked |",
                  "|---|---|---|---|"]
        for o in rows:
            checked = o.checked if not o.how else f"{o.checked}: {_cell(o.how)}"
            lines.append(f"| {o.id} | {_cell(o.statement)} | {_cell(o.source)} | {checked} |")
        lines.append("")
    return "\n".join(lines)
