"""The contract suite's verdict computation (docs/contract-suite.md, "Verdicts"), fed outcomes
directly: a skip because the adapter is stronger than a test's premise is not a gap.
"""

from __future__ import annotations

from typing import Any

import pytest
from reactor_contract.plugin import (
    MANDATORY_CONCERNS,
    NO_SIZE_LIMIT,
    RUN_FIRST,
    SERVER_CLOCK,
    UNCARRIABLE_BODY,
    ConformanceReport,
)


class _Config:
    """The two things :class:`ConformanceReport` reads of a pytest config."""

    def __init__(self, storage: str | None = "redis://x/0", router: str | None = "redis://x/0",
                 keyword: str = "") -> None:
        self.args = ["reactor_contract"]
        self._options: dict[str, Any] = {
            "reactor_storage": storage, "reactor_router": router, "keyword": keyword,
        }

    def getoption(self, name: str, default: Any = None) -> Any:
        return self._options.get(name, default)


def _report(outcomes: dict[str, list[tuple[str, str | None]]], **config: Any) -> ConformanceReport:
    """A report holding ``{concern: [(outcome, reason), ...]}``."""
    report = ConformanceReport(_Config(**config))  # type: ignore[arg-type]
    for concern, results in outcomes.items():
        for i, (outcome, reason) in enumerate(results):
            nodeid = f"reactor_contract/test_{concern}.py::T::test_{i}"
            report.concern_of[nodeid] = concern
            report.outcome[nodeid] = (outcome, reason)
    return report


#: What the Redis adapter's full run shows: everything passes but tests whose premise a Redis
#: storage is stronger than (no size limit, a server clock) and the documents row (no
#: DocumentStore).
_MANDATORY = tuple(sorted(MANDATORY_CONCERNS))


def _redis_like() -> dict[str, list[tuple[str, str | None]]]:
    rows: dict[str, list[tuple[str, str | None]]] = {c: [("passed", None)] * 3 for c in _MANDATORY}
    rows["documents"] = [("skipped", "not applicable: RedisStorage is not built on a "
                                     "DocumentStore")] * 28
    rows["contexts"] = [*rows["contexts"], ("skipped", NO_SIZE_LIMIT), ("skipped", NO_SIZE_LIMIT)]
    rows["rate_limits"] = [*rows["rate_limits"], ("skipped", SERVER_CLOCK)]
    rows["routers"] = [("passed", None), ("skipped", f"{UNCARRIABLE_BODY} not UTF-8")]
    return rows


def test_skips_for_a_stronger_adapter_are_certified_not_gaps() -> None:
    """No size limit, a server clock, a transport that cannot carry a body: "certified", each
    listed as not applicable, the rows ``ok``; the documents row stays ``n/a``."""
    report = _report(_redis_like())
    verdict = report.verdict()
    assert verdict["verdict"] == "certified", verdict
    assert verdict["gaps"] == [] and verdict["failures"] == []
    assert verdict["concerns"]["contexts"]["verdict"] == "ok"
    assert verdict["concerns"]["contexts"]["not_applicable"] == 2
    assert verdict["concerns"]["contexts"]["skipped"] == 0
    assert verdict["concerns"]["rate_limits"]["verdict"] == "ok"
    assert verdict["concerns"]["routers"]["verdict"] == "ok"
    assert verdict["concerns"]["documents"]["verdict"] == "n/a"
    assert f"contexts: {NO_SIZE_LIMIT} (2 tests)" in verdict["not_applicable"]
    assert f"rate_limits: {SERVER_CLOCK} (1 test)" in verdict["not_applicable"]
    assert verdict["totals"]["not_applicable"] == 28 + 2 + 1 + 1


def test_missing_behaviour_is_still_a_gap_beside_stronger_skips() -> None:
    rows = _redis_like()
    missing = "capability: signals not supported (Capabilities.signals is False)"
    rows["signals"] = [("skipped", missing)] * 6
    verdict = _report(rows).verdict()
    assert verdict["verdict"] == "certified with declared gaps"
    assert verdict["gaps"] == [f"signals: {missing} (6 tests)"]
    assert verdict["concerns"]["signals"]["verdict"] == "gaps"


@pytest.mark.parametrize(
    ("concern", "reason"),
    [
        # the suite's own words, but in a concern where the suite never issues them
        ("locks", NO_SIZE_LIMIT),
        ("claims", SERVER_CLOCK),
        # an adapter's own "stronger" claim in a mandatory concern
        ("semaphores", "not applicable: stronger than the premise: semaphores are optional"),
    ],
)
def test_only_the_suites_own_stronger_skips_count(concern: str, reason: str) -> None:
    """An adapter cannot launder a skip into "stronger than the premise": in a mandatory
    concern it fails the verdict with the teaching line."""
    rows = _redis_like()
    rows[concern] = [*rows[concern], ("skipped", reason)]
    verdict = _report(rows).verdict()
    assert verdict["verdict"] == "failed"
    assert verdict["concerns"][concern]["verdict"] == "FAIL"
    assert any("a mandatory concern cannot be skipped" in f for f in verdict["failures"])


def test_an_optional_concern_with_a_forged_stronger_skip_is_a_gap() -> None:
    rows = _redis_like()
    forged = "not applicable: stronger than the premise: we have no signals"
    rows["signals"] = [("skipped", forged)]
    verdict = _report(rows).verdict()
    assert verdict["verdict"] == "certified with declared gaps"
    assert verdict["gaps"] == [f"signals: {forged} (1 test)"]


def test_the_table_lists_not_applicable_skips_apart_from_gaps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _report(_redis_like())

    class _Writer:
        def write_sep(self, sep: str, title: str) -> None:
            print(f"== {title}")

        def write_line(self, line: str, **_markup: bool) -> None:
            print(line)

    report.pytest_terminal_summary(_Writer())
    out = capsys.readouterr().out
    assert "n/a  verdict" in out
    assert "skipped, with reasons:" not in out
    assert "not applicable (the concern does not apply, or the adapter is stronger" in out
    assert f"  contexts: {NO_SIZE_LIMIT} (2 tests)" in out
    assert out.rstrip().endswith("verdict: certified")


def test_the_root_concerns_run_first() -> None:
    """``documents`` then ``surface`` are collected first, so ``-x`` stops at the root cause;
    the other tests keep their order."""

    class _Item:
        def __init__(self, concern: str, n: int) -> None:
            self.nodeid = f"test_{concern}.py::test_{n}"
            self.cls = type("C", (), {"reactor_concern": concern})

        def iter_markers(self, name: str) -> list[pytest.Mark]:
            return []  # names no obligation

    items = [_Item("claims", 1), _Item("surface", 2), _Item("locks", 3), _Item("documents", 4),
             _Item("claims", 5)]
    report = ConformanceReport(_Config())  # type: ignore[arg-type]
    report.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "test_documents.py::test_4", "test_surface.py::test_2", "test_claims.py::test_1",
        "test_locks.py::test_3", "test_claims.py::test_5",
    ]
    assert RUN_FIRST == ("documents", "surface")


def test_a_storage_without_schedules_is_certified_with_the_schedules_row_not_applicable(
) -> None:
    """``schedules`` is an optional store (docs/protocol.md, "Schedules"): a storage that does
    not declare ``KeepsSchedules`` skips its tests with the suite's reason, the row is ``n/a``
    and the run stays certified; a failing schedules test fails the run."""
    from reactor_contract.test_schedules import NO_SCHEDULES

    rows = _redis_like()
    rows["schedules"] = [("skipped", NO_SCHEDULES)] * 18
    verdict = _report(rows).verdict()
    assert verdict["verdict"] == "certified", verdict
    assert verdict["concerns"]["schedules"]["verdict"] == "n/a"
    assert f"schedules: {NO_SCHEDULES} (18 tests)" in verdict["not_applicable"]
    assert NO_SCHEDULES.startswith("not applicable:") and "KeepsSchedules" in NO_SCHEDULES
    rows["schedules"] = [("passed", None)] * 17 + [("failed", None)]
    verdict = _report(rows).verdict()
    assert verdict["verdict"] == "failed"
    assert verdict["concerns"]["schedules"]["verdict"] == "FAIL"
