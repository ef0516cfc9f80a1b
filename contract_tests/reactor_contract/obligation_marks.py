"""The ``obligations`` marker on pytest's side: it is registered, its ids are checked against
the catalogue at collection, and ``--reactor-obligations`` prints which tests check each
obligation (docs/contract-suite.md, "The obligation catalogue").
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor_contract.obligations import CATALOGUE, MARKER, coverage, unknown_ids

__all__ = ["ObligationCoverage", "marked_ids", "register", "validate"]


def register(config: pytest.Config) -> None:
    """Declare the marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*ids): the obligations of docs/obligations.md this contract test checks",
    )


def marked_ids(item: pytest.Item) -> list[str]:
    """The obligation ids ``item`` names, from its own marker and its class's, in order."""
    ids: list[str] = []
    for mark in item.iter_markers(MARKER):
        for oid in mark.args:
            if oid not in ids:
                ids.append(str(oid))
    return ids


def validate(items: list[pytest.Item]) -> None:
    """Refuse a marker naming an id the catalogue does not have.

    Raises:
        pytest.UsageError: naming the test and the unknown ids.
    """
    problems = [
        f"{item.nodeid}: {', '.join(bad)}"
        for item in items
        if (bad := unknown_ids(marked_ids(item)))
    ]
    if problems:
        raise pytest.UsageError(
            "contract tests name obligations that are not in the catalogue "
            "(reactor_contract/obligations): " + "; ".join(problems)
        )


class ObligationCoverage:
    """A pytest plugin for ``--reactor-obligations``: after collection, print every obligation
    with the number of tests that check it and their names, then the untested ones; the session
    fails (exit 1) when an obligation is checked by no test."""

    def __init__(self) -> None:
        self.table: dict[str, list[str]] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Refuse unknown ids; record the markers of every collected test (before any
        deselection)."""
        validate(items)
        self.table = coverage({item.nodeid: marked_ids(item) for item in items})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Fail the session when an obligation is untested."""
        if any(not tests for tests in self.table.values()) and exitstatus == 0:
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the coverage table."""
        write = terminalreporter.write_line
        write("")
        write("obligation         checked         tests  statement")
        untested: list[str] = []
        for oid, tests in self.table.items():
            obligation = CATALOGUE[oid]
            statement = " ".join(obligation.statement.split())
            short = statement if len(statement) <= 72 else statement[:71] + "…"
            write(f"{oid:<18} {obligation.checked:<15} {len(tests):>5}  {short}")
            for nodeid in tests:
                write(f"{'':<42}{nodeid.split('::', 1)[-1]}")
            if not tests:
                untested.append(oid)
        probabilistic = sum(1 for o in CATALOGUE.values() if o.checked == "probabilistic")
        write(
            f"obligations: {len(self.table)}, untested: {len(untested)}, "
            f"checked only probabilistically: {probabilistic} (docs/obligations.md)"
        )
        if untested:
            write("untested: " + ", ".join(untested), red=True)
